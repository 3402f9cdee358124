"""Where the files we ship live: package data read through importlib.resources, never through the
source checkout's path, so an installed wheel finds them wherever it is."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def _package_dir(package: str) -> Path:
    # A regular package installed from a wheel (or linked by an editable install) is a real directory;
    # Alembic and glob need a Path, not a Traversable. Resolving the package's __init__.py leads from the
    # strict editable install's link tree back to the checkout's folder, so that files added there
    # (a migration `vip revision` writes) are seen, and written, in the checkout itself.
    return Path(str(files(package) / "__init__.py")).resolve().parent


def default_config_dir() -> Path:
    """The default `*.toml` configuration (`config/` in the repository)."""
    return _package_dir("vip.defaults")


def contract_artifacts_dir() -> Path:
    """Compiled contracts' ABI and bytecode (`contracts/artifacts/` in the repository)."""
    return _package_dir("vip.contracts") / "artifacts"


def migrations_dir() -> Path:
    """Alembic's script directory."""
    return _package_dir("vip.store.migrations")
