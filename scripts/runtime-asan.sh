#!/usr/bin/env bash
# Runs kiln-runtime's own tests (the kernels, typed kernels, arena, no-alloc checks)
# with the Rust code built under AddressSanitizer, so the runtime's `unsafe` blocks
# outside the CUDA emulator run instrumented. Every `unsafe` block there carries a
# `SAFETY:` comment; under ASan run:
#   kernels/gemm.rs        `_mm256_zeroupper` after faer calls (every GEMM test)
#   threads.rs             a job's borrowed closure handed to worker threads (its unit
#                          tests, tests/kernels/threads.rs: conv and GEMM on 2-3 threads)
#   kernels/depthwise.rs   unchecked loads of the copied input rows (tests/kernels/conv.rs:
#                          depthwise strides 1-3, dilations, pads, narrow and wide rows)
#   kernels/direct.rs      unchecked loads of the ring's input rows (tests/kernels/conv.rs:
#                          direct 3x3 at strides 1 and 2, two blocks and one, the 7x7 stem)
#   kernels/simd.rs        `_mm_prefetch` of the next row block's weights in the blocked
#                          product (tests/kernels/conv.rs: convolutions of one column block)
#   pages.rs               `madvise(MADV_HUGEPAGE)` on a buffer before its first write
#                          (its unit tests; every arena of 2 MiB or more)
# not reachable here: cuda/device_cudarc.rs (driver launches, cuBLAS, graph capture:
# they need a GPU; its `is_culib_present` checks only dlopen) and cuda/nvrtc.rs (a
# foreign library ASan cannot see into; under ASan libnvrtc fails to dlopen its
# builtins library, so tests/cuda_nvrtc.rs runs uninstrumented in scripts/test.sh).
# The emulator's FFI call (cuda/emulator.rs) runs under ASan in scripts/cuda-emu-asan.sh.
# Miri is not available: it is a rustup component of nightly toolchains and the pinned
# stable 1.95 cannot fetch it here.
#
# `-Zsanitizer` needs nightly flags: RUSTC_BOOTSTRAP=1 on the pinned stable toolchain.
# The explicit --target keeps build scripts and proc macros uninstrumented; a separate
# target directory keeps this build from replacing the normal one.
#
# Usage: scripts/runtime-asan.sh [extra cargo test arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

export RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-Zsanitizer=address"
export RUSTDOCFLAGS="-Zsanitizer=address"
export ASAN_OPTIONS="detect_leaks=0"
export CARGO_TARGET_DIR="${KILN_ASAN_TARGET_DIR:-$PWD/target/asan-rust}"
echo "== kiln-runtime's tests under AddressSanitizer (Rust instrumented)"
cargo test --release -p kiln-runtime --target x86_64-unknown-linux-gnu \
    --lib --tests "$@"
