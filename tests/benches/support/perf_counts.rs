//! Cycles and instructions per inference from Linux `perf stat`, for the benches'
//! `KILN_BENCH_COUNTS=1` tables (included by `zoo.rs` and the real-models bench).

use std::process::Command;

/// The `perf stat` events counted, user space only.
const EVENTS: &str = "cycles:u,instructions:u";

/// `[cycles, instructions]` of `cmd` and its children under `perf stat`, or why not.
pub fn perf_stat(cmd: &mut Command) -> Result<[f64; 2], String> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let envs: Vec<_> = cmd
        .get_envs()
        .map(|(k, v)| (k.to_owned(), v.map(|v| v.to_owned())))
        .collect();
    let mut perf = Command::new("perf");
    perf.args(["stat", "-x", ",", "-e", EVENTS, "--"])
        .arg(&program)
        .args(&args);
    for (k, v) in envs {
        match v {
            Some(v) => perf.env(k, v),
            None => perf.env_remove(k),
        };
    }
    let out = perf.output().map_err(|e| format!("perf: {e}"))?;
    let text = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("{program} under perf stat: {}", text.trim()));
    }
    // CSV lines `value,unit,event,...`; `<not supported>` where the CPU has no counter.
    let count = |event: &str| {
        text.lines()
            .find(|l| l.split(',').nth(2).is_some_and(|e| e.starts_with(event)))
            .and_then(|l| l.split(',').next()?.parse::<f64>().ok())
            .ok_or_else(|| format!("no {event} count from perf stat: {}", text.trim()))
    };
    Ok([count("cycles")?, count("instructions")?])
}

/// Cycles and instructions per inference: `run(n)` builds a command that does `n`
/// inferences after its set-up; two lengths, and the difference per inference.
pub fn per_inference(run: impl Fn(usize) -> Command, extra: usize) -> Result<[f64; 2], String> {
    let short = perf_stat(&mut run(2))?;
    let long = perf_stat(&mut run(2 + extra))?;
    Ok([0, 1].map(|i| (long[i] - short[i]) / extra as f64))
}

/// The geometric mean of ratios.
pub fn geometric_mean(v: &[f64]) -> f64 {
    (v.iter().map(|r| r.ln()).sum::<f64>() / v.len() as f64).exp()
}

/// Inferences the longer run adds for a model that takes `ms` a run: about two
/// seconds' worth, so that they outweigh what start-up varies by (importing
/// onnxruntime in Python alone is a few billion instructions).
pub fn extra_runs(ms: f64) -> usize {
    ((2000.0 / ms.max(1e-3)).ceil() as usize).clamp(10, 20_000)
}

/// Prints one row per model of cycles and instructions per inference for Kiln and
/// onnxruntime, `kiln(n)` and `ort(n)` being commands that each do `n` inferences
/// after their set-up, the longer run `extra` more, and the geometric means of the
/// ratios.
pub fn print_counts<K, O>(rows: impl Iterator<Item = (&'static str, usize, K, O)>)
where
    K: Fn(usize) -> Command,
    O: Fn(usize) -> Command,
{
    println!(
        "\n{:<24} {:>11} {:>11} {:>8} {:>11} {:>11} {:>8}",
        "model", "kiln Mcyc", "ort Mcyc", "cyc k/o", "kiln Minst", "ort Minst", "ins k/o"
    );
    let mut ratios = [Vec::new(), Vec::new()];
    for (name, extra, kiln, ort) in rows {
        match (per_inference(kiln, extra), per_inference(ort, extra)) {
            (Ok(k), Ok(o)) => {
                for i in 0..2 {
                    ratios[i].push(k[i] / o[i]);
                }
                println!(
                    "{name:<24} {:>11.1} {:>11.1} {:>8.2} {:>11.1} {:>11.1} {:>8.2}",
                    k[0] * 1e-6,
                    o[0] * 1e-6,
                    k[0] / o[0],
                    k[1] * 1e-6,
                    o[1] * 1e-6,
                    k[1] / o[1]
                );
            }
            (k, o) => {
                let why = k.err().or(o.err()).unwrap_or_default();
                println!("{name:<24} no counts: {why}");
            }
        }
    }
    if !ratios[0].is_empty() {
        println!(
            "geometric mean kiln/ort: cycles {:.2}, instructions {:.2} over {} models",
            geometric_mean(&ratios[0]),
            geometric_mean(&ratios[1]),
            ratios[0].len()
        );
    }
}
