//! Planning time and arena quality of the memory planner. Prints tables; asserts nothing.
//!
//! `cargo bench -p kiln-compiler --bench plan` (release). First synthetic network-like
//! inputs of 1k, 10k and 100k buffers: the median time of each strategy alone (liveness
//! and validation included, as `plan_with` runs them) and of `plan` with all of them;
//! the goal is 10k buffers under 50 ms and 100k under 1 s, total. Then, when
//! `testdata/` exists, each zoo model's naive size, every strategy's arena, the best
//! and the liveness lower bound. `KILN_PLAN_BENCH_RUNS` sets the runs per median (5).

use std::path::Path;
use std::time::Instant;

use kiln_compiler::plan::{BufferRequest, PlanInput, Strategy, plan, plan_with};
use kiln_compiler::{Options, compile};

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const SEED: u64 = 42;

fn main() {
    let runs: usize = std::env::var("KILN_PLAN_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(5);
    synthetic(runs);
    zoo();
}

fn synthetic(runs: usize) {
    println!(
        "Planning time, synthetic network-like inputs (seed {SEED}), median of {runs} runs, ms"
    );
    let mut header = format!("{:>8}", "buffers");
    for s in Strategy::ALL {
        header += &format!(" {:>18}", s.name());
    }
    header += &format!(" {:>9} {:>9} {:>8}", "total", "arena/LB", "chosen");
    println!("{header}");
    for n in SIZES {
        let input = network_like(n, SEED);
        let mut line = format!("{n:>8}");
        for &s in Strategy::ALL {
            let ms = median_ms(runs, || plan_with(&input, &[s]).map(|p| p.arena_bytes));
            line += &format!(" {ms:>18.1}");
        }
        let total = median_ms(runs, || plan(&input).map(|p| p.arena_bytes));
        match plan(&input) {
            Ok(p) => {
                let ratio = p.arena_bytes as f64 / p.lower_bound_bytes.max(1) as f64;
                line += &format!(" {total:>9.1} {ratio:>9.4} {}", p.strategy);
            }
            Err(e) => line += &format!(" error: {e}"),
        }
        println!("{line}");
    }
    println!();
}

/// Median wall time of `f` over `runs` calls, in milliseconds.
fn median_ms<T, E>(runs: usize, mut f: impl FnMut() -> Result<T, E>) -> f64 {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let _ = std::hint::black_box(f());
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn zoo() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
    let Ok(dir) = std::fs::read_dir(&root) else {
        println!("(no testdata/: zoo table skipped)");
        return;
    };
    let mut models: Vec<_> = dir
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("random.onnx").is_file())
        .collect();
    models.sort();
    let mib = |b: usize| format!("{:.3}", b as f64 / (1024.0 * 1024.0));
    println!("Zoo models, arena MiB per strategy (random.onnx, default options)");
    let mut header = format!("{:<14} {:>9}", "model", "naive");
    for s in Strategy::ALL {
        header += &format!(" {:>17}", s.name());
    }
    header += &format!(" {:>9} {:>9} {:>8}", "best", "bound", "best/LB");
    println!("{header}");
    let mut log_sum = 0.0;
    let mut count = 0;
    for model in models {
        let name = model
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let compiled = match compile(&model.join("random.onnx"), &Options::default()) {
            Ok(c) => c,
            Err(e) => {
                println!("{name:<14} error: {e}");
                continue;
            }
        };
        let p = &compiled.plan;
        let mut line = format!("{name:<14} {:>9}", mib(p.naive_bytes));
        for s in Strategy::ALL {
            let arena = p.strategies.iter().find(|(n, _)| *n == s.name());
            line += &format!(" {:>17}", arena.map_or("-".into(), |&(_, a)| mib(a)));
        }
        let ratio = p.arena_bytes as f64 / p.lower_bound_bytes.max(1) as f64;
        log_sum += ratio.ln();
        count += 1;
        line += &format!(
            " {:>9} {:>9} {ratio:>8.3}",
            mib(p.arena_bytes),
            mib(p.lower_bound_bytes)
        );
        println!("{line}");
    }
    if count > 0 {
        println!(
            "geometric mean of best / lower bound over {count} models: {:.3}",
            (log_sum / count as f64).exp()
        );
    }
}

/// A network-like input: one tensor per step, most read within 6 steps, 5 % skip
/// connections up to 200 steps, 10 % kernel scratch, some outputs near the end; sizes
/// log-uniform from 256 B to 8 MiB. Deterministic in `seed` (splitmix64); the same
/// family as the planner's own timing test.
fn network_like(n: usize, seed: u64) -> PlanInput {
    let mut state = seed;
    let mut below = |m: u64| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % m.max(1)
    };
    let steps = n.max(1);
    let mut input = PlanInput::new(steps);
    for i in 0..n {
        let size = 1usize << (8 + below(15));
        let size = size + below(size as u64) as usize;
        let kind = below(100);
        let buffer = if kind < 10 {
            BufferRequest::scratch(format!("s{i}"), size, i)
        } else if i + 10 >= n && kind < 50 {
            BufferRequest::output(format!("o{i}"), size, i)
        } else {
            let len = if kind < 15 {
                1 + below(200)
            } else {
                1 + below(6)
            } as usize;
            BufferRequest::new(format!("t{i}"), size, i, vec![(i + len).min(steps - 1)])
        };
        input.push(buffer);
    }
    input
}
