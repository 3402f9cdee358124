"""The dev stack's refusals that `vip` explains in one line (vip.cli.errors), kept apart from the modules
that raise them so that explaining them imports neither Anvil's launcher nor `vip dev`."""

from __future__ import annotations


class AnvilNotFound(FileNotFoundError):
    """No Anvil binary anywhere we look; the message says how to get one."""


class PortBusy(OSError):
    """A port `vip dev` needs is taken; the message names the option that moves it."""
