#!/bin/bash
# The generated cuda package on the device machine (torch with CUDA, nvcc, no network): scaffold
# the cuda package and build it there, then the steps named (default: all, in this order):
#   build      tdev scaffold --vendor cuda; pip install (CXX=/usr/bin/g++, see docs/scaffold.md)
#   tests      the generated tests, vendor routes only (FlagGems not importable; TESTS: the
#              test files or -k selection, default all)
#   overhead   benchmarks/bench_route_overhead.py (OVERHEAD_ARGS: more arguments, e.g.
#              "--cold-mb 8 --calls 200 --repeat 9": each call timed with the caches cold)
#   tune       benchmarks/bench_route_tune.py: tdev route tune on the shipped shapes + check
#   flaggems-cost  benchmarks/bench_route_flaggems.py: FlagGems direct vs through the route
#   train      benchmarks/bench_route_train.py with the routes `tune` wrote (TRAIN_ARGS: more
#              arguments, e.g. "--rounds 13")
#   flaggems   the generated tests with FlagGems installed (test_flaggems.py, test_routing.py,
#              a subset of test_parity.py under FlagGems routes)
#   train-recorded  bench_route_train.py --record-tune (the model's own calls, tuned)
#   paired     benchmarks/bench_route_paired.py: the same step, both sides alive together and
#              stepping in turn (PAIRED_ARGS, e.g. "--processes 10 --pairs 200")
#   compile    benchmarks/bench_route_compile.py: torch.compile of a small transformer on the
#              device (its own backend) and on torch.cuda (inductor), equal to eager, step times
#              (COMPILE_ARGS, e.g. "--rounds 5 --steps 50"; COMPILE_TIMEOUT)
#   profile    benchmarks/bench_route_profile.py: the training step's host time per operator
#              and the GPU's kernels, device vs torch.cuda
# Results in $OUT (<= 8 files). From the repository root:
#   bash benchmarks/gpu/run.sh [STEP...]
# FlagGems and its needs travel as wheels in .whl/ (docs/gpu-results.md says how).
set -u -o pipefail
REPO=$(pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
STEPS=${*:-build tests overhead tune flaggems-cost train flaggems train-recorded}
PKG=/tmp/torch_nvgpu
SITE=/tmp/site  # FlagGems, on PYTHONPATH only where a step wants it
export PYTHONUNBUFFERED=1 GEMS_VENDOR=nvidia
with_flaggems() {
  PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONWARNINGS=ignore::UserWarning "$@"
}
log() { echo "== $(date +%T) $*"; }
step() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
{
  log "machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, torch.cuda.get_device_name())"
  # tdev itself (its wheel maps templates/ into tdev.templates); no network: no dependencies
  python3 -m pip install -q --no-deps --no-build-isolation "$REPO" || exit 1
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" .whl/*.whl && log "FlagGems wheels installed in $SITE"
  fi
  if step build; then
    log "build"
    rm -rf "$PKG" && python3 -m tdev scaffold --vendor cuda --out "$PKG" || exit 1
    t0=$(date +%s)
    CXX=/usr/bin/g++ MAX_JOBS=16 timeout 300 python3 -m pip install -q --no-build-isolation \
      --no-deps "$PKG" || exit 1
    log "built in $(( $(date +%s) - t0 )) s"
  fi
  if step tests; then
    log "generated tests, vendor routes (FlagGems not importable)"
    (cd "$PKG/tests" && timeout ${TESTS_TIMEOUT:-300} python3 -m pytest -q -p no:cacheprovider --timeout 120 -rs \
      --durations=5 ${TESTS:-} 2>&1) | tee "$OUT/tests_vendor.txt" | tail -25
  fi
  cd /tmp
  if step overhead; then
    log "overhead"
    timeout 120 python3 "$REPO/benchmarks/bench_route_overhead.py" --package torch_nvgpu \
      ${OVERHEAD_ARGS:-} --json "$OUT/overhead.json"
  fi
  if step tune; then
    log "tdev route tune (shipped shapes) and its check"
    with_flaggems timeout 300 python3 "$REPO/benchmarks/bench_route_tune.py" \
      --package torch_nvgpu --shapes "$REPO/tools/tdev/route/shapes.yaml" \
      --rounds 5 --out "$OUT/tuned.conf" --json "$OUT/tune.json"
  fi
  if step flaggems-cost; then
    log "what a FlagGems route costs (FlagGems direct on torch.cuda vs through the route)"
    with_flaggems timeout 240 python3 "$REPO/benchmarks/bench_route_flaggems.py" \
      --package torch_nvgpu --shapes "$REPO/tools/tdev/route/shapes.yaml" \
      --json "$OUT/flaggems-cost.json"
  fi
  if step train; then
    log "training step with the tuned routes vs torch.cuda"
    conf=(); [ -f "$OUT/tuned.conf" ] && conf=(--conf "$OUT/tuned.conf")
    with_flaggems timeout ${TRAIN_TIMEOUT:-240} python3 "$REPO/benchmarks/bench_route_train.py" \
      --package torch_nvgpu "${conf[@]}" ${TRAIN_ARGS:-} --json "$OUT/train.json"
  fi
  if step paired; then
    log "training step, both sides stepping in turn (fresh worker pairs)"
    timeout ${PAIRED_TIMEOUT:-300} python3 "$REPO/benchmarks/bench_route_paired.py" \
      --package torch_nvgpu ${PAIRED_ARGS:-} --json "$OUT/paired.json"
  fi
  if step compile; then
    log "torch.compile: the device's backend vs torch.cuda's inductor"
    timeout ${COMPILE_TIMEOUT:-150} python3 "$REPO/benchmarks/bench_route_compile.py" \
      --package torch_nvgpu ${COMPILE_ARGS:-} --json "$OUT/compile.json"
  fi
  if step profile; then
    log "training step profiled per operator: device vs torch.cuda"
    timeout 120 python3 "$REPO/benchmarks/bench_route_profile.py" --package torch_nvgpu \
      --top 40 --kernels --json "$OUT/profile.json"
  fi
  if step flaggems; then
    log "generated tests with FlagGems installed"
    with_flaggems python3 -c "import time; t=time.time(); import flag_gems; print('import flag_gems: %.1f s' % (time.time()-t))"
    conf=/tmp/flaggems.conf
    printf '%s = flaggems\n' _softmax native_layer_norm mm add.Tensor mul.Tensor gelu cat \
      index_select sum.dim_IntList > $conf
    (cd "$PKG/tests" && with_flaggems timeout 300 python3 -m pytest -q -p no:cacheprovider \
        --timeout 280 -rs test_flaggems.py test_routing.py -k "flaggems" 2>&1
     log "test_parity.py (subset) with $conf"
     TORCH_NVGPU_BACKEND_CONFIG=$conf with_flaggems timeout 240 python3 -m pytest -q \
        -p no:cacheprovider --timeout 200 -rs test_parity.py \
        -k "softmax or layer_norm or mm or add or mul or cat or index_select or sum or relu" 2>&1) \
      | tee "$OUT/tests_flaggems.txt" | tail -30
  fi
  if step train-recorded; then
    log "training step: the model's calls recorded and tuned, vs torch.cuda"
    with_flaggems timeout 400 python3 "$REPO/benchmarks/bench_route_train.py" \
      --package torch_nvgpu --record-tune --max-cases 20 --out "$OUT/model-tuned.conf" \
      --json "$OUT/train-recorded.json"
  fi
  log "done"
} 2>&1 | tee "$OUT/log"
