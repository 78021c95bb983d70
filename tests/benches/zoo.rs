//! Memory and latency of every zoo model, next to onnxruntime on the same input in the
//! same run, both single-threaded, or both with `KILN_BENCH_THREADS` threads (Kiln's
//! `Context::set_threads`, onnxruntime's `intra_op_num_threads`). Prints a table;
//! asserts nothing.
//!
//! `cargo bench -p kiln-tests --bench zoo` (needs testdata/ and .venv from .ci/run).
//! Set `KILN_BENCH_MODELS=resnet50,vgg19` to pick models, `KILN_BENCH_RUNS` for runs
//! per round, `KILN_BENCH_ROUNDS` for rounds (3): each round times Kiln, then
//! onnxruntime, and the table gives the medians over rounds (`support/rounds.rs`).
//!
//! `KILN_BENCH_COUNTS=1` adds a table of CPU cycles and instructions per inference
//! (user space, from Linux `perf stat`), for Kiln and onnxruntime: a ratio that holds
//! on a shared machine whose clock and neighbours make times wander by tens of
//! percent. `KILN_BENCH_COUNTS=callgrind` counts instructions under valgrind's
//! callgrind instead, where the machine has no hardware counters (both sides then run
//! their AVX2 code, and slowly: see `support/counts.rs`; pick small models). Each
//! side runs twice in a process of its own under the counter, with 2 and `2 + extra`
//! inferences; the difference leaves out start-up, weight loading and onnxruntime's
//! session set-up. Kiln's process is this bench binary,
//! re-run with `KILN_BENCH_CHILD=MODEL:RUNS`.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use kiln_tests::{bytes, load_npy, zoo};

#[path = "support/counts.rs"]
mod counts;
use counts::{Counter, geometric_mean};

#[path = "support/rounds.rs"]
mod rounds;
use rounds::{median, paired};

fn ort_median_ms(model: &Path, input: &Path, runs: usize) -> Option<f64> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join(".venv/bin/python");
    let out = Command::new(&python)
        .arg(root.join("scripts/ort_bench.py"))
        .arg(model)
        .arg(input)
        .arg(runs.to_string())
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "ort_bench.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let at = text.find("\"median_ms\":")? + 12;
    text[at..]
        .trim_start()
        .split([',', '}'])
        .next()?
        .trim()
        .parse()
        .ok()
}

fn mib(b: usize) -> String {
    format!("{:.2}", b as f64 / (1024.0 * 1024.0))
}

/// `KILN_BENCH_CHILD=MODEL:RUNS`: run one model `RUNS` times (after one warm-up) and
/// exit, for `perf stat` to count.
fn child(spec: &str) {
    let (name, runs) = spec.split_once(':').expect("KILN_BENCH_CHILD=MODEL:RUNS");
    let m = kiln_tests::find(name);
    let x = load_npy(&Path::new(m.dir).join("random_input_0.npy"));
    time_model(name, &x.data, runs.parse().expect("runs"));
}

fn main() {
    if let Ok(spec) = std::env::var("KILN_BENCH_CHILD") {
        return child(&spec);
    }
    kiln_tests::require_testdata();
    let pick = std::env::var("KILN_BENCH_MODELS").ok();
    let runs: usize = std::env::var("KILN_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    println!(
        "{:<14} {:>9} {:>9} {:>9} {:>7} {:>10} {:>10} {:>7}",
        "model", "naive MiB", "bound MiB", "arena MiB", "a/bound", "kiln ms", "ort ms", "kiln/ort"
    );
    let mut ratios = Vec::new();
    let picked = || {
        zoo::MODELS.iter().filter(|m| m.random).filter(|m| {
            let short = m.name.trim_end_matches("_random");
            pick.as_ref()
                .is_none_or(|p| p.split(',').any(|x| x == short))
        })
    };
    let mut measured = Vec::new();
    for m in picked() {
        let short = m.name.trim_end_matches("_random");
        let dir = Path::new(m.dir);
        let input = dir.join("random_input_0.npy");
        let x = load_npy(&input);
        let n = if m.naive_bytes > 200 << 20 {
            runs.min(5)
        } else {
            runs
        };
        // Rounds of: a warm-up and timed runs of the whole `run` (weights loading
        // excluded), then onnxruntime's.
        let timed = paired(
            rounds::rounds(),
            || Ok(median(time_model(m.name, &x.data, n))),
            || ort_median_ms(&dir.join("random.onnx"), &input, n),
        )
        .expect("kiln runs");
        let (kiln, ort, ratio) = (timed.kiln_ms, timed.ort_ms, timed.ratio);
        measured.push((m, kiln));
        if let Some(r) = ratio {
            ratios.push(r);
        }
        println!(
            "{:<14} {:>9} {:>9} {:>9} {:>7.3} {:>10.2} {:>10} {:>7}",
            short,
            mib(m.naive_bytes),
            mib(m.lower_bound_bytes),
            mib(m.arena_bytes),
            m.arena_bytes as f64 / m.lower_bound_bytes as f64,
            kiln,
            ort.map_or("-".into(), |o| format!("{o:.2}")),
            ratio.map_or("-".into(), |r| format!("{r:.2}")),
        );
    }
    if !ratios.is_empty() {
        println!(
            "geometric mean kiln/ort: {:.2} over {} models",
            geometric_mean(&ratios),
            ratios.len()
        );
    }
    if let Some(counter) = Counter::from_env() {
        counts_table(counter, measured);
    }
}

/// The counts table (see the module documentation).
fn counts_table(counter: Counter, measured: Vec<(&'static kiln_tests::ZooModel, f64)>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let exe = std::env::current_exe().expect("this bench's path");
    let rows = measured.into_iter().map(|(m, ms)| {
        let dir = Path::new(m.dir);
        let (exe, root) = (exe.clone(), root.clone());
        let kiln = move |n: usize| {
            let mut c = Command::new(&exe);
            c.env("KILN_BENCH_CHILD", format!("{}:{n}", m.name));
            c
        };
        let ort = move |n: usize| {
            let mut c = Command::new(root.join(".venv/bin/python"));
            c.arg(root.join("scripts/ort_bench.py"))
                .arg(dir.join("random.onnx"))
                .arg(dir.join("random_input_0.npy"))
                .arg(n.to_string());
            c
        };
        (
            m.name.trim_end_matches("_random"),
            counter.extra_runs(ms),
            kiln,
            ort,
        )
    });
    counter.print_table(rows);
}

macro_rules! timers {
    ($($module:ident),*) => {
        fn time_model(name: &str, x: &[f32], runs: usize) -> Vec<f64> {
            match name {
                $(stringify!($module) => {
                    let m = kiln_tests::find(name);
                    let model = zoo::$module::Model::load(m.weights).expect("weights");
                    let threads = std::env::var("KILN_BENCH_THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(1);
                    let mut ctx = zoo::$module::Context::with_threads(threads).expect("threads");
                    let input = [bytes(x)];
                    model.run_bytes(&mut ctx, &input).expect("run");
                    (0..runs)
                        .map(|_| {
                            let t = Instant::now();
                            std::hint::black_box(model.run_bytes(&mut ctx, &input).expect("run"));
                            t.elapsed().as_secs_f64() * 1e3
                        })
                        .collect()
                })*
                _ => panic!("no timer for {name}"),
            }
        }
    };
}

timers!(
    alexnet_random,
    densenet121_random,
    inception_v1_random,
    inception_v2_random,
    resnet50_random,
    shufflenet_random,
    squeezenet_random,
    vgg19_random,
    zfnet512_random
);
