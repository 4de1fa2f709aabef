"""`kueue-harness explore`: find orderings that break Kueue from a case's reference run alone (issue 14).

A control case runs once with an observe-only plan (the reference); its history — Kueue's classified
writes with their object roles and Kueue's watch deliveries — is turned into perturbations (stale write,
held response, failed write, unobserved state, restart), each an ordinary YAML fault plan; every run is
judged by the checkers; runs that show new object states are extended with a second and third rule; each
violation is minimised to a plan `pytest --plan FILE` and `kueue-harness up --plan FILE` replay.

Pure parts: model.py (perturbations as plans), trace.py (a run's abstract history), generate.py (the
generator, pruning, ordering, shards), minimize.py (rule dropping), oracles.py (the checkers a reference
run makes meaningful), salvage.py (a discarded run's violation replayed as the plan that happened),
findings.py (violation keys, root-cause clusters, a run's outcome), cases.py (case names). Running parts:
plugin.py (pytest: `--plan`, the per-run epilogue, explore.json, the slots of `--explore-stream`),
stream.py (one environment for the whole search), driver.py (the search loop) and tables.py (its table,
`merge`).

May import: every layer below it (harness.LAYERS) except harness.cli.
"""

#: Per run, in its evidence folder: what the driver reads (plugin.py writes it).
RESULT_FILE = "explore.json"
#: Per pytest process, in its artifacts folder: one line per finished run (the driver's progress lines).
PROGRESS_FILE = "explore-progress.jsonl"
