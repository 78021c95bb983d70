//! Optional per-step timing for generated code: `run_bytes_profiled` passes one slot
//! per step, plain `run` passes none, and then each step costs one length check.

use std::time::Instant;

/// Starts timing a step when profiling.
#[inline(always)]
pub fn start(times: &[f64]) -> Option<Instant> {
    if times.is_empty() {
        None
    } else {
        Some(Instant::now())
    }
}

/// Adds the step's elapsed seconds to `times[step]`.
#[inline(always)]
pub fn stop(times: &mut [f64], step: usize, started: Option<Instant>) {
    if let (Some(t), Some(slot)) = (started, times.get_mut(step)) {
        *slot += t.elapsed().as_secs_f64();
    }
}
