"""The objects a case, a plan step or a unit test makes: fluent builders for every kind the harness
creates (`builders.py`: ResourceFlavor, ClusterQueue, Cohort, LocalQueue, WorkloadPriorityClass, Workload,
batch/v1 Job, kwok Node) and `Cluster`, the direct admin client that creates and reads them
(`cluster.py`). The public interface is this package: `from harness import objects as o`.

May import: harness.common. Imported by every layer above (plan steps, environments, checkers' tests,
scenarios).
"""

from harness.objects.builders import *  # noqa: F401,F403 - the builders are this package's interface
from harness.objects.builders import _Builder  # noqa: F401 - plan steps recognise builders by their base
from harness.objects.cluster import Cluster, condition, conditions_summary, is_true, webhooks_answer  # noqa: F401
