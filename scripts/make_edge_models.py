#!/usr/bin/env python3
"""Writes testdata/edge/: small ONNX models at the edges of Kiln's generated API (no
inputs, outputs that are weights, constants or inputs, a value listed twice as an
output, rank-0 and zero-sized tensors, names that are Rust keywords or no identifiers,
a single node, 2,000 outputs, outputs whose extent the data decides: NonZero, Compress,
Unique, NonMaxSuppression, TopK with a run-time k) and a small CNN for the concurrency test, each with
seeded inputs and onnxruntime's outputs. With --big it also writes testdata/big/: deep
models for scripts/bench_big_graphs.sh (transformer encoders of 6, 12, 24 and 48 layers and
ResNet-style CNNs of 75, 150, 300 and 600 blocks), without reference outputs.

Python is used ONLY to produce test data and reference outputs:

    .venv/bin/python scripts/make_edge_models.py [--out DIR] [--big] [--force]

Each case folder holds model.onnx, input_<k>.npy (graph input order), expected_<k>.npy
(onnxruntime 1 thread, graph output order) and meta.json (the inputs' and outputs' names,
types and shapes, and what the case is for). A folder whose meta.json has the current
VERSION and versions of onnx/onnxruntime/numpy is skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

VERSION = 1
OPSET = 17
F = TensorProto.FLOAT


def versions() -> dict:
    return {"onnx": onnx.__version__, "onnxruntime": ort.__version__, "numpy": np.__version__}


def seed_of(name: str) -> int:
    return zlib.crc32(f"kiln-edge/{name}".encode())


def rng_for(name: str, k: int = 0) -> np.random.Generator:
    return np.random.default_rng([seed_of(name), k])


def init(name: str, a: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(a), name)


def vi(name: str, elem: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def model_of(nodes, inputs, outputs, inits=(), name="edge", check=True) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), name, list(inputs), list(outputs), list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m)
    return m


# ----------------------------------------------------------------------------------------
# edge cases: each function returns (model, description)


def no_inputs():
    """No graph inputs: the output is computed from constants only (a Constant through
    Relu and an Add with a weight; all of it folds at compile time)."""
    c = helper.make_node(
        "Constant", [], ["c"], value=init("cv", np.array([[-1.5, 2.0, 0.25], [3.0, -4.0, 5.5]], np.float32))
    )
    r = helper.make_node("Relu", ["c"], ["r"])
    a = helper.make_node("Add", ["r", "w"], ["y"])
    w = init("w", np.arange(6, dtype=np.float32).reshape(2, 3) / 8)
    return model_of([c, r, a], [], [vi("y", F, [2, 3])], [w])


def output_is_weight():
    """An output that is an initializer (a weight) as is, beside one computed from it."""
    w = init("w", rng_for("output_is_weight", 9).standard_normal((3, 4)).astype(np.float32))
    a = helper.make_node("Add", ["x", "w"], ["y"])
    return model_of([a], [vi("x", F, [3, 4])], [vi("y", F, [3, 4]), vi("w", F, [3, 4])], [w])


def output_is_constant():
    """An output that is a Constant node's value, and one that folds to a constant
    (Shape of the input), beside a computed one."""
    c = helper.make_node("Constant", [], ["k"], value=init("kv", np.array([1.0, -2.0, 3.0], np.float32)))
    s = helper.make_node("Shape", ["x"], ["shape"])
    m = helper.make_node("Mul", ["x", "k"], ["y"])
    return model_of(
        [c, s, m],
        [vi("x", F, [2, 3])],
        [vi("y", F, [2, 3]), vi("k", F, [3]), vi("shape", TensorProto.INT64, [2])],
    )


def output_is_input():
    """A graph input that is also a graph output, beside a computed output."""
    r = helper.make_node("Relu", ["x"], ["y"])
    return model_of([r], [vi("x", F, [2, 5])], [vi("x", F, [2, 5]), vi("y", F, [2, 5])])


def duplicate_output():
    """The same value listed twice as a graph output (and once more between)."""
    r = helper.make_node("Sigmoid", ["x"], ["y"])
    t = helper.make_node("Tanh", ["x"], ["z"])
    return model_of(
        [r, t], [vi("x", F, [4])], [vi("y", F, [4]), vi("z", F, [4]), vi("y", F, [4])], check=False
    )


def rank0():
    """Rank-0 tensors: a scalar input, a scalar weight, scalar outputs (one an
    elementwise result, one a full reduction of a matrix with keepdims=0)."""
    w = init("w", np.array(2.5, np.float32))
    m = helper.make_node("Mul", ["s", "w"], ["p"])
    r = helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0)
    a = helper.make_node("Add", ["x", "p"], ["y"])
    return model_of(
        [m, r, a],
        [vi("s", F, []), vi("x", F, [2, 3])],
        [vi("p", F, []), vi("total", F, []), vi("y", F, [2, 3])],
        [w],
    )


def zero_dim():
    """Zero-sized dims: an input of shape [0, 3] through Relu (an empty output), and
    Concat of it with a [2, 3] input (the empty part adds nothing)."""
    r = helper.make_node("Relu", ["e"], ["empty"])
    c = helper.make_node("Concat", ["e", "x"], ["cat"], axis=0)
    n = helper.make_node("Neg", ["cat"], ["y"])
    return model_of(
        [r, c, n],
        [vi("e", F, [0, 3]), vi("x", F, [2, 3])],
        [vi("empty", F, [0, 3]), vi("y", F, [2, 3])],
    )


def names():
    """Names that are Rust keywords or no identifiers: inputs `type`, `self`, `1x`,
    `a.b/c:0`, a non-ASCII name, and `a-b` / `a_b` (which sanitise to the same
    identifier); outputs `fn`, `Self`, `_`, `ünï` and `a.b/c:0/out`; node names with
    quotes, a backslash, `*/` and a newline (they end up in comments and strings)."""
    ins = ["type", "self", "1x", "a.b/c:0", "名前", "a-b", "a_b"]
    nodes = [
        helper.make_node("Add", ["type", "self"], ["fn"], name='add "quoted" \\ */'),
        helper.make_node("Mul", ["1x", "a.b/c:0"], ["Self"], name="mul\nsecond line"),
        helper.make_node("Sub", ["名前", "a-b"], ["_"], name="名前"),
        helper.make_node("Relu", ["a_b"], ["ünï"], name=""),
        helper.make_node("Neg", ["fn"], ["a.b/c:0/out"], name="a.b/c:0"),
    ]
    outs = ["fn", "Self", "_", "ünï", "a.b/c:0/out"]
    return model_of(nodes, [vi(n, F, [3]) for n in ins], [vi(n, F, [3]) for n in outs])


def single_node():
    """One node (Relu), one input, one output."""
    return model_of([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [1, 8])], [vi("y", F, [1, 8])])


def many_outputs():
    """2,000 outputs: out_i = x * c_i + i, each its own Mul and Add on a [4] input."""
    nodes, outs, inits = [], [], []
    for i in range(2000):
        inits.append(init(f"c{i}", np.array([1.0 + i / 1000], np.float32)))
        inits.append(init(f"b{i}", np.array([float(i)], np.float32)))
        nodes.append(helper.make_node("Mul", ["x", f"c{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Add", [f"m{i}", f"b{i}"], [f"out_{i}"]))
        outs.append(vi(f"out_{i}", F, [4]))
    return model_of(nodes, [vi("x", F, [4])], outs, inits)


def small_cnn():
    """The concurrency test's model: a small CNN on [1, 3, 32, 32] (Conv+BN+Relu,
    MaxPool, a residual Conv block, GlobalAveragePool, Gemm, Softmax), outputs the
    probabilities and the logits."""
    g = rng_for("small_cnn", 9)

    def conv_w(o, i, k):
        return (g.standard_normal((o, i, k, k)) * np.sqrt(2.0 / (i * k * k))).astype(np.float32)

    inits = [
        init("w1", conv_w(16, 3, 3)),
        init("b1", (g.standard_normal(16) * 0.01).astype(np.float32)),
        init("bn_s", g.uniform(0.5, 1.5, 16).astype(np.float32)),
        init("bn_b", (g.standard_normal(16) * 0.1).astype(np.float32)),
        init("bn_m", (g.standard_normal(16) * 0.1).astype(np.float32)),
        init("bn_v", g.uniform(0.5, 1.5, 16).astype(np.float32)),
        init("w2", conv_w(16, 16, 3)),
        init("w3", conv_w(16, 16, 3)),
        init("fc_w", (g.standard_normal((10, 16)) * np.sqrt(2.0 / 16)).astype(np.float32)),
        init("fc_b", (g.standard_normal(10) * 0.01).astype(np.float32)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c3", "p1"], ["s3"]),
        helper.make_node("Relu", ["s3"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], axis=1),
    ]
    return model_of(
        nodes, [vi("x", F, [1, 3, 32, 32])], [vi("prob", F, [1, 10]), vi("logits", F, [1, 10])], inits
    )


def residual_adds():
    """Adds of a 1x1 convolution's output and a same-shaped tensor, which the CPU
    target fuses into the convolution: with a bias and a Relu after, the residual
    computed after the convolution; as a two-input Sum with the residual first and no
    activation; at stride 2. Beside them, adds it must leave alone: a broadcast
    [1, C, 1, 1] operand, and a convolution whose output is also a graph output."""
    g = rng_for("residual_adds", 9)

    def w(*shape):
        return init_array(g, shape)

    inits = [
        init("w1", w(16, 8, 1, 1)),
        init("b1", w(16)),
        init("w2", w(16, 8, 3, 3)),
        init("w3", w(16, 16, 1, 1)),
        init("w4", w(16, 8, 1, 1)),
        init("w5", w(16, 8, 1, 1)),
        init("b5", w(16)),
        init("cb", w(1, 16, 1, 1)),
        init("w6", w(16, 8, 1, 1)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),
        helper.make_node("Conv", ["x", "w2"], ["r1"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c1", "r1"], ["s1"]),
        helper.make_node("Relu", ["s1"], ["y1"]),
        helper.make_node("Conv", ["y1", "w3"], ["c2"]),
        helper.make_node("Sum", ["y1", "c2"], ["out_sum"]),
        helper.make_node("Conv", ["x", "w4"], ["c3"], strides=[2, 2]),
        helper.make_node("MaxPool", ["y1"], ["r3"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Add", ["r3", "c3"], ["s3"]),
        helper.make_node("Relu", ["s3"], ["out_strided"]),
        helper.make_node("Conv", ["x", "w5", "b5"], ["c4"]),
        helper.make_node("Add", ["c4", "cb"], ["out_broadcast"]),
        helper.make_node("Conv", ["x", "w6"], ["c5"]),
        helper.make_node("Add", ["c5", "r1"], ["out_shared"]),
    ]
    outputs = [
        vi("out_sum", F, [1, 16, 6, 6]),
        vi("out_strided", F, [1, 16, 3, 3]),
        vi("out_broadcast", F, [1, 16, 6, 6]),
        vi("out_shared", F, [1, 16, 6, 6]),
        vi("c5", F, [1, 16, 6, 6]),
    ]
    return model_of(nodes, [vi("x", F, [1, 8, 6, 6])], outputs, inits)


def init_array(g: np.random.Generator, shape) -> np.ndarray:
    return (g.standard_normal(shape) * 0.3).astype(np.float32)


I64 = TensorProto.INT64


def nms_postprocess():
    """Detection post-processing: NonMaxSuppression keeps boxes (how many is the data's
    choice), Gather takes the kept boxes' coordinates."""
    g = rng_for("nms_postprocess", 1)
    y1, x1 = g.uniform(0, 0.7, (2, 64))
    h, w = g.uniform(0.05, 0.3, (2, 64))
    boxes = np.stack([y1, x1, y1 + h, x1 + w], axis=1)[None].astype(np.float32)
    scores = g.uniform(0, 1, (1, 3, 64)).astype(np.float32)
    inits = [
        init("max_out", np.array([8], np.int64)),
        init("iou", np.array([0.4], np.float32)),
        init("score_min", np.array([0.2], np.float32)),
        init("box_col", np.array(2, np.int64)),
        init("flat", np.array([64, 4], np.int64)),
    ]
    nodes = [
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "score_min"], ["selected"]),
        helper.make_node("Gather", ["selected", "box_col"], ["box_idx"], axis=1),
        helper.make_node("Reshape", ["boxes", "flat"], ["boxes2"]),
        helper.make_node("Gather", ["boxes2", "box_idx"], ["kept"], axis=0),
    ]
    m = model_of(
        nodes,
        [vi("boxes", F, [1, 64, 4]), vi("scores", F, [1, 3, 64])],
        [vi("selected", I64, ["n", 3]), vi("kept", F, ["n", 4])],
        inits,
    )
    return m, {"boxes": boxes, "scores": scores}


