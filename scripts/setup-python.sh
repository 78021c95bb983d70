#!/usr/bin/env bash
# Creates .venv at the repository root (if missing) and installs the pinned Python packages
# from scripts/requirements.txt into it. Python is used only to produce test data.
# Idempotent: does nothing when .venv already holds exactly these requirements.
# Needs python3 (>= 3.10, with the venv module) and access to PyPI.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
REQ="$ROOT/scripts/requirements.txt"
STAMP="$VENV/.kiln-requirements.sha256"
PYTHON="${PYTHON:-python3}"

die() { echo "setup-python.sh: error: $*" >&2; exit 1; }

command -v "$PYTHON" >/dev/null 2>&1 || die "'$PYTHON' not found (set PYTHON=/path/to/python3)"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
    || die "$("$PYTHON" --version 2>&1) is too old; need Python >= 3.10"

want="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] \
    && "$VENV/bin/python" -c 'import numpy, onnx, onnxruntime' >/dev/null 2>&1; then
    exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "setup-python.sh: creating $VENV"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV" \
        || die "'$PYTHON -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)"
fi

echo "setup-python.sh: installing pinned packages from scripts/requirements.txt"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
"$VENV/bin/python" -m pip install --quiet --requirement "$REQ" \
    || die "pip install failed (see the messages above)"
"$VENV/bin/python" -c 'import numpy, onnx, onnxruntime' \
    || die "the installed packages do not import"
echo "$want" > "$STAMP"
echo "setup-python.sh: ok ($("$VENV/bin/python" -c 'import numpy, onnx, onnxruntime as o; print(f"numpy {numpy.__version__}, onnx {onnx.__version__}, onnxruntime {o.__version__}")'))"
