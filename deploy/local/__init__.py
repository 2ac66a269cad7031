"""Run the whole suite on one machine: `make run` (run.py) and a bot game against it (demo.py)."""
