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
(cd /tmp && env -u LD_LIBRARY_PATH -u TDEV_RT PYTHONPATH=$W/py python3 $here/cudnn_probe.py 2>&1 | tail -80)
# the first cudnnCreate of a process dies in cuDNN's std::call_once running a stale once-callable
# of libtorch_python's: which libstdc++ objects the process binds the once symbols to, and
# whether one libstdc++ preloaded for all of them changes it
conv='import torch; x = torch.randn(1, 3, 8, 8, device="cuda"); w = torch.randn(4, 3, 3, 3, device="cuda"); print("conv2d ok", torch.nn.functional.conv2d(x, w).sum().item())'
echo "== once-symbol bindings (LD_DEBUG=bindings)"
LD_DEBUG=bindings LD_DEBUG_OUTPUT=$OUT/ld python3 -c "$conv" 2>&1 | tail -3
cat $OUT/ld.* 2>/dev/null | grep -E "__once_call|__once_callable|__once_proxy" | sed 's/^ *[0-9]*: *//' | sort | uniq -c | head -30; rm -f $OUT/ld.*
stdcxx=$(python3 -c 'import ctypes.util; print(ctypes.util.find_library("stdc++"))')
echo "== conv2d with LD_PRELOAD=$stdcxx"
LD_PRELOAD=$(ldconfig -p | grep -m1 "libstdc++.so.6 " | sed 's/.*=> //') python3 -c "$conv" 2>&1 | tail -3
echo "== conv2d with torch.backends.cudnn.enabled = False"
python3 -c "import torch; torch.backends.cudnn.enabled = False; ${conv#import torch; }" 2>&1 | tail -3
cd $W/test
for t in test_cuda.py::TestCuda::test_cudnn_multiple_threads_same_device \
         test_cuda.py::TestCuda::test_graph_cudnn_dropout \
         test_torch.py::TestTorchDeviceTypeCUDA::test_conv_transposed_backward_agnostic_to_memory_format_cuda \
         test_torch.py::TestTorchDeviceTypeCUDA::test_conv_transposed_large_cuda; do
  echo "== $t"; LD_PRELOAD=$OUT/../segv_trace.so timeout 200 python3 -m pytest -p no:cacheprovider \
    -c $W/pytest.ini "$t" -q 2>&1 | grep -A40 "native backtrace\|passed\|failed" | head -45
done
echo "== the memory-snapshot tests alone (without test_memory_snapshot, which needs the network)"
timeout 300 python3 -m pytest -p cuda_tests_probe -p no:cacheprovider -c $W/pytest.ini test_cuda.py \
  -k "test_memory_snapshot_script or test_memory_snapshot_with_cpp or test_memory_plots_free_segment_stack" \
  --junitxml=$OUT/junit_1.xml -q 2>&1 | tail -15
