//! Property tests of the dynamic planner over random programs whose sizes are random
//! polynomials in `W` and `H` (mostly monotone: `a*W + b`, `a*W*H + b*W`,
//! `(W+1)/4 * c`, constants; some not: `1000 - W`), with in-place candidates, Concats
//! at symbolic offsets, scratch and graph outputs. At random points of the ranges,
//! beside the validator's own samples: the static validator, a brute-force pairwise
//! check and a byte-level simulation with the requested sizes in an arena of exactly
//! `arena_bytes` there (so nothing past it is touched) all pass; no block sits higher
//! than at the largest point; the arena never exceeds its maximum, which never exceeds
//! the static plan's.

use proptest::prelude::*;

use super::dynamic::{DynamicInput, DynamicOffset, DynamicPlan, plan_dynamic};
use super::simulate::simulate;
use super::testutil::{brute_is_valid_aliased, network_like};
use super::{BufferId, BufferRequest, validate};
use crate::dim::{Dim, SymbolRange};

fn w() -> Dim {
    Dim::sym("W")
}

fn h() -> Dim {
    Dim::sym("H")
}

/// A size in W and H from the families above.
fn arb_size() -> impl Strategy<Value = Dim> {
    let k = |r: std::ops::Range<i64>| r.prop_map(Dim::from);
    prop_oneof![
        3 => (k(1..80), k(0..300)).prop_map(|(a, b)| w() * a + b),
        2 => (k(1..8), k(0..40)).prop_map(|(a, b)| w() * h() * a + w() * b),
        1 => k(1..600).prop_map(|c| (w() + 1usize).div_floor(4) * c),
        1 => k(0..3000),
        1 => k(0..5).prop_map(|a| Dim::from(1000usize) - w() * a),
        1 => k(1..4).prop_map(|a| w() * w() * a - w() * 12 + 40),
        // Multiples of 64, so that Concat offsets are often aligned.
        2 => (k(1..4), k(0..4)).prop_map(|(a, b)| (w() * a + b) * 64usize),
        1 => k(1..3).prop_map(|a| w() * h() * a * 64usize),
    ]
}

/// W from `w_min` in steps of `w_step` up to 40 at most; H from 1 to `h_max`.
fn arb_ranges() -> impl Strategy<Value = Vec<SymbolRange>> {
    (1u64..8, 0u64..33, 1u64..5, 1u64..13).prop_map(|(w_min, w_span, w_step, h_max)| {
        vec![
            SymbolRange {
                step: w_step,
                ..SymbolRange::new("W", w_min, w_min + w_span)
            },
            SymbolRange::new("H", 1, h_max),
        ]
    })
}

/// A random program: step `s` writes buffer `s` from one to three earlier buffers,
/// mostly recent; it may name them as in-place candidates (of the same size as
/// expressions, or not), be a Concat of them (each a slice candidate at the sum of
/// the sizes before it), a graph output, use scratch, or accumulate into an earlier
/// buffer.
fn arb_dynamic(max_steps: usize) -> impl Strategy<Value = DynamicInput> {
    let step = (
        prop::collection::vec((0usize..100, 0u8..4), 1..4),
        arb_size(),
        0u8..10,
    );
    (
        prop::collection::vec(step, 1..max_steps),
        prop::sample::select(vec![1usize, 64, 256]),
        arb_ranges(),
    )
        .prop_map(|(steps, alignment, ranges)| {
            let mut input = DynamicInput::new(steps.len(), ranges);
            input.input.alignment = alignment;
            let mut scratch = Vec::new();
            for (s, (reads, size, kind)) in steps.into_iter().enumerate() {
                let mut b = BufferRequest::new(format!("t{s}"), 0, s, vec![]);
                b.live_to_end = kind == 0;
                let mut size = size;
                let picks: Vec<(usize, u8)> = reads
                    .iter()
                    .filter(|_| s > 0)
                    .map(|&(pick, candidate)| {
                        let back = if pick < 70 { 1 + pick % 3 } else { 1 + pick };
                        (s - back.min(s), candidate)
                    })
                    .collect();
                for &(x, candidate) in &picks {
                    input.input.buffers[x].uses.push(s);
                    if candidate > 0 {
                        b.in_place_of.push(BufferId(x as u32));
                    }
                    // Same size as the first candidate, as elementwise kernels are.
                    if candidate == 3 && b.in_place_of.len() == 1 {
                        size = input.sizes[x].clone();
                    }
                }
                if (kind == 3 || kind == 4) && s > 0 {
                    b.in_place_of.clear();
                    let mut delta = Dim::from(0usize);
                    for &(x, _) in &picks {
                        input.input.buffers[x].slice_of = Some((BufferId(s as u32), 0));
                        input.slice_deltas[x] = Some(delta.clone());
                        delta = delta + input.sizes[x].clone();
                    }
                    size = delta;
                }
                if kind == 1 && s > 0 {
                    input.input.buffers[s / 2].uses.push(s);
                }
                input.push(b, size);
                if kind == 2 {
                    scratch.push(BufferRequest::scratch(format!("s{s}"), 0, s));
                }
            }
            for b in scratch {
                input.push(b, w() * 8 + 100);
            }
            input
        })
}

