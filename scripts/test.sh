#!/usr/bin/env bash
# The Rust checks: formatting, lints (warnings are errors), then the whole test suite in
# release mode. The zoo tests read testdata/ (made by scripts/make_testdata.py); .ci/run
# makes it first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export KILN_TESTDATA="${KILN_TESTDATA:-$PWD/testdata}"

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy --workspace --all-targets --release -- -D warnings"
cargo clippy --workspace --all-targets --release -- -D warnings
echo "== cargo test --workspace --release"
cargo test --workspace --release
