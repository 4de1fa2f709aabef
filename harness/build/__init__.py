"""Building the real components with the machine's Go into the harness's cache: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kubectl, kwok (`binaries.py`) and any Kueue build — a tag, a ref,
a source tree, with patches (`kueue.py`, KueueSpec) — each once per version, under a build lock, with
progress lines.

May import: harness.common, harness.kueue.
"""
