"""The scenarios: one folder per upstream Kueue bug (bug.yaml, plans/, test_*.py), shipped with the harness
so a non-editable install finds its plans and bugs too."""
