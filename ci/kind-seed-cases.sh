#!/usr/bin/env bash
# Runs the seed cases of kubernetes-sigs/kueue#11480 against Kueue's release manifests in a kind cluster,
# Kueue's API traffic routed through the harness's proxy (pytest --target kind). The GitHub Actions
# workflow .github/workflows/kind.yml calls this script; it runs the same way on a laptop with kind and Docker
# (or Podman with KIND_EXPERIMENTAL_PROVIDER=podman), Python 3.11 and make.
#
# usage: ci/kind-seed-cases.sh [--kueue-version vX.Y.Z] [--kind-cluster NAME] [--kind-image IMAGE]
#                              [--kueue-manifests URL|FILE] [--artifacts-dir DIR] [--keep-cluster]
#                              [-- extra pytest arguments]
#
# A kind cluster NAME that exists is reused and kept; one created here is deleted at the end unless
# --keep-cluster. Evidence: DIR/summary.json, DIR/junit.xml, DIR/env/ (kueue.log through the API,
# mitmdump.log, proxy-events.jsonl), DIR/cases/<case>/ and <case>.tar.gz.
# Exit code: 0 when every case got the verdict its Kueue version should give (pytest's), else non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${KUEUE_HARNESS_KUEUE_VERSION:-v0.17.0}"
cluster="${KUEUE_HARNESS_KIND_CLUSTER:-kueue-harness}"
artifacts=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --kueue-version) version="$2"; shift 2 ;;
    --kind-cluster) cluster="$2"; shift 2 ;;
    --kind-image) extra+=("--kind-image=$2"); shift 2 ;;
    --kueue-manifests) extra+=("--kueue-manifests=$2"); shift 2 ;;
    --artifacts-dir) artifacts="$2"; shift 2 ;;
    --keep-cluster) extra+=("--keep-env"); shift ;;
    --) shift; extra+=("$@"); break ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

engine="${KIND_EXPERIMENTAL_PROVIDER:-docker}"
for tool in kind "$engine" make python3; do
  command -v "$tool" >/dev/null || { echo "$tool is required on PATH (see docs/kind.md)" >&2; exit 2; }
done
"$engine" info >/dev/null 2>&1 || { echo "$engine is installed but not running" >&2; exit 2; }

make install
artifacts="${artifacts:-artifacts/kind-${version}-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$artifacts"
echo "kind $(kind version | awk '{print $2}'), Kueue ${version}, cluster ${cluster}, evidence in ${artifacts}"

rc=0
.venv/bin/python -m pytest cases/kueue_11480 \
  -p no:cacheprovider -q -rN \
  --target kind --kind-cluster "$cluster" --kueue-version "$version" \
  --artifacts-dir "$artifacts" --junitxml "$artifacts/junit.xml" \
  ${extra[@]+"${extra[@]}"} || rc=$?

# The verdict table, also to the job summary on GitHub Actions.
.venv/bin/python - "$artifacts/summary.json" "${GITHUB_STEP_SUMMARY:-}" <<'EOF' || true
import json, sys
from pathlib import Path
path, gh = Path(sys.argv[1]), sys.argv[2]
if not path.exists():
    print(f"no {path}: the environment did not start (see the output above)")
    sys.exit(0)
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
EOF
exit "$rc"
