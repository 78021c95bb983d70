//! The memory-aware schedule through `compile_bytes`: kept where it lowers the arena,
//! not otherwise, on both targets. (Its numerics against onnxruntime:
//! `tests/tests/zoo.rs`, on the same shape of model made by `scripts/make_testdata.py`.)

mod common;

use common::{Model, Node, Rng, tiny_classifier};
use kiln_compiler::schedule::{Schedule, check_order};
use kiln_compiler::{Compiled, Options, Target, compile_bytes};

/// x → stem; two branches from the stem, each a big tensor (64 channels at 32×32)
/// reduced to a small one; the file lists both big tensors before either reduction.
/// (The second reduction is an average pool: a max pool would fuse into the
/// convolution before it on the CPU, and its big tensor would never exist.)
fn two_branches() -> Vec<u8> {
    let mut rng = Rng::new(7);
    let conv = |name: &str, ins: &[&str]| Node::new("Conv", ins, &[name]).name(name);
    Model::new(13)
        .input("x", &[1, 8, 32, 32])
        .init("stem.w", &[16, 8, 3, 3], rng.floats(16 * 8 * 9))
        .init("b1.w", &[64, 16, 1, 1], rng.floats(64 * 16))
        .init("b2.w", &[64, 16, 3, 3], rng.floats(64 * 16 * 9))
        .init("c1.w", &[8, 64, 1, 1], rng.floats(8 * 64))
        .node(conv("a", &["x", "stem.w"]).ints("pads", &[1, 1, 1, 1]))
        .node(conv("b1", &["a", "b1.w"]))
        .node(conv("b2", &["a", "b2.w"]).ints("pads", &[1, 1, 1, 1]))
        .node(conv("c1", &["b1", "c1.w"]).ints("strides", &[2, 2]))
        .node(
            Node::new("AveragePool", &["b2"], &["c2"])
                .name("c2")
                .ints("kernel_shape", &[2, 2])
                .ints("strides", &[2, 2]),
        )
        .node(
            Node::new("Concat", &["c1", "c2"], &["y"])
                .name("y")
                .int("axis", 1),
        )
        .output("y")
        .bytes()
}

fn compile(bytes: &[u8], target: Target) -> Compiled {
    let opts = Options {
        target,
        ..Options::default()
    };
    compile_bytes(bytes, "test.onnx", "test", &opts).expect("compiles")
}

fn steps(c: &Compiled) -> Vec<&str> {
    c.program.steps.iter().map(|s| s.node.as_str()).collect()
}

#[test]
fn two_branches_run_one_after_the_other_on_both_targets() {
    for target in [Target::Cpu, Target::Cuda] {
        let c = compile(&two_branches(), target);
        let s = c.schedule;
        assert_eq!(s.kept, Schedule::MemoryAware, "{}", target.name());
        assert_eq!(steps(&c), ["a", "b1", "c1", "b2", "c2", "y"]);
        let aware = s
            .memory_aware_arena
            .expect("the memory-aware order was planned");
        assert_eq!(c.plan.arena_bytes, aware);
        // At the peak, a small tensor (8 KiB) in the place of a big one (256 KiB), less
        // what the kernel scratch of the memory-aware peak's step (c1's packed block of
        // 64 rows by up to 256 positions, 66 KiB) adds over the file order's.
        assert!(aware + 180 * 1024 <= s.file_order_arena, "{s:?}");
        assert!(c.report().contains("Schedule: memory-aware order kept"));
        let json = c.json_report();
        assert_eq!(json["schedule"]["kept"], "memory-aware");
        assert_eq!(json["arena_bytes"], aware);
    }
}

/// A chain has one order: nothing is planned twice, and the report says so.
#[test]
fn a_chain_keeps_file_order() {
    let c = compile(&tiny_classifier(false).bytes(), Target::Cpu);
    assert_eq!(c.schedule.kept, Schedule::FileOrder);
    assert_eq!(c.schedule.memory_aware_arena, None);
    assert_eq!(c.schedule.file_order_arena, c.plan.arena_bytes);
    let order: Vec<usize> = (0..c.program.steps.len()).collect();
    check_order(&c.program, &order).unwrap();
    assert!(c.report().contains("Schedule: file order"));
}
