"""The plan language: what a fault plan says and how it is checked. Rules match Kueue's requests
(`rules.py`: Match, Trigger, Release, Rule, RuleBook, trigger_satisfied), act by a registered fault kind
or step kind (`actions.py`: the registry and the fault kinds, one class each; `step_kinds.py`: the plan
step kinds, registered on import of this package), create/patch/delete objects by builder name (`steps.py`), and
load from YAML with file:line errors (`load.py`; what YAML a plan may be: `yamlsafe.py`), and warn
offline about rules that can never match (`lint.py`). Pure: the proxy and the Nemesis both evaluate it.

May import: harness.common, harness.kueue, harness.objects.
"""

from harness.plan import step_kinds  # noqa: F401,E402 - registers the plan step kinds (create, patch, …)
