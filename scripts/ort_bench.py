#!/usr/bin/env python3
"""Times onnxruntime on one model, as the peer of Kiln's benchmarks.

    .venv/bin/python scripts/ort_bench.py MODEL.onnx INPUT.npy RUNS
    .venv/bin/python scripts/ort_bench.py MODEL.onnx NAME=INPUT.npy [NAME=INPUT.npy ...] RUNS

Runs the model on the CPU execution provider, single-threaded (intra_op_num_threads=1,
inter_op_num_threads=1, ORT_SEQUENTIAL) with all graph optimisations;
KILN_BENCH_THREADS=N in the environment sets intra_op_num_threads=N (the peer of a
Kiln context with N threads). A bare INPUT.npy
feeds the model's first input (the zoo bench); NAME=INPUT.npy feeds the input NAME, of
any element type (the real-models bench: several inputs, int64 token ids); every input
the model declares must be fed. After 3 warm-up runs it times RUNS runs and prints one
JSON line on stdout:

    {"median_ms": 12.3, "min_ms": 12.1, "runs": 20}

Everything else (errors, onnxruntime's own log) goes to stderr; the exit status is
non-zero on any error.
"""

import json
import os
import statistics
import sys
import time

WARMUP = 3


def session_options(ort):
    """The benchmark's session settings (scripts/ort_profile.py uses them too)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = int(os.environ.get("KILN_BENCH_THREADS") or 1)
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return so


def main(argv: list) -> int:
    if len(argv) < 4 or argv[1] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    model_path, input_args = argv[1], argv[2:-1]
    try:
        runs = int(argv[-1])
    except ValueError:
        runs = 0
    if runs < 1:
        print(f"ort_bench.py: RUNS must be a positive integer, got {argv[-1]!r}", file=sys.stderr)
        return 2
    named = [a.split("=", 1) for a in input_args if "=" in a]
    if len(named) not in (0, len(input_args)) or (not named and len(input_args) != 1):
        print("ort_bench.py: give one INPUT.npy, or NAME=INPUT.npy for every input", file=sys.stderr)
        return 2

    import numpy as np
    import onnxruntime as ort

    so = session_options(ort)
    sess = ort.InferenceSession(model_path, sess_options=so, providers=["CPUExecutionProvider"])
    if named:
        feeds = {name: np.load(path, allow_pickle=False) for name, path in named}
        declared = {i.name for i in sess.get_inputs()}
        if set(feeds) != declared:
            raise ValueError(f"fed inputs {sorted(feeds)}, the model declares {sorted(declared)}")
    else:
        feeds = {sess.get_inputs()[0].name: np.load(input_args[0], allow_pickle=False)}
    # Every graph output is fetched: random.onnx's extra logits output costs a 4 KB copy.
    for _ in range(WARMUP):
        sess.run(None, feeds)
    times_ms = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        sess.run(None, feeds)
        times_ms.append((time.perf_counter_ns() - t0) / 1e6)
    result = {
        "median_ms": round(statistics.median(times_ms), 4),
        "min_ms": round(min(times_ms), 4),
        "runs": runs,
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as e:  # noqa: BLE001 -- one line on stderr, non-zero status
        print(f"ort_bench.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
