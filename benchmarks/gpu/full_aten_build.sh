#!/bin/bash
# The full standalone torch_cuda build on the device machine (no GPU needed): every set, ATen's
# kernels, torch/csrc's framework and the real _CUDAC, from a build staged here with
# -D TORCH_CUDA_STAGE_ONLY=ON and packed by benchmarks/gpu/pack_full_build.sh into
# .clean/fb/{build,site,tree}.tgz (run with carry [".clean/fb"]). BUDGET = seconds for ninja,
# JOBS = parallel jobs; a second call resumes the first's build directory (/tmp/fb) if the
# machine is still the same. Brings back the ninja log, the failures and the symbol dumps of
# every library built ($OUT), which `tdev link-check --libs` checks here.
R=$PWD; W=/tmp/fb; mkdir -p $W/site $W/tree; cd $W
if [ ! -d b ]; then
  tar xzf $R/.clean/fb/build.tgz; tar xzf $R/.clean/fb/site.tgz -C site; tar xzf $R/.clean/fb/tree.tgz -C tree
  mkdir -p site/torch/lib site/cusparselt/lib; for d in site/nvidia/*/; do mkdir -p $d/lib; done
  nproc; free -g | sed -n 2p; nvcc --version | tail -1; g++ --version | head -1; cmake --version | head -1
  cmake -S src/stage2 -B b -G Ninja -D TDEV_SITE_PACKAGES=$W/site -D TDEV_CODEGEN_DIR=$W/codegen \
    -D TDEV_TREE_DIR=$W/tree -D TDEV_LINK_STAGE1=OFF -D CMAKE_BUILD_TYPE=Release -D CMAKE_CUDA_ARCHITECTURES=90 \
    -D Python3_EXECUTABLE=$(command -v python3) > $OUT/configure.log 2>&1 || { tail -40 $OUT/configure.log; exit 3; }
  echo configured; ninja -C b -t targets all | grep -c '\.o:'
fi
start=$(date +%s)
timeout ${BUDGET:-480} ninja -C b -k 0 -j ${JOBS:-34} > $W/ninja.out 2>&1; echo ninja rc=$? after $(( $(date +%s)-start )) s
grep -c '^FAILED' $W/ninja.out; grep '^FAILED' $W/ninja.out | sed 's/.*-o //;s/ .*//' | head -100
cp b/.ninja_log $OUT/ninja_log.txt; gzip -c $W/ninja.out > $OUT/ninja_out.txt.gz
ls -la b/lib b/python/torch_cuda 2>/dev/null; tail -5 $W/ninja.out
cd $R; for L in $W/b/lib/*.so $W/b/python/torch_cuda/_CUDAC*.so; do
  [ -f "$L" ] && PYTHONPATH=tools:. python3 -m tdev link-check --dump-symbols $L -o $OUT/$(basename $L).syms.gz
done
bash benchmarks/gpu/dump_providers.sh  # libcuda.so.1, libc, libm, python: --provider there
