//! Many threads on one model: `small_cnn` (a small CNN from `make_edge_models.py`, about
//! 3.3 MFLOP a run) shared by 8 threads, each with its own `Context` (or, through the
//! CUDA emulator, its own arena), on seeded random inputs per thread and run. Every
//! output must equal, bit for bit, a single-threaded run of the same inputs made
//! beforehand, with one shared set of weights.
//!
//! - CPU target: 8 threads × 1,000 runs.
//! - CUDA target through the CPU emulator of the kernels (`cuda::emulator`): 8 threads
//!   × 4 runs. The emulator runs launches one at a time (a process-wide mutex, its
//!   fibers and `__shared__` section are global) at tens of MFLOP/s, so threads test
//!   that the launcher and arenas are independent, not speed; each thread also uses
//!   another fiber order (forward, reverse, shuffled), which must not change a bit.

use std::time::Instant;

use kiln_edge_models::cases::{small_cnn, small_cnn_cuda};
use kiln_edge_models::generated::SMALL_CNN_CUDA_WEIGHTS;
use kiln_edge_models::require_testdata;
use kiln_runtime::Weights;
use kiln_runtime::cuda::emulator::{Emulator, ThreadOrder, set_thread_order};

const THREADS: usize = 8;

/// Seeded inputs in [-2, 2) for thread `t`, run `r` (xorshift32).
fn input(len: usize, t: usize, r: usize) -> Vec<f32> {
    let mut s = (t as u32 * 1_000_003 + r as u32).wrapping_mul(0x9e37_79b9) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 22) as f32 - 2.0
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `run(state, t, r)` for every thread and run, first on this thread alone (one
/// state), then on `THREADS` threads at once (each its own state from `state()`);
/// every output must be the same bits. Returns both wall times in seconds.
fn single_then_threaded<S, N, R>(runs: usize, state: N, run: R) -> (f64, f64)
where
    N: Fn() -> S + Sync,
    R: Fn(&mut S, usize, usize) -> Vec<Vec<u32>> + Sync,
{
    let mut own = state();
    let start = Instant::now();
    let reference: Vec<Vec<Vec<Vec<u32>>>> = (0..THREADS)
        .map(|t| (0..runs).map(|r| run(&mut own, t, r)).collect())
        .collect();
    let single = start.elapsed().as_secs_f64();
    // The inputs differ, so must the outputs (a run that ignored its input would pass
    // the comparison below).
    assert_ne!(reference[0][0], reference[1][0]);
    assert_ne!(reference[0][0], reference[0][runs - 1]);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for (t, want) in reference.iter().enumerate() {
            let (run, state) = (&run, &state);
            scope.spawn(move || {
                let mut own = state();
                for (r, want) in want.iter().enumerate() {
                    let got = run(&mut own, t, r);
                    assert!(
                        got == *want,
                        "thread {t}, run {r}: outputs differ from the single-threaded run"
                    );
                }
            });
        }
    });
    (single, start.elapsed().as_secs_f64())
}

#[test]
fn cpu_8_threads_1000_runs_bit_identical() {
    require_testdata();
    let model = small_cnn::Model::new().unwrap();
    let len = small_cnn::INPUTS[0].len();
    let runs = 1000;
    let (single, threaded) = single_then_threaded(runs, small_cnn::Context::new, |ctx, t, r| {
        let x = input(len, t, r);
        let out = model.run(ctx, small_cnn::Inputs { x: &x }).unwrap();
        vec![bits(out.prob), bits(out.logits)]
    });
    eprintln!(
        "small_cnn, CPU: {} runs single-threaded in {single:.2} s, {THREADS} threads × {runs} in {threaded:.2} s",
        THREADS * runs
    );
}

#[test]
fn cuda_emulator_8_threads_bit_identical() {
    require_testdata();
    let weights = Weights::from_file(SMALL_CNN_CUDA_WEIGHTS, small_cnn_cuda::WEIGHTS_BYTES)
        .unwrap_or_else(|e| panic!("{e}"));
    let len = small_cnn_cuda::INPUTS[0].len();
    let runs = 4;
    // An arena of f32 elements, so it is aligned like the device's, and a phase: 0 for
    // the single-threaded reference, 1 for the threads, so that every threaded run
    // uses another fiber order than its reference.
    let states = std::sync::atomic::AtomicUsize::new(0);
    let state = || {
        let phase = states
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .min(1);
        (vec![0.0f32; small_cnn_cuda::ARENA_BYTES.div_ceil(4)], phase)
    };
    let (single, threaded) = single_then_threaded(runs, state, |(arena, phase), t, r| {
        let orders = ThreadOrder::ALL;
        set_thread_order(orders[(t + r + *phase) % orders.len()]);
        let x = input(len, t, r);
        {
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(arena);
            let inputs: [&[f32]; 1] = [&x];
            let mut emu = Emulator::new(bytes, weights.as_f32(), &inputs);
            small_cnn_cuda::launch_all(&mut emu).unwrap();
        }
        small_cnn_cuda::OUTPUT_REGIONS
            .iter()
            .map(|&(offset, len)| bits(&arena[offset / 4..offset / 4 + len]))
            .collect()
    });
    eprintln!(
        "small_cnn, CUDA emulator: {} runs single-threaded in {single:.2} s, {THREADS} threads × {runs} in {threaded:.2} s",
        THREADS * runs
    );
}
