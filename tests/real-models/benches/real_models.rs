//! Latency and memory of every real model, next to onnxruntime on the same inputs in the
//! same run, both single-threaded, or both with `KILN_BENCH_THREADS` threads (Kiln's
//! `Context::set_threads`, onnxruntime's `intra_op_num_threads`). Prints a markdown
//! table; asserts nothing.
//!
//! `cargo bench -p kiln-real-models` (needs testdata/real_models from
//! `scripts/fetch_real_models.py` and .venv from `scripts/setup-python.sh`).
//! `KILN_BENCH_MODELS=minilm_l6_int8,silero_vad` picks models, `KILN_BENCH_RUNS` sets the
//! timed runs a round (default 20, after one warm-up run; onnxruntime gets the same
//! count after its own 3 warm-up runs, in `scripts/ort_bench.py`), `KILN_BENCH_ROUNDS`
//! the rounds (3): each round times Kiln, then onnxruntime, and the table gives the
//! medians over rounds (`tests/benches/support/rounds.rs`).
//!
//! kiln ms: median wall time of `Model::run_bytes` (weights loaded once, outside the
//! timing). ort ms: onnxruntime's median `session.run` with every graph input fed,
//! including the ones Kiln binds at compile time. Arena: `ARENA_BYTES`, all of `run`'s
//! working memory; bound: the liveness lower bound without in-place aliasing.
//!
//! `KILN_BENCH_COUNTS=1` adds a table of CPU cycles and instructions per inference
//! for Kiln and onnxruntime from `perf stat`, `KILN_BENCH_COUNTS=callgrind` one of
//! instructions from callgrind, as the zoo bench does (see `tests/benches/zoo.rs`),
//! single-threaded; Kiln's process is this bench re-run with
//! `KILN_BENCH_CHILD=MODEL:RUNS`.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use kiln_real_models::{
    Compiled, RealModel, data_path, module_inputs, ort_median_ms, real_models, require_data,
};

#[path = "../../benches/support/counts.rs"]
mod counts;
use counts::{Counter, geometric_mean};

#[path = "../../benches/support/rounds.rs"]
mod rounds;
use rounds::{median, paired};

/// One warm-up run, then `runs` timed ones, in milliseconds.
fn time_model(
    m: &RealModel,
    c: &Compiled,
    threads: usize,
    runs: usize,
) -> Result<Vec<f64>, String> {
    let inputs = module_inputs(m, c)?;
    let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data.bytes()).collect();
    let mut s = (c.load)(c.weights).map_err(|e| e.to_string())?;
    s.set_threads(threads).map_err(|e| e.to_string())?;
    s.run_only(&bytes).map_err(|e| e.to_string())?;
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            s.run_only(&bytes).map_err(|e| e.to_string())?;
            Ok(t.elapsed().as_secs_f64() * 1e3)
        })
        .collect()
}

/// `KILN_BENCH_CHILD=MODEL:RUNS`: run one model `RUNS` times (after one warm-up) and
/// exit, for `perf stat` to count.
fn child(spec: &str) {
    let (name, runs) = spec.split_once(':').expect("KILN_BENCH_CHILD=MODEL:RUNS");
    let m = real_models::MODELS
        .iter()
        .find(|m| m.name == name)
        .expect("model");
    let c = m.compiled.as_ref().expect("compiled");
    time_model(m, c, 1, runs.parse().expect("runs")).expect("run");
}

fn mib(b: usize) -> String {
    format!("{:.2}", b as f64 / (1024.0 * 1024.0))
}

fn main() {
    if let Ok(spec) = std::env::var("KILN_BENCH_CHILD") {
        return child(&spec);
    }
    require_data();
    let pick = std::env::var("KILN_BENCH_MODELS").ok();
    let runs: usize = std::env::var("KILN_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(20);
    let threads: usize = std::env::var("KILN_BENCH_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    println!(
        "| model | kiln ms | ort ms | kiln/ort | arena MiB | bound MiB | arena/bound | in-place bound MiB | naive MiB | schedule |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut measured = Vec::new();
    let mut ratios = Vec::new();
    let mut failed = Vec::new();
    for m in real_models::MODELS {
        if pick
            .as_ref()
            .is_some_and(|p| !p.split(',').any(|x| x == m.name))
        {
            continue;
        }
        let c = match &m.compiled {
            Ok(c) => c,
            Err(e) => {
                failed.push(format!("{}: does not compile: {e}", m.name));
                continue;
            }
        };
        let inputs: Vec<(&str, &str)> = m.inputs.iter().map(|io| (io.name, io.file)).collect();
        let timed = paired(
            rounds::rounds(),
            || time_model(m, c, threads, runs).map(median),
            || {
                ort_median_ms(m.onnx, &inputs, runs)
                    .map_err(|e| failed.push(format!("{}: onnxruntime: {e}", m.name)))
                    .ok()
            },
        );
        let (kiln, ort, ratio) = match timed {
            Ok(t) => (t.kiln_ms, t.ort_ms, t.ratio),
            Err(e) => {
                failed.push(format!("{}: {e}", m.name));
                continue;
            }
        };
        measured.push((m, kiln));
        ratios.extend(ratio);
        println!(
            "| {} | {kiln:.3} | {} | {} | {} | {} | {:.3} | {} | {} | {} |",
            m.name,
            ort.map_or("-".into(), |o| format!("{o:.3}")),
            ratio.map_or("-".into(), |r| format!("{r:.2}")),
            mib(c.arena_bytes),
            mib(c.lower_bound_bytes),
            c.arena_bytes as f64 / c.lower_bound_bytes as f64,
            mib(c.in_place_lower_bound_bytes),
            mib(c.naive_bytes),
            c.schedule,
        );
    }
    if !ratios.is_empty() {
        println!(
            "\ngeometric mean kiln/ort: {:.2} over {} models ({} rounds of {runs} runs each, {threads} thread(s))",
            geometric_mean(&ratios),
            ratios.len(),
            rounds::rounds()
        );
    }
    for f in failed {
        println!("not measured: {f}");
    }
    if let Some(counter) = Counter::from_env() {
        counts_table(counter, measured);
    }
}

/// The counts table, single-threaded (see the module documentation), for the models
/// measured above with their median times.
fn counts_table(counter: Counter, measured: Vec<(&'static RealModel, f64)>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let exe = std::env::current_exe().expect("this bench's path");
    let rows = measured.into_iter().map(|(m, ms)| {
        let (exe, root) = (exe.clone(), root.clone());
        let kiln = move |n: usize| {
            let mut c = Command::new(&exe);
            c.env("KILN_BENCH_CHILD", format!("{}:{n}", m.name))
                .env_remove("KILN_BENCH_THREADS");
            c
        };
        let ort = move |n: usize| {
            let mut c = Command::new(root.join(".venv/bin/python"));
            c.arg(root.join("scripts/ort_bench.py")).arg(m.onnx);
            for io in m.inputs {
                c.arg(format!("{}={}", io.name, data_path(io.file).display()));
            }
            c.arg(n.to_string()).env_remove("KILN_BENCH_THREADS");
            c
        };
        (m.name, counter.extra_runs(ms), kiln, ort)
    });
    counter.print_table(rows);
}
