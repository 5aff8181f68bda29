#!/usr/bin/env bash
# ctest python.wheel (label wheel): the platform wheel as a user gets it. `pip wheel ./python` (build
# isolation: the pinned scikit-build-core from PyPI drives the project's CMake, RINGKV_CUDA=OFF, only
# the target ringkv) in a fresh virtual environment outside the source tree, then, with nothing of the
# build on PATH and neither RINGKV nor RINGKV_DATA_DIR set, from a folder outside the source tree:
#   1. the wheel's tag is py3-none-linux_x86_64 and it holds the CLI, its worker, the golden set, the
#      profiles, the plugin ABI header and the Python package with its pytest plugin;
#   2. `ringkv check --engine reference` (the console entry point) PASSES on the bundled golden set;
#   3. python -c 'import ringkv; ... ringkv.check(out)' on the numpy engine's outputs of every case passes;
#   4. the README's pytest command (pytest --ringkv-engine=my_engine:make_engine, python/consumer) passes.
# The CMake build folder is kept in WORK_DIR/skbuild, so that a rerun rebuilds only what changed.
# usage: wheel_test.sh PYTHON3 SOURCE_DIR WORK_DIR
set -euo pipefail
python3=$1 src=$2 work=$3
mkdir -p "$work"
rm -rf "$work/venv" "$work/dist" "$work/run"
"$python3" -m venv "$work/venv"
py="$work/venv/bin/python"
t0=$(date +%s)
"$py" -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" -C build-dir="$work/skbuild" "$src/python" > "$work/wheel.log" 2>&1 ||
  { cat "$work/wheel.log" >&2; echo "FAILED: pip wheel ./python" >&2; exit 1; }
echo "pip wheel ./python: $(( $(date +%s) - t0 )) s"
wheels=("$work"/dist/ringkv-*.whl)
whl=${wheels[0]}
[ "${#wheels[@]}" = 1 ] && [ -f "$whl" ] || { echo "FAILED: expected one wheel in $work/dist" >&2; exit 1; }
case "$(basename "$whl")" in
  ringkv-*-py3-none-linux_x86_64.whl) echo "wheel: $(basename "$whl") ($(( $(stat -c %s "$whl") / 1024 )) KiB)" ;;
  *) echo "FAILED: the wheel's tag is not py3-none-linux_x86_64: $(basename "$whl")" >&2; exit 1 ;;
esac
"$py" - "$whl" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["ringkv/_data/bin/ringkv", "ringkv/_data/bin/ringkv_plugin_worker", "ringkv/_data/share/ringkv/golden/manifest.json",
        "ringkv/_data/share/ringkv/profiles/f32-reference.json", "ringkv/_data/include/ringkv/engine_abi.h",
        "ringkv/__init__.py", "ringkv/pytest_plugin.py", "ringkv/_cli.py", "ringkv/examples/numpy_engine.py"]
missing = [n for n in need if n not in names]
if missing:
    sys.exit(f"FAILED: the wheel lacks {missing}")
if any("cuda" in n.lower() for n in names):
    sys.exit("FAILED: the wheel carries CUDA parts: " + ", ".join(n for n in names if "cuda" in n.lower()))
print(f"wheel holds {len(names)} files, the CLI, its worker, {sum(n.endswith('.safetensors') for n in names)} golden files")
PY
"$py" -m pip install --quiet "$whl" numpy==2.4.6 safetensors==0.8.0 pytest==9.2.0

# From here on: a folder outside the source tree, the venv's bin/ and the system's on PATH, nothing else.
mkdir -p "$work/run" && cd "$work/run"
user_env=(env -u RINGKV -u RINGKV_DATA_DIR -u RINGKV_GOLDEN -u PYTHONPATH "PATH=$work/venv/bin:/usr/bin:/bin" PYTHONDONTWRITEBYTECODE=1)
out=$("${user_env[@]}" ringkv check --engine reference 2>&1) || { echo "$out" >&2; echo "FAILED: ringkv check --engine reference" >&2; exit 1; }
echo "$out" | tail -1
echo "$out" | grep -q "^PASSED" || { echo "FAILED: ringkv check --engine reference did not pass" >&2; exit 1; }

"${user_env[@]}" python -c '
import ringkv
from ringkv.examples.numpy_engine import make_engine
golden = ringkv.default_golden_dir()
assert "/ringkv/_data/" in ringkv.find_ringkv() and "/ringkv/_data/" in golden, (ringkv.find_ringkv(), golden)
manifest, engine = ringkv.read_manifest(golden), make_engine()
ringkv.write_capabilities("numpy-out", engine.name, engine.capabilities())
for entry in manifest:
    ringkv.replay(manifest.load(entry), engine, "numpy-out")
report = ringkv.check("numpy-out")
assert report["passed"] and report["exit_code"] == 0, report["output"]
print("ringkv.check on the numpy engine: %d cases, all passed" % len(report["cases"]))
'

cp -r "$src/python/consumer" "$work/run/my_project"
cd "$work/run/my_project"
out=$("${user_env[@]}" pytest -p no:cacheprovider -q --ringkv-engine=my_engine:make_engine 2>&1) ||
  { echo "$out" >&2; echo "FAILED: pytest --ringkv-engine=my_engine:make_engine" >&2; exit 1; }
echo "$out" | tail -1
echo "python.wheel: passed"
