"""Pure models the checkers judge with: Kueue's quota and cohort tree (`quota.py`: check_quota,
usage_by_cluster_queue) and object lifecycles (`lifecycle.py`: Pods against their Workloads).
"""