def nonzero_gather():
    """NonZero over a mask, GatherND of the values it picks and their sum, and Compress of
    the rows whose first value is positive, doubled: extents the data decides, read by
    the steps after them."""
    inits = [
        init("half", np.array(0.5, np.float32)),
        init("zero", np.array(0.0, np.float32)),
        init("two", np.array(2.0, np.float32)),
        init("starts", np.array([0], np.int64)),
        init("ends", np.array([1], np.int64)),
        init("axis1", np.array([1], np.int64)),
        init("col_shape", np.array([6], np.int64)),
    ]
    nodes = [
        helper.make_node("Greater", ["x", "half"], ["mask"]),
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
        helper.make_node("GatherND", ["x", "idx"], ["vals"]),
        helper.make_node("ReduceSum", ["vals"], ["total"], keepdims=0),
        helper.make_node("Slice", ["x", "starts", "ends", "axis1"], ["col"]),
        helper.make_node("Reshape", ["col", "col_shape"], ["col6"]),
        helper.make_node("Greater", ["col6", "zero"], ["keep"]),
        helper.make_node("Compress", ["x", "keep"], ["rows"], axis=0),
        helper.make_node("Mul", ["rows", "two"], ["rows2"]),
    ]
    return model_of(
        nodes,
        [vi("x", F, [6, 8])],
        [vi("nz", I64, [2, "n"]), vi("vals", F, ["n"]), vi("total", F, []), vi("rows2", F, ["r", 8])],
        inits,
    )


