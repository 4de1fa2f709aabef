"""kueue-harness: reproduces Kueue races on real, unmodified Kueue binaries, from outside (README.md).

One package per part (docs/architecture.md). `LAYERS` is their order, lowest first: a module may import
its own package and the packages before it, never one after it, and no import closes a circle
(tests/unit/test_layers.py reads every import and holds the code to this).
"""

#: The packages of harness/, lowest layer first (docs/architecture.md has what each owns).
LAYERS = (
    "common",     # errors, waits, processes, certificates, quantities, redaction, paths
    "kueue",      # facts about Kueue: request classification, log, config, versions, known bugs
    "build",      # building the real components with Go
    "objects",    # builders and the direct admin client
    "history",    # the case's record, short names, repeated lines
    "plan",       # the plan language: rules, triggers, actions, steps, YAML
    "proxy",      # the mitmproxy addons and the harness side of the control channel
    "nemesis",    # process faults, plan steps, facts, watch ticks (harness side)
    "env",        # where it runs: local processes, kind, a kubeconfig
    "checkers",   # invariants and assumptions, the quota model, the monitor
    "report",     # the evidence bundle and its offline re-check
    "scenarios",  # set-up steps and the pytest plugin (the case)
    "explore",    # kueue-harness explore
    "cli",        # the command line, sessions, matrix, bisect
)
