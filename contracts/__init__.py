"""Compiled contract artifacts, shipped as package data of `vip.contracts`; the Solidity sources and the
build script stay in the repository."""
