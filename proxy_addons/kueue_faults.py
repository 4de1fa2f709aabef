"""The script mitmdump loads: `mitmdump -s proxy_addons/kueue_faults.py --set kh_control_port=N
--set kh_token_file=F --set kh_events=F.jsonl --set kh_flows=F.mitm` (harness/proxy/client.py does this).

The addon's parts live in the importable package harness/proxy/addons (mitmproxy loads this file outside
sys.modules, where @dataclass fails; the package is a normal module). Unmatched traffic passes unchanged;
watch responses stream (a buffered watch looks like a Kueue bug: docs/kueue-notes.md, "Through
mitmproxy").
"""

from harness.proxy.addons import KueueFaults, addons  # noqa: F401 - mitmproxy reads `addons`
