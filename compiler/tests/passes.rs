//! Graph rewrites seen from the compiled program: which steps a pattern leaves.

mod common;

use common::{Model, Node};
use kiln_compiler::{Options, compile_bytes};

/// The compiled model's steps, each its operator's name, or `NODE: LABEL` where
/// `fused` labels its kernel; the first output must have `shape`.
fn fused_steps(
    bytes: &[u8],
    opts: &Options,
    shape: [usize; 4],
    fused: impl Fn(&kiln_compiler::lower::Kernel) -> Option<&'static str>,
) -> Vec<String> {
    let c = compile_bytes(bytes, "t.onnx", "t", opts).expect("compiles");
    assert_eq!(c.program.outputs[0].0.shape, shape);
    let name = |s: &kiln_compiler::lower::Step| match fused(&s.kernel) {
        Some(label) => format!("{}: {label}", s.node),
        None => s.op_type.to_string(),
    };
    c.program.steps.iter().map(name).collect()
}

fn cuda_options() -> Options {
    Options {
        target: kiln_compiler::Target::Cuda,
        ..Options::default()
    }
}

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

/// The exporters' GELU, `x · ½ · (1 + erf(x/√2))` in five nodes, becomes one `Gelu`
/// step on both targets (a tuned unary with a CUDA twin), whichever way the products
/// are grouped and whether `x/√2` is a `Div` or a `Mul` by 1/√2. An intermediate read
/// elsewhere, or another constant, leaves the nodes as they are.
#[test]
fn gelu_patterns_become_one_step() {
    let model = |nodes: &[(&str, &[&str], &str)], outputs: &[&str]| {
        let mut m = Model::new(13)
            .input("x", &[2, 8])
            .init("root2", &[], vec![std::f32::consts::SQRT_2])
            .init("inv_root2", &[], vec![std::f32::consts::FRAC_1_SQRT_2])
            .init("one", &[], vec![1.0])
            .init("half", &[], vec![0.5])
            .init("six_tenths", &[], vec![0.6]);
        for &(op, inputs, output) in nodes {
            m = m.node(Node::new(op, inputs, &[output]));
        }
        for &o in outputs {
            m = m.output(o);
        }
        m.bytes()
    };
    let steps = |bytes: &[u8], target: kiln_compiler::Target| -> Vec<&'static str> {
        let opts = Options {
            target,
            ..Options::default()
        };
        let c = compile_bytes(bytes, "t.onnx", "t", &opts).expect("compiles");
        c.program.steps.iter().map(|s| s.op_type).collect()
    };
    let erf: [(&str, &[&str], &str); 2] = [("Div", &["x", "root2"], "d"), ("Erf", &["d"], "e")];
    // MiniLM's: x · ((erf(x/√2) + 1) · ½).
    let minilm = [
        ("Add", &["e", "one"][..], "a"),
        ("Mul", &["a", "half"], "h"),
        ("Mul", &["x", "h"], "y"),
    ];
    // BERT's: (x · (1 + erf(x/√2))) · ½.
    let bert = [
        ("Add", &["one", "e"][..], "a"),
        ("Mul", &["x", "a"], "m"),
        ("Mul", &["m", "half"], "y"),
    ];
    for (name, tail) in [("minilm", minilm), ("bert", bert)] {
        let nodes = [&erf[..], &tail[..]].concat();
        for target in [kiln_compiler::Target::Cpu, kiln_compiler::Target::Cuda] {
            assert_eq!(steps(&model(&nodes, &["y"]), target), ["Gelu"], "{name}");
        }
    }
    // PyTorch's: (x · ½) · (1 + erf(x · 1/√2)).
    let torch = [
        ("Mul", &["inv_root2", "x"][..], "d"),
        ("Erf", &["d"], "e"),
        ("Add", &["e", "one"], "a"),
        ("Mul", &["x", "half"], "m"),
        ("Mul", &["m", "a"], "y"),
    ];
    assert_eq!(
        steps(&model(&torch, &["y"]), kiln_compiler::Target::Cpu),
        ["Gelu"]
    );
    let nodes = [&erf[..], &minilm[..]].concat();
    let shared = steps(&model(&nodes, &["y", "e"]), kiln_compiler::Target::Cpu);
    assert_eq!(shared, ["Div", "Erf", "Add", "Mul", "Mul"]);
    let mut other = nodes.clone();
    other[3] = ("Mul", &["a", "six_tenths"], "h");
    let other = steps(&model(&other, &["y"]), kiln_compiler::Target::Cpu);
    assert_eq!(other, ["Div", "Erf", "Add", "Mul", "Mul"]);
}

