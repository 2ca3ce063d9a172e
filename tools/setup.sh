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
# Ascend's real runtime headers (acl/acl.h, hccl/hccl.h) for tests/test_scaffold_ascend_headers.py:
# the torch_npu wheel ships them (no CANN library). Only its include tree is unpacked, in the
# layout CANN has under ASCEND_HOME (include/acl, include/hccl); same wheel whatever this Python.
npu_version=2.14.0
npu_home=${TDEV_ASCEND_HEADERS:-$HOME/.cache/tdev/torch-npu-$npu_version}
if [[ ! -f $npu_home/include/acl/acl.h ]]; then
  log "pip download torch-npu==$npu_version (headers only) -> $npu_home"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 -d "$npu_home/wheel" "torch-npu==$npu_version" >&2
  python3 - "$npu_home" <<'PY'
import pathlib, shutil, sys, zipfile
home = pathlib.Path(sys.argv[1]); tmp = home / "include.tmp"; prefix = "torch_npu/include/"
wheel, = (home / "wheel").glob("torch_npu-*.whl")
shutil.rmtree(tmp, ignore_errors=True)
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/") and ".." not in name:
            dest = tmp / name[len(prefix):]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(z.read(name))
(tmp / "hccl").symlink_to("third_party/hccl/inc/hccl")  # CANN: include/hccl/hccl.h
shutil.rmtree(home / "include", ignore_errors=True)
tmp.rename(home / "include")  # complete or absent: a killed run is redone
PY
fi
# Debian's chromium: the tests open the pages of `tdev scan --html` and `tdev extract --html` in it
if ! command -v chromium >/dev/null; then
  log "apt-get install chromium"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
fi
log "pip install -e .[test]"
python3 -m pip install -q -e '.[test]' >&2
log "ready: $(command -v tdev)"
