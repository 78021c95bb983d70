#!/usr/bin/env bash
# Runs the CUDA emulator tests (runtime-support/tests/cuda_emulator.rs) with the
# kernels and the fiber scheduler built with AddressSanitizer, then checks that ASan
# is live by running a kernel that reads one element past its input.
#
# How it works: KILN_EMU_ASAN=1 makes runtime-support/build.rs compile the .cu files
# with -fsanitize=address and link libasan; the test binary is started with gcc's
# libasan preloaded (ASan must be the first library loaded), through cargo's runner
# setting, so cargo and rustc themselves never run under ASan. The fibers tell ASan
# about every stack switch (__sanitizer_start/finish_switch_fiber in
# cuda/shim/runtime.cpp). Leak checking is off: Rust's test harness and thread-locals
# leak on purpose at exit.
#
# A separate target directory keeps the instrumented build from replacing the normal
# one (the first run builds the dependencies once more).
#
# Usage: scripts/cuda-emu-asan.sh [extra cargo test arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

libasan="$(gcc -print-file-name=libasan.so)"
[[ -e "$libasan" ]] || { echo "cuda-emu-asan.sh: no libasan.so for gcc" >&2; exit 1; }

export KILN_EMU_ASAN=1
export CARGO_TARGET_DIR="${KILN_ASAN_TARGET_DIR:-$PWD/target/asan}"
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="env LD_PRELOAD=$libasan ASAN_OPTIONS=detect_leaks=0:abort_on_error=0"
test_args=(--release -p kiln-runtime --features cuda-emulator --test cuda_emulator)

echo "== the emulator tests under AddressSanitizer"
cargo test "${test_args[@]}" "$@"

echo "== ASan is live: an out-of-bounds read must be reported"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if cargo test "${test_args[@]}" -- --ignored --exact asan_catches_an_out_of_bounds_read >"$log" 2>&1; then
    cat "$log"
    echo "cuda-emu-asan.sh: the out-of-bounds read went unreported" >&2
    exit 1
fi
if ! grep -q "ERROR: AddressSanitizer: heap-buffer-overflow" "$log"; then
    cat "$log"
    echo "cuda-emu-asan.sh: the test failed without an ASan report" >&2
    exit 1
fi
grep -m1 "ERROR: AddressSanitizer" "$log"
echo "cuda-emu-asan.sh: all emulator tests pass under ASan, and ASan reports the planted read"
