#!/bin/bash
# Pack what the device machine needs to build torch_cuda against its own CUDA 13 libraries and run
# PyTorch's CUDA tests on it (benchmarks/gpu/cuda_tests.sh), as two loads of at most ~60 MB, one
# a call (the device takes 64 MiB a call, the working tree included):
#   .clean/rt/c1: the staged build (build.tgz, site.tgz, tree.tgz: pack_full_build.sh) and the
#                 wheel's libraries that torch_cuda and _CUDAC link (torch_link.tar.xz: libtorch,
#                 libtorch_python, libshm; torch_cpu.tar.xz.a: the first part of libtorch_cpu, libc10)
#   .clean/rt/c2: torch_cpu.tar.xz.b, the rest of the wheel but its four CUDA libraries (torch_rest.tar.xz, with
#                 libcudart.so.12 and libcupti.so.12 that libtorch_cpu needs), the release's test/
#                 (tests.tar.xz) and the Python packages the tests import (wheels/)
# usage: benchmarks/gpu/pack_cuda_tests.sh STAGED_BUILD STAGE1_SITE TREE TORCH_WHEEL_CP312 \
#            CUDART_WHEEL CUPTI_WHEEL WHEELS_DIR
# STAGED_BUILD: a build directory made with -D TORCH_CUDA_STAGE_ONLY=ON -D TORCH_CUDA_LIBRARIES=...
# (docs/cuda-tests.md); WHEELS_DIR: pytest, expecttest, ... as wheels.
set -euo pipefail
build=${1:?staged build}; site=${2:?stage-1 site-packages}; tree=${3:?PyTorch tree}
wheel=${4:?torch wheel}; cudart=${5:?cudart wheel}; cupti=${6:?cupti wheel}; wheels=${7:?wheels dir}
here=$(cd "$(dirname "$0")" && pwd); out=$here/../../.clean/rt
rm -rf "$out"; mkdir -p "$out/c1" "$out/c2/wheels"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

bash "$here/pack_full_build.sh" "$build" "$site" "$tree" >/dev/null
mv "$here/../../.clean/fb/"{build,site,tree}.tgz "$out/c1/"

# the wheel less its CUDA libraries (tdev builds those), the headers (site.tgz has them) and tools
unzip -q "$wheel" -d "$tmp/w" -x 'torch/lib/libtorch_cuda.so' 'torch/lib/libtorch_cuda_linalg.so' \
  'torch/lib/libc10_cuda.so' 'torch/lib/libcaffe2_nvrtc.so' 'torch/include/*' 'torch/bin/*'
unzip -q "$wheel" 'torch/bin/torch_shm_manager' -d "$tmp/w"  # torch.multiprocessing's helper
unzip -q "$cudart" -d "$tmp/w" 'nvidia/cuda_runtime/lib/libcudart.so.12'
unzip -q "$cupti" -d "$tmp/w" 'nvidia/cuda_cupti/lib/libcupti.so.12'
for lib in libtorch_cuda.so libtorch_cuda_linalg.so libc10_cuda.so libcaffe2_nvrtc.so; do
  [[ ! -e $tmp/w/torch/lib/$lib ]] || { echo "pack: $lib still in the runtime" >&2; exit 1; }
done
# ~70 MB even as xz -9: its first 40 MB travel with c1, the rest with c2
tar cf - -C "$tmp/w" torch/lib/libtorch_cpu.so torch/lib/libc10.so | xz -9 -T0 > "$tmp/torch_cpu.tar.xz"
split -b 40M -a 1 "$tmp/torch_cpu.tar.xz" "$tmp/torch_cpu.tar.xz."
mv "$tmp/torch_cpu.tar.xz.a" "$out/c1/"; mv "$tmp/torch_cpu.tar.xz.b" "$out/c2/"
tar cf - -C "$tmp/w" torch/lib/libtorch.so torch/lib/libtorch_python.so torch/lib/libshm.so \
  | xz -9 -T0 > "$out/c1/torch_link.tar.xz"
rm "$tmp/w/torch/lib/"{libtorch_cpu,libc10,libtorch,libtorch_python,libshm}.so
tar cf - -C "$tmp/w" . | xz -9 -T0 > "$out/c2/torch_rest.tar.xz"
tar cf - -C "$tree" test pytest.ini | xz -9 -T0 > "$out/c2/tests.tar.xz"
cp "$wheels"/*.whl "$out/c2/wheels/"
tdev registrations dump --release "$(cat "$tree/version.txt" | cut -d. -f1-3 | sed "s/a0$//")" -o "$out/c2/stock_registrations.json"
du -sh "$out/c1" "$out/c2"; du -ch "$out"/c1/* | tail -1
