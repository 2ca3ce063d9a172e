#!/bin/bash
# A lane of cuda_tests.sh (LANES="@0 sh benchmarks/gpu/tunableop_evidence.sh"): TunableOp's offline
# tuning (tunableop_probe.py) under the runtime under test and under this machine's own torch,
# then the test itself alone with a Python stack dump.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash $here/probe_both.sh tunableop_probe.py ${PROBE_TIMEOUT:-90}
echo "== the test alone, a stack dump after 120 s"
cd $W/test && timeout 300 python3 -m pytest -p no:cacheprovider -c $W/pytest.ini -o faulthandler_timeout=120 \
  test_linalg.py -k test_matmul_offline_tunableop_cuda_float16 -q 2>&1 | grep -v '^\s*$' | tail -60
