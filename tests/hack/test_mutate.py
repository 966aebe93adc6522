"""`make mutate`'s copy of the checkout: the unit tests run in mutants/ and
read what they read in the checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hack.mutate import copy_the_rest


def test_a_tracked_link_to_a_folder_is_made_again_as_a_link(tmp_path: Path) -> None:
    """reconciler/crds links to ../crds: `reconciler manifests crds` reads
    the CRDs through it, and its test failed in mutants/ without it."""
    (tmp_path / "crds").mkdir()
    (tmp_path / "crds" / "a.yaml").write_text("kind: A\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "crds").symlink_to("../crds")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    copy_the_rest(tmp_path)
    copied = tmp_path / "mutants" / "pkg" / "crds"
    assert copied.is_symlink() and (copied / "a.yaml").read_text() == "kind: A\n"
