#!/usr/bin/env python3
"""onnxruntime's time per node and per operator on one model: the peer of
`kiln run MODEL --profile`, for finding which kernel holds a model back.

    .venv/bin/python scripts/ort_profile.py MODEL.onnx NAME=INPUT.npy [...] RUNS [TOP]

Same session settings as scripts/ort_bench.py (single-threaded unless
KILN_BENCH_THREADS=N, all graph optimisations). After 3 warm-up runs it profiles RUNS
runs (SessionOptions.enable_profiling), sums each node's `*_kernel_time` events and
prints the TOP (default 30) slowest nodes, then the total per operator type, in ms per
run. Node names are onnxruntime's after its own rewrites (e.g. `<output>_nchwc`).
"""

import collections
import json
import os
import sys
import tempfile

WARMUP = 3


def main(argv: list) -> int:
    args = argv[1:]
    if len(args) < 3 or args[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    model_path = args[0]
    numbers = []
    while args and args[-1].isdigit():
        numbers.insert(0, int(args.pop()))
    if not numbers or len(numbers) > 2:
        print("ort_profile.py: give RUNS, and optionally TOP, last", file=sys.stderr)
        return 2
    runs, top = numbers[0], (numbers[1] if len(numbers) == 2 else 30)
    named = [a.split("=", 1) for a in args[1:]]
    if not named or any(len(n) != 2 for n in named):
        print("ort_profile.py: give NAME=INPUT.npy for every input", file=sys.stderr)
        return 2

    import numpy as np
    import onnxruntime as ort

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from ort_bench import session_options

    so = session_options(ort)
    feeds = {name: np.load(path, allow_pickle=False) for name, path in named}
    # Warm up without profiling, then profile a session of its own.
    sess = ort.InferenceSession(model_path, sess_options=so, providers=["CPUExecutionProvider"])
    for _ in range(WARMUP):
        sess.run(None, feeds)
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    sess = ort.InferenceSession(model_path, sess_options=so, providers=["CPUExecutionProvider"])
    for _ in range(runs + 1):
        sess.run(None, feeds)
    path = sess.end_profiling()
    with open(path) as f:
        events = json.load(f)

    per_node = collections.defaultdict(float)
    op_of = {}
    for e in events:
        name = e.get("name", "")
        if e.get("cat") == "Node" and name.endswith("_kernel_time"):
            node = name[: -len("_kernel_time")]
            per_node[node] += e["dur"] / 1000.0
            op_of[node] = e.get("args", {}).get("op_name", "?")
    # The first profiled run is one more warm-up: divide by all runs anyway (its share
    # is small and the same for every node).
    scale = 1.0 / (runs + 1)
    total = sum(per_node.values()) * scale
    print(f"# {model_path}: {total:.3f} ms per run in kernels, {len(per_node)} nodes")
    for node, ms in sorted(per_node.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{ms * scale:9.4f}  {op_of[node]:<24} {node}")
    per_op = collections.defaultdict(float)
    for node, ms in per_node.items():
        per_op[op_of[node]] += ms * scale
    print("# per operator")
    for op, ms in sorted(per_op.items(), key=lambda kv: -kv[1]):
        print(f"{ms:9.4f}  {op}")
    os.remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
