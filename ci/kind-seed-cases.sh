#!/usr/bin/env bash
# Runs the seed cases of kubernetes-sigs/kueue#11480 on a kind cluster (pytest --target kind), Kueue's API
# traffic routed through the harness's proxy. The same script serves both paths (ci/README.md):
#   offline (default): the container engine, the kind CLI, the node image (Kubernetes v1.35.4 built here), the
#     Kueue image of the build under test and its manifests are all made on this machine; nothing is pulled.
#   registry reachable (GitHub Actions): --kind-image kindest/node:vX takes a published node image.
#
# usage: ci/kind-seed-cases.sh [--artifacts-dir DIR] [--kueue-version vX.Y.Z] [--kind-cluster NAME]
#                              [--kind-image IMAGE] [--kueue-manifests URL|FILE] [--keep-cluster]
#                              [-- extra pytest arguments]
#
# Needs: Python 3.11, make, Go >= 1.25; root (or a running container engine and kind) on a Debian-like
# machine. Builds whatever is missing into ~/.cache/kueue-harness (cold: about 25 min; warm: about 4 min).
# A kind cluster NAME that exists is reused and kept; one created here is deleted at the end, with the
# container network and the container engine this run started, unless --keep-cluster.
# Evidence: DIR/summary.json, DIR/junit.xml, DIR/env/ (kueue.log through the API, mitmdump.log,
# proxy-events.jsonl), DIR/cases/<case>/.
# Exit code: 0 when every case got the verdict its Kueue build should give and nothing was left running;
# 1 otherwise; 2 for bad arguments or missing tools.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${KUEUE_HARNESS_KUEUE_VERSION:-v0.17.0}"
cluster="${KUEUE_HARNESS_KIND_CLUSTER:-kueue-harness}"
artifacts=""
keep=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --kueue-version) version="$2"; shift 2 ;;
    --kind-cluster) cluster="$2"; shift 2 ;;
    --kind-image) extra+=("--kind-image=$2"); shift 2 ;;
    --kueue-manifests) extra+=("--kueue-manifests=$2"); shift 2 ;;
    --artifacts-dir) artifacts="$2"; shift 2 ;;
    --keep-cluster) extra+=("--keep-env"); keep=1; shift ;;
    --) shift; extra+=("$@"); break ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

for tool in make python3 go; do
  command -v "$tool" >/dev/null || { echo "$tool is required on PATH (see ci/README.md)" >&2; exit 2; }
done

[ -x .venv/bin/python ] || make install
artifacts="${artifacts:-artifacts/kind-${version}-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$artifacts"
echo "kind target: Kueue ${version}, cluster ${cluster}, evidence in ${artifacts}"

rc=0
since="$(date +%s)"
.venv/bin/python -m pytest cases/kueue_11480 \
  -p no:cacheprovider -q -rN --capture=tee-sys \
  --target kind --kind-cluster "$cluster" --kueue-version "$version" \
  --artifacts-dir "$artifacts" --junitxml "$artifacts/junit.xml" \
  ${extra[@]+"${extra[@]}"} || rc=$?

# The verdict table, also to the job summary on GitHub Actions; verdict must equal expected for every case.
.venv/bin/python - "$artifacts/summary.json" "${GITHUB_STEP_SUMMARY:-}" <<'EOF' || rc=1
import json, sys
from pathlib import Path
path, gh = Path(sys.argv[1]), sys.argv[2]
if not path.exists():
    print(f"no {path}: the environment did not start (see the output above)")
    sys.exit(1)
s = json.loads(path.read_text())
rows = [f"| {c['case'].split('::')[-1]} | {c['verdict']} | {c.get('expected', '')} | {c['seconds']:.1f} | "
        f"{c.get('detail', '')[:120].replace('|', '/')} |" for c in s["cases"]]
md = "\n".join([
    f"### kubernetes-sigs/kueue#11480 seed cases: Kueue {s['kueue_version']} on kind "
    f"(Kubernetes {s['kubernetes_version']}, target {s['target']})", "",
    "| case | verdict | expected | seconds | detail |", "|---|---|---|---|---|", *rows, ""])
print(md)
if gh:
    with open(gh, "a") as fh:
        fh.write(md + "\n")
bad = [c["case"] for c in s["cases"] if c["verdict"] != c.get("expected")]
if len(s["cases"]) < 4 or bad:
    print(f"verdicts not as expected: {bad or 'fewer than 4 cases ran'}")
    sys.exit(1)
EOF

# Nothing may be left running: no cluster, no kind container or network, no daemon this run started.
if [ "$keep" = 0 ]; then
  .venv/bin/python -m harness.env.engine leftovers --cluster "$cluster" --since "$since" || rc=1
fi
exit "$rc"
