//! Kiln and onnxruntime timed in alternating rounds, for the benches' latency tables
//! (included by `zoo.rs` and the real-models bench).
//!
//! This machine's speed drifts over minutes (two vCPUs whose clock and neighbours
//! change: a 2-thread SqueezeNet ran 3.98 ms alone and 6.97 ms after two other
//! models, onnxruntime 3.56 and 5.25 ms). Timing all of Kiln's runs and then all of
//! onnxruntime's puts such a drift between the two; rounds that alternate them put it
//! on both, and the ratio is taken round by round.

/// Rounds per model: `KILN_BENCH_ROUNDS`, 3 by default.
pub fn rounds() -> usize {
    std::env::var("KILN_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(3)
}

/// A model's timings over the rounds: medians of the rounds' medians, and the median
/// of the rounds' ratios (`None` where onnxruntime could not run).
pub struct Paired {
    pub kiln_ms: f64,
    pub ort_ms: Option<f64>,
    pub ratio: Option<f64>,
}

/// `rounds` rounds of `kiln()` then `ort()`, each returning its median milliseconds
/// over its runs of the round. Stops at Kiln's first error; onnxruntime's first failure
/// ends its part (`Err` from `ort` is reported once by the caller's closure).
pub fn paired(
    rounds: usize,
    mut kiln: impl FnMut() -> Result<f64, String>,
    mut ort: impl FnMut() -> Option<f64>,
) -> Result<Paired, String> {
    let (mut kiln_ms, mut ort_ms) = (Vec::new(), Vec::new());
    let mut ort_ok = true;
    for _ in 0..rounds {
        kiln_ms.push(kiln()?);
        if ort_ok {
            match ort() {
                Some(ms) => ort_ms.push(ms),
                None => ort_ok = false,
            }
        }
    }
    let ratios: Vec<f64> = kiln_ms.iter().zip(&ort_ms).map(|(k, o)| k / o).collect();
    Ok(Paired {
        kiln_ms: median(kiln_ms),
        ort_ms: ort_ok.then(|| median(ort_ms)),
        ratio: ort_ok.then(|| median(ratios)),
    })
}

/// The median (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
