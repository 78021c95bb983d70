//! Counts per inference for the benches' `KILN_BENCH_COUNTS` tables (included by
//! `zoo.rs` and the real-models bench): CPU cycles and instructions from Linux
//! `perf stat` (`KILN_BENCH_COUNTS=1`), or instructions from valgrind's callgrind
//! (`KILN_BENCH_COUNTS=callgrind`).
//!
//! Both are ratios that hold on a shared machine whose clock and neighbours make times
//! wander by tens of percent. `perf stat` needs hardware counters, which a virtual
//! machine may not pass through. Callgrind needs none and counts the same on every
//! run, but it simulates the CPU: valgrind has no AVX-512, so under it Kiln and
//! onnxruntime both take their AVX2 paths, and it runs code about 2,000 to 3,000
//! times slower than the CPU (SqueezeNet's inference took 12 s, onnxruntime's
//! import about 60 s): a table of the small models takes tens of minutes.

use std::process::Command;

/// Which counter a `KILN_BENCH_COUNTS` table reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// `perf stat`: user-space cycles and instructions.
    Perf,
    /// callgrind: instructions executed (its `Collected` total).
    Callgrind,
}

impl Counter {
    /// The counter `KILN_BENCH_COUNTS` asks for (`1` or `perf`, `callgrind`), if any.
    pub fn from_env() -> Option<Self> {
        match std::env::var("KILN_BENCH_COUNTS").ok()?.as_str() {
            "1" | "perf" => Some(Counter::Perf),
            "callgrind" => Some(Counter::Callgrind),
            other => {
                eprintln!("KILN_BENCH_COUNTS={other}: expected 1, perf or callgrind");
                None
            }
        }
    }

