"""What a fresh interpreter loads: the daemon's memory is mostly its modules."""

from __future__ import annotations

import json
import subprocess
import sys


def loaded_after(imports: str, watched: set[str]) -> list[str]:
    """The top-level packages of ``watched`` that a new interpreter holds
    after ``import <imports>``."""
    code = (
        f"import json, sys, {imports};"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {watched!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result: list[str] = json.loads(out.stdout)
    return result
