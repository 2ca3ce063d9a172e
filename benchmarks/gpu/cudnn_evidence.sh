#!/bin/bash
# Evidence for the cuDNN failures of PyTorch's CUDA tests (a lane of cuda_tests.sh: LANES="sh
# benchmarks/gpu/cudnn_evidence.sh"): the autocast operators one by one under the runtime under
# test and under the machine's own torch (cudnn_probe.py), cuDNN's own error log for them, and
# the native backtrace of each test that kills the process (segv_trace.c). Output in $OUT.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
gcc -shared -fPIC -O1 -o $OUT/../segv_trace.so $here/segv_trace.c || exit 1
echo "== the runtime under test"
CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=$OUT/cudnn_log.txt python3 $here/cudnn_probe.py 2>&1 | tail -80
grep -n -i -B2 -A8 "finalize\|error" $OUT/cudnn_log.txt 2>/dev/null | head -60
echo "== this machine's own torch (its CUDA 13 build, same cuDNN)"
(cd /tmp && env -u PYTHONPATH -u LD_LIBRARY_PATH -u TDEV_RT python3 $here/cudnn_probe.py 2>&1 | tail -80)
cd $W/test
for t in TestCuda::test_cudnn_multiple_threads_same_device TestCuda::test_graph_cudnn_dropout; do
  echo "== $t"; LD_PRELOAD=$OUT/../segv_trace.so timeout 200 python3 -m pytest -p no:cacheprovider \
    -c $W/pytest.ini "test_cuda.py::$t" -q 2>&1 | grep -A40 "native backtrace\|passed\|failed" | head -45
done
for t in test_conv_transposed_backward_agnostic_to_memory_format_cuda test_conv_transposed_large_cuda; do
  echo "== $t"; LD_PRELOAD=$OUT/../segv_trace.so timeout 200 python3 -m pytest -p no:cacheprovider \
    -c $W/pytest.ini test_torch.py -k "$t" -q 2>&1 | grep -A40 "native backtrace\|passed\|failed" | head -45
done
echo "== the memory-snapshot tests alone (without test_memory_snapshot, which needs the network)"
timeout 300 python3 -m pytest -p cuda_tests_probe -p no:cacheprovider -c $W/pytest.ini test_cuda.py \
  -k "test_memory_snapshot_script or test_memory_snapshot_with_cpp or test_memory_plots_free_segment_stack" \
  --junitxml=$OUT/junit_1.xml -q 2>&1 | tail -15
