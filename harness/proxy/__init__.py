"""The fault proxy: the mitmproxy addons that classify, hold, fail, delay and record Kueue's requests
(`addons/`, loaded into mitmdump by proxy_addons/kueue_faults.py), the harness side that starts mitmdump
and drives its control channel (`client.py`: Proxy, RuleHandle), and the one-line sentences about its
events that session logs print (`notices.py`).

May import: harness.common, harness.kueue, harness.plan.
"""
