#!/usr/bin/env bash
# Seeds corpus/TARGET for the four targets from testdata/ (made by
# scripts/make_testdata.py and make_node_tests.py): the 1,884 node-test models, the
# zoo's light models and the edge models. Left out: vgg19 and zfnet512 (their weights
# are ConstantOfShape nodes that fold to 400+ MiB, above -malloc_limit_mb by design)
# and edge/many_outputs (2,000 outputs: seconds per run under ASan).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
testdata="${KILN_TESTDATA:-../../testdata}"
mkdir -p corpus/compile_bytes corpus/compile_with_dims corpus/compile_with_ranges corpus/mutate_graph
for m in "$testdata"/node/*/model.onnx "$testdata"/*/model.onnx "$testdata"/edge/*/model.onnx; do
    case "$m" in */vgg19/*|*/zfnet512/*|*/many_outputs/*) continue ;; esac
    h="$(sha1sum "$m" | cut -c1-16)"
    cp "$m" "corpus/compile_bytes/$h"
    { printf '\x01\x01\x01\x01\x01\x01\x01\x01'; cat "$m"; } > "corpus/compile_with_dims/$h"
    { printf '\x00'; cat "$m"; } > "corpus/mutate_graph/$h"
    { printf '\x00\x01\x02\x03\x01\x00\x07\x05'; cat "$m"; } > "corpus/compile_with_ranges/$h"
done
