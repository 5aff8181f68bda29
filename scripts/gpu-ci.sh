#!/usr/bin/env bash
# shellcheck disable=SC2317  # the step functions are called through run_step
# ringkv GPU CI: the one script a GPU runner runs (docs/gpu-ci.md).
#
#   scripts/gpu-ci.sh                       build (Release, CUDA) and check everything
#   OUT=dir scripts/gpu-ci.sh               artifacts there (default ./gpu-ci-out)
#   RINGKV_PREBUILT=dir scripts/gpu-ci.sh   use binaries built elsewhere instead of building:
#                                           dir/ringkv_cuda_bench, and where present dir/ringkv,
#                                           dir/ringkv_gpu_tests, dir/libringkv_cuda.a
#
# Steps, each timed, its output in $OUT/<step>.log:
#   device     nvidia-smi sees a GPU (no GPU fails the run unless RINGKV_GPU_CI_ALLOW_NO_DEVICE=1)
#   configure  Release, RINGKV_CUDA=ON; with the test suite where GoogleTest, RapidCheck and the
#              rest are installed, else -DRINGKV_BUILD_TESTS=OFF (the engine and the benchmark only)
#   build      only what the later steps run: ringkv_cuda_bench (+ ringkv_gpu_tests, ringkv)
#   resources  no decode/append kernel spills or uses local memory on sm_90 (cuobjdump)
#   gpu-tests  ctest -L gpu (JUnit: $OUT/ctest-gpu.xml); a test that skips although a GPU is
#              present fails the step
#   check      ringkv check --engine cuda --engine cuda-cublas --properties (JUnit + JSON)
#   scale      ringkv check --scale TIER on cuda and cuda-cublas: production-shape cases judged on
#              sampled rows (docs/scale.md); tiers from RINGKV_SCALE_TIERS (default "gpu gpu-long";
#              "" skips the step), one JSON report per tier
#   bench      ringkv_cuda_bench --quick (text and JSON)
#   memcheck   compute-sanitizer --tool memcheck on the benchmark's validation case
#   racecheck  compute-sanitizer --tool racecheck on its decode-only validation case
#   initcheck  compute-sanitizer --tool initcheck on the benchmark's validation case
#   sanitize-tests  compute-sanitizer --tool memcheck on the GPU tests that drive every kernel
#              through small cases (exact ring, guard bands, device entry, a few goldens)
# A summary table (step, status, seconds) is printed last; the exit status is 1 if any step
# failed, else 0. Steps that cannot run here (no tests built, no compute-sanitizer) are SKIP.
#
# Other knobs: RINGKV_GPU_BUILD_DIR (default build-gpu-ci), RINGKV_JOBS (default nproc),
# RINGKV_CUDA_ARCHITECTURES (e.g. 90 to build only for an H100/H200: faster; the resource check
# needs 90 in it), RINGKV_CHECK_CASES (cases per property for `ringkv check`, default 100),
# RINGKV_BENCH_ARGS (default --quick), RINGKV_STEP_TIMEOUT (seconds each test, check, sanitizer
# and benchmark command may run before it is killed and its step fails; default: no limit),
# RINGKV_TIME_BUDGET (seconds for the whole run: a command is killed when it is spent, so the
# summary still prints inside a lease; default: no limit).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${OUT:-$PWD/gpu-ci-out}"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
BUILD_DIR="${RINGKV_GPU_BUILD_DIR:-$ROOT/build-gpu-ci}"
PREBUILT="${RINGKV_PREBUILT:-}"
JOBS="${RINGKV_JOBS:-$(nproc 2>/dev/null || echo 4)}"
ALLOW_NO_DEVICE="${RINGKV_GPU_CI_ALLOW_NO_DEVICE:-0}"
CHECK_CASES="${RINGKV_CHECK_CASES:-100}"
SCALE_TIERS="${RINGKV_SCALE_TIERS-gpu gpu-long}"
BENCH_ARGS="${RINGKV_BENCH_ARGS:---quick}"
STEP_TIMEOUT="${RINGKV_STEP_TIMEOUT:-}"

BUDGET="${RINGKV_TIME_BUDGET:-}"
START_EPOCH=$(date +%s)

