#!/usr/bin/env bash
# Install tdev and everything its commands and tests need, on a fresh machine of this project's
# kind (Debian, Python >= 3.10, root). Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[setup] %s\n' "$*" >&2; }

# system tools: ccache (wrapped-cmake --launcher ccache), cmake/ninja/g++ for the native builds
need=()
for tool in ccache cmake ninja g++ cpp; do command -v "$tool" >/dev/null || need+=("$tool"); done
if ((${#need[@]})); then
  pkgs=()
  for t in "${need[@]}"; do case $t in ninja) pkgs+=(ninja-build);; g++) pkgs+=(g++);; cpp) pkgs+=(cpp);; *) pkgs+=("$t");; esac; done
  log "apt-get install ${pkgs[*]}"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >&2
fi

# libraries the standalone torch_cuda build (wrapped-cmake, docs/standalone-build.md) needs for c10
libs=()
for pkg in libfmt-dev libcpuinfo-dev; do dpkg -s "$pkg" >/dev/null 2>&1 || libs+=("$pkg"); done
if ((${#libs[@]})); then
  log "apt-get install ${libs[*]}"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${libs[@]}" >&2
fi

# torch: the CPU build of 2.13.0 (a plain `torch` requirement would pull a multi-GB CUDA build)
python3 -c 'import torch' 2>/dev/null || { log "pip install torch==2.13.0"; python3 -m pip install -q torch==2.13.0 >&2; }
# nvml.h for c10/cuda/driver_api.h (the CUDA toolkit here ships no NVML headers)
python3 -c 'import nvidia, glob, sys; sys.exit(not any(glob.glob(p + "/*/include/nvml.h") for p in nvidia.__path__))' 2>/dev/null \
  || { log "pip install nvidia-nvml-dev==13.0.87"; python3 -m pip install -q nvidia-nvml-dev==13.0.87 >&2; }
# nccl.h + libnccl for the generated cuda package's c10d backend (the CUDA toolkit here ships no NCCL)
python3 -c 'import nvidia.nccl' 2>/dev/null || { log "pip install nvidia-nccl-cu13==2.32.3"; python3 -m pip install -q --no-deps nvidia-nccl-cu13==2.32.3 >&2; }
log "pip install -e .[test]"
python3 -m pip install -q -e '.[test]' >&2
log "ready: $(command -v tdev)"
