#!/usr/bin/env bash
# Runs one fuzz target for SECONDS in the background-friendly way this machine needs
# (2 shared cores: one worker, niced). Usage: compiler/fuzz/run.sh TARGET SECONDS
#   TARGET: compile_bytes | compile_with_dims | compile_with_ranges | mutate_graph
# Seeds: compiler/fuzz/seed.sh writes corpus/TARGET from testdata/ (node tests, zoo
# and edge models). Crashes land in artifacts/TARGET.
#
# Limits, per input:
#   -timeout=10        a small model compiles in milliseconds (even under ASan);
#                      10 s is a hang, not a slow compile.
#   -malloc_limit_mb=2048  one allocation above 512 MiB from an input of at most
#                      -max_len bytes is an amplification worth a look: constant
#                      folding is the only place the compiler allocates per element
#                      (ops::MAX_FOLDED_ELEMENTS bounds it) and the zoo models' largest
#                      single tensors are ~400 MiB only with their real weights, which
#                      the seeds do not carry.
#   -rss_limit_mb=2048 ASan's shadow and quarantine roughly double the compiler's own
#                      peak (tens of MiB on the seeds); 2 GiB leaves room on a shared
#                      23 GiB machine running several agents.
# The pinned toolchain is stable 1.95: cargo-fuzz's `-Z` flags need RUSTC_BOOTSTRAP=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
target="$1"
seconds="${2:-600}"
(cd .. && RUSTC_BOOTSTRAP=1 cargo fuzz build -O "$target")
mkdir -p "corpus/$target" "artifacts/$target"
ASAN_OPTIONS="detect_odr_violation=0:allocator_may_return_null=1" nice -n 10 \
    "target/x86_64-unknown-linux-gnu/release/$target" "corpus/$target" \
    -artifact_prefix="artifacts/$target/" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -timeout=10 -malloc_limit_mb=2048 -rss_limit_mb=2048 -max_len=300000 \
    -max_total_time="$seconds" -print_final_stats=1
