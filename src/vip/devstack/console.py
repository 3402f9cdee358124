"""The `vip` console script, for starting the stack's processes: never `python -m` in the caller's working
directory, whose own packages (a lender's `api/`, say) would come first on `sys.path`."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


class ConsoleScriptMissing(FileNotFoundError):
    """The package is importable but its console script is not installed beside this interpreter."""


def vip_console_script() -> str:
    """The `vip` script installed with this interpreter's environment, else the one on PATH."""
    beside = Path(sys.executable).parent / "vip"
    if beside.is_file():
        return str(beside)
    on_path = shutil.which("vip")
    if on_path:
        return on_path
    raise ConsoleScriptMissing("the `vip` command is not installed: `pip install vip-service` puts it beside "
                               "your Python")
