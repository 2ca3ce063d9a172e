#!/bin/bash
# PyTorch's own CUDA tests against tdev's libtorch_cuda, on the device machine. Loads packed by
# benchmarks/gpu/pack_cuda_tests.sh; one phase a call, all on one warm machine (its /tmp/rt stays):
#   PHASE=build  carry [".clean/rt/c1"]: unpack, configure stage 2 against this machine's CUDA 13
#                libraries (its python's nvidia/ packages), ninja for BUDGET seconds (JOBS jobs)
#   PHASE=more   carry [".clean/rt/c2"]: unpack the runtime and tests; ninja again (resumes)
#   PHASE=wait   no carry: wait for the lanes an earlier PHASE=test started, then count them
#   PHASE=test   no carry (or a copy of tdev's tools as TDEV_SRC): finish the build if anything
#                is left, put the built libraries in the 2.6.0 runtime, check what the process
#                maps and the registrations, then run the lanes for what is left of BUDGET
#                seconds: LANES="rfc test_cuda.py; test_nn.py -- -k cuda", one GPU a lane, side
#                by side ("rfc": torch_patches/rfc applied and tdev's _CUDAC in place of
#                torch._C's bindings); without LANES one lane of TESTS with PYTEST_ARGS (RFC=1)
# $OUT gets the ninja log, failures, summary.txt (counts per lane and every failure's first line)
# and results.tgz (junit XML, /proc/self/maps of each pytest process, logs, crashed tests).
set -uo pipefail
R=$PWD; W=/tmp/rt; B=$W/b; S=$W/site; mkdir -p $W/site $W/tree
DEV_SITE=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))')
budget=${BUDGET:-500}; jobs=${JOBS:-$(( $(nproc) + 2 ))}; T0=$(date +%s)
left() { echo $(( budget - ($(date +%s) - T0) )); }
running() { pgrep -f "^ninja -C $B" > /dev/null; }
settle() {  # wait for a ninja started in the background by an earlier call (BG=1)
  while running && [ $(left) -gt 60 ]; do sleep 10; done
  ! running || { echo "ninja still running in the background: $(ninja -C $B -n 2>/dev/null | tail -1)"; return 1; }
}
report() {
  echo "failed: $(grep -c '^FAILED' $W/ninja.out)"; grep '^FAILED' $W/ninja.out | sed 's/.*-o //;s/ .*//' | head -50
  grep -B2 -A12 'error' $W/ninja.out | head -150 > $OUT/errors.txt
  cp $B/.ninja_log $OUT/ninja_log.txt; ninja -C $B -n 2>/dev/null | tail -1
}
nin() {  # ninja for what is left of the budget (BG=1: in the background, past this call, on a
         # machine that keeps it: the next call goes on while it compiles); -k 0 keeps going
         # past a failed unit
  if [ "${BG:-0}" = 1 ]; then
    setsid nohup bash -c "ninja -C $B -k 0 -j $jobs > $W/ninja.out 2>&1" > /dev/null 2>&1 < /dev/null &
    sleep 20; echo "ninja in the background: $(grep -c '^\[' $W/ninja.out) steps so far"; return
  fi
  local start=$(date +%s)
  timeout $(left) ninja -C $B -k 0 -j $jobs > $W/ninja.out 2>&1; echo "ninja rc=$? after $(( $(date +%s)-start )) s"
  report
}
collect() {  # wait for the lanes (or the end of this call's budget), then count what they have
  while pgrep -f cuda_tests_lane.sh > /dev/null && [ $(left) -gt 45 ]; do sleep 10; done
  for f in $W/lanes/lane_*.log; do
    i=${f##*lane_}; i=${i%.log}; echo "=== lane $i: $(cat $W/lanes/spec_$i.txt)"; tail -${TAIL:-12} $f
  done
  pgrep -f cuda_tests_lane.sh > /dev/null && echo "(lanes still running: PHASE=wait collects them)"
  python3 $R/benchmarks/gpu/junit_summary.py $W/lanes | tee $OUT/summary.txt
  (cd $W && tar czf $OUT/results.tgz lanes 2>/dev/null)
}
case ${PHASE:?PHASE=build|more|test|wait} in
build)
  C=$R/.clean/rt/c1; cd $W
  tar xzf $C/build.tgz; tar xzf $C/site.tgz -C site; tar xzf $C/tree.tgz -C tree
  xz -dc $C/torch_link.tar.xz | tar xf - -C site; cp $C/torch_cpu.tar.xz.a $W/
  # the stage-2 CMake files from this checkout's overlay (the staged copies are the overlay's as
  # it was when packed): a fix to them needs no new pack
  cp $R/third_device/torch_cuda_overlay/stage2/CMakeLists.txt $R/third_device/torch_cuda_overlay/stage2/*.cmake \
     $R/third_device/torch_cuda_overlay/common/*.cmake src/stage2/
  # this machine's g++ (/opt/gcc) has only a static libstdc++: link the system's shared one, the
  # one the wheel's libraries load (a private copy aborts the process, see common/cxx_runtime.cmake)
  STDCXX=$(ldconfig -p | awk '$1 == "libstdc++.so.6" && /x86-64/ {print $NF; exit}')
  # libtorch_cpu and libc10 come with c2 (too large for one load): configure and compile now,
  # against their paths (the link, last, waits for them; ninja relinks once they are there)
  for L in libtorch_cpu.so libc10.so; do [ -s site/torch/lib/$L ] || : > site/torch/lib/$L; done
  nproc; free -g | sed -n 2p; nvcc --version | tail -1; g++ --version | head -1; cmake --version | head -1
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "CUDA libraries: $DEV_SITE/nvidia"
  ls $DEV_SITE/nvidia/*/lib | head -40
  cmake -S src/stage2 -B $B -G Ninja -D TDEV_SITE_PACKAGES=$S -D TDEV_CODEGEN_DIR=$W/codegen \
    -D TDEV_TREE_DIR=$W/tree -D TDEV_CUDA_SITE=$DEV_SITE -D TDEV_LINK_STAGE1=ON \
    -D TORCH_CUDA_LIBSTDCXX=$STDCXX -D CMAKE_BUILD_TYPE=Release -D CMAKE_CUDA_ARCHITECTURES=90 -D Python3_EXECUTABLE=$(command -v python3) \
    > $OUT/configure.log 2>&1 || { tail -40 $OUT/configure.log; exit 3; }
  echo "configured: $(ninja -C $B -t targets all | grep -c '\.o:') objects"
  nin ;;
