#!/usr/bin/env python3
"""Writes testdata/node/: ONNX's backend node test cases, made from the pinned onnx wheel.

The wheel ships the generators of the node tests, not their data; this script runs them
(`onnx.backend.test.case.node.collect_testcases`, as ONNX's own `cmd_tools.py
generate-data` does) and writes, for each case, data set 0 as:

    testdata/node/<case>/model.onnx
    testdata/node/<case>/input_<j>.npy     one per graph input that is a plain tensor
    testdata/node/<case>/output_<j>.npy    one per graph output that is a plain tensor

and one testdata/node/index.json that tests/conformance/build.rs reads: per case its name,
the operator it tests, the op types (and domains) of the model's nodes, its inputs and
outputs (name, dtype, shape; or `kind` for sequences, optionals, maps) and an `excluded`
reason when the case is out of Kiln's scope (training, strings, sequences, random
generators, Loop/Scan, non-default domains).

Tensors whose element type plain numpy has no dtype for (bfloat16, float8*, float4, int4,
int2, ...) are written as their bits (uint8/uint16) or, for the small integers, as
int8/uint8 values; `onnx_type` in index.json says what they are.

Python makes test data only. Run it with the project's virtual environment:

    .venv/bin/python scripts/make_node_tests.py [--out DIR] [--force]

Idempotent: nothing is written when index.json exists and was written by the same onnx
version and GENERATOR_VERSION. Deterministic: the same wheel writes the same bytes. The
folder is written beside the old one and swapped in whole, so no stale case survives.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

# Bump whenever anything written to testdata/node changes.
# 2: float8 E5M2 arrays written as uint8 bits like the other ml_dtypes types (ml_dtypes
#    gives float8_e5m2 NumPy kind "f", which the old test missed: '<f1' files).
# 4: data-dependent output shapes (NonZero, Unique, Compress, NonMaxSuppression) no
#    longer excluded.
GENERATOR_VERSION = 4

TRAINING_OPS = {"Adagrad", "Adam", "Momentum", "Gradient"}
# BatchNormalization/Dropout cases that ask for training-mode outputs (`training` in the name).
TRAINING_MODE_OPS = {"BatchNormalization", "Dropout"}
STRING_OPS = {
    "StringNormalizer",
    "StringConcat",
    "StringSplit",
    "RegexFullMatch",
    "TfIdfVectorizer",
    "LabelEncoder",
}
RANDOM_OPS = {
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
}
LOOP_OPS = {"Loop", "Scan"}
# Ops whose inputs or outputs are sequences or optionals.
SEQUENCE_OPS = {
    "SequenceConstruct",
    "SequenceAt",
    "SequenceEmpty",
    "SequenceErase",
    "SequenceInsert",
    "SequenceLength",
    "SequenceMap",
    "SplitToSequence",
    "ConcatFromSequence",
    "Optional",
    "OptionalGetElement",
    "OptionalHasElement",
}
DEFAULT_DOMAINS = {"", "ai.onnx"}


def value_kind(t: onnx.TypeProto) -> str:
    return t.WhichOneof("value") or "undefined"


def type_mentions(t: onnx.TypeProto, kinds: set[str]) -> bool:
    """Whether a type is, or contains, one of `kinds` (`sequence_type`, `string`, ...)."""
    k = value_kind(t)
    if k in kinds:
        return True
    if k == "tensor_type":
        return "string" in kinds and t.tensor_type.elem_type == TensorProto.STRING
    if k == "sequence_type":
        return type_mentions(t.sequence_type.elem_type, kinds)
    if k == "optional_type":
        return type_mentions(t.optional_type.elem_type, kinds)
    if k == "map_type":
        return True
    return False


def all_nodes(graph: onnx.GraphProto):
    """Every node, subgraphs (If, Loop, Scan bodies) included."""
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(a.g)
            for g in a.graphs:
                yield from all_nodes(g)


def all_value_types(graph: onnx.GraphProto):
    for v in list(graph.input) + list(graph.output) + list(graph.value_info):
        yield v.type
    for n in graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from all_value_types(a.g)
            for g in a.graphs:
                yield from all_value_types(g)


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def base_name(name: str) -> str:
    """`test_elu_expanded_ver18` -> `test_elu`."""
    return re.sub(r"_expanded(_ver\d+)?$", "", name)


def excluded_reason(case, ops: list[tuple[str, str]]) -> str | None:
    op_types = {op for op, _ in ops}
    domains = sorted({d for _, d in ops if d not in DEFAULT_DOMAINS})
    graph = case.model.graph
    hit = sorted(op_types & TRAINING_OPS)
    if hit:
        return f"training operator ({', '.join(hit)})"
    if op_types & TRAINING_MODE_OPS and "training" in case.name:
        return "training mode (asks for training outputs)"
    if domains:
        return f"non-default domain ({', '.join(domains)})"
    hit = sorted(op_types & RANDOM_OPS)
    if hit:
        return f"random generator ({', '.join(hit)})"
    hit = sorted(op_types & LOOP_OPS)
    if hit:
        return f"loop ({', '.join(hit)})"
    hit = sorted(op_types & STRING_OPS)
    if hit:
        return f"string operator ({', '.join(hit)})"
    if any(type_mentions(t, {"string"}) for t in all_value_types(graph)):
        return "string tensors"
    hit = sorted(op_types & SEQUENCE_OPS)
    if hit or any(
        type_mentions(t, {"sequence_type", "optional_type", "map_type"})
        for t in all_value_types(graph)
    ):
        return "sequence, optional or map values" + (f" ({', '.join(hit)})" if hit else "")
    return None


def as_numpy(value, elem_type: int) -> tuple[np.ndarray, str]:
    """A tensor value as a plain-numpy array and its ONNX element type name."""
    if isinstance(value, TensorProto):
        elem_type = value.data_type
        value = numpy_helper.to_array(value)
    a = np.asarray(value)
    onnx_type = TensorProto.DataType.Name(elem_type) if elem_type else str(a.dtype).upper()
    if a.dtype.kind == "V" or a.dtype.type.__module__.split(".")[0] == "ml_dtypes":
        # ml_dtypes (bfloat16, float8*, float4, int4, int2, ...): no plain numpy dtype
        # (most have kind "V"; float8_e5m2 has kind "f").
        name = a.dtype.name
        if name.startswith("int"):
            a = a.astype(np.int8)
        elif name.startswith("uint"):
            a = a.astype(np.uint8)
        else:
            a = a.view({1: np.uint8, 2: np.uint16}[a.dtype.itemsize])
    # np.require, not np.ascontiguousarray: the latter turns a scalar into shape [1].
    return np.require(a, requirements="C"), onnx_type


def describe(vi: onnx.ValueInfoProto, value):
    """Index entry of one graph input/output, and the array to write (or None)."""
    kind = value_kind(vi.type)
    if kind != "tensor_type" or value is None or isinstance(value, (list, dict)):
        return {"name": vi.name, "kind": kind.removesuffix("_type")}, None
    a, onnx_type = as_numpy(value, vi.type.tensor_type.elem_type)
    entry = {
        "name": vi.name,
        "kind": "tensor",
        "dtype": a.dtype.name,
        "onnx_type": onnx_type,
        "shape": list(a.shape),
    }
    if a.dtype.kind in "OUS":
        return entry, None  # strings: described, never written
    return entry, a


def save_npy(path: Path, a: np.ndarray) -> None:
    with open(path, "wb") as f:
        np.save(f, a, allow_pickle=False)


def write_all(out: Path) -> dict:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' overflow warnings
        cases = collect_testcases(None)
    cases.sort(key=lambda c: c.name)
    single_op = {
        c.name: c.model.graph.node[0].op_type for c in cases if len(c.model.graph.node) == 1
    }
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    entries = []
    for case in cases:
        graph = case.model.graph
        ops = [(n.op_type, n.domain) for n in all_nodes(graph)]
        expanded = base_name(case.name) != case.name
        if expanded:
            operator = single_op.get(base_name(case.name))
        else:
            operator = graph.node[0].op_type if len(graph.node) == 1 else None
        if operator is None:
            # Longest op type of the model whose snake_case name the case name starts with.
            stem = base_name(case.name).removeprefix("test_")
            fits = [op for op, _ in ops if stem.startswith(snake(op))]
            operator = max(fits, key=len) if fits else ops[0][0]
        folder = tmp / case.name
        folder.mkdir()
        (folder / "model.onnx").write_bytes(case.model.SerializeToString())
        inputs, outputs = case.data_sets[0]
        io = {}
        for side, infos, values in (("input", graph.input, inputs), ("output", graph.output, outputs)):
            io[side] = []
            for j, vi in enumerate(infos):
                entry, a = describe(vi, values[j] if j < len(values) else None)
                if a is not None:
                    save_npy(folder / f"{side}_{j}.npy", a)
                io[side].append(entry)
        domains = sorted({d or "ai.onnx" for _, d in ops})
        entries.append(
            {
                "name": case.name,
                "operator": operator,
                "expanded": expanded,
                "op_types": sorted({op for op, _ in ops}),
                "domains": domains,
                "inputs": io["input"],
                "outputs": io["output"],
                "excluded": excluded_reason(case, ops),
            }
        )
    index = {
        "onnx_version": onnx.__version__,
        "generator_version": GENERATOR_VERSION,
        "cases": entries,
    }
    text = json.dumps(index, indent=1, sort_keys=True) + "\n"
    (tmp / "index.json").write_text(text)
    old = out.with_name(out.name + ".old")
    if out.exists():
        if old.exists():
            shutil.rmtree(old)
        os.rename(out, old)
    os.rename(tmp, out)
    if old.exists():
        shutil.rmtree(old)
    return index


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=root / "testdata" / "node", help="default: testdata/node")
    ap.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = ap.parse_args()
    index_path = args.out / "index.json"
    if not args.force and index_path.is_file():
        try:
            old = json.loads(index_path.read_text())
        except ValueError:
            old = {}
        if old.get("onnx_version") == onnx.__version__ and old.get("generator_version") == GENERATOR_VERSION:
            print(f"{args.out}: up to date (onnx {onnx.__version__}, {len(old['cases'])} cases)")
            return 0
    t = time.time()
    index = write_all(args.out)
    cases = index["cases"]
    excluded = sum(1 for c in cases if c["excluded"])
    print(
        f"{args.out}: {len(cases)} node test cases from onnx {onnx.__version__} "
        f"({excluded} excluded) in {time.time() - t:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
