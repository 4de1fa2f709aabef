"""What the harness knows about Kueue itself, version by version: how to read its API requests (`api.py`:
request -> KueueWrite, watch line -> WatchEvent), its log (`log.py`), its Configuration file and feature
gates (`config.py`), the pinned versions and version profiles (`versions.py`) and the known bugs with the
builds they affect (`bugs.py`, from cases/*/bug.yaml). Pure facts and parsing: no processes, no cluster.

May import: harness.common.
"""