# limit CMD...: runs CMD, killed after RINGKV_STEP_TIMEOUT seconds, or when the whole run's
# RINGKV_TIME_BUDGET (seconds, leaving 20 for the summary) is spent, where those are set (exit 124).
limit() {
  local t="$STEP_TIMEOUT"
  if [ -n "$BUDGET" ]; then
    local left=$((BUDGET - ($(date +%s) - START_EPOCH) - 20))
    [ "$left" -lt 1 ] && { NOTE="RINGKV_TIME_BUDGET=${BUDGET}s spent"; echo "$NOTE"; return 124; }
    if [ -z "$t" ] || [ "$left" -lt "$t" ]; then t=$left; fi
  fi
  if [ -n "$t" ]; then
    timeout -k 10 "$t" "$@"
    local rc=$?
    [ "$rc" = 124 ] && { NOTE="killed after ${t}s (RINGKV_STEP_TIMEOUT, RINGKV_TIME_BUDGET)"; echo "$NOTE"; }
    return "$rc"
  fi
  "$@"
}

for d in /usr/local/cuda/bin /opt/cuda/bin "${CUDA_HOME:-/nonexistent}/bin" "${CUDA_PATH:-/nonexistent}/bin"; do
  [ -d "$d" ] && case ":$PATH:" in *":$d:"*) ;; *) PATH="$PATH:$d" ;; esac
done
export PATH
# Prebuilt binaries link the CUDA runtime and cuBLAS dynamically: find them in the toolkit.
if [ -n "$PREBUILT" ]; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
  done
  export LD_LIBRARY_PATH
fi

STEP_NAMES=()
STEP_STATUS=()
STEP_SECS=()
STEP_NOTES=()
HAVE_DEVICE=0
TESTS_BUILT=0
BENCH=""
CLI=""
GPU_TESTS=""
CUDA_LIB=""
NOTE=""

# run_step NAME FUNCTION: runs the function with its output shown and logged; the function
# returns 0 (PASS), 77 (SKIP, with NOTE set to why) or anything else (FAIL).
run_step() {
  local name="$1" fn="$2" start end rc status
  local log="$OUT_DIR/$name.log"
  NOTE=""
  echo
  echo "=== [$name] $(date -u +%H:%M:%S) ==="
  start=$(date +%s.%N)
  "$fn" > >(tee "$log") 2>&1
  rc=$?
  wait $! 2>/dev/null || true  # let tee finish writing
  end=$(date +%s.%N)
  case $rc in
    0) status=PASS ;;
    77) status=SKIP ;;
    *) status=FAIL ;;
  esac
  [ "$status" = FAIL ] && [ -z "$NOTE" ] && NOTE="exit status $rc, see $log"
  STEP_NAMES+=("$name")
  STEP_STATUS+=("$status")
  STEP_SECS+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')")
  STEP_NOTES+=("$NOTE")
  echo "=== [$name] $status${NOTE:+ ($NOTE)}"
}

skip() { NOTE="$1"; echo "SKIP: $1"; return 77; }
no_device_skip() { skip "no GPU (see the device step)"; }

step_device() {
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    HAVE_DEVICE=1
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu \
      --format=csv 2>/dev/null || true
    command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -2
    return 0
  fi
  echo "nvidia-smi found no GPU"
  if [ "$ALLOW_NO_DEVICE" = 1 ]; then
    skip "no GPU (allowed by RINGKV_GPU_CI_ALLOW_NO_DEVICE=1): device steps are skipped"
    return 77
  fi
  NOTE="no GPU: a GPU runner without a GPU is misconfigured (set RINGKV_GPU_CI_ALLOW_NO_DEVICE=1 to skip instead)"
  return 1
}

configure_with() {  # configure_with TESTS(ON|OFF)
  local archs=()
  [ -n "${RINGKV_CUDA_ARCHITECTURES:-}" ] && archs=("-DRINGKV_CUDA_ARCHITECTURES=$RINGKV_CUDA_ARCHITECTURES")
  rm -f "$BUILD_DIR/CMakeCache.txt"
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRINGKV_CUDA=ON \
    -DRINGKV_BUILD_TESTS="$1" -DRINGKV_BUILD_BENCHMARKS=ON "${archs[@]}"
}

step_configure() {
  if [ -n "$PREBUILT" ]; then
    skip "RINGKV_PREBUILT=$PREBUILT: using prebuilt binaries"
    return 77
  fi
  command -v nvcc >/dev/null 2>&1 || { NOTE="nvcc not found (PATH, CUDA_HOME)"; return 1; }
  if configure_with ON; then
    TESTS_BUILT=1
    return 0
  fi
  echo
  echo "--- the test suite's dependencies are missing (above); configuring the engine and the benchmark only"
  if configure_with OFF; then
    TESTS_BUILT=0
    NOTE="without the test suite (GoogleTest/RapidCheck/CLI11/nlohmann_json/benchmark missing)"
    return 0
  fi
  return 1
}

