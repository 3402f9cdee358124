"""The wheel: every package of the tree is in it, nothing outside `vip` can be imported by its old name,
and it works on its own in a lender's project (scripts/wheel-check)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

SETUPTOOLS = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def packages_in_tree() -> set[str]:
    """Every folder with an `__init__.py` under the folders package-dir maps, named as it is installed."""
    found = set()
    for prefix, folder in SETUPTOOLS["package-dir"].items():
        root = REPO_ROOT / folder
        for init in root.rglob("__init__.py"):
            parts = [p for p in (prefix, *init.parent.relative_to(root).parts) if p]
            found.add(".".join(parts))
    return found


def test_every_package_in_the_tree_is_listed_for_the_wheel():
    assert set(SETUPTOOLS["packages"]) == packages_in_tree()
    assert len(SETUPTOOLS["packages"]) == len(set(SETUPTOOLS["packages"]))


@pytest.mark.e2e
def test_the_old_top_level_names_cannot_come_back():
    """ruff refuses `api`, `indexer` and `verification` as top-level imports (and relative imports)."""
    code = ("import api\nfrom api.routes import users\nimport indexer.store\nfrom verification import fraud\n"
            "from . import ids\nfrom vip.api import app\nfrom vip.verification import fraud as f\n"
            "__all__ = ['api', 'users', 'indexer', 'fraud', 'ids', 'app', 'f']\n")
    ruff = Path(sys.executable).parent / "ruff"
    done = subprocess.run([str(ruff), "check", "--output-format", "concise", "--select", "TID",
                           "--stdin-filename", str(REPO_ROOT / "src" / "vip" / "example.py"), "-"],
                          input=code, capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    found = [line.split(": ", 1)[1].split()[0] for line in done.stdout.splitlines() if "example.py:" in line]
    assert found == ["TID251", "TID251", "TID251", "TID251", "TID252"], done.stdout


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_the_wheel_installs_and_runs_the_readme_example_in_a_lenders_project():
    """Builds the wheel, checks its file list, installs it in a fresh virtualenv and runs the README's
    plugin example beside a top-level `api` package of the lender's (see the script)."""
    done = subprocess.run([str(REPO_ROOT / "scripts" / "wheel-check")], capture_output=True, text=True,
                          timeout=870)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "2 passed" in done.stdout
