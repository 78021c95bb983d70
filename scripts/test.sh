#!/usr/bin/env bash
# The Rust checks: formatting, lints (warnings are errors), then the whole test suite in
# release mode. The zoo tests read testdata/ (made by scripts/make_testdata.py); .ci/run
# makes it first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export KILN_TESTDATA="${KILN_TESTDATA:-$PWD/testdata}"
# libnvrtc from the nvidia-cuda-nvrtc-cu12 wheel (scripts/setup-python.sh) for the CUDA
# compile checks; cargo overrides LD_LIBRARY_PATH, so the runtime loads it by full path.
if [[ -z "${KILN_NVRTC_LIB:-}" ]]; then
    KILN_NVRTC_LIB="$(ls "$PWD"/.venv/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 2>/dev/null | head -n1 || true)"
    [[ -n "$KILN_NVRTC_LIB" ]] || { echo "test.sh: libnvrtc.so.12 not found; run scripts/setup-python.sh" >&2; exit 1; }
    export KILN_NVRTC_LIB
fi

echo "== cargo fmt --check"
cargo fmt --all --check
# --all-features turns on kiln-runtime's `cuda` (cudarc, NVRTC checks) and
# `cuda-emulator` (the .cu kernels compiled as C++ and run on the CPU), and builds
# kiln-cuda-check's `device` tests, which are ignored without `-- --ignored` (no GPU here).
# Disk: clippy reruns every build script under its own hash (its RUSTC_WORKSPACE_WRAPPER
# is part of the fingerprint), so the generated zoo modules and their weights, 3.8 GB,
# would exist twice. Clippy builds in a target directory of its own, removed when it is
# done; a fresh clone's CI run once ran out of disk with both copies kept.
CLIPPY_TARGET_DIR="${KILN_CLIPPY_TARGET_DIR:-$PWD/target/clippy}"
echo "== cargo clippy --workspace --all-targets --release --all-features -- -D warnings"
CARGO_TARGET_DIR="$CLIPPY_TARGET_DIR" \
    cargo clippy --workspace --all-targets --release --all-features -- -D warnings
echo "== cargo clippy -p kiln-runtime --release -- -D warnings (no features)"
CARGO_TARGET_DIR="$CLIPPY_TARGET_DIR" cargo clippy -p kiln-runtime --release -- -D warnings
rm -rf "$CLIPPY_TARGET_DIR"
# The UI tests build the macro's cases in the dev profile under target/tests/trybuild;
# without debug info that build is about half as large (the environment is inherited by
# trybuild's cargo and overrides the manifest's profile).
export CARGO_PROFILE_DEV_DEBUG=0
echo "== cargo test --workspace --release --all-features"
cargo test --workspace --release --all-features
echo "== scripts/check-intrinsics.sh"
scripts/check-intrinsics.sh
echo "== the CUDA emulator tests under AddressSanitizer"
scripts/cuda-emu-asan.sh
scripts/runtime-asan.sh
