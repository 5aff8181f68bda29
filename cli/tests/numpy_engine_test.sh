#!/usr/bin/env bash
# ctest cli.numpy_example_engine: the numpy example engine (docs/examples/numpy_engine.py, on the
# ringkv Python package from python/src) writes outputs for every golden case, `ringkv check --outputs`
# must pass them, and must fail the same engine with a planted W+1 window. Installs numpy and
# safetensors into a venv with pip (needs PyPI: without it this test FAILS, it does not skip).
# usage: numpy_engine_test.sh PYTHON SOURCE_DIR VENV_DIR RINGKV WORK_DIR
set -euo pipefail
python=$1 src=$2 venv=$3 ringkv=$4 work=$5
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" || { echo "FAILED: '$python -m venv' failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
if ! "$venv/bin/python" -c "import numpy, safetensors" 2>/dev/null; then
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet numpy safetensors || {
    echo "FAILED: pip could not install numpy and safetensors (is PyPI reachable?)" >&2
    exit 1
  }
fi
rm -rf "$work" && mkdir -p "$work"
export PYTHONPATH="$src/python/src${PYTHONPATH:+:$PYTHONPATH}"
"$venv/bin/python" "$src/docs/examples/numpy_engine.py" "$src/golden" "$work/good" 2> /dev/null
"$ringkv" check --quiet --golden "$src/golden" --outputs "$work/good"
# must_fail DIR WHAT: ringkv check --outputs DIR exits 1 (its report in DIR.log).
must_fail() {
  set +e
  "$ringkv" check --quiet --golden "$src/golden" --outputs "$1" > "$1.log" 2>&1
  local rc=$?
  set -e
  if [ "$rc" -ne 1 ]; then
    echo "FAILED: ringkv check --outputs passed (exit $rc) $2" >&2
    cat "$1.log" >&2
    exit 1
  fi
}
"$venv/bin/python" "$src/docs/examples/numpy_engine.py" "$src/golden" "$work/bug" --bug window+1 2> /dev/null
must_fail "$work/bug" "the numpy engine with a W+1 window"
grep -q "needle-W+1" "$work/bug.log" || { echo "FAILED: the report does not name the needle-W+1 class" >&2; exit 1; }
# --write-internals: rotated q/k and the stored cache per row (golden-format §7) are checked too: the
# honest engine's RoPE is conformant and its cache exact; with the W+1 window it still fails.
"$venv/bin/python" "$src/docs/examples/numpy_engine.py" "$src/golden" "$work/internals" --write-internals 2> /dev/null
"$ringkv" check --quiet --table --golden "$src/golden" --outputs "$work/internals" --json "$work/internals.json" > "$work/internals.log"
grep -q "decode_w8  *RoPE conformant" "$work/internals.log" || { echo "FAILED: no conformant RoPE verdict" >&2; cat "$work/internals.log" >&2; exit 1; }
grep -q '"verdict": "conformant"' "$work/internals.json" || { echo "FAILED: the JSON report has no RoPE verdict" >&2; exit 1; }
"$venv/bin/python" "$src/docs/examples/numpy_engine.py" "$src/golden" "$work/internals-bug" --write-internals --bug window+1 2> /dev/null
must_fail "$work/internals-bug" "the W+1 numpy engine with its rotated q/k and cache"
echo "numpy example engine: passes (also with q_rot/k_rot and its stored cache); with a planted W+1 window it fails, as it must"
