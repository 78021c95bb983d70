#!/usr/bin/env bash
# The quickest look at Kiln on a fresh machine: make SqueezeNet with seeded random
# weights (Python, test data only), then compile, build and run it with `kiln run`,
# which prints the plan summary, the outputs and the latency.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/setup-python.sh
.venv/bin/python scripts/make_testdata.py --only squeezenet
cargo run --release --quiet -p kiln-compiler --bin kiln -- \
    run testdata/squeezenet/random.onnx \
    --data data_0=testdata/squeezenet/random_input_0.npy \
    --out target/demo-out --runs 20
