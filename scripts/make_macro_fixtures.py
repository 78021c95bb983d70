#!/usr/bin/env python3
"""Writes the small committed models the `include_model!` tests compile, and the
onnxruntime reference outputs `tests/macro-user` checks against.

Python is used ONLY to produce test data. The outputs are committed (a few KB each), so
the Rust tests need neither Python nor testdata/; rerun this only to change them:

    .venv/bin/python scripts/make_macro_fixtures.py

It is deterministic: the same package versions (scripts/requirements.txt) write the
same bytes.

macros/tests/fixtures/ (inputs of the trybuild UI tests, macros/tests/ui.rs)
    tiny.onnx         Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Softmax on a
                      fixed [1, 3, 8, 8] input `x`, output `prob` [1, 4].
    batch.onnx        The same graph with a symbolic batch dim: `x` is [N, 3, 8, 8].
    unsupported.onnx  A graph using RandomNormalLike and RandomUniformLike, random generators
                  Kiln does not support.
    not_onnx.onnx     A text file with an .onnx name.

tests/macro-user/models/ (the crate that uses the macro on a real model)
    tiny_cnn.onnx              A small residual CNN with seeded random weights and a
                               symbolic batch dim (`x` [N, 3, 16, 16]): Conv+bias ->
                               BatchNormalization -> Relu -> MaxPool -> Conv -> Add
                               (residual) -> Relu -> Conv stride 2 -> LeakyRelu ->
                               GlobalAveragePool -> Flatten -> Gemm (logits) -> Softmax.
                               Outputs `prob` [N, 10] and `logits` [N, 10].
    tiny_cnn_input.npy         float32 [2, 3, 16, 16], N(0, 1).
    tiny_cnn_expected_prob.npy, tiny_cnn_expected_logits.npy
                               onnxruntime outputs on that input (CPU, one thread).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "macros" / "tests" / "fixtures"
MODELS = ROOT / "tests" / "macro-user" / "models"
OPSET = 13
SEED = 20240603


def conv_weight(rng: np.random.Generator, o: int, i: int, k: int) -> np.ndarray:
    """He-scaled conv weights, so activations stay around unit scale."""
    return (rng.standard_normal((o, i, k, k)) * np.sqrt(2.0 / (i * k * k))).astype(np.float32)


def model(nodes, inputs, outputs, inits, name: str) -> bytes:
    graph = helper.make_graph(
        nodes, name, inputs, outputs, [numpy_helper.from_array(a, n) for n, a in inits.items()]
    )
    m = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="kiln scripts/make_macro_fixtures.py",
    )
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m.SerializeToString()


def tiny(batch: str | int, rng: np.random.Generator) -> bytes:
    inits = {
        "w": conv_weight(rng, 4, 3, 3),
        "b": (rng.standard_normal(4) * 0.1).astype(np.float32),
        "fc_w": (rng.standard_normal((4, 4)) * 0.5).astype(np.float32),
        "fc_b": (rng.standard_normal(4) * 0.1).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name="pool"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])
    prob = helper.make_tensor_value_info("prob", TensorProto.FLOAT, [batch, 4])
    return model(nodes, [x], [prob], inits, "tiny")


def unsupported() -> bytes:
    nodes = [
        helper.make_node("RandomNormalLike", ["x"], ["e"], name="normal"),
        helper.make_node("RandomUniformLike", ["x"], ["y"], name="random"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    return model(nodes, [x], [y], {}, "unsupported")


def tiny_cnn(rng: np.random.Generator) -> bytes:
    inits = {
        "conv1_w": conv_weight(rng, 8, 3, 3),
        "conv1_b": (rng.standard_normal(8) * 0.1).astype(np.float32),
        "bn_scale": rng.uniform(0.5, 1.5, 8).astype(np.float32),
        "bn_bias": (rng.standard_normal(8) * 0.1).astype(np.float32),
        "bn_mean": (rng.standard_normal(8) * 0.1).astype(np.float32),
        "bn_var": rng.uniform(0.5, 1.5, 8).astype(np.float32),
        "conv2_w": conv_weight(rng, 8, 8, 3),
        "conv3_w": conv_weight(rng, 16, 8, 3),
        "conv3_b": (rng.standard_normal(16) * 0.1).astype(np.float32),
        "fc_w": (rng.standard_normal((10, 16)) * np.sqrt(2.0 / 16)).astype(np.float32),
        "fc_b": (rng.standard_normal(10) * 0.1).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "conv1_w", "conv1_b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node(
            "BatchNormalization",
            ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"],
            ["bn"],
            name="bn1",
            epsilon=1e-5,
        ),
        helper.make_node("Relu", ["bn"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2_w"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "p1"], ["res"], name="residual"),
        helper.make_node("Relu", ["res"], ["r2"], name="relu2"),
        helper.make_node(
            "Conv", ["r2", "conv3_w", "conv3_b"], ["c3"], name="conv3", pads=[1, 1, 1, 1], strides=[2, 2]
        ),
        helper.make_node("LeakyRelu", ["c3"], ["r3"], name="leaky3", alpha=0.1),
        helper.make_node("GlobalAveragePool", ["r3"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])
    outs = [
        helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 10]),
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10]),
    ]
    return model(nodes, [x], outs, inits, "tiny_cnn")


def write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_bytes() == data:
        return
    path.write_bytes(data)
    print(f"wrote {path.relative_to(ROOT)} ({len(data)} bytes)")


def npy_bytes(a: np.ndarray) -> bytes:
    from io import BytesIO

    buf = BytesIO()
    np.save(buf, np.ascontiguousarray(a, dtype="<f4"), allow_pickle=False)
    return buf.getvalue()


def main() -> None:
    rng = np.random.default_rng(SEED)
    write(FIXTURES / "tiny.onnx", tiny(1, rng))
    write(FIXTURES / "batch.onnx", tiny("N", rng))
    write(FIXTURES / "unsupported.onnx", unsupported())
    write(FIXTURES / "not_onnx.onnx", b"This is a text file, not an ONNX model.\n")

    cnn = tiny_cnn(rng)
    write(MODELS / "tiny_cnn.onnx", cnn)
    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(cnn, so, providers=["CPUExecutionProvider"])
    prob, logits = sess.run(["prob", "logits"], {"x": x})
    write(MODELS / "tiny_cnn_input.npy", npy_bytes(x))
    write(MODELS / "tiny_cnn_expected_prob.npy", npy_bytes(prob))
    write(MODELS / "tiny_cnn_expected_logits.npy", npy_bytes(logits))
    print(f"tiny_cnn: max|logits| {np.abs(logits).max():.3f}, prob rows sum to {prob.sum(axis=1)}")


if __name__ == "__main__":
    main()