def nonzero_empty():
    """NonZero of a mask with no true element: an extent of 0, and steps after it."""
    inits = [init("big", np.array(100.0, np.float32))]
    nodes = [
        helper.make_node("Greater", ["x", "big"], ["mask"]),
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Cast", ["nz"], ["nzf"], to=F),
        helper.make_node("Neg", ["nzf"], ["y"]),
    ]
    return model_of(nodes, [vi("x", F, [3, 5])], [vi("nz", I64, [2, "n"]), vi("y", F, [2, "n"])], inits)


def topk_runtime_k():
    """TopK whose k is a graph input, read at run time, and an Add after it."""
    nodes = [
        helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1),
        helper.make_node("Add", ["v", "v"], ["v2"]),
    ]
    m = model_of(
        nodes, [vi("x", F, [4, 20]), vi("k", I64, [1])], [vi("v2", F, [4, "k"]), vi("i", I64, [4, "k"])]
    )
    return m, {"k": np.array([7], np.int64)}


def unique_counts():
    """Unique (in order of first occurrence) of int64 values with all four outputs, and
    the counts cast to float."""
    nodes = [
        helper.make_node("Unique", ["x"], ["y", "first", "inverse", "counts"], sorted=0),
        helper.make_node("Cast", ["counts"], ["countsf"], to=F),
    ]
    m = model_of(
        nodes,
        [vi("x", I64, [40])],
        [vi("y", I64, ["u"]), vi("first", I64, ["u"]), vi("inverse", I64, [40]), vi("countsf", F, ["u"])],
    )
    return m, {"x": rng_for("unique_counts", 1).integers(0, 12, 40).astype(np.int64)}