more)
  C=$R/.clean/rt/c2; cd $W
  cat $W/torch_cpu.tar.xz.a $C/torch_cpu.tar.xz.b | xz -dc | tar xf - -C site || exit 5
  xz -dc $C/torch_rest.tar.xz | tar xf - -C site; xz -dc $C/tests.tar.xz | tar xf - -C $W
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $W/py $C/wheels/*.whl
  cp $C/stock_registrations.json $W/; [ ! -d $C/x ] || cp -a $C/x/. site/  # x/: files the wheel adds
  if running; then echo "ninja running: $(grep -c '^\[' $W/ninja.out) steps done"; else nin; fi ;;
test)
  cd $W; settle || exit 4; [ ! -s $W/ninja.out ] || report
  [ "$(ninja -C $B -n 2>/dev/null | tail -1)" = "ninja: no work to do." ] || BG=0 nin
  [ "$(ninja -C $B -n 2>/dev/null | tail -1)" = "ninja: no work to do." ] || { echo "build not finished"; exit 4; }
  for L in libtorch_cuda.so libc10_cuda.so libcaffe2_nvrtc.so; do cp $B/lib/$L $S/torch/lib/ || exit 4; done
  # libstdc++'s call_once internals exported by a library shadow the process's libstdc++ (cuDNN's
  # first cudnnCreate then runs a stale callable): the stock libraries export none
  for L in $B/lib/libtorch_cuda.so $B/lib/libc10_cuda.so $B/lib/libcaffe2_nvrtc.so $B/python/*/_CUDAC*.so; do
    echo "${L##*/}: $(nm -D --defined-only $L | grep -c ' __once_proxy$\| _ZSt15__once_callable$\| _ZSt11__once_call$') of libstdc++'s once symbols exported (stock: 0); needs $(readelf -d $L | grep -o 'libstdc++[^]]*' || echo 'no shared libstdc++ (stock: libstdc++.so.6)')"
  done
  # tdev itself (patch engine, registrations) from TDEV_SRC: a copy of the repository's tools
  # that does not change while the tests run (default: this checkout)
  T=${TDEV_SRC:-$R}
  # cuDNN 9 (libtorch_python NEEDs it) and the other CUDA 13 libraries from this machine's python
  export LD_LIBRARY_PATH=$DEV_SITE/nvidia/cudnn/lib:$DEV_SITE/nvidia/cu13/lib:$DEV_SITE/nvidia/nccl/lib:$DEV_SITE/nvidia/cusparselt/lib
  export PYTHONUNBUFFERED=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
  export base_pp=$W/py:$R/benchmarks/gpu:$R/benchmarks/gpu/hidden W S B R
  # RFC mode runs on its own copy of the runtime (hard links; the patched files are replaced,
  # not written through): torch_patches/rfc applied, tdev's _CUDAC in place of torch._C's bindings
  if [[ ${LANES:-} == *rfc* || ${RFC:-0} == 1 ]] && [ ! -d $W/site_rfc ]; then
    cp -al $S $W/site_rfc && PYTHONPATH=$T/tools:$T python3 $R/benchmarks/gpu/patch_site.py $W/site_rfc \
      $T/torch_patches/rfc/0001-cuda-bindings-from-cudac.patch || exit 6
  fi
  PYTHONPATH=$S:$base_pp python3 -m cuda_tests_probe > $OUT/probe.txt 2>&1; cat $OUT/probe.txt
  [ ! -d $W/site_rfc ] || { echo "== RFC mode:"; PYTHONPATH=$W/site_rfc:$base_pp:$B/python TORCH_CUDA_CUDAC=1 \
      TDEV_RT=$W/site_rfc python3 -m cuda_tests_probe 2>&1 | grep -v '^/' | tee -a $OUT/probe.txt; }
  # the registrations against the stock 2.6.0 libraries' (dumped where those load: the stage-1
  # environment, `tdev registrations dump -o stock_registrations.json`, carried in c2)
  [ -s $OUT/registrations.json ] || (cd $T && export PYTHONPATH=$T/tools:$T:$S:$base_pp && \
     python3 -m tdev registrations dump --python python3 -o $OUT/registrations.json && \
     python3 -m tdev registrations compare $W/stock_registrations.json $OUT/registrations.json) 2>&1 | tail -20
  # lanes, side by side, each on a GPU of its own unless "@N" names one, in the background, for
  # LANE_BUDGET seconds (default: what is left of this call): LANES="rfc test_cuda.py; @2
  # test_nn.py -- -k cuda; ...". A later call with PHASE=wait collects them (the machine stays
  # warm between calls). Without LANES: one lane of TESTS with PYTEST_ARGS (RFC=1: RFC mode).
  spec=${LANES:-$([ "${RFC:-0}" = 1 ] && echo "rfc ")${TESTS:-test_cuda.py} -- ${PYTEST_ARGS:-}}
  IFS=';' read -ra lanes <<< "$spec"; ngpu=$(nvidia-smi -L | wc -l); i=0; rm -rf $W/lanes; mkdir -p $W/lanes
  for lane in "${lanes[@]}"; do
    echo "$lane" > $W/lanes/spec_$i.txt
    LANE_GPU=$(( i % ngpu )) setsid nohup bash $R/benchmarks/gpu/cuda_tests_lane.sh "$W/lanes/$i" "$lane" \
      ${LANE_BUDGET:-$(( $(left) - 30 ))} > $W/lanes/lane_$i.log 2>&1 < /dev/null &
    i=$((i+1))
  done
  collect ;;
wait)
  collect ;;
esac
