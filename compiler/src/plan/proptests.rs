//! Property tests over random interval sets and random program-like DAGs with
//! in-place candidates: every strategy's plan (the local search's included) passes
//! the validator, a brute-force O(n²) check of overlaps and aliases and a byte-level
//! simulation, lies between the bound with its aliases and naive, and is
//! deterministic; the local search never does worse than the greedy orders; the
//! validator agrees with brute force on arbitrary (mostly broken) offsets and aliases.

use proptest::prelude::*;

use super::interference::TEST_EDGE_BUDGET;
use super::simulate::simulate;
use super::strategy::Shared;
use super::testutil::{brute_is_valid, brute_is_valid_aliased, brute_lower_bound, naive_sizes};
use super::{
    BufferId, BufferRequest, MemoryPlan, PlanInput, Strategy as Planner, analyze, plan, plan_with,
    validate,
};

/// Buffers over `1..max_steps` steps: plain tensors with one or more uses,
/// outputs, scratch, zero-size ones, and sizes drawn to produce many ties.
fn arb_input(max_steps: usize, max_buffers: usize) -> impl Strategy<Value = PlanInput> {
    (1..max_steps, prop::sample::select(vec![1usize, 16, 256])).prop_flat_map(
        move |(steps, alignment)| {
            let size = prop_oneof![
                1 => Just(0usize),
                3 => 1usize..3000,
                3 => prop::sample::select(vec![256usize, 512, 1024, 4096]),
            ];
            let buffer = (0..steps, 0..steps, 0..steps, size, 0u8..10).prop_map(
                move |(a, b, c, size, kind)| {
                    let (def, last) = (a.min(b), a.max(b));
                    match kind {
                        0 => BufferRequest::scratch("", size, def),
                        1 => BufferRequest::output("", size, def),
                        2 => BufferRequest::new("", size, def, vec![]),
                        _ => BufferRequest::new("", size, def, vec![last, c.clamp(def, last)]),
                    }
                },
            );
            prop::collection::vec(buffer, 0..max_buffers).prop_map(move |buffers| {
                let mut input = PlanInput::new(steps);
                input.alignment = alignment;
                for (i, mut b) in buffers.into_iter().enumerate() {
                    b.name = format!("b{i}");
                    input.push(b);
                }
                input
            })
        },
    )
}

/// A random program: step `s` writes buffer `s` (sizes from a small set, so equal
/// sizes are common) from one to three earlier buffers, mostly recent ones, may use
/// scratch, and names some of its inputs as in-place candidates, legal or not (the
/// input may be read later, differ in size, or be a graph output); some buffers are
/// graph outputs, a few are written again later (accumulation), some are Concats of
/// their inputs (each a slice candidate), some pool their first input (an overlap
/// candidate).
fn arb_dag(max_steps: usize) -> impl Strategy<Value = PlanInput> {
    let step = (
        prop::collection::vec((0usize..100, 0u8..4), 1..4),
        prop::sample::select(vec![256usize, 256, 512, 1000, 1024]),
        0u8..10,
    );
    (
        prop::collection::vec(step, 1..max_steps),
        prop::sample::select(vec![1usize, 64, 256]),
    )
        .prop_map(|(steps, alignment)| {
            let mut input = PlanInput::new(steps.len());
            input.alignment = alignment;
            let mut scratch = Vec::new();
            for (s, (reads, size, kind)) in steps.iter().enumerate() {
                let mut b = BufferRequest::new(format!("t{s}"), *size, s, vec![]);
                b.live_to_end = *kind == 0;
                for &(pick, candidate) in reads.iter().filter(|_| s > 0) {
                    // Mostly one of the last three, sometimes anything earlier.
                    let back = if pick < 70 { 1 + pick % 3 } else { 1 + pick };
                    let x = s - back.min(s);
                    input.buffers[x].uses.push(s);
                    if candidate > 0 {
                        b.in_place_of.push(BufferId(x as u32));
                    }
                }
                if *kind == 3 && s > 0 {
                    // A Concat of its reads, in order: each may become a slice of it
                    // (or not: read later, twice, at a misaligned byte, ...).
                    let mut delta = 0;
                    for &(pick, _) in reads {
                        let back = if pick < 70 { 1 + pick % 3 } else { 1 + pick };
                        let x = s - back.min(s);
                        input.buffers[x].slice_of = Some((BufferId(s as u32), delta));
                        delta += input.buffers[x].size;
                    }
                    b.size = delta;
                }
                if *kind == 4 && s > 0 {
                    // A pooling of its first read: planes of that buffer, each pooled
                    // to a quarter, a half or the same size; an overlap candidate
                    // (legal or not: the input may be read later, or be an output).
                    let (pick, shrink) = reads[0];
                    let back = if pick < 70 { 1 + pick % 3 } else { 1 + pick };
                    let x = s - back.min(s);
                    let in_size = input.buffers[x].size;
                    let planes = if in_size.is_multiple_of(4) { 4 } else { 1 };
                    let in_plane = in_size / planes;
                    let out_plane = (in_plane >> (shrink % 3)).max(1);
                    b.size = planes * out_plane;
                    b.overlap_of = Some((
                        BufferId(x as u32),
                        super::PlaneOrder {
                            planes,
                            in_plane,
                            out_plane,
                        },
                    ));
                }
                if *kind == 1 && s > 0 {
                    // An accumulation: step s writes an earlier buffer again.
                    input.buffers[s / 2].uses.push(s);
                }
                input.push(b);
                if *kind == 2 {
                    scratch.push(BufferRequest::scratch(format!("s{s}"), 300, s));
                }
            }
            for b in scratch {
                input.push(b);
            }
            input
        })
}