step_build() {
  if [ -n "$PREBUILT" ]; then
    [ -x "$PREBUILT/ringkv_cuda_bench" ] && BENCH="$PREBUILT/ringkv_cuda_bench"
    [ -x "$PREBUILT/ringkv" ] && CLI="$PREBUILT/ringkv"
    [ -x "$PREBUILT/ringkv_gpu_tests" ] && GPU_TESTS="$PREBUILT/ringkv_gpu_tests"
    [ -f "$PREBUILT/libringkv_cuda.a" ] && CUDA_LIB="$PREBUILT/libringkv_cuda.a"
    echo "prebuilt: bench=${BENCH:-none} cli=${CLI:-none} gpu_tests=${GPU_TESTS:-none} lib=${CUDA_LIB:-none}"
    [ -n "$BENCH" ] || { NOTE="no $PREBUILT/ringkv_cuda_bench"; return 1; }
    skip "prebuilt binaries"
    return 77
  fi
  [ -f "$BUILD_DIR/build.ninja" ] || { NOTE="not configured"; return 1; }
  local targets=(ringkv_cuda ringkv_cuda_bench)
  [ "$TESTS_BUILT" = 1 ] && targets+=(ringkv_gpu_tests ringkv)
  cmake --build "$BUILD_DIR" --parallel "$JOBS" --target "${targets[@]}" || return 1
  BENCH="$BUILD_DIR/cuda/bench/ringkv_cuda_bench"
  CUDA_LIB="$(find "$BUILD_DIR/cuda" -maxdepth 1 -name 'libringkv_cuda.*' | head -1)"
  if [ "$TESTS_BUILT" = 1 ]; then
    CLI="$BUILD_DIR/cli/ringkv"
    GPU_TESTS="$BUILD_DIR/conformance/gpu/ringkv_gpu_tests"
  fi
  return 0
}

step_resources() {
  [ -n "$CUDA_LIB" ] || { skip "no libringkv_cuda to read"; return 77; }
  local cuobjdump="${CUOBJDUMP:-$(command -v cuobjdump || true)}"
  local out
  out=$(cmake "-DCUOBJDUMP=$cuobjdump" "-DCXXFILT=$(command -v c++filt || true)" "-DBINARY=$CUDA_LIB" -DARCH=sm_90 \
    -P "$ROOT/cuda/bench/check_resources.cmake" 2>&1)
  local rc=$?
  echo "$out"
  if echo "$out" | grep -q "kernel resource check SKIPPED"; then
    skip "no cuobjdump"
    return 77
  fi
  [ "$rc" = 0 ] || NOTE="a decode/append kernel spills or uses local memory, or none was found"
  return "$rc"
}

step_gpu_tests() {
  [ "$HAVE_DEVICE" = 1 ] || { no_device_skip; return 77; }
  if [ -n "$PREBUILT" ] && [ -n "$GPU_TESTS" ]; then
    RINGKV_GOLDEN_DIR="$ROOT/golden" limit "$GPU_TESTS" --gtest_output="xml:$OUT_DIR/gtest-gpu.xml" 2>&1 |
      tee "$OUT_DIR/gpu-tests.out"
    local rc=${PIPESTATUS[0]}
    if grep -q '^\[  SKIPPED \]' "$OUT_DIR/gpu-tests.out"; then
      NOTE="tests skipped although a GPU is present"
      return 1
    fi
    return "$rc"
  fi
  [ "$TESTS_BUILT" = 1 ] || { skip "test suite not built (its dependencies are missing)"; return 77; }
  (cd "$BUILD_DIR" && ctest -L gpu --output-on-failure --timeout "${STEP_TIMEOUT:-1800}" --output-junit "$OUT_DIR/ctest-gpu.xml") \
    2>&1 | tee "$OUT_DIR/ctest-gpu.out"
  local rc=${PIPESTATUS[0]}
  # On a machine with a GPU no GPU test may skip: that would hide a broken driver or build.
  if grep -q "tests did not run" "$OUT_DIR/ctest-gpu.out"; then
    NOTE="GPU tests skipped although a GPU is present (see 'did not run' above)"
    return 1
  fi
  return "$rc"
}

step_check() {
  [ "$HAVE_DEVICE" = 1 ] || { no_device_skip; return 77; }
  [ -n "$CLI" ] || { skip "the ringkv CLI was not built (test suite dependencies missing)"; return 77; }
  limit "$CLI" check --table --engine cuda --engine cuda-cublas --properties --cases "$CHECK_CASES" --golden "$ROOT/golden" \
    --junit "$OUT_DIR/check.xml" --json "$OUT_DIR/check.json"
}

