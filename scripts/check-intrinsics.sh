#!/usr/bin/env bash
# Every x86 SIMD intrinsic the kernels use is inlined into a function compiled for its
# target feature. One compiled out of line (its caller built for the baseline: an
# `#[inline(always)]` missing between a `vectorize!` block, or pulp's target-feature
# function, and the intrinsic) costs a call per shuffle: 84f3774 made the direct
# kernel's 8×8 transposes so, and stems ran 4× their time with every test green.
# Lists the intrinsics defined as functions in the newest kernel-test binary (built by
# `cargo test --release`), or in the binary given; `_mm256_zeroupper` (called after
# faer on purpose, `kernels/gemm.rs`) and std's `_xgetbv` (feature detection) pass.
#
# Without an argument it also builds the kernel tests with one codegen unit (under
# target/one-codegen-unit) and checks that binary: which functions the inliner keeps
# out of line depends on how the crate is cut into units, and a user's release profile
# (`codegen-units = 1`, `lto`) cuts it differently from ours. A closure in
# `VectorActivation::apply` was inlined in our builds and out of line in one unit,
# where depthwise layers with HardSwish ran 5–8× their time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

check() {
    local bin="$1"
    local found
    found="$(nm -C --defined-only "$bin" | grep -E 'core::core_arch::x86(_64)?::[a-z0-9_.]+::_mm' \
        | grep -v '::_mm256_zeroupper$' || true)"
    if [[ -n "$found" ]]; then
        echo "check-intrinsics.sh: intrinsics compiled out of line in $bin:" >&2
        echo "$found" >&2
        exit 1
    fi
    echo "check-intrinsics.sh: no intrinsic out of line in $bin"
}

newest() {
    ls -t "$1"/release/deps/kernels-* 2>/dev/null | grep -v '\.d$' | head -n1 || true
}

if [[ $# -gt 0 ]]; then
    check "$1"
    exit 0
fi
bin="$(newest target)"
[[ -n "$bin" ]] || { echo "check-intrinsics.sh: no kernel-test binary; run cargo test --release first" >&2; exit 1; }
check "$bin"
one=target/one-codegen-unit
CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 CARGO_TARGET_DIR="$one" \
    cargo test --release -p kiln-runtime --test kernels --no-run --quiet
check "$(newest "$one")"
rm -rf "$one"