/// `Add(Conv1x1(x), r)` and a two-input `Sum` fuse into the convolution on the CPU
/// (`Kernel::ResidualConv2d`), the Relu after them too, also where `r` is computed after
/// the convolution; a 3×3 convolution's add, a broadcast operand, and a convolution
/// whose output is also read elsewhere stay apart. CUDA (no such kernel) fuses none.
#[test]
fn residual_adds_fuse_into_one_by_one_convolutions_on_the_cpu() {
    use kiln_compiler::lower::Kernel;
    let w = |n: usize| (0..n).map(|i| (i as f32 - 20.0) / 50.0).collect::<Vec<_>>();
    let model = |tail: &dyn Fn(Model) -> Model| {
        let m = Model::new(13)
            .input("x", &[1, 4, 5, 5])
            .init("w1", &[6, 4, 1, 1], w(24))
            .init("w3", &[6, 4, 3, 3], w(216));
        tail(m).bytes()
    };
    let kinds = |bytes: &[u8], opts: &Options| -> Vec<String> {
        let c = compile_bytes(bytes, "t.onnx", "t", opts).expect("compiles");
        c.program
            .steps
            .iter()
            .map(|s| match s.kernel {
                Kernel::ResidualConv2d(_) => "Conv+residual".to_string(),
                _ => s.op_type.to_string(),
            })
            .collect()
    };
    let cpu = Options::default();
    let fused = model(&|m| {
        m.node(Node::new("Conv", &["x", "w1"], &["c"]))
            .node(Node::new("Conv", &["x", "w3"], &["r"]).ints("pads", &[1, 1, 1, 1]))
            .node(Node::new("Add", &["c", "r"], &["s"]))
            .node(Node::new("Relu", &["s"], &["y"]))
            .output("y")
    });
    assert_eq!(kinds(&fused, &cpu), ["Conv", "Conv+residual"]);
    let cuda = Options {
        target: kiln_compiler::Target::Cuda,
        ..Options::default()
    };
    assert_eq!(kinds(&fused, &cuda), ["Conv", "Conv", "Add", "Relu"]);
    let sum = model(&|m| {
        m.node(Node::new("Conv", &["x", "w3"], &["r"]).ints("pads", &[1, 1, 1, 1]))
            .node(Node::new("Conv", &["x", "w1"], &["c"]))
            .node(Node::new("Sum", &["r", "c"], &["y"]))
            .output("y")
    });
    assert_eq!(kinds(&sum, &cpu), ["Conv", "Conv+residual"]);
    // Either operand may be the convolution: the 1×1 one takes the 3×3 one's output.
    let either = model(&|m| {
        m.node(Node::new("Conv", &["x", "w1"], &["r"]))
            .node(Node::new("Conv", &["x", "w3"], &["c"]).ints("pads", &[1, 1, 1, 1]))
            .node(Node::new("Add", &["c", "r"], &["y"]))
            .output("y")
    });
    assert_eq!(kinds(&either, &cpu), ["Conv", "Conv+residual"]);
    // A grouped 1×1 convolution (ShuffleNet's, before its unit's Sum).
    let grouped = model(&|m| {
        m.init("w2", &[6, 2, 1, 1], w(12))
            .node(Node::new("Conv", &["x", "w3"], &["r"]).ints("pads", &[1, 1, 1, 1]))
            .node(Node::new("Conv", &["x", "w2"], &["c"]).int("group", 2))
            .node(Node::new("Sum", &["c", "r"], &["s"]))
            .node(Node::new("Relu", &["s"], &["y"]))
            .output("y")
    });
    assert_eq!(kinds(&grouped, &cpu), ["Conv", "Conv+residual"]);
    let three_by_three = model(&|m| {
        m.node(Node::new("Conv", &["x", "w3"], &["r"]).ints("pads", &[0, 0, 2, 2]))
            .node(Node::new("Conv", &["x", "w3"], &["c"]).ints("pads", &[1, 1, 1, 1]))
            .node(Node::new("Add", &["c", "r"], &["y"]))
            .output("y")
    });
    assert_eq!(kinds(&three_by_three, &cpu), ["Conv", "Conv", "Add"]);
    // Broadcast from an input (a constant one folds into the bias instead).
    let broadcast = model(&|m| {
        m.input("b", &[1, 6, 1, 1])
            .node(Node::new("Conv", &["x", "w1"], &["c"]))
            .node(Node::new("Add", &["c", "b"], &["y"]))
            .output("y")
    });
    assert_eq!(kinds(&broadcast, &cpu), ["Conv", "Add"]);
    let shared = model(&|m| {
        m.node(Node::new("Conv", &["x", "w1"], &["c"]))
            .node(Node::new("Conv", &["x", "w3"], &["r"]).ints("pads", &[1, 1, 1, 1]))
            .node(Node::new("Add", &["c", "r"], &["y"]))
            .output("y")
            .output("c")
    });
    assert_eq!(kinds(&shared, &cpu), ["Conv", "Conv", "Add"]);
}

