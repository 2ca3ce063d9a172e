#!/bin/bash
# Reruns named lanes after PHASE=test, on the same warm machine, each on its own: a test that
# failed or crashed among others, alone (tells a test's own failure from one left by another).
#   rerun_tests.sh SECONDS "LANE; LANE; ..."   (lane syntax as in cuda_tests_lane.sh)
# Results under /tmp/rt/rerun/<n>; prints each lane's last lines.
set -uo pipefail
export R=$PWD W=/tmp/rt; export B=$W/b S=$W/site
DEV_SITE=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))')
export LD_LIBRARY_PATH=$DEV_SITE/nvidia/cudnn/lib:$DEV_SITE/nvidia/cu13/lib:$DEV_SITE/nvidia/nccl/lib:$DEV_SITE/nvidia/cusparselt/lib
export PYTHONUNBUFFERED=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 base_pp=$W/py:$R/benchmarks/gpu:$R/benchmarks/gpu/hidden
IFS=';' read -ra lanes <<< "$2"; i=0; rm -rf $W/rerun; mkdir -p $W/rerun
for lane in "${lanes[@]}"; do
  LANE_GPU=$(( i % 4 )) bash $R/benchmarks/gpu/cuda_tests_lane.sh $W/rerun/$i "$lane" $1 > $W/rerun/lane_$i.log 2>&1 &
  i=$((i+1))
done
wait
for f in $W/rerun/lane_*.log; do echo "=== $f"; grep -v '^  File ' $f | tail -${TAIL:-25}; done
