"""What a case is made of: typed set-up steps and named waits (`setups.py`: preemption_queues,
cohort_queues, submit_job, admitted_jobs, wait_workload), and the pytest plugin that gives each case its
namespace, history, proxy rules, Nemesis and verdict (`plugin.py`: CaseContext, the `case` fixture, the
markers kueue_bug / checkers / kueue_config / pods / kueue_log). Cases import this package:
`from harness.scenarios import submit_job`.

May import: every layer below it (harness/layers.py), not harness.explore or harness.cli.
"""

from harness.scenarios.setups import *  # noqa: F401,F403 - the set-up steps are this package's interface
