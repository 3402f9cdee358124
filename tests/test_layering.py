"""The package's floors (docs/architecture.md, "Layers"): a module imports only from its own floor or
floors below it (features also from each other); never upward, never in a cycle between packages, and
never inside a function to dodge one. The pure verification core is the lowest floor: it imports nothing
of ours. A newcomer can then read the tree bottom up."""

from __future__ import annotations

import ast
from collections import defaultdict
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from tests.support.paths import REPO_ROOT

# Where each top-level folder of the repository sits in the `vip` namespace (pyproject's package-dir).
SOURCE_ROOTS = {"src/vip": "vip", "api": "vip.api", "indexer": "vip.indexer",
                "verification": "vip.verification"}

# Floors, bottom up. A module's floor is the longest listed prefix of its name.
FLOORS: list[set[str]] = [
    {"vip.verification"},
    {"vip", "vip.config", "vip.errors", "vip.formats", "vip.ids", "vip.clock", "vip.metrics", "vip.logging",
     "vip.resources", "vip.token_cipher", "vip.store", "vip.chain", "vip.run_loop",
     "vip.production_secrets", "vip.readiness", "vip.waits"},
    {"vip.indexer"},
    {"vip.accounts", "vip.connections", "vip.transactions", "vip.reports", "vip.payments", "vip.webhooks",
     "vip.personas"},
    # The dashboard stands beside the API (its pages use the API's context); the application factory
    # (vip.api.app) mounts both, so it is a unit of its own on that floor: no cycle between the two.
    {"vip.api", "vip.api.app", "vip.dashboard"},
    {"vip.daemon", "vip.cli", "vip.devstack", "vip.testing", "vip.client"},
]


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in SOURCE_ROOTS.items():
        root = REPO_ROOT / folder
        for path in root.rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def _owner(name: str) -> str:
    """The listed unit (package or module) a module belongs to."""
    units = set().union(*FLOORS)
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in units:
            return ".".join(parts[:i])
    raise AssertionError(f"{name} is on no floor: add it to FLOORS in this test and to docs/architecture.md")


def _floor(name: str) -> int:
    owner = _owner(name)
    return next(i for i, floor in enumerate(FLOORS) if owner in floor)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported vip module, whether the import is inside a function)."""
    tree = ast.parse(path.read_text())
    found = []
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
              for n in ast.walk(f)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "vip":
            found.append((node.module, id(node) in nested))
        elif isinstance(node, ast.Import):
            found += [(a.name, id(node) in nested) for a in node.names if a.name.split(".")[0] == "vip"]
    return found


def test_no_module_imports_upward_or_from_inside_a_function():
    wrong = []
    for name, path in _modules().items():
        for imported, local in _imports(path):
            if local:
                wrong.append(f"{name}: function-local import of {imported}")
            if _floor(imported) > _floor(name):
                wrong.append(f"{name} (floor {_floor(name)}) imports {imported} (floor {_floor(imported)})")
    assert not wrong, "\n".join(wrong)


def test_units_import_each_other_without_cycles():
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in _modules().items():
        for imported, _ in _imports(path):
            if _owner(imported) != _owner(name):
                graph[_owner(name)].add(_owner(imported))
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"import cycle between packages: {exc.args[1]}") from None


def test_nothing_we_ship_imports_a_top_level_api_indexer_or_verification():
    for name, path in _modules().items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for imported in names:
                assert imported.split(".")[0] not in {"api", "indexer", "verification"}, f"{name}: {imported}"