/// A Concat of two to five parts written one after another and read only by it,
/// each with a temporary beside it over a random span; the Concat's output is read
/// once more after it.
fn arb_concat() -> impl Strategy<Value = DynamicInput> {
    let part = (arb_size(), arb_size(), 0usize..4);
    (
        prop::collection::vec(part, 2..6),
        prop::sample::select(vec![1usize, 64, 256]),
        arb_ranges(),
    )
        .prop_map(|(parts, alignment, ranges)| {
            let k = parts.len();
            let mut input = DynamicInput::new(k + 2, ranges);
            input.input.alignment = alignment;
            let parent = BufferId(2 * k as u32);
            let mut delta = Dim::from(0usize);
            for (j, (size, temp, span)) in parts.into_iter().enumerate() {
                let part = BufferRequest::new(format!("c{j}"), 0, j, vec![k]);
                input.push_slice(part, size.clone(), parent, delta.clone());
                let last = (j + span).min(k + 1);
                input.push(BufferRequest::new(format!("t{j}"), 0, j, vec![last]), temp);
                delta = delta + size;
            }
            input.push(BufferRequest::new("P", 0, k, vec![k + 1]), delta);
            input.push(BufferRequest::output("r", 0, k + 1), w() * 64);
            input
        })
}

/// A point of the ranges from two fractions.
fn point_of(input: &DynamicInput, (fw, fh): (u64, u64)) -> [(String, i64); 2] {
    let at = |r: &SymbolRange, f: u64| {
        let count = (r.largest() - r.min) / r.step + 1;
        (r.name.to_string(), (r.min + r.step * (f % count)) as i64)
    };
    [at(&input.ranges[0], fw), at(&input.ranges[1], fh)]
}

