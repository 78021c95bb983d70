//! Property tests over random interval sets: every strategy's plan (the local
//! search's included) passes the validator and a brute-force O(n²) check, lies
//! between the lower bound and naive, and is deterministic; the local search never
//! does worse than the greedy orders; the validator agrees with brute force on
//! arbitrary (mostly broken) offsets.

use proptest::prelude::*;

use super::interference::TEST_EDGE_BUDGET;
use super::strategy::Shared;
use super::testutil::{brute_is_valid, brute_lower_bound, naive_sizes};
use super::{
    BufferRequest, MemoryPlan, PlanInput, Strategy as Planner, analyze, plan, plan_with, validate,
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

/// Runs `f` with the conflict index forced onto its segment-tree representation.
fn with_tree_index<T>(f: impl FnOnce() -> T) -> T {
    TEST_EDGE_BUDGET.set(Some(0));
    let result = f();
    TEST_EDGE_BUDGET.set(None);
    result
}

fn check_plan(input: &PlanInput, plan: &MemoryPlan) -> Result<(), TestCaseError> {
    prop_assert_eq!(validate(input, plan), Ok(()));
    prop_assert!(brute_is_valid(input, &plan.offsets));
    prop_assert_eq!(plan.lower_bound_bytes, brute_lower_bound(input));
    prop_assert_eq!(plan.naive_bytes, naive_sizes(input).iter().sum::<usize>());
    prop_assert!(plan.arena_bytes >= plan.lower_bound_bytes);
    prop_assert!(plan.arena_bytes <= plan.naive_bytes);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn every_strategy_is_valid_bounded_and_deterministic(input in arb_input(24, 32)) {
        for &strategy in Planner::ALL {
            let first = plan_with(&input, &[strategy]).unwrap();
            check_plan(&input, &first)?;
            prop_assert_eq!(first.strategy, strategy.name());
            let again = plan_with(&input, &[strategy]).unwrap();
            prop_assert_eq!(&first, &again);
            // The tree-backed conflict index gives the very same plan.
            let tree = with_tree_index(|| plan_with(&input, &[strategy]).unwrap());
            prop_assert_eq!(&first, &tree);
        }
        let best = plan(&input).unwrap();
        check_plan(&input, &best)?;
        let smallest = best.strategies.iter().map(|&(_, a)| a).min();
        prop_assert_eq!(Some(best.arena_bytes), smallest);
        // The local search never loses to the greedy orders it starts from, and
        // starting from their shared placements changes nothing.
        let arena_of = |name: &str| best.strategies.iter().find(|s| s.0 == name).map(|s| s.1);
        let local = arena_of("local-search").unwrap();
        prop_assert!(local <= arena_of("greedy-by-size").unwrap());
        prop_assert!(local <= arena_of("greedy-by-breadth").unwrap());
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
        // Ties go to the first strategy with the smallest arena.
        let first_best = best.strategies.iter().find(|&&(_, a)| a == best.arena_bytes);
        prop_assert_eq!(first_best.map(|&(n, _)| n), Some(best.strategy));
    }

    #[test]
    fn validator_agrees_with_brute_force(
        input in arb_input(12, 12),
        seeds in prop::collection::vec(0usize..6, 12),
    ) {
        // Random offsets on a coarse grid: many collide, some do not.
        let mut plan = plan(&input).unwrap();
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
        let verdict = validate(&input, &plan);
        prop_assert_eq!(verdict.is_ok(), brute_is_valid(&input, &plan.offsets), "{:?}", verdict);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Fewer, larger cases: deeper segment trees, longer best-fit scans.
    #[test]
    fn larger_inputs_are_valid(input in arb_input(400, 400)) {
        for &strategy in Planner::ALL {
            let graph = plan_with(&input, &[strategy]).unwrap();
            check_plan(&input, &graph)?;
            let tree = with_tree_index(|| plan_with(&input, &[strategy]).unwrap());
            prop_assert_eq!(&graph, &tree);
        }
    }
}