EDGE = {
    f.__name__: f
    for f in [
        no_inputs,
        output_is_weight,
        output_is_constant,
        output_is_input,
        duplicate_output,
        rank0,
        zero_dim,
        names,
        single_node,
        many_outputs,
        small_cnn,
        residual_adds,
        nms_postprocess,
        nonzero_gather,
        nonzero_empty,
        topk_runtime_k,
        unique_counts,
    ]
}

NP_OF = {
    TensorProto.FLOAT: np.float32,
    TensorProto.INT64: np.int64,
}


def save_npy(path: Path, a: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".tmp.npy")
    np.save(tmp, a, allow_pickle=False)
    os.replace(tmp, path)


def ort_session(data: bytes) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(data, sess_options=so, providers=["CPUExecutionProvider"])


def up_to_date(folder: Path) -> bool:
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return False
    return meta.get("version") == VERSION and meta.get("versions") == versions()


def io_meta(v: onnx.ValueInfoProto) -> dict:
    t = v.type.tensor_type
    return {
        "name": v.name,
        "dtype": np.dtype(NP_OF[t.elem_type]).name,
        # 0 where the data decides (NonZero, Unique, ...).
        "shape": [d.dim_value for d in t.shape.dim],
    }


def make_edge(name: str, root: Path, force: bool) -> str:
    folder = root / name
    if not force and up_to_date(folder):
        return f"{name:20s} up to date"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meta.json").unlink(missing_ok=True)
    for old in folder.glob("*.npy"):
        old.unlink()
    made = EDGE[name]()
    # A case may give some inputs' values (valid boxes, a k in range).
    model, given = made if isinstance(made, tuple) else (made, {})
    data = model.SerializeToString()
    (folder / "model.onnx").write_bytes(data)
    feeds = {}
    for k, v in enumerate(model.graph.input):
        m = io_meta(v)
        a = given.get(v.name)
        if a is None:
            a = rng_for(name, k + 1).standard_normal(m["shape"]).astype(m["dtype"])
        a = np.asarray(a, dtype=m["dtype"])
        save_npy(folder / f"input_{k}.npy", a)
        feeds[v.name] = a
    outs = ort_session(data).run(None, feeds)
    for k, o in enumerate(outs):
        save_npy(folder / f"expected_{k}.npy", np.asarray(o))
    meta = {
        "version": VERSION,
        "description": " ".join(EDGE[name].__doc__.split()),
        "source": f"scripts/make_edge_models.py: {name}()",
        "inputs": [io_meta(v) for v in model.graph.input],
        "outputs": [io_meta(v) for v in model.graph.output],
        "versions": versions(),
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    return f"{name:20s} built: {len(model.graph.node)} nodes, {len(outs)} outputs"


# ----------------------------------------------------------------------------------------
# big graphs (for scripts/bench_big_graphs.sh; no reference outputs)


def transformer(layers: int, hidden: int = 256, heads: int = 4, seq: int = 64, ffn: int = 1024):
    """A BERT-style encoder as PyTorch (opset < 17) exports it: per layer Q/K/V
    projections, each reshaped to heads by a Reshape whose target is computed from
    Shape/Gather/Unsqueeze/Concat (folds at compile time), scaled dot-product attention
    with Softmax, the output projection, a residual Add and LayerNorm decomposed into
    ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add, then a GELU feed-forward (Erf form)."""
    g = np.random.default_rng(seed_of(f"transformer{layers}"))
    nodes, inits = [], []
    dh = hidden // heads

    def w(name, shape, scale):
        inits.append(init(name, (g.standard_normal(shape) * scale).astype(np.float32)))
        return name

    def c(name, value, dtype=np.float32):
        inits.append(init(name, np.array(value, dtype)))
        return name

    def node(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], **kw))
        return out

    c("two", 2.0)
    c("eps", 1e-12)
    c("sqrt2", np.sqrt(2.0))
    c("one", 1.0)
    c("half", 0.5)
    c("scale", 1.0 / np.sqrt(dh))
    c("heads", [heads], np.int64)
    c("dh", [dh], np.int64)
    c("hid", [hidden], np.int64)
    c("i0", 0, np.int64)
    c("i1", 1, np.int64)
    c("ax0", [0], np.int64)

    def layer_norm(x, p):
        mean = node("ReduceMean", [x], f"{p}_mean", axes=[-1])
        d = node("Sub", [x, mean], f"{p}_d")
        sq = node("Pow", [d, "two"], f"{p}_sq")
        var = node("ReduceMean", [sq], f"{p}_var", axes=[-1])
        ve = node("Add", [var, "eps"], f"{p}_ve")
        sd = node("Sqrt", [ve], f"{p}_sd")
        n = node("Div", [d, sd], f"{p}_n")
        inits.append(init(f"{p}_g", (1.0 + g.standard_normal(hidden) * 0.1).astype(np.float32)))
        s = node("Mul", [n, f"{p}_g"], f"{p}_s")
        return node("Add", [s, w(f"{p}_b", [hidden], 0.1)], f"{p}_out")

    def linear(x, p, i, o):
        mm = node("MatMul", [x, w(f"{p}_w", [i, o], np.sqrt(1.0 / i))], f"{p}_mm")
        return node("Add", [mm, w(f"{p}_bias", [o], 0.02)], f"{p}_out")

    def dims(x, p):
        shape = node("Shape", [x], f"{p}_shape")
        b = node("Gather", [shape, "i0"], f"{p}_b", axis=0)
        s = node("Gather", [shape, "i1"], f"{p}_s", axis=0)
        bu = node("Unsqueeze", [b, "ax0"], f"{p}_bu")
        su = node("Unsqueeze", [s, "ax0"], f"{p}_su")
        return bu, su

    def split_heads(x, p):
        bu, su = dims(x, p)
        target = node("Concat", [bu, su, "heads", "dh"], f"{p}_target", axis=0)
        r = node("Reshape", [x, target], f"{p}_r")
        return node("Transpose", [r], f"{p}_t", perm=[0, 2, 1, 3])

    x = "x"
    for l in range(layers):
        p = f"l{l}"
        q = split_heads(linear(x, f"{p}_q", hidden, hidden), f"{p}_qh")
        k = split_heads(linear(x, f"{p}_k", hidden, hidden), f"{p}_kh")
        v = split_heads(linear(x, f"{p}_v", hidden, hidden), f"{p}_vh")
        kt = node("Transpose", [k], f"{p}_kt", perm=[0, 1, 3, 2])
        sc = node("MatMul", [q, kt], f"{p}_scores")
        sc = node("Mul", [sc, "scale"], f"{p}_scaled")
        pr = node("Softmax", [sc], f"{p}_probs", axis=-1)
        ctx = node("MatMul", [pr, v], f"{p}_ctx")
        ctx = node("Transpose", [ctx], f"{p}_ctx_t", perm=[0, 2, 1, 3])
        bu, su = dims(x, f"{p}_ctxd")
        target = node("Concat", [bu, su, "hid"], f"{p}_ctx_target", axis=0)
        ctx = node("Reshape", [ctx, target], f"{p}_ctx_r")
        att = linear(ctx, f"{p}_o", hidden, hidden)
        h = layer_norm(node("Add", [att, x], f"{p}_res1"), f"{p}_ln1")
        f = linear(h, f"{p}_ff1", hidden, ffn)
        e = node("Erf", [node("Div", [f, "sqrt2"], f"{p}_gd")], f"{p}_erf")
        gm = node("Mul", [f, node("Add", [e, "one"], f"{p}_e1")], f"{p}_gm")
        gelu = node("Mul", [gm, "half"], f"{p}_gelu")
        f2 = linear(gelu, f"{p}_ff2", ffn, hidden)
        x = layer_norm(node("Add", [f2, h], f"{p}_res2"), f"{p}_ln2")
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    return model_of(nodes, [vi("x", F, [1, seq, hidden])], [vi("y", F, [1, seq, hidden])], inits, f"transformer{layers}")


