#!/usr/bin/env bash
# ctest golden.python_readers_agree: installs numpy and safetensors into a venv with pip, then
# reads every committed golden case with docs/examples/read_golden_numpy.py and
# docs/examples/read_golden_safetensors.py and checks that they agree (compare_readers.py).
# Needs PyPI (or a configured mirror): without it this test FAILS, it does not skip.
# usage: python_readers_test.sh PYTHON SOURCE_DIR VENV_DIR [RINGKV_GOLDEN_TOOL]
set -euo pipefail
python=$1 src=$2 venv=$3 tool=${4:-}
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" || { echo "FAILED: '$python -m venv' failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
if ! "$venv/bin/python" -c "import numpy, safetensors" 2>/dev/null; then
  "$venv/bin/python" -m pip install --disable-pip-version-check --quiet numpy safetensors || {
    echo "FAILED: pip could not install numpy and safetensors (is PyPI reachable?)" >&2
    exit 1
  }
fi
"$venv/bin/python" -c "import numpy, safetensors; print('numpy', numpy.__version__, 'safetensors', safetensors.__version__)"
for reader in read_golden_numpy.py read_golden_safetensors.py; do  # the examples run as documented
  "$venv/bin/python" "$src/docs/examples/$reader" "$src/golden/cases/decode_w8.safetensors" > /dev/null
done
exec "$venv/bin/python" "$src/conformance/golden/compare_readers.py" "$src/golden" "$src/docs/examples" $tool
