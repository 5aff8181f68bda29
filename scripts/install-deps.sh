#!/usr/bin/env bash
# Installs exactly the build and test dependencies of ringkv from Debian's packages.
# The CUDA toolkit (nvcc, cuBLAS) is optional and not installed here.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  cmake ninja-build g++ \
  googletest libgtest-dev libgmock-dev \
  librapidcheck-dev \
  libcli11-dev \
  nlohmann-json3-dev \
  libbenchmark-dev \
  python3 python3-venv