def resnet(blocks: int, channels: int = 16, size: int = 32):
    """A ResNet-style CNN: a stem Conv, then `blocks` residual blocks (Conv, BatchNorm,
    Relu, Conv, BatchNorm, Add, Relu) at a fixed width, channels doubling and the
    resolution halving (a strided 1x1 Conv on the shortcut) every blocks/3 blocks,
    then GlobalAveragePool, Flatten and Gemm."""
    g = np.random.default_rng(seed_of(f"resnet{blocks}"))
    nodes, inits = [], []

    def w(name, a):
        inits.append(init(name, a.astype(np.float32)))
        return name

    def conv(x, p, i, o, k, stride=1):
        wt = w(f"{p}_w", g.standard_normal((o, i, k, k)) * np.sqrt(2.0 / (i * k * k)))
        nodes.append(helper.make_node("Conv", [x, wt], [f"{p}_c"], pads=[k // 2] * 4, strides=[stride] * 2))
        return f"{p}_c"

    def bn(x, p, c, gamma=1.0):
        ins = [
            w(f"{p}_s", g.uniform(0.5, 1.5, c) * gamma),
            w(f"{p}_b", g.standard_normal(c) * 0.1),
            w(f"{p}_m", g.standard_normal(c) * 0.1),
            w(f"{p}_v", g.uniform(0.5, 1.5, c)),
        ]
        nodes.append(helper.make_node("BatchNormalization", [x, *ins], [f"{p}_n"]))
        return f"{p}_n"

    def relu(x, p):
        nodes.append(helper.make_node("Relu", [x], [f"{p}_r"]))
        return f"{p}_r"

    c = channels
    x = relu(bn(conv("x", "stem", 3, c, 3), "stem_bn", c), "stem")
    stage = max(1, blocks // 3)
    for b in range(blocks):
        p = f"b{b}"
        short, stride, cin = x, 1, c
        if b > 0 and b % stage == 0 and b // stage < 3:
            c, stride = c * 2, 2
            short = conv(x, f"{p}_sc", cin, c, 1, stride)
        h = relu(bn(conv(x, f"{p}_1", cin, c, 3, stride), f"{p}_bn1", c), f"{p}_1")
        h = bn(conv(h, f"{p}_2", c, c, 3), f"{p}_bn2", c, gamma=0.2)
        nodes.append(helper.make_node("Add", [h, short], [f"{p}_sum"]))
        x = relu(f"{p}_sum", p)
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    nodes.append(
        helper.make_node("Gemm", ["flat", w("fc_w", g.standard_normal((10, c)) * 0.1), w("fc_b", np.zeros(10))], ["y"], transB=1)
    )
    return model_of(nodes, [vi("x", F, [1, 3, size, size])], [vi("y", F, [1, 10])], inits, f"resnet{blocks}")


BIG = {
    # 48 layers and 600 blocks: past 3,500 ONNX nodes, the size users report rustc
    # trouble at (a 4,104-node model, tracel-ai/burn-onnx#229).
    **{f"transformer{n}": (lambda n=n: transformer(n)) for n in (6, 12, 24, 48)},
    **{f"resnet{n}": (lambda n=n: resnet(n)) for n in (75, 150, 300, 600)},
}


def make_big(name: str, root: Path, force: bool) -> str:
    folder = root / name
    path = folder / "model.onnx"
    stamp = folder / "version"
    if not force and path.is_file() and stamp.is_file() and stamp.read_text() == f"{VERSION}\n":
        return f"{name:20s} up to date"
    folder.mkdir(parents=True, exist_ok=True)
    model = BIG[name]()
    path.write_bytes(model.SerializeToString())
    # onnxruntime loads it (a check that the model is valid), on one seeded input.
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = rng_for(name).standard_normal(shape).astype(np.float32)
    (y,) = ort_session(path.read_bytes()).run(None, {"x": x})
    if not np.isfinite(y).all():
        raise RuntimeError(f"{name}: onnxruntime's output is not finite")
    stamp.write_text(f"{VERSION}\n")
    return f"{name:20s} built: {len(model.graph.node)} nodes, {path.stat().st_size / 1e6:.1f} MB"


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=root / "testdata", help="default: testdata/")
    ap.add_argument("--big", action="store_true", help="also the deep models (testdata/big/)")
    ap.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = ap.parse_args()
    for name in EDGE:
        print(make_edge(name, args.out / "edge", args.force), flush=True)
    if args.big:
        for name in BIG:
            print(make_big(name, args.out / "big", args.force), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