/// Runs `f` with the conflict index forced onto its segment-tree representation.
fn with_tree_index<T>(f: impl FnOnce() -> T) -> T {
    TEST_EDGE_BUDGET.set(Some(0));
    let result = f();
    TEST_EDGE_BUDGET.set(None);
    result
}

fn check_plan(input: &PlanInput, plan: &MemoryPlan) -> Result<(), TestCaseError> {
    prop_assert_eq!(validate(input, plan), Ok(()));
    prop_assert!(brute_is_valid_aliased(
        input,
        &plan.offsets,
        &plan.alias_of,
        &plan.slice_of,
        &plan.overlap_of
    ));
    prop_assert_eq!(simulate(input, plan), Ok(()));
    prop_assert_eq!(plan.lower_bound_bytes, brute_lower_bound(input));
    prop_assert_eq!(plan.naive_bytes, naive_sizes(input).iter().sum::<usize>());
    prop_assert!(plan.in_place_lower_bound_bytes <= plan.lower_bound_bytes);
    prop_assert!(plan.arena_bytes >= plan.in_place_lower_bound_bytes);
    prop_assert!(plan.arena_bytes <= plan.naive_bytes);
    if plan.in_place_count() == 0 && plan.slice_count() == 0 && plan.overlap_count() == 0 {
        prop_assert!(brute_is_valid(input, &plan.offsets));
        prop_assert_eq!(plan.in_place_lower_bound_bytes, plan.lower_bound_bytes);
    }
    Ok(())
}