/// A MaxPool over a direct convolution's output (activation fused or not) fuses into
/// it on the CPU: one step, named after the convolution, that writes the pooled
/// output. An average pool, a max pool with Indices, a convolution the direct kernel
/// does not take (1×1) or whose output is read elsewhere stay apart; CUDA fuses none.
#[test]
fn max_pools_fuse_into_direct_convolutions_on_the_cpu() {
    use kiln_compiler::lower::Kernel;
    let w = |n: usize| (0..n).map(|i| (i as f32 - 20.0) / 50.0).collect::<Vec<_>>();
    let model = |kernel: i64, pool: &str, tail: &dyn Fn(Model) -> Model| {
        let m = Model::new(13)
            .input("x", &[1, 3, 23, 23])
            .init(
                "w",
                &[8, 3, kernel, kernel],
                w(24 * (kernel * kernel) as usize),
            )
            .node(
                Node::new("Conv", &["x", "w"], &["c"])
                    .name("stem")
                    .ints("strides", &[2, 2]),
            )
            .node(Node::new("Relu", &["c"], &["r"]))
            .node(
                Node::new(pool, &["r"], &["y"])
                    .name("pool")
                    .ints("kernel_shape", &[3, 3])
                    .ints("strides", &[2, 2]),
            )
            .output("y");
        tail(m).bytes()
    };
    let steps = |bytes: &[u8], opts: &Options| {
        fused_steps(bytes, opts, [1, 8, 5, 5], |k| {
            matches!(k, Kernel::Conv2dMaxPool(..)).then_some("Conv+max pool")
        })
    };
    let (cpu, cuda) = (Options::default(), cuda_options());
    let plain = model(3, "MaxPool", &|m| m);
    assert_eq!(steps(&plain, &cpu), ["stem: Conv+max pool"]);
    assert_eq!(steps(&plain, &cuda), ["Conv", "MaxPool"]);
    assert_eq!(
        steps(&model(3, "AveragePool", &|m| m), &cpu),
        ["Conv", "AveragePool"]
    );
    assert_eq!(
        steps(&model(1, "MaxPool", &|m| m), &cpu),
        ["Conv", "MaxPool"]
    );
    let read_elsewhere = model(3, "MaxPool", &|m| m.output("r"));
    assert_eq!(steps(&read_elsewhere, &cpu), ["Conv", "MaxPool"]);
    let indices = Model::new(13)
        .input("x", &[1, 3, 23, 23])
        .init("w", &[8, 3, 3, 3], w(216))
        .node(Node::new("Conv", &["x", "w"], &["c"]).ints("strides", &[2, 2]))
        .node(
            Node::new("MaxPool", &["c"], &["y", "i"])
                .ints("kernel_shape", &[3, 3])
                .ints("strides", &[2, 2]),
        )
        .output("y")
        .output("i")
        .bytes();
    assert_eq!(steps(&indices, &cpu), ["Conv", "MaxPool"]);
}

