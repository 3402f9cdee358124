"""Chain access: contract artifacts, ABIs and deployment helpers."""