/// Every strategy alone and all together: valid, deterministic, independent of the
/// conflict index's representation; the best is the smallest, the local search
/// never loses to the greedy orders it starts from.
fn check_all_strategies(input: &PlanInput) -> Result<(), TestCaseError> {
    for &strategy in Planner::ALL {
        let first = plan_with(input, &[strategy]).unwrap();
        check_plan(input, &first)?;
        prop_assert_eq!(first.strategy, strategy.name());
        let again = plan_with(input, &[strategy]).unwrap();
        prop_assert_eq!(&first, &again);
        // The tree-backed conflict index gives the very same plan.
        let tree = with_tree_index(|| plan_with(input, &[strategy]).unwrap());
        prop_assert_eq!(&first, &tree);
    }
    let best = plan(input).unwrap();
    check_plan(input, &best)?;
    prop_assert_eq!(&best, &plan(input).unwrap());
    let smallest = best.strategies.iter().map(|t| t.arena_bytes).min();
    prop_assert_eq!(Some(best.arena_bytes), smallest);
    // Ties go to the first strategy with the smallest arena, in place first.
    let first_best = best
        .strategies
        .iter()
        .find(|t| t.arena_bytes == best.arena_bytes);
    prop_assert_eq!(first_best.map(|t| t.strategy), Some(best.strategy));
    prop_assert_eq!(
        first_best.map(|t| t.in_place),
        Some(best.in_place_count() > 0)
    );
    prop_assert_eq!(first_best.map(|t| t.slices), Some(best.slice_count() > 0));
    for (in_place, slices) in [(true, true), (false, true), (true, false), (false, false)] {
        let arena_of = |name: &str| {
            best.strategies
                .iter()
                .find(|t| t.strategy == name && t.in_place == in_place && t.slices == slices)
                .map(|t| t.arena_bytes)
        };
        if let Some(local) = arena_of("local-search") {
            prop_assert!(local <= arena_of("greedy-by-size").unwrap());
            prop_assert!(local <= arena_of("greedy-by-breadth").unwrap());
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn every_strategy_is_valid_bounded_and_deterministic(input in arb_input(24, 32)) {
        check_all_strategies(&input)?;
        // Starting the local search from the greedy strategies' shared placements
        // changes nothing.
        let live = analyze(&input).unwrap();
        let mut shared = Shared::new(&live);
        let mut from_shared = None;
        for &strategy in Planner::ALL {
            let offsets = strategy.offsets_shared(&mut shared).unwrap();
            if strategy == Planner::LocalSearch {
                from_shared = Some(offsets);
            }
        }
        prop_assert_eq!(from_shared, Some(Planner::LocalSearch.offsets(&live).unwrap()));
    }

    #[test]
    fn dags_with_in_place_candidates_plan_validly(input in arb_dag(40)) {
        check_all_strategies(&input)?;
    }

    #[test]
    fn validator_agrees_with_brute_force(
        input in prop_oneof![arb_input(12, 12), arb_dag(12)],
        seeds in prop::collection::vec(0usize..6, 24),
        aliases in prop::collection::vec(0usize..30, 24),
    ) {
        // Random offsets on a coarse grid: many collide, some do not; random aliases,
        // mostly illegal.
        let mut plan = plan(&input).unwrap();
        let n = plan.alias_of.len();
        // Slices are checked against brute force by `check_plan`; here, only aliases.
        plan.slice_of = vec![None; n];
        plan.overlap_of = vec![None; n];
        for (slot, &a) in plan.alias_of.iter_mut().zip(&aliases) {
            if a < n && a % 3 == 0 {
                *slot = Some(BufferId(a as u32));
            } else if a >= n + 10 {
                *slot = None;
            }
        }
        // 256 is a multiple of every alignment drawn; zero-size buffers stay at 0
        // (inside any arena).
        for ((offset, &s), &size) in plan.offsets.iter_mut().zip(&seeds).zip(&plan.aligned_sizes) {
            *offset = if size == 0 { 0 } else { s * 256 };
        }
        plan.arena_bytes = plan
            .offsets
            .iter()
            .zip(&plan.aligned_sizes)
            .filter(|(_, s)| **s > 0)
            .map(|(o, s)| o + s)
            .max()
            .unwrap_or(0);
        // The bound with these aliases, by brute force, so that only the overlaps and
        // the aliases themselves decide the verdict.
        plan.in_place_lower_bound_bytes = super::testutil::brute_in_place_bound(&input, &plan.alias_of);
        let verdict = validate(&input, &plan);
        let brute = brute_is_valid_aliased(&input, &plan.offsets, &plan.alias_of, &plan.slice_of, &plan.overlap_of);
        prop_assert_eq!(verdict.is_ok(), brute, "{:?}", verdict);
        if verdict.is_ok() {
            prop_assert_eq!(simulate(&input, &plan), Ok(()));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Fewer, larger cases: deeper segment trees, longer best-fit scans.
    #[test]
    fn larger_inputs_are_valid(input in prop_oneof![arb_input(400, 400), arb_dag(400)]) {
        for &strategy in Planner::ALL {
            let graph = plan_with(&input, &[strategy]).unwrap();
            check_plan(&input, &graph)?;
            let tree = with_tree_index(|| plan_with(&input, &[strategy]).unwrap());
            prop_assert_eq!(&graph, &tree);
        }
    }
}
