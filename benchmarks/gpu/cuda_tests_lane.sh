#!/bin/bash
# One lane of benchmarks/gpu/cuda_tests.sh (PHASE=test): pytest on one GPU, for at most SECONDS.
#   LANE_GPU=N cuda_tests_lane.sh DIR "[@GPU] [rfc] [VAR=VALUE...] FILE... [-- PYTEST ARGS]" SECONDS
# "rfc": the RFC-mode copy of the runtime ($W/site_rfc, torch.cuda's bindings from tdev's _CUDAC).
# A test that kills the process (a signal) is named in DIR/crashed.txt and pytest runs the file
# again from there (TDEV_RESUME: cuda_tests_probe deselects what already has a result); each run
# leaves DIR/junit_<n>.xml, DIR/pytest_<n>.out and DIR/results_<pid>.tsv (a line a test).
# "sh SCRIPT [ARGS]": runs SCRIPT (relative to the repository) instead, with the same environment.
# Needs W, S, B, R, base_pp from cuda_tests.sh.
set -uo pipefail
dir=$1; spec=$2; budget=$3; T0=$(date +%s); mkdir -p "$dir"
left() { echo $(( budget - ($(date +%s) - T0) )); }
files=(); args=(); rfc=0
head=${spec%% -- *}; [ "$head" = "$spec" ] || eval "args=(${spec#* -- })"
for w in $head; do
  case $w in rfc) rfc=1 ;; @[0-9]*) LANE_GPU=${w#@} ;; [A-Z]*=*) export "$w" ;; *) files+=("$w") ;; esac
done
export CUDA_VISIBLE_DEVICES=$LANE_GPU OUT=$dir
if [ $rfc = 1 ]; then
  export PYTHONPATH=$W/site_rfc:$base_pp:$B/python TORCH_CUDA_CUDAC=1 TDEV_RT=$W/site_rfc
else
  export PYTHONPATH=$S:$base_pp TDEV_RT=$S; unset TORCH_CUDA_CUDAC
fi
if [ "${files[0]:-}" = sh ]; then bash "$R/${files[1]}" "${files[@]:2}"; exit; fi  # a script of its own
echo "lane: GPU $LANE_GPU, rfc=$rfc, files: ${files[*]}, args: ${args[*]:-}"
cd $W/test; n=0; : > $dir/crashed.txt
for t in "${files[@]}"; do
  export TDEV_RESUME=0  # (not --deselect: it drops every test whose name starts with the one named)
  for try in $(seq 1 ${MAX_CRASHES:-40}); do
    n=$((n+1)); [ $(left) -gt 20 ] || { echo "budget spent before $t (try $try)"; break; }
    rm -f $dir/current_test.txt; start=$(date +%s)
    timeout $(left) python3 -m pytest -p cuda_tests_probe -p no:cacheprovider -c $W/pytest.ini $t \
      "${args[@]}" --junitxml=$dir/junit_$n.xml -q > $dir/pytest_$n.out 2>&1; rc=$?
    echo "$t run $n: rc=$rc after $(( $(date +%s) - start )) s"
    grep -v '^  File \|^Thread \|^Current thread\|^Extension modules' $dir/pytest_$n.out | tail -8
    [ $rc -ge 128 ] && [ $rc -ne 137 ] && [ -s $dir/current_test.txt ] || break
    crashed=$(cat $dir/current_test.txt); echo "$crashed (signal $((rc-128)))" >> $dir/crashed.txt
    echo "== crashed: $crashed; again from there"; export TDEV_RESUME=1
  done
done
echo "lane done after $(( $(date +%s) - T0 )) s"
