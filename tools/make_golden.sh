#!/usr/bin/env bash
# make_golden.sh: regenerates tests/golden/ (the PyTorch parity fixtures): statebench exports
# tiny models' configs, initial weights and a batch; tools/torch_reference.py (Debian's
# python3-torch, or any PyTorch) computes logits, loss, gradients and five AdamW steps.
# Usage: tools/make_golden.sh [BUILD_DIR]   (commit the result)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
cmake --build "$BUILD" --target statebench_golden_export
rm -rf tests/golden
"$BUILD/statebench_golden_export" tests/golden
PY=${PYTHON:-python3}
$PY -c "import torch" 2>/dev/null || PY=/usr/bin/python3
for d in tests/golden/*/; do "$PY" tools/torch_reference.py "$d"; done
