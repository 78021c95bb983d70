//! Graph rewrites seen from the compiled program: which steps a pattern leaves.

mod common;

use common::{Model, Node};
use kiln_compiler::{Options, compile_bytes};

/// `Conv` then an exporter's hard-swish, `x · Clip(x + 3, 0, 6) / 6`, in the two orders
/// exporters write it (`Mul` then `Div`, as Paddle's; `Div` then `Mul`): the pattern
/// becomes one `HardSwish`, fused into the convolution, so one step is left. A pattern
/// whose intermediate value is also read elsewhere, or whose constants differ, stays.
#[test]
fn hard_swish_patterns_fuse_into_the_convolution() {
    let conv = |m: Model| {
        m.input("x", &[1, 2, 5, 5])
            .init(
                "w",
                &[4, 2, 3, 3],
                (0..72).map(|i| (i as f32 - 36.0) / 50.0).collect(),
            )
            .init("three", &[], vec![3.0])
            .init("zero", &[], vec![0.0])
            .init("six", &[], vec![6.0])
            .node(Node::new("Conv", &["x", "w"], &["c"]).ints("pads", &[1, 1, 1, 1]))
            .node(Node::new("Add", &["c", "three"], &["a"]))
            .node(Node::new("Clip", &["a", "zero", "six"], &["k"]))
    };
    let steps = |m: Model| -> Vec<&'static str> {
        let c = compile_bytes(&m.bytes(), "t.onnx", "t", &Options::default()).expect("compiles");
        c.program.steps.iter().map(|s| s.op_type).collect()
    };
    let mul_div = conv(Model::new(13))
        .node(Node::new("Mul", &["c", "k"], &["m"]))
        .node(Node::new("Div", &["m", "six"], &["y"]))
        .output("y");
    assert_eq!(steps(mul_div), ["Conv"]);
    let div_mul = conv(Model::new(13))
        .node(Node::new("Div", &["k", "six"], &["d"]))
        .node(Node::new("Mul", &["d", "c"], &["y"]))
        .output("y");
    assert_eq!(steps(div_mul), ["Conv"]);
    // The clipped value is also an output: nothing is rewritten.
    let shared = conv(Model::new(13))
        .node(Node::new("Mul", &["c", "k"], &["m"]))
        .node(Node::new("Div", &["m", "six"], &["y"]))
        .output("y")
        .output("k");
    assert_eq!(steps(shared).len(), 5);
    // Divided by 3, not 6: not a hard-swish.
    let other = conv(Model::new(13))
        .init("three2", &[], vec![3.0])
        .node(Node::new("Mul", &["c", "k"], &["m"]))
        .node(Node::new("Div", &["m", "three2"], &["y"]))
        .output("y");
    assert_eq!(steps(other).len(), 5);
}

/// `Conv` then `x · Sigmoid(x)` (SiLU, as YOLO exports it) in either operand order
/// becomes one `Swish`, fused into the convolution: one step. A Sigmoid whose output is
/// also read elsewhere, or a `Mul` by the sigmoid of another value, stays as it is.
#[test]
fn swish_patterns_fuse_into_the_convolution() {
    let conv = |m: Model| {
        m.input("x", &[1, 2, 5, 5])
            .init(
                "w",
                &[4, 2, 3, 3],
                (0..72).map(|i| (i as f32 - 36.0) / 50.0).collect(),
            )
            .node(Node::new("Conv", &["x", "w"], &["c"]).ints("pads", &[1, 1, 1, 1]))
            .node(Node::new("Sigmoid", &["c"], &["s"]))
    };
    let steps = |m: Model| -> Vec<&'static str> {
        let c = compile_bytes(&m.bytes(), "t.onnx", "t", &Options::default()).expect("compiles");
        c.program.steps.iter().map(|s| s.op_type).collect()
    };
    for inputs in [["c", "s"], ["s", "c"]] {
        let silu = conv(Model::new(13))
            .node(Node::new("Mul", &inputs, &["y"]))
            .output("y");
        assert_eq!(steps(silu), ["Conv"], "Mul({inputs:?})");
    }
    // The sigmoid is also an output: nothing is rewritten (Sigmoid fuses instead).
    let shared = conv(Model::new(13))
        .node(Node::new("Mul", &["c", "s"], &["y"]))
        .output("y")
        .output("s");
    assert_eq!(steps(shared).len(), 3);
    // x · Sigmoid(z) with z ≠ x: not a SiLU.
    let other = conv(Model::new(13))
        .input("z", &[1, 4, 5, 5])
        .node(Node::new("Sigmoid", &["z"], &["t"]))
        .node(Node::new("Mul", &["c", "t"], &["y"]))
        .output("y");
    assert_eq!(steps(other), ["Conv", "Sigmoid", "Mul"]);
}
