"""Core of the service: settings, store, chain access, clock, logging, metrics, CLI and dev stack."""
