"""Preset borrowers for integrators (development stacks only): catalogue and builder."""
