"""No function longer than a reader can hold at once where the money and the verdicts are decided: the
pure verification core, the payments package and the API's middleware. A function over the limit is split
into named steps."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO_ROOT

MAX_LINES = 60
CHECKED = ["verification", "src/vip/payments", "api/middleware.py"]


def _files() -> list[Path]:
    found: list[Path] = []
    for name in CHECKED:
        path = REPO_ROOT / name
        found += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return found


def long_functions(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of each function longer than MAX_LINES, counting its decorators,
    signature, docstring and body."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = (node.end_lineno or node.lineno) - first + 1
            if lines > MAX_LINES:
                found.append((node.name, first, lines))
    return found


def test_the_checked_paths_exist():
    assert all((REPO_ROOT / name).exists() for name in CHECKED)
    assert len(_files()) > 10


def test_no_function_is_over_the_limit():
    wrong = [f"{path.relative_to(REPO_ROOT)}:{first} {name} is {lines} lines"
             for path in _files() for name, first, lines in long_functions(path.read_text())]
    assert not wrong, f"split into named steps (at most {MAX_LINES} lines each):\n" + "\n".join(wrong)


def test_a_long_function_is_found_and_a_short_one_is_not():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    source = f"@staticmethod\ndef long():\n{body}\n\n\nasync def short():\n    return 1\n"
    assert long_functions(source) == [("long", 1, MAX_LINES + 2)]
