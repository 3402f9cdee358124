"""Default configuration, shipped as package data of `vip.defaults` (read with importlib.resources)."""