/// Everything the module doc promises, at one point.
fn check_at(
    input: &DynamicInput,
    plan: &DynamicPlan,
    values: &[(String, i64)],
) -> Result<(), TestCaseError> {
    let lookup = |s: &str| values.iter().find(|(n, _)| n == s).map(|&(_, v)| v);
    let at = plan.eval(&lookup).unwrap();
    prop_assert!(at.arena_bytes <= plan.arena_bytes_max);
    let (point, memory) = plan.at(input, &lookup).unwrap();
    prop_assert_eq!(&memory.offsets, &at.offsets);
    prop_assert_eq!(validate(&point, &memory), Ok(()));
    prop_assert!(brute_is_valid_aliased(
        &point,
        &memory.offsets,
        &memory.alias_of,
        &memory.slice_of,
        &memory.overlap_of
    ));
    // The requested sizes, inside what is reserved, simulated in exactly the arena.
    let mut real = point.clone();
    for (b, size) in real.buffers.iter_mut().zip(&input.sizes) {
        let bytes = usize::try_from(size.eval(&lookup).unwrap()).unwrap();
        prop_assert!(bytes <= b.size);
        b.size = bytes;
    }
    prop_assert_eq!(simulate(&real, &memory), Ok(()));
    // No block higher than at the largest point.
    let largest = |s: &str| {
        let r = input.ranges.iter().find(|r| *r.name == *s)?;
        Some(r.largest() as i64)
    };
    let top = plan.eval(&largest).unwrap();
    for (i, b) in plan.buffers.iter().enumerate() {
        if matches!(b.offset, DynamicOffset::Max(_)) {
            prop_assert!(at.offsets[i] <= top.offsets[i]);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn dynamic_plans_are_valid_at_every_point_tried(
        input in arb_dynamic(30),
        points in prop::collection::vec((0u64..1000, 0u64..1000), 6),
    ) {
        let plan = plan_dynamic(&input).unwrap();
        prop_assert_eq!(&plan, &plan_dynamic(&input).unwrap(), "deterministic");
        prop_assert!(plan.arena_bytes_max <= plan.at_max.arena_bytes);
        for p in points {
            check_at(&input, &plan, &point_of(&input, p))?;
        }
        check_reserved(&input, &plan)?;
    }

    #[test]
    fn concats_at_symbolic_offsets_are_valid_at_every_point_tried(
        input in arb_concat(),
        points in prop::collection::vec((0u64..1000, 0u64..1000), 6),
    ) {
        let plan = plan_dynamic(&input).unwrap();
        prop_assert!(plan.arena_bytes_max <= plan.at_max.arena_bytes);
        for p in points {
            check_at(&input, &plan, &point_of(&input, p))?;
        }
        check_reserved(&input, &plan)?;
    }
}

/// Exactly the sizes not provably monotone are held at a constant.
fn check_reserved(input: &DynamicInput, plan: &DynamicPlan) -> Result<(), TestCaseError> {
    {
        for (b, size) in plan.buffers.iter().zip(&input.sizes) {
            prop_assert_eq!(b.is_reserved(), !size.is_monotone());
            prop_assert!(b.size.is_monotone());
        }
    }
    Ok(())
}

/// [`network_like`]'s lifetimes with symbolic sizes: of a static size `s`, a third
/// `W * (s/64)`, a third `W*H * (s/1024)`, a third `H * (s/16)` (W ≤ 64, H ≤ 16).
fn network_like_dynamic(n: usize, seed: u64) -> DynamicInput {
    let ranges = vec![SymbolRange::new("W", 1, 64), SymbolRange::new("H", 1, 16)];
    let static_input = network_like(n, seed);
    let mut input = DynamicInput::new(static_input.steps, ranges);
    for (i, b) in static_input.buffers.into_iter().enumerate() {
        let s = b.size;
        let size = match i % 3 {
            0 => w() * (s / 64),
            1 => w() * h() * (s / 1024).max(1),
            _ => h() * (s / 16),
        };
        input.push(b, size);
    }
    input
}

#[test]
fn network_like_arenas_shrink_and_stay_below_the_static_plan() {
    let mut equal = 0;
    for seed in 0..8 {
        let input = network_like_dynamic(300, seed);
        let plan = plan_dynamic(&input).unwrap();
        assert!(plan.arena_bytes_max <= plan.at_max.arena_bytes);
        equal += usize::from(plan.arena_bytes_max == plan.at_max.arena_bytes);
        let small = plan.eval(&|_| Some(1)).unwrap().arena_bytes;
        assert!(
            small < plan.arena_bytes_max,
            "{small} of {}",
            plan.arena_bytes_max
        );
        eprintln!(
            "seed {seed}: arena at W=H=1 / max {:.3}",
            small as f64 / plan.arena_bytes_max as f64
        );
    }
    eprintln!("arena at the largest point equal to the static plan's: {equal} of 8");
}

/// A measurement, not a timed assertion. By hand, in release:
/// `cargo test --release -p kiln-compiler --lib plan::dynamic_proptests::planning_time -- --ignored --nocapture`
#[test]
#[ignore = "a measurement, run by hand in release"]
fn planning_time_of_dynamic_network_like_inputs() {
    for n in [1_000, 10_000, 100_000] {
        let input = network_like_dynamic(n, 42);
        let start = std::time::Instant::now();
        let plan = plan_dynamic(&input).unwrap();
        let elapsed = start.elapsed();
        let start = std::time::Instant::now();
        super::validate_dynamic::validate_dynamic(&input, &plan).unwrap();
        let checked = start.elapsed();
        println!(
            "{n:>6} buffers: plan {:>8.1} ms (of which validation {:>8.1} ms), {:.2} max terms per buffer; arena max / static plan's {:.4}",
            elapsed.as_secs_f64() * 1e3,
            checked.as_secs_f64() * 1e3,
            plan.max_terms() as f64 / n as f64,
            plan.arena_bytes_max as f64 / plan.at_max.arena_bytes as f64,
        );
        for v in [1, 4, 16] {
            let at = move |s: &str| Some(if s == "W" { 4 * v } else { v });
            let start = std::time::Instant::now();
            let arena = plan.eval(&at).unwrap().arena_bytes;
            let eval = start.elapsed();
            let (point, _) = plan.at(&input, &at).unwrap();
            let replanned = super::plan(&point).unwrap().arena_bytes;
            println!(
                "    W={:<3} H={v:<3} eval {:>7.3} ms: arena / max {:.4}, / replanned there {:.4}",
                4 * v,
                eval.as_secs_f64() * 1e3,
                arena as f64 / plan.arena_bytes_max as f64,
                arena as f64 / replanned as f64,
            );
        }
    }
}
