#!/bin/bash
# Pack what the device machine needs for the full standalone build (benchmarks/gpu/full_aten_build.sh)
# into .clean/fb/{build,site,tree}.tgz: the staged sources and codegen of a build directory made
# with -D TORCH_CUDA_STAGE_ONLY=ON, the headers (and version.py) of the stage-1 environment, and
# the headers of the PyTorch tree (the last include directories: private headers neither the
# wheel nor the extraction holds). No library travels: the device links with TDEV_LINK_STAGE1=OFF.
#   usage: benchmarks/gpu/pack_full_build.sh BUILD_DIR SITE_PACKAGES TREE
set -euo pipefail
build=${1:?build dir}; site=${2:?site-packages}; tree=${3:?PyTorch tree}
out=$(cd "$(dirname "$0")/../.." && pwd)/.clean/fb
mkdir -p "$out"
tar czf "$out/build.tgz.tmp" -C "$build" src codegen/sources codegen/aoti && mv "$out/build.tgz.tmp" "$out/build.tgz"
( cd "$site" && find torch/include torch/version.py torch/share/cmake cusparselt/include include \
    cutlass_library/source/include cutlass_library/source/tools/util/include nvidia/*/include \
    -type f 2>/dev/null ) > "$out/site.list"
tar czf "$out/site.tgz.tmp" -C "$site" -T "$out/site.list" && mv "$out/site.tgz.tmp" "$out/site.tgz"
( cd "$tree" && find aten/src torch c10 -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cuh' \
    -o -name '*.inl' \) ) > "$out/tree.list"
tar czf "$out/tree.tgz.tmp" -C "$tree" -T "$out/tree.list" && mv "$out/tree.tgz.tmp" "$out/tree.tgz"
rm -f "$out/site.list" "$out/tree.list"
du -ch "$out"/*.tgz
