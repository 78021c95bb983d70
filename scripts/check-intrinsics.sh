#!/usr/bin/env bash
# Every x86 SIMD intrinsic the kernels use is inlined into a function compiled for its
# target feature. One compiled out of line (its caller built for the baseline: an
# `#[inline(always)]` missing between a `vectorize!` block, or pulp's target-feature
# function, and the intrinsic) costs a call per shuffle: 84f3774 made the direct
# kernel's 8×8 transposes so, and stems ran 4× their time with every test green.
# Lists the intrinsics defined as functions in the newest kernel-test binary (built by
# `cargo test --release`), or in the binary given; `_mm256_zeroupper` (called after
# faer on purpose, `kernels/gemm.rs`) and std's `_xgetbv` (feature detection) pass.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin="${1:-$(ls -t target/release/deps/kernels-* 2>/dev/null | grep -v '\.d$' | head -n1 || true)}"
[[ -n "$bin" ]] || { echo "check-intrinsics.sh: no kernel-test binary; run cargo test --release first" >&2; exit 1; }
found="$(nm -C --defined-only "$bin" | grep -E 'core::core_arch::x86(_64)?::[a-z0-9_.]+::_mm' \
    | grep -v '::_mm256_zeroupper$' || true)"
if [[ -n "$found" ]]; then
    echo "check-intrinsics.sh: intrinsics compiled out of line in $bin:" >&2
    echo "$found" >&2
    exit 1
fi
echo "check-intrinsics.sh: no intrinsic out of line in $bin"
