"""Small libraries every part of the harness uses, owning nothing about Kueue: errors with exit codes
(`errors.py`), bounded waits on tenacity (`waiting.py`), JSON-lines files read as they grow (`jsonl.py`),
child processes that die with the harness (`procs.py`), certificates on `cryptography` (`pki.py`),
Kubernetes quantities (`quantity.py`), secret redaction (`redact.py`), and where things live: the
checkout, its cases and the harness's cache folder (`paths.py`).

May import: nothing of the harness (the bottom layer; harness/layers.py).
"""
