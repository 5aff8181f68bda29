#!/usr/bin/env bash
# ctest engines.<name>.scale_<tier>[_<bug>]: a real engine at serving shapes through its adapter
# (docs/scale.md "Scale cases in files"): `ringkv golden generate --scale TIER --filter FILTER` writes
# the inputs, the adapter replays them into outputs files as it does the golden set, and
# `ringkv check --outputs --scale TIER` judges them on the sampled rows.
#   without BUG: every case FILTER keeps must be within the adapter's capabilities and pass;
#   with BUG=REGEX: the adapter's planted bug (adapter.py --bug BUG) must fail every such case, with a
#   first failure matching REGEX (where the bug must show, e.g. "token 4096 " for a W + 1 window at W 4096).
# Without the virtual environment of scripts/install-engines.sh this test FAILS (it does not skip).
# usage: scale_test.sh NAME SOURCE_DIR VENV_DIR RINGKV WORK_DIR TIER FILTER [BUG=REGEX]
set -euo pipefail
name=$1 src=$2 venv=$3 ringkv=$4 work=$5 tier=$6 filter=$7 spec=${8:-}
bug=${spec%%=*} where=${spec#*=}
py="$venv/bin/python"
if [ ! -x "$py" ] || ! "$py" -c "import numpy, safetensors" 2>/dev/null; then
  echo "FAILED: no virtual environment with the engines at $venv: run ./scripts/install-engines.sh" >&2
  exit 1
fi
rm -rf "$work" && mkdir -p "$work"
start=$SECONDS
"$ringkv" golden generate --scale "$tier" --filter "$filter" --out "$work/inputs" > /dev/null
echo "== inputs of tier $tier ($filter): $(du -sh "$work/inputs" | cut -f1), $((SECONDS - start)) s"
bug_args=()
[ -n "$bug" ] && bug_args=(--bug "$bug")
"$py" "$src/engines/$name/adapter.py" "$work/inputs" "$work/outputs" --ringkv "$ringkv" "${bug_args[@]}" 2> "$work/adapter.log"
echo "== $name${bug:+ with the planted bug $bug}: $(tr '\n' ';' < "$work/adapter.log"), $((SECONDS - start)) s"
set +e
"$ringkv" check --quiet --outputs "$work/outputs" --scale "$tier" --no-golden --filter "$filter" \
  --json "$work/report.json" > "$work/check.log" 2>&1
rc=$?
set -e
echo "== ringkv check --outputs --scale $tier: exit $rc, $((SECONDS - start)) s"
# Every selected case judged (none skipped): passed without a bug, failed where REGEX says with one.
"$py" - "$work/report.json" "$rc" "$bug" "$where" <<'EOF'
import json, re, sys
report, rc, bug, where = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3], sys.argv[4]
cases = [c for c in report["cases"] if c["name"].startswith("scale/")]
want = "failed" if bug else "passed"
bad = [c for c in cases if c["status"] != want or (bug and not re.search(where, c["detail"]))]
for c in cases:
    print(f"  {c['name']}: {c['status']}: {c['detail'][:300]}")
if not cases or bad or rc != (1 if bug else 0):
    print(f"FAILED: expected every case {want}" + (f" at /{where}/" if bug else "") + f" and exit {1 if bug else 0}", file=sys.stderr)
    sys.exit(1)
EOF
echo "$name at scale ($tier, $filter): ${bug:+planted bug $bug }as expected"
