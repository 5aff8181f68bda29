#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang-14, ASan + UBSan, into build-fuzz/) and runs each one for
# RINGKV_FUZZ_RUNS executions (default 200000) or RINGKV_FUZZ_SECONDS seconds (default 60), whichever
# comes first, two at a time. Fails on any finding: a crash, sanitizer report, leak, timeout (10 s per
# input), out-of-memory (2 GiB) or an exception other than a clear ringkv::Error (fuzz/clear_error.hpp).
# The committed corpus (fuzz/corpus/<target>/) is read, never written: new inputs go to
# build-fuzz/fuzz-corpus/<target>/, findings to build-fuzz/fuzz-findings/<target>/ (commit each one
# under fuzz/corpus/<target>/regressions/ with its fix). docs/reliability.md, "Fuzzing".
#
#   scripts/fuzz.sh [TARGET...]     (default: every target)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${RINGKV_FUZZ_BUILD:-build-fuzz}"
RUNS="${RINGKV_FUZZ_RUNS:-200000}"
SECONDS_CAP="${RINGKV_FUZZ_SECONDS:-60}"
JOBS="${RINGKV_FUZZ_JOBS:-2}"

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 -DRINGKV_FUZZ=ON \
  -DRINGKV_CUDA=OFF -DRINGKV_BUILD_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS=-O1 >/dev/null
cmake --build "$BUILD" --target ringkv_fuzz_all
# First the committed corpora, regressions included, replayed under the sanitizers (ctest label fuzz).
ctest --test-dir "$BUILD" -L fuzz --output-on-failure -j "${RINGKV_FUZZ_JOBS:-2}"

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in fuzz/*.dict; do targets+=("$(basename "$f" .dict)"); done
fi

run_one() {
  local t="$1"
  local work="$BUILD/fuzz-corpus/$t" findings="$BUILD/fuzz-findings/$t" log="$BUILD/fuzz-logs/$t.log"
  mkdir -p "$work" "$findings" "$(dirname "$log")"
  local rc=0
  "$BUILD/fuzz/ringkv_fuzz_$t" -seed="${RINGKV_FUZZ_SEED:-1}" -runs="$RUNS" -max_total_time="$SECONDS_CAP" -timeout=10 -rss_limit_mb=2048 \
    -dict="fuzz/$t.dict" -artifact_prefix="$findings/" -print_final_stats=1 "$work" "fuzz/corpus/$t" \
    >"$log" 2>&1 || rc=$?
  local execs
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  if [ "$rc" -eq 0 ]; then
    echo "$t: ${execs:-?} executions, no finding"
  else
    echo "$t: FINDING after ${execs:-?} executions (exit $rc); input in $findings/, log $log:"
    grep -E "ERROR|fuzz finding|SUMMARY|Test unit written" "$log" | head -5 | sed 's/^/  /'
  fi
  return "$rc"
}
export -f run_one
export BUILD RUNS SECONDS_CAP

start=$(date +%s)
if printf '%s\n' "${targets[@]}" | xargs -P "$JOBS" -I{} bash -c 'run_one {}'; then
  echo "fuzz: ${#targets[@]} targets, no finding ($(( $(date +%s) - start )) s)"
else
  echo "fuzz: FINDINGS (see above); $(( $(date +%s) - start )) s" >&2
  exit 1
fi