    /// What each count is, in the order [`Self::count`] gives them.
    fn events(self) -> &'static [&'static str] {
        match self {
            Counter::Perf => &["cycles", "instructions"],
            Counter::Callgrind => &["instructions"],
        }
    }

    /// The counts of `cmd` (and, under `perf stat`, its children), or why not.
    fn count(self, cmd: &Command) -> Result<Vec<f64>, String> {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut wrapped = match self {
            Counter::Perf => {
                let mut c = Command::new("perf");
                // User space only.
                c.args(["stat", "-x", ",", "-e", "cycles:u,instructions:u", "--"]);
                c
            }
            Counter::Callgrind => {
                let mut c = Command::new("valgrind");
                c.args(["--tool=callgrind", "--callgrind-out-file=/dev/null"]);
                c
            }
        };
        wrapped.arg(&program).args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => wrapped.env(k, v),
                None => wrapped.env_remove(k),
            };
        }
        // Python's string hashing is seeded per process, and so is part of what its
        // import executes: fixed, both runs of onnxruntime's side count the same set-up.
        wrapped.env("PYTHONHASHSEED", "0");
        let tool = wrapped.get_program().to_string_lossy().into_owned();
        let out = wrapped.output().map_err(|e| format!("{tool}: {e}"))?;
        let text = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("{program} under {tool}: {}", tail(&text)));
        }
        match self {
            // CSV lines `value,unit,event,...`; `<not supported>` where the CPU has no
            // counter.
            Counter::Perf => self
                .events()
                .iter()
                .map(|event| {
                    text.lines()
                        .find(|l| l.split(',').nth(2).is_some_and(|e| e.starts_with(event)))
                        .and_then(|l| l.split(',').next()?.parse::<f64>().ok())
                        .ok_or_else(|| format!("no {event} count from perf stat: {}", tail(&text)))
                })
                .collect(),
            // `==PID== Collected : N`.
            Counter::Callgrind => text
                .lines()
                .find_map(|l| l.split_once("Collected :")?.1.trim().parse::<f64>().ok())
                .map(|n| vec![n])
                .ok_or_else(|| format!("no total from callgrind: {}", tail(&text))),
        }
    }

    /// Counts per inference: `run(n)` builds a command that does `n` inferences after
    /// its set-up; two lengths, and the difference per inference (start-up, weight
    /// loading and onnxruntime's import and session set-up left out).
    fn per_inference(
        self,
        run: impl Fn(usize) -> Command,
        extra: usize,
    ) -> Result<Vec<f64>, String> {
        let short = self.count(&run(2))?;
        let long = self.count(&run(2 + extra))?;
        Ok(short
            .iter()
            .zip(&long)
            .map(|(s, l)| (l - s) / extra as f64)
            .collect())
    }

    /// Inferences the longer run adds for a model that takes `ms` a run, so that they
    /// outweigh what start-up varies by. Under `perf stat`, about two seconds' worth
    /// (importing onnxruntime in Python alone is a few billion instructions, and the
    /// counts wander). Under callgrind Kiln's process counts the same on every run,
    /// but onnxruntime's set-up varies by millions of instructions, more than a 0.1 ms
    /// model executes (Silero VAD's difference over two inferences came out negative):
    /// about 20 ms' worth, at least two, and its ratios are good to about ±10 %.
    pub fn extra_runs(self, ms: f64) -> usize {
        let worth = |total_ms: f64| (total_ms / ms.max(1e-3)).ceil() as usize;
        match self {
            Counter::Perf => worth(2000.0).clamp(10, 20_000),
            Counter::Callgrind => worth(20.0).clamp(2, 400),
        }
    }

    /// Prints one row per model of the counts per inference for Kiln and onnxruntime,
    /// `kiln(n)` and `ort(n)` being commands that each do `n` inferences after their
    /// set-up, the longer run `extra` more, and the geometric means of the ratios.
    pub fn print_table<K, O>(self, rows: impl Iterator<Item = (&'static str, usize, K, O)>)
    where
        K: Fn(usize) -> Command,
        O: Fn(usize) -> Command,
    {
        let events = self.events();
        let short = |e: &str| if e == "cycles" { "Mcyc" } else { "Minst" };
        print!("\n{:<24}", "model");
        for e in events {
            let s = short(e);
            print!(
                " {:>11} {:>11} {:>8}",
                format!("kiln {s}"),
                format!("ort {s}"),
                "k/o"
            );
        }
        println!();
        let mut ratios = vec![Vec::new(); events.len()];
        for (name, extra, kiln, ort) in rows {
            match (
                self.per_inference(kiln, extra),
                self.per_inference(ort, extra),
            ) {
                (Ok(k), Ok(o)) if k.iter().chain(&o).any(|&c| c <= 0.0) => {
                    println!(
                        "{name:<24} no counts: the runs' set-up varied by more than \
                         {extra} inferences add"
                    );
                }
                (Ok(k), Ok(o)) => {
                    print!("{name:<24}");
                    for i in 0..events.len() {
                        ratios[i].push(k[i] / o[i]);
                        print!(
                            " {:>11.1} {:>11.1} {:>8.2}",
                            k[i] * 1e-6,
                            o[i] * 1e-6,
                            k[i] / o[i]
                        );
                    }
                    println!();
                }
                (k, o) => {
                    let why = k.err().or(o.err()).unwrap_or_default();
                    println!("{name:<24} no counts: {why}");
                }
            }
        }
        if !ratios[0].is_empty() {
            let means: Vec<_> = events
                .iter()
                .zip(&ratios)
                .map(|(e, r)| format!("{e} {:.2}", geometric_mean(r)))
                .collect();
            let how = match self {
                Counter::Perf => "perf stat",
                Counter::Callgrind => "callgrind, AVX2 paths",
            };
            println!(
                "geometric mean kiln/ort ({how}): {} over {} models",
                means.join(", "),
                ratios[0].len()
            );
        }
    }
}

/// The last lines of a tool's output, for an error.
fn tail(text: &str) -> String {
    let lines: Vec<_> = text.trim().lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

/// The geometric mean of ratios.
pub fn geometric_mean(v: &[f64]) -> f64 {
    (v.iter().map(|r| r.ln()).sum::<f64>() / v.len() as f64).exp()
}