/// A channel shuffle (`Reshape` to `[N, g, C/g, H, W]`, `Transpose(0, 2, 1, 3, 4)`,
/// `Reshape` back) over the output of a convolution of `g` groups fuses into it on the
/// CPU: one step, named after the convolution, writing the shuffled output. Shuffles
/// over another group count, of a one-group convolution, of a value read elsewhere,
/// and other transposes stay apart; CUDA fuses none.
#[test]
fn channel_shuffles_fuse_into_grouped_convolutions_on_the_cpu() {
    use kiln_compiler::lower::Kernel;
    let model = |group: i64, split: &[i64], perm: &[i64], tail: &dyn Fn(Model) -> Model| {
        let m = Model::new(13)
            .input("x", &[1, 4, 5, 5])
            .init(
                "w",
                &[8, 4 / group, 1, 1],
                (0..32 / group).map(|i| (i as f32 - 8.0) / 20.0).collect(),
            )
            .init_i64("split", &[5], split.to_vec())
            .init_i64("back", &[4], vec![1, 8, 5, 5])
            .node(
                Node::new("Conv", &["x", "w"], &["c"])
                    .name("gconv")
                    .int("group", group),
            )
            .node(Node::new("Relu", &["c"], &["r"]))
            .node(Node::new("Reshape", &["r", "split"], &["s"]))
            .node(Node::new("Transpose", &["s"], &["t"]).ints("perm", perm))
            .node(Node::new("Reshape", &["t", "back"], &["y"]))
            .output("y");
        tail(m).bytes()
    };
    let steps = |bytes: &[u8], opts: &Options| {
        fused_steps(bytes, opts, [1, 8, 5, 5], |k| {
            matches!(k, Kernel::ShuffledConv2d(..)).then_some("Conv+shuffle")
        })
    };
    let (cpu, cuda) = (Options::default(), cuda_options());
    let shuffle = [0, 2, 1, 3, 4];
    let fused = model(2, &[1, 2, 4, 5, 5], &shuffle, &|m| m);
    assert_eq!(steps(&fused, &cpu), ["gconv: Conv+shuffle"]);
    assert_eq!(steps(&fused, &cuda), ["Conv", "Transpose"]);
    let apart = ["Conv", "Transpose"];
    // Four shuffle groups over a convolution of two.
    assert_eq!(
        steps(&model(2, &[1, 4, 2, 5, 5], &shuffle, &|m| m), &cpu),
        apart
    );
    assert_eq!(
        steps(&model(1, &[1, 2, 4, 5, 5], &shuffle, &|m| m), &cpu),
        apart
    );
    let read_elsewhere = model(2, &[1, 2, 4, 5, 5], &shuffle, &|m| m.output("r"));
    assert_eq!(steps(&read_elsewhere, &cpu), apart);
    let other = model(2, &[1, 2, 4, 5, 5], &[0, 1, 2, 4, 3], &|m| m);
    assert_eq!(steps(&other, &cpu), apart);
}

/// An AveragePool whose window is its whole unpadded plane lowers to the mean per plane
/// (`Kernel::ReduceMean`, as GlobalAveragePool does); a padded or smaller window, and a
/// MaxPool over the whole plane, stay pools.
#[test]
fn whole_plane_average_pools_lower_to_a_mean() {
    use kiln_compiler::lower::Kernel;
    let kinds = |op: &str, kernel: i64, pads: i64| -> Vec<&'static str> {
        let model = Model::new(13)
            .input("x", &[2, 3, 7, 7])
            .node(
                Node::new(op, &["x"], &["y"])
                    .ints("kernel_shape", &[kernel, kernel])
                    .ints("pads", &[pads; 4]),
            )
            .output("y");
        let c =
            compile_bytes(&model.bytes(), "t.onnx", "t", &Options::default()).expect("compiles");
        let out = c.program.steps.iter().map(|s| match s.kernel {
            Kernel::ReduceMean(p) => {
                assert_eq!((p.outer, p.inner), (6, 49));
                "mean"
            }
            Kernel::Pool2d(_) => "pool",
            _ => "other",
        });
        out.collect()
    };
    assert_eq!(kinds("AveragePool", 7, 0), ["mean"]);
    assert_eq!(kinds("AveragePool", 7, 1), ["pool"]);
    assert_eq!(kinds("AveragePool", 5, 0), ["pool"]);
    assert_eq!(kinds("MaxPool", 7, 0), ["pool"]);
}