step_scale() {
  [ "$HAVE_DEVICE" = 1 ] || { no_device_skip; return 77; }
  [ -n "$CLI" ] || { skip "the ringkv CLI was not built (test suite dependencies missing)"; return 77; }
  [ -n "$SCALE_TIERS" ] || { skip "RINGKV_SCALE_TIERS is empty"; return 77; }
  local tier rc=0
  for tier in $SCALE_TIERS; do
    limit "$CLI" check --engine cuda --engine cuda-cublas --scale "$tier" --no-golden \
      --json "$OUT_DIR/scale-$tier.json" --junit "$OUT_DIR/scale-$tier.xml" || rc=1
  done
  return "$rc"
}

sanitizer() {
  local s="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}"
  [ -z "$s" ] && [ -x /usr/local/cuda/compute-sanitizer/compute-sanitizer ] && s=/usr/local/cuda/compute-sanitizer/compute-sanitizer
  echo "$s"
}

# sanitize_bench TOOL ARGS...: compute-sanitizer --tool TOOL on the benchmark with ARGS.
sanitize_bench() {
  [ "$HAVE_DEVICE" = 1 ] || { no_device_skip; return 77; }
  [ -n "$BENCH" ] || { NOTE="no benchmark binary"; return 1; }
  local s tool="$1"
  shift
  s="$(sanitizer)"
  [ -n "$s" ] || { skip "compute-sanitizer not found"; return 77; }
  limit "$s" --tool "$tool" --error-exitcode 1 "$BENCH" "$@"
}
step_memcheck() { sanitize_bench memcheck --validate; }
step_racecheck() { sanitize_bench racecheck --validate --decode-only; }
step_initcheck() { sanitize_bench initcheck --validate; }

# memcheck over the GPU tests whose cases are small but reach every kernel: the exact-ring
# comparison after every step (every storage format, INT8 scheme, sinks, chunks, resets), the
# guard bands, the device entry with f16/bf16 inputs, and a few committed goldens on both paths.
SANITIZE_TEST_FILTER="${RINGKV_SANITIZE_TEST_FILTER:-CudaExactRing.*:CudaGuardBands.*:CudaDeviceEntry.*:*CudaGolden*decode_w8_sinks2:*CudaGolden*chunk_2w_crosses_wrap:*CudaGolden*int8_q8_0}"
step_sanitize_tests() {
  [ "$HAVE_DEVICE" = 1 ] || { no_device_skip; return 77; }
  [ -n "$GPU_TESTS" ] || { skip "the GPU tests were not built"; return 77; }
  local s
  s="$(sanitizer)"
  [ -n "$s" ] || { skip "compute-sanitizer not found"; return 77; }
  RINGKV_GOLDEN_DIR="$ROOT/golden" limit "$s" --tool memcheck --error-exitcode 1 \
    "$GPU_TESTS" --gtest_filter="$SANITIZE_TEST_FILTER"
}

step_bench() {
  [ "$HAVE_DEVICE" = 1 ] || { no_device_skip; return 77; }
  [ -n "$BENCH" ] || { NOTE="no benchmark binary"; return 1; }
  # shellcheck disable=SC2086
  limit "$BENCH" $BENCH_ARGS --json "$OUT_DIR/bench.json" | tee "$OUT_DIR/bench.txt"
  local rc=${PIPESTATUS[0]}
  if grep -q "skipped" "$OUT_DIR/bench.txt" && ! grep -q "^device:" "$OUT_DIR/bench.txt"; then
    NOTE="the benchmark skipped although a GPU is present"
    return 1
  fi
  return "$rc"
}

echo "ringkv GPU CI: source $ROOT, artifacts $OUT_DIR${PREBUILT:+, prebuilt $PREBUILT}"
run_step device step_device
run_step configure step_configure
run_step build step_build
run_step resources step_resources
run_step gpu-tests step_gpu_tests
run_step check step_check
run_step scale step_scale
run_step bench step_bench
run_step memcheck step_memcheck
run_step racecheck step_racecheck
run_step initcheck step_initcheck
run_step sanitize-tests step_sanitize_tests

failed=0
{
  echo
  echo "ringkv GPU CI summary ($(date -u +%Y-%m-%dT%H:%M:%SZ), artifacts in $OUT_DIR)"
  printf '%-10s %-6s %8s  %s\n' step status seconds note
  for i in "${!STEP_NAMES[@]}"; do
    printf '%-10s %-6s %8s  %s\n' "${STEP_NAMES[$i]}" "${STEP_STATUS[$i]}" "${STEP_SECS[$i]}" "${STEP_NOTES[$i]}"
    [ "${STEP_STATUS[$i]}" = FAIL ] && failed=1
  done
  if [ $failed = 1 ]; then echo "GPU CI FAILED"; else echo "GPU CI PASSED"; fi
} | tee "$OUT_DIR/summary.txt"
grep -q "GPU CI FAILED" "$OUT_DIR/summary.txt" && exit 1
exit 0
