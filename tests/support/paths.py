"""Where the repository's own files are, for tests that read them (docs, Dockerfile, examples)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
