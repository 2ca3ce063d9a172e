#!/bin/bash
# A probe under the runtime under test, then under this machine's own torch (its CUDA 13 build,
# the same CUDA libraries): the same outcome on both means the environment, not tdev's build.
# A lane of cuda_tests.sh: LANES="@2 sh benchmarks/gpu/probe_both.sh lstm_probe.py [ARGS]"
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd); probe=$1; shift
echo "== $probe under the runtime under test"
(cd /tmp && timeout ${PROBE_LIMIT:-200} python3 $here/$probe "$@" 2>&1 | tail -60)
echo "== $probe under this machine's own torch"
(cd /tmp && env -u LD_LIBRARY_PATH -u TDEV_RT -u PYTHONPATH timeout ${PROBE_LIMIT:-200} \
  python3 $here/$probe "$@" 2>&1 | tail -60)
