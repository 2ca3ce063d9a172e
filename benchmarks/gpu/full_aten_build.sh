#!/bin/bash
# Carry: .clean/fb/{build,site,tree}.tgz, made here from a TORCH_CUDA_STAGE_ONLY build dir (the
# staged src/ and codegen/sources), the stage-1 site-packages headers and the tree's aten/src headers
# (see docs/standalone-build.md, "The full ATen build, once"). BUDGET=seconds for ninja, JOBS.
# Full ATen CUDA compile on the device machine from a staged (TORCH_CUDA_STAGE_ONLY) build.
R=$PWD; W=/tmp/fb; mkdir -p $W/site $W/tree; cd $W
tar xzf $R/.clean/fb/build.tgz; tar xzf $R/.clean/fb/site.tgz -C site; tar xzf $R/.clean/fb/tree.tgz -C tree
mkdir -p site/torch/lib site/cusparselt/lib; for d in site/nvidia/*/; do mkdir -p $d/lib; done
nproc; free -g | sed -n 2p; nvcc --version | tail -1; g++ --version | head -1; cmake --version | head -1
cmake -S src/stage2 -B b -G Ninja -D TDEV_SITE_PACKAGES=$W/site -D TDEV_CODEGEN_DIR=$W/codegen/sources \
  -D TDEV_TREE_DIR=$W/tree -D TDEV_LINK_STAGE1=OFF -D CMAKE_BUILD_TYPE=Release -D CMAKE_CUDA_ARCHITECTURES=90 > $OUT/configure.log 2>&1 || { tail -40 $OUT/configure.log; exit 3; }
echo configured; ninja -C b -t targets all | grep -c '\.o:' 
start=$(date +%s)
timeout ${BUDGET:-480} ninja -C b -k 0 -j ${JOBS:-34} torch_cuda > $W/ninja.out 2>&1; echo ninja rc=$? after $(( $(date +%s)-start )) s
grep -c '^FAILED' $W/ninja.out; grep '^FAILED' $W/ninja.out | sed 's/.*-o //;s/ .*//' | head -100
cp b/.ninja_log $OUT/ninja_log.txt; gzip -c $W/ninja.out > $OUT/ninja_out.txt.gz
ls -la b/lib* b/*.so 2>/dev/null; tail -5 $W/ninja.out
if [ -f b/libtorch_cuda.so ] || ls b/lib/libtorch_cuda.so >/dev/null 2>&1; then L=$(ls b/libtorch_cuda.so b/lib/libtorch_cuda.so 2>/dev/null | head -1); cd $R && PYTHONPATH=tools:. python3 -m tdev link-check --dump-symbols $W/$L -o $OUT/libtorch_cuda.syms.gz; fi
