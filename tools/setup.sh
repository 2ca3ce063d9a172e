#!/usr/bin/env bash
# Install tdev and everything its commands and tests need, on a fresh machine of this project's
# kind (Debian, Python >= 3.10, root). The Python packages go into the project's own virtual
# environment, .venv in the repository (TDEV_VENV to put it elsewhere; made with python3, or
# TDEV_BASE_PYTHON), at the versions constraints.txt pins. Safe to run again: it installs only
# what is missing or not at its pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[setup] %s\n' "$*" >&2; }
venv=${TDEV_VENV:-$PWD/.venv}
base_python=${TDEV_BASE_PYTHON:-python3}

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

# the project's virtual environment (Debian's python3 refuses `pip install` outside one: PEP 668;
# its venv needs the python3-venv package). One left half-made by a killed run is made again.
if [[ -e $venv && ! -f $venv/pyvenv.cfg && -n $(ls -A "$venv" 2>/dev/null) ]]; then
  log "$venv is not a virtual environment (no pyvenv.cfg) and not empty: set TDEV_VENV to another place"
  exit 2
fi
if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  log "$base_python -m venv $venv"
  rm -rf "$venv"
  if ! "$base_python" -m venv "$venv" >&2; then
    rm -rf "$venv"
    log "apt-get install python3-venv"
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
    "$base_python" -m venv "$venv" >&2
  fi
fi
python=$venv/bin/python
# Python.h: the generated packages and wrapped-cmake's extensions compile against it
if ! "$python" -c 'import os, sys, sysconfig; sys.exit(not os.path.isfile(sysconfig.get_paths()["include"] + "/Python.h"))'; then
  log "apt-get install python3-dev"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-dev >&2
fi
pip_install() { "$python" -m pip install -q --disable-pip-version-check -c constraints.txt "$@" >&2; }
# setuptools and wheel: the generated packages are built with --no-build-isolation, with these.
# torch: the CPU build of 2.13.0 (a plain `torch` requirement would pull a multi-GB CUDA build);
# PyPI has no +cpu builds, PyTorch's CPU index has them. NumPy: torch warns without it.
# nvidia-nvml-dev: nvml.h for c10/cuda/driver_api.h (the CUDA toolkit here ships no NVML headers).
base=(setuptools wheel torch==2.13.0+cpu numpy nvidia-nvml-dev)
log "pip install ${base[*]}"
pip_install "${base[@]}" 2>/dev/null \
  || pip_install --extra-index-url https://download.pytorch.org/whl/cpu "${base[@]}"
# nccl.h + libnccl for the generated cuda package's c10d backend (the CUDA toolkit here ships no NCCL)
log "pip install nvidia-nccl-cu13"
pip_install --no-deps nvidia-nccl-cu13
# Ascend's real runtime headers (acl/acl.h, hccl/hccl.h) for tests/test_scaffold_ascend_headers.py:
# the torch_npu wheel ships them (no CANN library). Only its include tree is unpacked, in the
# layout CANN has under ASCEND_HOME (include/acl, include/hccl); same wheel whatever this Python.
npu_version=2.14.0
npu_home=${TDEV_ASCEND_HEADERS:-$HOME/.cache/tdev/torch-npu-$npu_version}
if [[ ! -f $npu_home/include/acl/acl.h ]]; then
  log "pip download torch-npu==$npu_version (headers only) -> $npu_home"
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 -d "$npu_home/wheel" "torch-npu==$npu_version" >&2
  "$python" - "$npu_home" <<'PY'
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
pip_install -e '.[test]'
log "ready: $venv/bin/tdev (the tests: $venv/bin/python -m pytest -q)"
