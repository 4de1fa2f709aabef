"""The harness side of the faults the proxy cannot do alone (`runner.py`: Nemesis): process faults such as
restarting Kueue, plan steps done directly against kube-apiserver, facts from Kueue's log and watched
objects posted to the proxy, and the tick Workload that releases delayed watch lines. Runs per case (a
pytest plugin hook in runner.py) and in `kueue-harness up`'s supervisor.

May import: harness.common, harness.kueue, harness.objects, harness.history, harness.plan, harness.proxy.
"""

from harness.nemesis.runner import Nemesis  # noqa: F401 - the package's interface
