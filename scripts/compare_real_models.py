#!/usr/bin/env python3
"""Compile the real models of scripts/fetch_real_models.py with Kiln, run them and compare
with onnxruntime.

    cargo build --release -p kiln-compiler
    .venv/bin/python scripts/fetch_real_models.py
    .venv/bin/python scripts/compare_real_models.py [NAME ...] [--kiln target/release/kiln]

For each model in testdata/real_models/models.json: `kiln compile` (does it load, which
operators are unsupported, other errors verbatim), `kiln plan --json` (arena bytes),
`kiln run --data NAME=input_j.npy --out DIR --runs 20` (latency, single thread; inputs
listed in `kiln_constants` are bound with `--constant` instead), then the
max abs and max relative error of every output against onnxruntime's output_<j>.npy, and
onnxruntime's own single-threaded latency on the same inputs (median of 20 runs after one
warm-up). Results go to testdata/real_models/results.json and a markdown table on stdout.
Work files go to $KILN_RM_WORK (default /tmp/rm/<name>).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "testdata" / "real_models"


def sh(cmd: list[str], timeout: int = 3600) -> tuple[int, str]:
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return p.returncode, (p.stdout + p.stderr).strip()


def file_name(output_name: str) -> str:
    """The file name `kiln run --out` gives an output (runner.rs)."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", output_name) + ".npy"


def errors(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    if got.shape != want.shape:
        raise ValueError(f"shape {list(got.shape)} vs onnxruntime {list(want.shape)}")
    g, w = got.astype(np.float64), want.astype(np.float64)
    diff = np.abs(g - w)
    abs_err = float(diff.max()) if diff.size else 0.0
    # relative to the output's scale, so that near-zero elements do not dominate
    scale = float(np.abs(w).max()) if w.size else 0.0
    return abs_err, abs_err / scale if scale > 0 else abs_err


def ort_ms(path: Path, feeds: dict, runs: int = 20) -> float:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def one(m: dict, kiln: str, runs: int) -> dict:
    name = m["name"]
    work = Path(os.environ.get("KILN_RM_WORK", "/tmp/rm")) / name
    work.mkdir(parents=True, exist_ok=True)
    model = str(DATA / m["file"])
    shapes = [a for s in m["kiln_inputs"] for a in ("--input", s)]
    # inputs bound at compile time (silero's sample rate): NAME=FILE relative to DATA
    bound = [c.split("=", 1) for c in m.get("kiln_constants", [])]
    shapes += [a for n, f in bound for a in ("--constant", f"{n}={DATA / f}")]
    r = {"name": name, "package": f"{m['package']}=={m['version']}", "kind": m["kind"],
         "nodes": m["nodes"]}
    feeds = {i["name"]: np.load(DATA / i["file"]) for i in m["inputs"]}
    r["ort_ms"] = ort_ms(DATA / m["file"], feeds)

    rc, out = sh([kiln, "compile", model, "--out-dir", str(work / "gen"), *shapes])
    r["compiles"] = rc == 0
    if rc != 0:
        r["error"] = out
        return r
    rc, out = sh([kiln, "plan", model, "--json", *shapes])
    if rc == 0:
        try:
            r["arena_bytes"] = json.loads(out)["arena_bytes"]
        except (ValueError, KeyError):
            r["plan"] = out[:500]
    data = [a for i in m["inputs"] if not i.get("constant")
            for a in ("--data", f"{i['name']}={DATA / i['file']}")]
    t = time.time()
    rc, out = sh([kiln, "run", model, *shapes, *data, "--out", str(work / "out"),
                  "--runs", str(runs)])
    r["run_wall_s"] = round(time.time() - t, 1)
    if rc != 0:
        r["error"] = out[-4000:]
        return r
    lat = re.search(r"latency: median ([0-9.]+) ms", out)
    r["kiln_ms"] = float(lat.group(1)) if lat else None
    r["outputs"] = []
    for o in m["outputs"]:
        want = np.load(DATA / o["file"])
        got = np.load(work / "out" / file_name(o["name"]))
        try:
            a, rel = errors(got, want)
            r["outputs"].append({"name": o["name"], "max_abs": a, "max_rel": rel})
        except ValueError as e:
            r["outputs"].append({"name": o["name"], "error": str(e)})
    return r


def table(results: list[dict]) -> str:
    rows = ["| model | package | nodes | compiles | error | max abs / rel | kiln ms | ort ms | arena bytes |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        err = " ".join(line.strip() for line in r.get("error", "").splitlines())[:200]
        cmp = "; ".join(
            f"{o['name']}: {o['max_abs']:.2e} / {o['max_rel']:.2e}" if "max_abs" in o
            else f"{o['name']}: {o['error']}" for o in r.get("outputs", []))
        kms = r.get("kiln_ms")
        rows.append(f"| {r['name']} | {r['package']} | {r['nodes']} | {'yes' if r['compiles'] else 'no'} "
                    f"| {err} | {cmp} | {'' if kms is None else f'{kms:.3f}'} | {r['ort_ms']:.3f} "
                    f"| {r.get('arena_bytes', '')} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--kiln", default=str(ROOT / "target" / "release" / "kiln"))
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    models = json.loads((DATA / "models.json").read_text())
    if args.names:
        models = [m for m in models if m["name"] in args.names]
    path = DATA / "results.json"
    old = {r["name"]: r for r in json.loads(path.read_text())} if path.exists() else {}
    for m in models:
        print(f"== {m['name']}", flush=True)
        r = one(m, args.kiln, args.runs)
        old[m["name"]] = r
        print(json.dumps(r, indent=1), flush=True)
    path.write_text(json.dumps(list(old.values()), indent=1) + "\n")
    print(table([old[m["name"]] for m in json.loads((DATA / "models.json").read_text())
                 if m["name"] in old]))


if __name__ == "__main__":
    main()
