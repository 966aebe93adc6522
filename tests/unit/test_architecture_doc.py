"""docs/architecture.md names every module of the package where a reader
looks for it: a module added without a line there fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reconciler"
DOC = (ROOT / "docs" / "architecture.md").read_text()
SKIP = {"__init__", "__main__"}


def modules(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if p.stem not in SKIP}


def row(folder: str) -> str:
    """The folder's row of the table of modules."""
    found = re.search(rf"^\| `{re.escape(folder)}/` \|(.*)\|$", DOC, re.MULTILINE)
    assert found, f"docs/architecture.md has no row for {folder}/"
    return found.group(1)


def named(text: str) -> set[str]:
    return set(re.findall(r"`([a-z_]+)`", text))


def packages(folder: Path) -> list[Path]:
    """``folder`` and the packages inside it."""
    return [p.parent for p in sorted(folder.rglob("__init__.py"))]


def test_each_module_of_a_folder_is_named_in_its_row() -> None:
    """Modules of a package inside a folder (kinds/redis/, engine/observe/)
    are named in the folder's row too."""
    unnamed = {
        f"{pkg.relative_to(PACKAGE)}/{m}.py"
        for folder in PACKAGE.iterdir()
        if folder.is_dir() and (folder / "__init__.py").exists()
        for pkg in packages(folder)
        for m in modules(pkg) - named(row(folder.name))
    }
    assert not unnamed, f"not in docs/architecture.md's table of modules: {sorted(unnamed)}"


def test_each_module_at_the_root_is_in_the_tree() -> None:
    tree = DOC[DOC.index("```\nreconciler/") : DOC.index("```", DOC.index("```\nreconciler/") + 3)]
    unnamed = {m for m in modules(PACKAGE) if f"{m}.py" not in tree}
    assert not unnamed, f"not in docs/architecture.md's tree: {sorted(unnamed)}"


def test_the_table_of_kinds_is_the_registry() -> None:
    """docs/architecture.md's rows of kinds say what each registered kind
    declares: its API, what it makes besides pods, whether it owns pods."""
    from reconciler.kinds import registry

    shown = re.findall(r"^\| `([A-Za-z]+)` \| `([^`]+)` \| ([^|]+) \| (yes|no) \|$", DOC, re.M)
    declared = [
        (
            kind.name,
            f"{kind.resource.crd_name}/{kind.resource.version}",
            ", ".join(c.kind for c in kind.children) or "nothing",
            "yes" if kind.owns_pods else "no",
        )
        for kind in registry.KINDS
    ]
    assert [(k, api, made.strip(), owns) for k, api, made, owns in shown] == declared
