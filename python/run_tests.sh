#!/usr/bin/env bash
# ctest python.package (python/run_tests.sh): builds the pure-Python wheel of python/ (pip wheel
# --no-build-isolation -C wheel.cmake=false: nothing downloaded, no CMake run; the platform wheel is
# ctest python.wheel's), installs it with pip into WORK_DIR/site and runs the package's pytest suite
# (python/tests) against that installed copy, with the ringkv CLI of the build. Needs the virtual
# environment of scripts/install-engines.sh (numpy, safetensors, pytest, wheel, pinned in
# engines/requirements.txt; scikit-build-core, pinned in python/build-requirements.txt): without it
# this test FAILS (it does not skip).
# usage: run_tests.sh SOURCE_DIR VENV_DIR RINGKV WORK_DIR
set -euo pipefail
src=$1 venv=$2 ringkv=$3 work=$4
py="$venv/bin/python"
if [ ! -x "$py" ] || ! "$py" -c "import numpy, safetensors, pytest, wheel, scikit_build_core" 2>/dev/null; then
  echo "FAILED: no virtual environment with numpy, safetensors, pytest, wheel and scikit-build-core at $venv: run ./scripts/install-engines.sh" >&2
  echo "        (python3 -m venv .venv && .venv/bin/pip install -r engines/requirements.txt -r python/build-requirements.txt)" >&2
  exit 1
fi
rm -rf "$work" && mkdir -p "$work"
cp -r "$src/python" "$work/src"  # build out of the source tree: setuptools writes build/ and *.egg-info
"$py" -m pip wheel --quiet --no-deps --no-build-isolation --config-settings=wheel.cmake=false --wheel-dir "$work/dist" "$work/src" > "$work/wheel.log" 2>&1 ||
  { cat "$work/wheel.log" >&2; echo "FAILED: pip wheel python/" >&2; exit 1; }
"$py" -m pip install --quiet --no-deps --target "$work/site" "$work"/dist/ringkv-*.whl
cd "$work"
PYTHONPATH="$work/site" RINGKV="$ringkv" RINGKV_GOLDEN="$src/golden" RINGKV_EXPECT_INSTALLED=1 PYTHONDONTWRITEBYTECODE=1 \
  "$py" -m pytest -q -p no:cacheprovider --basetemp "$work/tmp" --rootdir "$src/python" "$src/python/tests"
