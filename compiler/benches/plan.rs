//! Planning time and arena quality of the memory planner. Prints tables; asserts nothing.
//!
//! `cargo bench -p kiln-compiler --bench plan` (release). First two families of
//! synthetic inputs of 1k, 10k and 100k buffers: network-like ones, where greedy
//! placement already reaches the lower bound (so the local search stops at once), and
//! random intervals, where it does not (so the local search spends its whole budget).
//! Each row gives the median time of every strategy alone (liveness, conflict index
//! and validation included, as `plan_with` runs them) and of `plan` with all of them;
//! the goal is 10k buffers under 50 ms and 100k under 1 s, total. Then, when
//! `testdata/` exists, each zoo model's naive size, every strategy's arena without
//! in-place aliasing, the best of those, the best with in-place aliases (the plan
//! Kiln compiles), the liveness lower bound (without aliasing: the reference), the
//! bound with the aliases, best / bound, the planning time, and the arenas in file
//! order and in the memory-aware order (`-` where it is file order) with the one kept
//! marked `*`; then the geometric mean of best / bound. `KILN_PLAN_BENCH_RUNS` sets the runs per median (default 5).

use std::path::Path;
use std::time::Instant;

use kiln_compiler::plan::{BufferRequest, PlanInput, Strategy, plan, plan_with};
use kiln_compiler::schedule::Schedule;
use kiln_compiler::{Options, compile};

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const SEED: u64 = 42;

type Family = fn(usize, u64) -> PlanInput;

fn main() {
    let runs: usize = std::env::var("KILN_PLAN_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(5);
    let families: [(&str, Family); 2] = [
        ("network-like", network_like),
        ("random intervals", random_intervals),
    ];
    for (family, make) in families {
        println!("Planning time in ms, median of {runs} runs: {family} inputs (seed {SEED})");
        synthetic(runs, make);
        println!();
    }
    zoo(runs);
}

fn synthetic(runs: usize, make: Family) {
    let mut header = format!("{:>8}", "buffers");
    for s in Strategy::ALL {
        header += &format!(" {:>17}", s.name());
    }
    header += &format!(
        " {:>8} {:>9} {:>8}  chosen",
        "total", "greedy/LB", "best/LB"
    );
    println!("{header}");
    for n in SIZES {
        let input = make(n, SEED);
        let mut line = format!("{n:>8}");
        for &s in Strategy::ALL {
            let ms = median_ms(runs, || plan_with(&input, &[s]).map(|p| p.arena_bytes));
            line += &format!(" {ms:>17.1}");
        }
        let total = median_ms(runs, || plan(&input).map(|p| p.arena_bytes));
        match plan(&input) {
            Ok(p) => {
                let bound = p.lower_bound_bytes.max(1) as f64;
                let greedy = p
                    .strategies
                    .iter()
                    .filter(|t| t.strategy.starts_with("greedy"))
                    .map(|t| t.arena_bytes)
                    .min()
                    .unwrap_or(0);
                line += &format!(
                    " {total:>8.1} {:>9.4} {:>8.4}  {}",
                    greedy as f64 / bound,
                    p.arena_bytes as f64 / bound,
                    p.strategy
                );
            }
            Err(e) => line += &format!(" error: {e}"),
        }
        println!("{line}");
    }
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
    times.get(times.len() / 2).copied().unwrap_or(0.0)
}

fn zoo(runs: usize) {
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
    println!(
        "Zoo models: arena MiB per strategy without aliasing, the best of them, the best with \
         in-place aliases, the bounds without and with them (random.onnx, default options), plan() ms, \
         arena in file order and in the memory-aware order (* kept)"
    );
    let mut header = format!("{:<13} {:>8} {:>8}", "model", "buffers", "naive");
    for s in Strategy::ALL {
        header += &format!(" {:>17}", s.name());
    }
    header += &format!(
        " {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "no alias", "in place", "bound", "IP bound", "best/LB", "ms"
    );
    header += &format!(" {:>9} {:>9}", "file", "mem-aware");
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
                println!("{name:<13} error: {e}");
                continue;
            }
        };
        let p = &compiled.plan;
        let buffers = compiled.plan_input.buffers.len();
        let mut line = format!("{name:<13} {buffers:>8} {:>8}", mib(p.naive_bytes));
        let unaliased = |s: &str| {
            p.strategies
                .iter()
                .find(|t| t.strategy == s && !t.in_place)
                .map(|t| t.arena_bytes)
        };
        for s in Strategy::ALL {
            line += &format!(" {:>17}", unaliased(s.name()).map_or("-".into(), mib));
        }
        let no_alias = Strategy::ALL
            .iter()
            .filter_map(|s| unaliased(s.name()))
            .min();
        let ratio = p.arena_bytes as f64 / p.lower_bound_bytes.max(1) as f64;
        log_sum += ratio.ln();
        count += 1;
        let ms = median_ms(runs, || plan(&compiled.plan_input).map(|p| p.arena_bytes));
        line += &format!(
            " {:>8} {:>8} {:>8} {:>8} {ratio:>8.3} {ms:>8.2}",
            no_alias.map_or("-".into(), mib),
            mib(p.arena_bytes),
            mib(p.lower_bound_bytes),
            mib(p.in_place_lower_bound_bytes),
        );
        let s = &compiled.schedule;
        let kept = |k: Schedule| if s.kept == k { "*" } else { " " };
        line += &format!(
            " {:>8}{} {:>8}{}",
            mib(s.file_order_arena),
            kept(Schedule::FileOrder),
            s.memory_aware_arena.map_or("-".into(), mib),
            kept(Schedule::MemoryAware),
        );
        println!("{line}");
    }
    if count > 0 {
        println!(
            "geometric mean of best (in place) / lower bound (without aliasing) over {count} models: {:.3}",
            (log_sum / count as f64).exp()
        );
    }
}

/// A generator of numbers below its argument (splitmix64), deterministic in `seed`.
fn splitmix(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |m: u64| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % m.max(1)
    }
}

/// One tensor per step, most read within 6 steps, 5 % skip connections up to 200
/// steps, 10 % kernel scratch, some outputs near the end; sizes log-uniform from
/// 256 B to 8 MiB. The same family as the planner's own timing test.
fn network_like(n: usize, seed: u64) -> PlanInput {
    let mut below = splitmix(seed);
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

/// Random lifetimes over n / 2 steps, a quarter of them long (up to 100 steps);
/// sizes half powers of two, half arbitrary. Greedy placement ends a few percent
/// above the bound here, so the local search runs its whole budget.
fn random_intervals(n: usize, seed: u64) -> PlanInput {
    let mut below = splitmix(seed);
    let steps = (n / 2).max(1);
    let mut input = PlanInput::new(steps);
    for i in 0..n {
        let def = below(steps as u64) as usize;
        let len = if below(4) == 0 { below(100) } else { below(4) } as usize;
        let size = if below(2) == 0 {
            256 << below(6)
        } else {
            1 + below(20_000) as usize
        };
        let last = (def + len).min(steps - 1);
        input.push(BufferRequest::new(format!("b{i}"), size, def, vec![last]));
    }
    input
}
