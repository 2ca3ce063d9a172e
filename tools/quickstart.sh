#!/usr/bin/env bash
# The main job for a newcomer: install tdev into the project's virtual environment (.venv, see
# tools/setup.sh), fetch a real PyTorch source tree, scan it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
tree=$(bash tools/get-pytorch-src.sh "${1:-2.6.0}")
"${TDEV_VENV:-$PWD/.venv}/bin/tdev" scan "$tree"
