#!/bin/bash
# PyTorch's own CUDA tests against tdev's libtorch_cuda, on the device machine. Loads packed by
# benchmarks/gpu/pack_cuda_tests.sh; one phase a call, all on one warm machine (its /tmp/rt stays):
#   PHASE=build  carry [".clean/rt/c1"]: unpack, configure stage 2 against this machine's CUDA 13
#                libraries (its python's nvidia/ packages), ninja for BUDGET seconds (JOBS jobs)
#   PHASE=more   carry [".clean/rt/c2"]: unpack the runtime and tests; ninja again (resumes)
#   PHASE=test   no carry: finish the build if anything is left, put the built libraries in the
#                2.6.0 runtime, check what the process maps, run TESTS (test files, default
#                test_cuda.py) with PYTEST_ARGS for what is left of BUDGET seconds; RFC=1: with
#                torch_patches/rfc applied and tdev's _CUDAC in place of torch._C's bindings
# $OUT gets the ninja log, failures, junit XML per test file and /proc/self/maps of the runs.
set -uo pipefail
R=$PWD; W=/tmp/rt; B=$W/b; S=$W/site; mkdir -p $W/site $W/tree
DEV_SITE=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))')
budget=${BUDGET:-500}; jobs=${JOBS:-$(( $(nproc) + 2 ))}; T0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - T0) )); }
nin() {  # ninja for what is left of the budget; -k 0 keeps going past a failed unit
  local start=$(date +%s)
  timeout $(left) ninja -C $B -k 0 -j $jobs > $W/ninja.out 2>&1; echo "ninja rc=$? after $(( $(date +%s)-start )) s"
  echo "failed: $(grep -c '^FAILED' $W/ninja.out)"; grep '^FAILED' $W/ninja.out | sed 's/.*-o //;s/ .*//' | head -50
  grep -B2 -A12 'error' $W/ninja.out | head -150 > $OUT/errors.txt
  cat $B/.ninja_log >> $W/ninja_log.all; cp $W/ninja_log.all $OUT/ninja_log.txt
  ninja -C $B -n 2>/dev/null | tail -1
}
case ${PHASE:?PHASE=build|more|test} in
build)
  C=$R/.clean/rt/c1; cd $W
  tar xzf $C/build.tgz; tar xzf $C/site.tgz -C site; tar xzf $C/tree.tgz -C tree
  xz -dc $C/torch_link.tar.xz | tar xf - -C site; cp $C/torch_cpu.tar.xz.a $W/
  # libtorch_cpu and libc10 come with c2 (too large for one load): configure and compile now,
  # against their paths (the link, last, waits for them; ninja relinks once they are there)
  for L in libtorch_cpu.so libc10.so; do [ -s site/torch/lib/$L ] || : > site/torch/lib/$L; done
  nproc; free -g | sed -n 2p; nvcc --version | tail -1; g++ --version | head -1; cmake --version | head -1
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "CUDA libraries: $DEV_SITE/nvidia"
  ls $DEV_SITE/nvidia/*/lib | head -40
  cmake -S src/stage2 -B $B -G Ninja -D TDEV_SITE_PACKAGES=$S -D TDEV_CODEGEN_DIR=$W/codegen \
    -D TDEV_TREE_DIR=$W/tree -D TDEV_CUDA_SITE=$DEV_SITE -D TDEV_LINK_STAGE1=ON \
    -D CMAKE_BUILD_TYPE=Release -D CMAKE_CUDA_ARCHITECTURES=90 -D Python3_EXECUTABLE=$(command -v python3) \
    > $OUT/configure.log 2>&1 || { tail -40 $OUT/configure.log; exit 3; }
  echo "configured: $(ninja -C $B -t targets all | grep -c '\.o:') objects"
  nin ;;
more)
  C=$R/.clean/rt/c2; cd $W
  cat $W/torch_cpu.tar.xz.a $C/torch_cpu.tar.xz.b | xz -dc | tar xf - -C site || exit 5
  xz -dc $C/torch_rest.tar.xz | tar xf - -C site; xz -dc $C/tests.tar.xz | tar xf - -C $W
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $W/py $C/wheels/*.whl
  cp $C/stock_registrations.json $W/
  nin ;;
test)
  cd $W; [ "$(ninja -C $B -n 2>/dev/null | tail -1)" = "ninja: no work to do." ] || nin
  for L in libtorch_cuda.so libc10_cuda.so libcaffe2_nvrtc.so; do cp $B/lib/$L $S/torch/lib/ || exit 4; done
  # cuDNN 9 (libtorch_python NEEDs it) and the other CUDA 13 libraries from this machine's python
  export LD_LIBRARY_PATH=$DEV_SITE/nvidia/cudnn/lib:$DEV_SITE/nvidia/cu13/lib:$DEV_SITE/nvidia/nccl/lib:$DEV_SITE/nvidia/cusparselt/lib
  export PYTHONPATH=$S:$W/py:$R/benchmarks/gpu:$R/benchmarks/gpu/hidden PYTHONUNBUFFERED=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
  if [ "${RFC:-0}" = 1 ]; then  # RFC mode: torch.cuda's bindings from tdev's _CUDAC, torch._C's hidden
    PYTHONPATH=$R/tools:$R python3 $R/benchmarks/gpu/patch_site.py $S $R/torch_patches/rfc/0001-cuda-bindings-from-cudac.patch || exit 6
    export PYTHONPATH=$PYTHONPATH:$B/python TORCH_CUDA_CUDAC=1
  else
    rm -f $S/torch/cuda/_cudac.py; [ ! -f $S/torch/cuda/__init__.py.orig ] || cp $S/torch/cuda/__init__.py.orig $S/torch/cuda/__init__.py
  fi
  python3 -m cuda_tests_probe > $OUT/probe.txt 2>&1; cat $OUT/probe.txt
  # the registrations against the stock 2.6.0 libraries' (dumped where those load: the stage-1
  # environment, `tdev registrations dump -o stock_registrations.json`, carried in c2)
  (cd $R && export PYTHONPATH=$R/tools:$R:$PYTHONPATH && python3 -m tdev registrations dump --python python3 \
     -o $OUT/registrations.json && python3 -m tdev registrations compare \
     $W/stock_registrations.json $OUT/registrations.json) 2>&1 | tail -40
  # a test that kills the process (a signal) is named in crashed.txt and deselected, and pytest
  # runs again on the rest; each run has its junit XML
  cd $W/test; n=0; : > $OUT/crashed.txt
  for t in ${TESTS:-test_cuda.py}; do
    desel=()
    for try in 1 2 3 4 5 6; do
      n=$((n+1)); [ $(left) -gt 20 ] || break; rm -f $OUT/current_test.txt
      timeout $(left) python3 -m pytest -p cuda_tests_probe -c $W/pytest.ini $t ${PYTEST_ARGS:-} \
        "${desel[@]}" --junitxml=$OUT/junit_$n.xml -q > $W/pytest_$n.out 2>&1; rc=$?
      grep -v '^  File \|^Thread \|^Current thread\|^Extension modules' $W/pytest_$n.out | tail -${TAIL:-60}
      [ $rc -ge 128 ] && [ $rc -ne 137 ] && [ -s $OUT/current_test.txt ] || break
      crashed=$(cat $OUT/current_test.txt); echo "$crashed (signal $((rc-128)))" >> $OUT/crashed.txt
      echo "== crashed: $crashed; again without it"; desel+=(--deselect "$crashed")
    done
  done
  (cd $OUT && tar czf results.tgz junit_*.xml maps_*.txt 2>/dev/null && rm -f junit_*.xml maps_*.txt) ;;
esac
