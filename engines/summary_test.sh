#!/usr/bin/env bash
# ctest engines.summary_table: the cross-engine table at the top of docs/engines.md is what
# `verdicts.py summary` generates from the engines' expected.json files, and a stale copy is caught.
# usage: summary_test.sh PYTHON SOURCE_DIR WORK_DIR EXPECTED.json...
set -euo pipefail
py=$1 src=$2 work=$3
shift 3
verdicts="$src/engines/common/verdicts.py"
"$py" "$verdicts" summary-check "$src/docs/engines.md" "$src/golden/manifest.json" "$@"
# A doc whose table says one engine cannot express a class it was judged on must fail.
mkdir -p "$work"
sed '0,/^| `W=1` | [^|]* |/s//| `W=1` | changed by hand |/' "$src/docs/engines.md" > "$work/stale.md"
if "$py" "$verdicts" summary-check "$work/stale.md" "$src/golden/manifest.json" "$@" > "$work/stale.log"; then
  echo "FAILED: summary-check accepted a hand-edited table ($work/stale.md)" >&2
  exit 1
fi
grep -q "is stale" "$work/stale.log"
echo "a hand-edited table is caught: $(head -1 "$work/stale.log")"
