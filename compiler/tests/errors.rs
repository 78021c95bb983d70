//! Error paths of `compile_bytes`/`compile`: bad input never panics and every error
//! names what is wrong (the node, its operator, the input, the option) and what was
//! expected.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::{INT64, Model, Node, Rng, TempDir, tiny_classifier};
use kiln_compiler::dim::{dims_of, fmt_dims};
use kiln_compiler::{Compiled, Error, Options, WeightsMode, compile_bytes};
use onnx_protobuf::{Message, ModelProto, StringStringEntryProto, TensorProto};

fn compile_opts(bytes: &[u8], opts: &Options) -> Result<Compiled, Error> {
    compile_bytes(bytes, "test.onnx", "test", opts)
}

fn compile(bytes: &[u8]) -> Result<Compiled, Error> {
    compile_opts(bytes, &Options::default())
}

/// Compiles `bytes`, which must fail, and returns the error.
fn error(bytes: &[u8]) -> Error {
    error_opts(bytes, &Options::default())
}

fn error_opts(bytes: &[u8], opts: &Options) -> Error {
    match compile_opts(bytes, opts) {
        Ok(_) => panic!("the compile should have failed"),
        Err(e) => e,
    }
}

fn with_inputs(dims: &[(&str, &[usize])]) -> Options {
    Options {
        input_dims: dims
            .iter()
            .map(|(n, d)| ((*n).to_owned(), dims_of(d)))
            .collect(),
        ..Options::default()
    }
}

/// Asserts `e` is `Error::Node` for `node`/`op` and its message contains `expected`;
/// returns the full text.
fn assert_node_error(e: &Error, node: &str, op: &str, expected: &str) -> String {
    let text = e.to_string();
    match e {
        Error::Node { node: n, op: o, .. } => {
            assert_eq!((n.as_str(), o.as_str()), (node, op), "{text}");
        }
        other => panic!("expected Error::Node for `{node}`, got {other:?}"),
    }
    assert!(
        text.starts_with(&format!("node `{node}` ({op}, opset 13): ")),
        "{text}"
    );
    assert!(text.contains(expected), "`{expected}` missing from: {text}");
    text
}

/// Compiles `bytes` under `catch_unwind`; `Err(())` when it panicked.
fn compile_no_panic(bytes: &[u8]) -> Result<Result<Compiled, Error>, ()> {
    catch_unwind(AssertUnwindSafe(|| compile(bytes))).map_err(|_| ())
}

// ---------------------------------------------------------------------------------
// Malformed files

/// Every prefix of a valid model either fails with an error (a `Parse` error whenever
/// protobuf cannot read it) or compiles; none panics.
#[test]
fn truncated_model_never_panics() {
    let bytes = tiny_classifier(false).bytes();
    assert!(compile(&bytes).is_ok(), "the untruncated model compiles");
    let mut panicked = Vec::new();
    for len in 0..bytes.len() {
        let cut = &bytes[..len];
        let parses = ModelProto::parse_from_bytes(cut).is_ok();
        match compile_no_panic(cut) {
            Err(()) => panicked.push(len),
            Ok(Ok(_)) => assert!(parses, "length {len}: unparseable bytes compiled"),
            Ok(Err(e)) => {
                if !parses {
                    assert!(matches!(e, Error::Parse { .. }), "length {len}: {e:?}");
                    assert!(
                        e.to_string().contains("is not a readable ONNX model"),
                        "{e}"
                    );
                }
            }
        }
    }
    assert!(panicked.is_empty(), "panicked at lengths {panicked:?}");
}

/// An empty buffer parses as an empty `ModelProto`: the error says there is no graph.
#[test]
fn empty_file_has_no_graph() {
    let e = error(&[]);
    assert!(matches!(e, Error::Parse { .. }), "{e:?}");
    assert!(e.to_string().contains("holds no graph"), "{e}");
}

/// Seeded random byte buffers never panic the compiler.
#[test]
fn random_garbage_never_panics() {
    let mut rng = Rng::new(0x6b69_6c6e);
    let mut panicked = Vec::new();
    for i in 0..400 {
        let len = rng.below(600);
        let buf: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        match compile_no_panic(&buf) {
            Err(()) => panicked.push(i),
            Ok(r) => assert!(r.is_err(), "buffer {i} compiled"),
        }
    }
    assert!(panicked.is_empty(), "panicked on buffers {panicked:?}");
}

/// A valid model with a few random bytes overwritten (so most of it still parses, with
/// odd dims, names or attributes) never panics the compiler.
#[test]
fn mutated_model_never_panics() {
    let bytes = tiny_classifier(false).bytes();
    let mut rng = Rng::new(42);
    let mut panicked = Vec::new();
    for i in 0..400 {
        let mut buf = bytes.clone();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(buf.len());
            buf[at] = rng.next_u64() as u8;
        }
        if compile_no_panic(&buf).is_err() {
            panicked.push(i);
        }
    }
    assert!(panicked.is_empty(), "panicked on mutations {panicked:?}");
}

/// Values that break arithmetic and indexing: zero, negatives, huge and extreme.
const NASTY: &[i64] = &[
    -2,
    -1,
    0,
    1,
    2,
    3,
    7,
    1 << 20,
    1 << 31,
    1 << 40,
    i64::MAX,
    i64::MIN,
];

/// Attribute names worth adding to any node.
const ATTRS: &[&str] = &[
    "axis",
    "axes",
    "group",
    "kernel_shape",
    "strides",
    "pads",
    "dilations",
    "perm",
    "to",
    "size",
    "transA",
    "transB",
    "ceil_mode",
    "allowzero",
    "start",
    "end",
];

/// Operator types to swap in (supported ones, so the node gets past the support check).
const OPS: &[&str] = &[
    "Conv",
    "Gemm",
    "MatMul",
    "BatchNormalization",
    "Relu",
    "Clip",
    "Add",
    "Sum",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "LRN",
    "Softmax",
    "Concat",
    "Transpose",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "Dropout",
    "Constant",
    "ConstantOfShape",
    "Shape",
    "Gather",
    "Cast",
];

/// Applies one random structural mutation to `m` and describes it.
fn mutate(m: &mut ModelProto, rng: &mut Rng) -> String {
    let nasty = |rng: &mut Rng| NASTY[rng.below(NASTY.len())];
    let g = m.graph.mut_or_insert_default();
    let names: Vec<String> = g
        .node
        .iter()
        .flat_map(|n| n.output.iter().cloned())
        .chain(g.initializer.iter().map(|t| t.name.clone()))
        .chain(g.input.iter().map(|i| i.name.clone()))
        .chain(["".to_owned(), "ghost".to_owned()])
        .collect();
    let ni = rng.below(g.node.len().max(1));
    match rng.below(10) {
        0 if !g.node.is_empty() => {
            let n = &mut g.node[ni];
            if n.attribute.is_empty() {
                return "no attribute to change".into();
            }
            let a = rng.below(n.attribute.len());
            let attr = &mut n.attribute[a];
            let v = nasty(rng);
            attr.i = v;
            if !attr.ints.is_empty() {
                let j = rng.below(attr.ints.len());
                attr.ints[j] = v;
            }
            format!("node {ni} attribute {} = {v}", attr.name)
        }
        1 if !g.node.is_empty() => {
            let name = ATTRS[rng.below(ATTRS.len())];
            let len = rng.below(5);
            let ints: Vec<i64> = (0..len).map(|_| nasty(rng)).collect();
            let i = nasty(rng);
            let n = &mut g.node[ni];
            n.attribute.retain(|a| a.name != name);
            n.attribute.push(onnx_protobuf::AttributeProto {
                name: name.into(),
                i,
                ints: ints.clone(),
                ..Default::default()
            });
            format!("node {ni} attribute {name} = {i} / {ints:?}")
        }
        2 if !g.node.is_empty() => {
            let new = names[rng.below(names.len())].clone();
            let n = &mut g.node[ni];
            let at = rng.below(n.input.len() + 1);
            if at == n.input.len() {
                n.input.push(new.clone());
            } else {
                n.input[at] = new.clone();
            }
            format!("node {ni} input {at} = `{new}`")
        }
        3 if !g.node.is_empty() => {
            let n = &mut g.node[ni];
            if n.input.is_empty() {
                return "no input to remove".into();
            }
            let at = rng.below(n.input.len());
            n.input.remove(at);
            format!("node {ni} input {at} removed")
        }
        4 if !g.node.is_empty() => {
            let op = OPS[rng.below(OPS.len())];
            g.node[ni].op_type = op.into();
            format!("node {ni} becomes {op}")
        }
        5 if !g.node.is_empty() => {
            g.node.remove(ni);
            format!("node {ni} removed")
        }
        6 if !g.initializer.is_empty() => {
            let t = rng.below(g.initializer.len());
            let init = &mut g.initializer[t];
            let v = nasty(rng);
            if !init.int64_data.is_empty() {
                let j = rng.below(init.int64_data.len());
                init.int64_data[j] = v;
                format!("initializer {} value {j} = {v}", init.name)
            } else if !init.dims.is_empty() {
                let j = rng.below(init.dims.len());
                init.dims[j] = v;
                format!("initializer {} dim {j} = {v}", init.name)
            } else {
                init.dims.push(v);
                format!("initializer {} gets dim {v}", init.name)
            }
        }
        7 => {
            let v = nasty(rng);
            let Some(onnx_protobuf::type_proto::Value::TensorType(t)) =
                &mut g.input[0].type_.mut_or_insert_default().value
            else {
                return "input without a tensor type".into();
            };
            let dims = &mut t.shape.mut_or_insert_default().dim;
            let j = rng.below(dims.len() + 1);
            let d = onnx_protobuf::tensor_shape_proto::Dimension {
                value: Some(onnx_protobuf::tensor_shape_proto::dimension::Value::DimValue(v)),
                ..Default::default()
            };
            if j == dims.len() {
                dims.push(d);
            } else {
                dims[j] = d;
            }
            format!("input dim {j} = {v}")
        }
        8 if !g.node.is_empty() => {
            let dup = g.node[ni].clone();
            let at = rng.below(g.node.len());
            g.node.insert(at, dup);
            format!("node {ni} duplicated at {at}")
        }
        9 if !g.node.is_empty() => {
            let new = names[rng.below(names.len())].clone();
            let n = &mut g.node[ni];
            let at = rng.below(n.output.len() + 1);
            if at == n.output.len() {
                n.output.push(new.clone());
            } else {
                n.output[at] = new.clone();
            }
            format!("node {ni} output {at} = `{new}`")
        }
        _ => "nothing".into(),
    }
}

/// Valid models mutated structurally (extreme attribute values, rewired inputs and
/// outputs, swapped operator types, removed or duplicated nodes, odd initializer and
/// input dims) never panic the compiler. `KILN_FUZZ_ITERS=N` runs N models instead of
/// 3000 (40 000 pass).
#[test]
fn structured_mutations_never_panic() {
    let bases = [
        common::kitchen_sink().proto(),
        tiny_classifier(false).proto(),
    ];
    let mut rng = Rng::new(2024);
    let mut panicked = Vec::new();
    let iters = std::env::var("KILN_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    for i in 0..iters {
        let mut m = bases[i % bases.len()].clone();
        let steps: Vec<String> = (0..1 + rng.below(3))
            .map(|_| mutate(&mut m, &mut rng))
            .collect();
        let bytes = m.write_to_bytes().unwrap();
        if compile_no_panic(&bytes).is_err() {
            panicked.push(format!(
                "#{i} (base {}): {}",
                i % bases.len(),
                steps.join("; ")
            ));
        }
    }
    assert!(
        panicked.is_empty(),
        "{} mutated models panicked:\n{}",
        panicked.len(),
        panicked.join("\n")
    );
}

/// The kitchen-sink model (most supported operators, folded shape arithmetic)
/// compiles to code that parses and a plan that validates.
#[test]
fn kitchen_sink_compiles() {
    let c = compile(&common::kitchen_sink().bytes()).unwrap();
    syn::parse_file(&c.code).expect("the generated code parses");
    kiln_compiler::plan::validate(&c.plan_input, &c.plan).expect("the plan validates");
    assert_eq!(c.program.outputs[0].0.shape, [1, 6]);
}

/// A text file given to `compile(path)` is a `Parse` error that names the path.
#[test]
fn text_file_is_a_parse_error_naming_the_path() {
    let dir = TempDir::new("text");
    let path = dir.join("notes.onnx");
    std::fs::write(&path, "This is not an ONNX model, just some text.\n").unwrap();
    let e = kiln_compiler::compile(&path, &Options::default()).unwrap_err();
    let text = e.to_string();
    match &e {
        Error::Parse { path: p, .. } => assert_eq!(p, &path),
        other => panic!("expected Error::Parse, got {other:?}"),
    }
    assert!(
        text.starts_with(&format!(
            "{} is not a readable ONNX model: ",
            path.display()
        )),
        "{text}"
    );
}

/// A missing file is an `Io` error naming the path.
#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let dir = TempDir::new("missing");
    let path = dir.join("nowhere.onnx");
    let e = kiln_compiler::compile(&path, &Options::default()).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with(&format!("reading {}: ", path.display())),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------
// Unsupported operators

/// One `Error::Unsupported` lists every unsupported operator type with its opset,
/// node count and first node names, custom domains included; supported nodes are not
/// listed.
#[test]
fn unsupported_operators_are_listed_together() {
    let bytes = Model::new(13)
        .opset("com.example", 2)
        .input("x", &[1, 4])
        .node(Node::new("Foo", &["x"], &["a"]).name("foo_a"))
        .node(Node::new("Relu", &["a"], &["b"]).name("relu"))
        .node(Node::new("Foo", &["b"], &["c"]).name("foo_b"))
        .node(Node::new("Bar", &["c"], &["d"]).name("bar"))
        .node(Node::new("Foo", &["d"], &["e"]))
        .node(
            Node::new("Gelu", &["e"], &["f"])
                .name("gelu")
                .domain("com.example"),
        )
        .output("f")
        .bytes();
    let e = error(&bytes);
    let Error::Unsupported(ops) = &e else {
        panic!("expected Error::Unsupported, got {e:?}");
    };
    let summary: Vec<_> = ops
        .iter()
        .map(|o| (o.op_type.as_str(), o.domain.as_str(), o.opset, o.count))
        .collect();
    assert_eq!(
        summary,
        [
            ("Foo", "", 13, 3),
            ("Bar", "", 13, 1),
            ("Gelu", "com.example", 2, 1)
        ]
    );
    // Unnamed nodes are named by their index.
    assert_eq!(ops[0].nodes, ["foo_a", "foo_b", "#4"]);
    assert_eq!(
        e.to_string(),
        "the model uses 3 operator types Kiln does not support:\n  \
         Foo (opset 13): 3 nodes, first: foo_a, foo_b, #4\n  \
         Bar (opset 13): 1 node, first: bar\n  \
         com.example::Gelu (opset 2): 1 node, first: gelu"
    );
}

/// A supported op type in a custom domain is not the ONNX operator: it is unsupported.
#[test]
fn supported_name_in_a_custom_domain_is_unsupported() {
    let bytes = Model::new(13)
        .opset("com.example", 1)
        .input("x", &[1, 4])
        .node(
            Node::new("Relu", &["x"], &["y"])
                .name("r")
                .domain("com.example"),
        )
        .output("y")
        .bytes();
    let e = error(&bytes);
    assert_eq!(
        e.to_string(),
        "the model uses 1 operator type Kiln does not support:\n  \
         com.example::Relu (opset 1): 1 node, first: r"
    );
}

/// Only the first three node names are listed, but all are counted.
#[test]
fn unsupported_list_caps_node_names() {
    let mut m = Model::new(13).input("x", &[1]);
    for i in 0..5 {
        let (a, b) = (format!("v{i}"), format!("v{}", i + 1));
        let a = if i == 0 { "x".to_owned() } else { a };
        m = m.node(Node::new("Foo", &[&a], &[&b]).name(&format!("foo{i}")));
    }
    let e = error(&m.output("v5").bytes());
    assert!(
        e.to_string()
            .ends_with("Foo (opset 13): 5 nodes, first: foo0, foo1, foo2"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------
// Graph inputs and --input

/// A symbolic dim with no `--input` is an `Error::Input` naming the input, the dim's
/// name and position, and how to give it.
#[test]
fn symbolic_dim_needs_an_input_shape() {
    let e = error(&tiny_classifier(true).bytes());
    let Error::Input { input, .. } = &e else {
        panic!("expected Error::Input, got {e:?}");
    };
    assert_eq!(input, "x");
    assert_eq!(
        e.to_string(),
        "input `x`: dim 0 is symbolic (`batch`) in [batch, 3, 8, 8]; give it with \
         --input x=DIMS (for example 1x3x8x8)"
    );
}

/// Dims the model leaves unknown (no value and no name, or a negative value) are shown
/// as the model has them, not under an invented name.
#[test]
fn unknown_dims_get_a_symbol_named_after_input_and_axis() {
    let e = error(
        &Model::new(13)
            .input_sym("x", &["-1", "3"])
            .node(Node::new("Relu", &["x"], &["y"]))
            .output("y")
            .bytes(),
    );
    assert_eq!(
        e.to_string(),
        "input `x`: dim 0 is symbolic (`x[0]`) in [x[0], 3]; give it with --input x=DIMS \
         (for example 1x3)"
    );
    let mut m = Model::new(13)
        .input_sym("x", &["2", "n"])
        .node(Node::new("Relu", &["x"], &["y"]))
        .output("y")
        .proto();
    if let Some(onnx_protobuf::type_proto::Value::TensorType(t)) =
        &mut m.graph.mut_or_insert_default().input[0]
            .type_
            .mut_or_insert_default()
            .value
    {
        t.shape.mut_or_insert_default().dim[1].value = None;
    }
    assert_eq!(
        error(&m.write_to_bytes().unwrap()).to_string(),
        "input `x`: dim 1 is symbolic (`x[1]`) in [2, x[1]]; give it with --input x=DIMS \
         (for example 2x1)"
    );
}

/// Giving the symbolic input's shape through `Options.input_dims` makes it compile with
/// that shape.
#[test]
fn input_dims_resolve_symbolic_dims() {
    let c = compile_opts(
        &tiny_classifier(true).bytes(),
        &with_inputs(&[("x", &[2, 3, 8, 8])]),
    )
    .unwrap();
    assert_eq!(c.program.inputs[0].shape, [2, 3, 8, 8]);
    assert_eq!(c.program.outputs[0].0.shape, [2, 5]);
}

/// An `--input` of the wrong rank names the declared shape and both ranks.
#[test]
fn input_dims_of_the_wrong_rank() {
    let e = error_opts(
        &tiny_classifier(true).bytes(),
        &with_inputs(&[("x", &[2, 3, 8])]),
    );
    assert!(matches!(e, Error::Input { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "input `x`: the model declares rank 4 ([batch, 3, 8, 8]), --input gave rank 3"
    );
}

/// An `--input` contradicting a fixed dim names the dim and both values.
#[test]
fn input_dims_contradicting_a_fixed_dim() {
    let e = error_opts(
        &tiny_classifier(true).bytes(),
        &with_inputs(&[("x", &[2, 4, 8, 8])]),
    );
    assert!(matches!(e, Error::Input { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "input `x`: dim 1 is fixed to 3 by the model, --input gave 4"
    );
}

/// An `--input` for an input the model lacks lists the real inputs (initializers
/// excluded).
#[test]
fn input_dims_for_an_unknown_input() {
    let e = error_opts(
        &tiny_classifier(true).bytes(),
        &with_inputs(&[("data", &[1, 3, 8, 8])]),
    );
    assert!(matches!(e, Error::Input { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "input `data`: the model has no such input (inputs: x)"
    );
}

/// A graph input of an element type Kiln does not know names the input and the code.
#[test]
fn input_of_an_unknown_element_type() {
    let bytes = Model::new(13)
        .typed_input("s", 8, &["2"]) // STRING
        .node(Node::new("Relu", &["s"], &["y"]))
        .output("y")
        .bytes();
    let e = error(&bytes);
    assert_eq!(
        e.to_string(),
        "input `s`: element type string is not supported"
    );
}

/// Int64 graph inputs run on typed kernels: the generated `Inputs` take `&[i64]`.
#[test]
fn int64_graph_inputs_get_typed_fields() {
    let bytes = Model::new(13)
        .typed_input("a", INT64, &["2", "3"])
        .typed_input("b", INT64, &["2", "3"])
        .node(Node::new("Add", &["a", "b"], &["c"]).name("add"))
        .output("c")
        .bytes();
    let c = compile(&bytes).expect("int64 Add compiles");
    assert!(c.code.contains("pub a: &'a [i64]"), "{}", c.code);
    assert!(c.code.contains("pub c: &'a [i64]"), "{}", c.code);
}

/// An operator given an element type it does not take names the node, the op, the
/// input's type and what it takes.
#[test]
fn unsupported_element_type_names_the_node() {
    let bytes = Model::new(13)
        .typed_input("x", INT64, &["1", "1", "4", "4"])
        .init_i64("w", &[1, 1, 1, 1], vec![1])
        .node(Node::new("Conv", &["x", "w"], &["y"]).name("conv_i"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "conv_i",
        "Conv",
        "input 0 has element type int64; Conv takes float (f32, f64, f16, bf16)",
    );
}

/// Adding an int64 constant to a float32 input is a type error naming the node.
#[test]
fn mixed_element_types_name_the_node() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .init_i64("k", &[3], vec![1, 2, 3])
        .node(Node::new("Add", &["x", "k"], &["y"]).name("add_k"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "add_k",
        "Add",
        "input 1 has element type int64, input 0 has float32; they must match",
    );
}

// ---------------------------------------------------------------------------------
// Shape errors name the node and op

/// Conv weight channels that do not match the input's.
#[test]
fn conv_channel_mismatch() {
    let bytes = Model::new(13)
        .input("x", &[1, 3, 8, 8])
        .init("w", &[4, 2, 3, 3], vec![0.0; 72])
        .node(Node::new("Conv", &["x", "w"], &["y"]).name("conv1"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "conv1",
        "Conv",
        "input has 3 channels, weight [4, 2, 3, 3] with group 1 expects 2",
    );
}

/// A Conv bias of the wrong length.
#[test]
fn conv_bias_mismatch() {
    let bytes = Model::new(13)
        .input("x", &[1, 3, 8, 8])
        .init("w", &[4, 3, 3, 3], vec![0.0; 108])
        .init("b", &[5], vec![0.0; 5])
        .node(Node::new("Conv", &["x", "w", "b"], &["y"]).name("conv1"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "conv1",
        "Conv",
        "bias has shape [5], expected [4]",
    );
}

/// A Conv window larger than the (padded) input.
#[test]
fn conv_window_too_large() {
    let bytes = Model::new(13)
        .input("x", &[1, 1, 2, 2])
        .init("w", &[1, 1, 3, 3], vec![0.0; 9])
        .node(Node::new("Conv", &["x", "w"], &["y"]).name("conv1"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "conv1",
        "Conv",
        "window of extent 3 does not fit spatial dim 0 of size 2",
    );
}

/// Gemm with mismatched inner dims.
#[test]
fn gemm_inner_dim_mismatch() {
    let bytes = Model::new(13)
        .input("a", &[2, 3])
        .init("b", &[4, 5], vec![0.0; 20])
        .node(Node::new("Gemm", &["a", "b"], &["y"]).name("fc"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "fc",
        "Gemm",
        "inner dimensions differ: A [2, 3], B [4, 5]",
    );
}

/// MatMul with mismatched inner dims.
#[test]
fn matmul_inner_dim_mismatch() {
    let bytes = Model::new(13)
        .input("a", &[2, 3])
        .init("b", &[4, 5], vec![0.0; 20])
        .node(Node::new("MatMul", &["a", "b"], &["y"]).name("mm"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "mm",
        "MatMul",
        "inner dimensions differ: [2, 3] × [4, 5]",
    );
}

/// Reshape to a shape with a different element count.
#[test]
fn reshape_to_an_incompatible_count() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .init_i64("shape", &[2], vec![4, 2])
        .node(Node::new("Reshape", &["x", "shape"], &["y"]).name("reshape"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "reshape",
        "Reshape",
        "cannot reshape [2, 3] (6 elements) to [4, 2]",
    );
}

/// Reshape whose target is computed at run time (not a constant).
#[test]
fn reshape_to_a_run_time_shape() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .input("s", &[2])
        .node(Node::new("Reshape", &["x", "s"], &["y"]).name("reshape"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "reshape",
        "Reshape",
        "input 1 (`s`, the target shape) must be a constant once input shapes are fixed",
    );
}

/// Concat inputs that differ off the concatenation axis.
#[test]
fn concat_dim_mismatch() {
    let bytes = Model::new(13)
        .input("a", &[1, 2, 4])
        .input("b", &[1, 3, 5])
        .node(
            Node::new("Concat", &["a", "b"], &["y"])
                .name("cat")
                .int("axis", 1),
        )
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "cat",
        "Concat",
        "input `b` has shape [1, 3, 5], incompatible with [1, 2, 4] along axis 1",
    );
}

/// Concat without its required `axis` attribute.
#[test]
fn concat_without_axis() {
    let bytes = Model::new(13)
        .input("a", &[1, 2])
        .node(Node::new("Concat", &["a", "a"], &["y"]).name("cat"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "cat",
        "Concat",
        "attribute `axis` is required",
    );
}

/// Add of shapes that do not broadcast.
#[test]
fn add_not_broadcastable() {
    let bytes = Model::new(13)
        .input("a", &[2, 3])
        .input("b", &[4])
        .node(Node::new("Add", &["a", "b"], &["y"]).name("add"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "add",
        "Add",
        "shapes [2, 3], [4] do not broadcast",
    );
}

/// A binary op given one operand.
#[test]
fn add_with_a_missing_operand() {
    let bytes = Model::new(13)
        .input("a", &[2, 3])
        .node(Node::new("Add", &["a"], &["y"]).name("add"))
        .output("y")
        .bytes();
    assert_node_error(&error(&bytes), "add", "Add", "input 1 is missing");
}

/// A softmax axis out of range.
#[test]
fn softmax_axis_out_of_range() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .node(
            Node::new("Softmax", &["x"], &["y"])
                .name("sm")
                .int("axis", 2),
        )
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "sm",
        "Softmax",
        "axis 2 is out of range for rank 2",
    );
}

/// An invalid attribute value (negative kernel size) is caught at load time.
#[test]
fn negative_attribute_value() {
    let bytes = Model::new(13)
        .input("x", &[1, 1, 4, 4])
        .node(
            Node::new("MaxPool", &["x"], &["y"])
                .name("pool")
                .ints("kernel_shape", &[2, -2]),
        )
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "pool",
        "MaxPool",
        "attribute `kernel_shape` has a negative value -2",
    );
}

/// A node reading a value that nothing defines names the node, the op, the opset and
/// the missing value.
#[test]
fn undefined_value() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .node(Node::new("Add", &["x", "ghost"], &["y"]).name("add"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "add",
        "Add",
        "reads `ghost`, which no node, graph input or initializer defines",
    );
}

/// A graph output that no node produces.
#[test]
fn output_produced_by_nothing() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .node(Node::new("Relu", &["x"], &["y"]).name("relu"))
        .output("z")
        .bytes();
    let e = error(&bytes);
    assert!(matches!(e, Error::Model(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "the model is malformed: graph output `z` is produced by no node"
    );
}

/// A graph with no outputs.
#[test]
fn graph_without_outputs() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .node(Node::new("Relu", &["x"], &["y"]))
        .bytes();
    assert_eq!(
        error(&bytes).to_string(),
        "the model is malformed: the graph has no outputs"
    );
}

/// Two nodes writing the same value (ONNX graphs are SSA).
#[test]
fn value_defined_twice() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .node(Node::new("Relu", &["x"], &["y"]).name("first"))
        .node(Node::new("Neg", &["x"], &["y"]).name("second"))
        .output("y")
        .bytes();
    let e = error(&bytes);
    assert!(matches!(e, Error::Node { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("output `y` is already defined elsewhere (ONNX graphs are SSA)"),
        "{e}"
    );
}

/// A cycle names the nodes that can never run (it used to say only "has a cycle").
#[test]
fn cycle() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .node(Node::new("Add", &["x", "b"], &["a"]).name("n_a"))
        .node(Node::new("Relu", &["a"], &["b"]).name("n_b"))
        .output("b")
        .bytes();
    let e = error(&bytes);
    assert!(matches!(e, Error::Model(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "the model is malformed: the graph has a cycle; 2 nodes can never run: \
         `n_a` (Add), `n_b` (Relu)"
    );
}

/// Nodes listed out of order (some exporters do this) are sorted, not rejected.
#[test]
fn nodes_out_of_order_are_sorted() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .node(Node::new("Neg", &["a"], &["b"]).name("second"))
        .node(Node::new("Relu", &["x"], &["a"]).name("first"))
        .output("b")
        .bytes();
    let c = compile(&bytes).unwrap();
    let order: Vec<_> = c.program.steps.iter().map(|s| s.node.as_str()).collect();
    assert_eq!(order, ["first", "second"]);
}

/// Conv output channels that do not divide into the groups (the message used to claim
/// the input channels were wrong).
#[test]
fn conv_output_channels_not_a_multiple_of_group() {
    let bytes = Model::new(13)
        .input("x", &[1, 4, 8, 8])
        .init("w", &[3, 2, 3, 3], vec![0.0; 54])
        .node(
            Node::new("Conv", &["x", "w"], &["y"])
                .name("conv1")
                .int("group", 2),
        )
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "conv1",
        "Conv",
        "weight [3, 2, 3, 3] has 3 output channels, not a multiple of group 2",
    );
}

/// An absurd `group` is an error, not an overflow.
#[test]
fn conv_huge_group() {
    let bytes = Model::new(13)
        .input("x", &[1, 3, 8, 8])
        .init("w", &[4, 3, 3, 3], vec![0.0; 108])
        .node(
            Node::new("Conv", &["x", "w"], &["y"])
                .name("conv1")
                .int("group", i64::MAX),
        )
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "conv1",
        "Conv",
        &format!("group {} exceeds the input's 3 channels", i64::MAX),
    );
}

/// Absurd pads or dilations are errors, not overflows.
#[test]
fn conv_huge_pads_and_dilations() {
    let conv = |node: Node| {
        Model::new(13)
            .input("x", &[1, 3, 8, 8])
            .init("w", &[4, 3, 3, 3], vec![0.0; 108])
            .node(node)
            .output("y")
            .bytes()
    };
    let n = || Node::new("Conv", &["x", "w"], &["y"]).name("conv1");
    let pads = conv(n().ints("pads", &[i64::MAX, 0, i64::MAX, 0]));
    assert_node_error(&error(&pads), "conv1", "Conv", "output `y`: shape [1, 4, ");
    let pads = conv(n().ints("pads", &[1 << 20, 1 << 20, 1 << 20, 1 << 20]));
    assert_node_error(
        &error(&pads),
        "conv1",
        "Conv",
        "output `y`: shape [1, 4, 2097158, 2097158] is too large: \
         Kiln supports at most 17179869184 elements per tensor",
    );
    let dilations = conv(
        n().ints("kernel_shape", &[3, 3])
            .ints("dilations", &[i64::MAX, 1]),
    );
    assert_node_error(
        &error(&dilations),
        "conv1",
        "Conv",
        "does not fit spatial dim 0 of size 8",
    );
}

/// A Gemm bias C that broadcasts with [M, N] but not *to* it (rank 3, or larger than
/// the output) is rejected; it used to be accepted and computed with wrong strides.
#[test]
fn gemm_bias_must_broadcast_to_the_output() {
    for (c_dims, c_len) in [(&[1i64, 1, 2][..], 2), (&[2, 2][..], 4), (&[3][..], 3)] {
        let bytes = Model::new(13)
            .input("a", &[1, 3])
            .init("b", &[3, 2], vec![0.0; 6])
            .init("c", c_dims, vec![0.0; c_len])
            .node(Node::new("Gemm", &["a", "b", "c"], &["y"]).name("fc"))
            .output("y")
            .bytes();
        assert_node_error(
            &error(&bytes),
            "fc",
            "Gemm",
            &format!("C has shape {c_dims:?}, which does not broadcast to [1, 2]"),
        );
    }
}

/// A graph input whose shape has more elements than Kiln supports (from the model or
/// from `--input`) is an input error, not an overflow.
#[test]
fn huge_input_shapes() {
    let relu = |dims: &[&str]| {
        Model::new(13)
            .input_sym("x", dims)
            .node(Node::new("Relu", &["x"], &["y"]))
            .output("y")
            .bytes()
    };
    let max = i64::MAX.to_string();
    let e = error(&relu(&[&max, &max]));
    assert!(matches!(e, Error::Input { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "input `x`: shape [{max}, {max}] is too large: \
             Kiln supports at most 17179869184 elements per tensor"
        )
    );
    // Sizes past i64 saturate as dims; --input names the size it was given.
    let e = error_opts(&relu(&["n", "4"]), &with_inputs(&[("x", &[usize::MAX, 4])]));
    assert!(
        e.to_string()
            .starts_with(&format!("input `x`: shape [{max}, 4] is too large")),
        "{e}"
    );
    let spec = format!("x={}x4", usize::MAX);
    let e = kiln_compiler::parse_input_spec(&spec).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "invalid option: `{spec}`: {} is larger than any supported size",
            usize::MAX
        )
    );
}

/// A Reshape target whose product overflows is a clear error.
#[test]
fn reshape_to_a_huge_shape() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .init_i64("shape", &[3], vec![-1, 1 << 40, 1 << 40])
        .node(Node::new("Reshape", &["x", "shape"], &["y"]).name("reshape"))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "reshape",
        "Reshape",
        "cannot reshape [2, 3] (6 elements) to [-1, 1099511627776, 1099511627776]",
    );
}

/// ConstantOfShape asked for a huge constant fails instead of allocating it.
#[test]
fn constant_of_shape_too_large() {
    let bytes = Model::new(13)
        .input("x", &[2])
        .init_i64("s", &[2], vec![1 << 20, 1 << 20])
        .node(Node::new("ConstantOfShape", &["s"], &["c"]).name("zeros"))
        .node(Node::new("Add", &["x", "c"], &["y"]))
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "zeros",
        "ConstantOfShape",
        "the constant of shape [1048576, 1048576] is too large to compute at compile time",
    );
}

/// A node that lists more outputs than its operator produces, with the extra one used,
/// names the node and the output (it used to fail later as "nothing computed it").
#[test]
fn extra_output_used() {
    let bytes = Model::new(13)
        .input("x", &[2])
        .node(Node::new("Relu", &["x"], &["y", "z"]).name("relu"))
        .output("z")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "relu",
        "Relu",
        "output 1 (`z`) is used, but the operator produces only 1 output",
    );
}

/// A Flatten axis out of range is reported as given, not after normalisation.
#[test]
fn flatten_axis_out_of_range() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .node(
            Node::new("Flatten", &["x"], &["y"])
                .name("flat")
                .int("axis", -3),
        )
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "flat",
        "Flatten",
        "axis -3 is out of range for rank 2",
    );
}

// ---------------------------------------------------------------------------------
// Initializers

fn model_with_weight(w: TensorProto) -> Vec<u8> {
    Model::new(13)
        .input("x", &[2, 2])
        .init_tensor(w)
        .node(Node::new("Add", &["x", "w"], &["y"]).name("add"))
        .output("y")
        .bytes()
}

fn float_tensor(dims: &[i64]) -> TensorProto {
    TensorProto {
        name: "w".into(),
        dims: dims.to_vec(),
        data_type: common::FLOAT,
        ..Default::default()
    }
}

/// `raw_data` shorter than the dims need names the initializer and both sizes.
#[test]
fn initializer_raw_data_length_mismatch() {
    let mut w = float_tensor(&[2, 2]);
    w.raw_data = vec![0; 12];
    let e = error(&model_with_weight(w));
    assert!(matches!(e, Error::Model(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "the model is malformed: initializer `w`: raw data holds 12 bytes, \
         expected 4 elements of float32"
    );
}

/// Typed data (`float_data`) of the wrong count names the initializer and its shape.
#[test]
fn initializer_float_data_count_mismatch() {
    let mut w = float_tensor(&[2, 2]);
    w.float_data = vec![1.0, 2.0, 3.0];
    assert_eq!(
        error(&model_with_weight(w)).to_string(),
        "the model is malformed: initializer `w`: holds 3 values, its shape [2, 2] needs 4"
    );
}

/// A negative dim names the initializer and the dim.
#[test]
fn initializer_negative_dim() {
    let mut w = float_tensor(&[2, -2]);
    w.float_data = vec![0.0; 4];
    assert_eq!(
        error(&model_with_weight(w)).to_string(),
        "the model is malformed: initializer `w`: negative dimension -2"
    );
}

/// Dims whose product overflows are an error, not a panic or a huge allocation.
#[test]
fn initializer_dims_overflow() {
    let mut w = float_tensor(&[i64::MAX, i64::MAX]);
    w.raw_data = vec![0; 8];
    assert_eq!(
        error(&model_with_weight(w)).to_string(),
        format!(
            "the model is malformed: initializer `w`: shape [{m}, {m}] is too large: \
             Kiln supports at most 17179869184 elements per tensor",
            m = i64::MAX
        )
    );
}

/// Weights in an external file are reported as not supported.
#[test]
fn initializer_external_data() {
    let mut w = float_tensor(&[2, 2]);
    w.external_data.push(StringStringEntryProto {
        key: "location".into(),
        value: "weights.bin".into(),
        ..Default::default()
    });
    assert_eq!(
        error(&model_with_weight(w)).to_string(),
        "the model is malformed: initializer `w`: external data files are not supported yet"
    );
}

/// `data_location = EXTERNAL` alone (no `external_data` entries) is also reported as
/// external data, not as "holds 0 values".
#[test]
fn initializer_external_location() {
    let mut w = float_tensor(&[2, 2]);
    w.data_location = onnx_protobuf::tensor_proto::DataLocation::EXTERNAL.into();
    assert_eq!(
        error(&model_with_weight(w)).to_string(),
        "the model is malformed: initializer `w`: external data files are not supported yet"
    );
}

/// An element type Kiln does not know (string) names the initializer and the code.
#[test]
fn initializer_unknown_element_type() {
    let mut w = float_tensor(&[1]);
    w.data_type = 8; // STRING
    w.string_data.push(b"hello".to_vec());
    assert_eq!(
        error(&model_with_weight(w)).to_string(),
        "the model is malformed: initializer `w`: element type string is not supported"
    );
}

/// Two initializers of the same name.
#[test]
fn initializer_defined_twice() {
    let bytes = Model::new(13)
        .input("x", &[2])
        .init("w", &[2], vec![1.0, 2.0])
        .init("w", &[2], vec![3.0, 4.0])
        .node(Node::new("Add", &["x", "w"], &["y"]))
        .output("y")
        .bytes();
    assert_eq!(
        error(&bytes).to_string(),
        "the model is malformed: value `w` is defined twice"
    );
}

// ---------------------------------------------------------------------------------
// Options

/// Alignments that are not a power of two in 4..=256 are `Error::Options`.
#[test]
fn bad_alignment() {
    let bytes = tiny_classifier(false).bytes();
    for alignment in [0, 2, 3, 12, 100, 512] {
        let e = error_opts(
            &bytes,
            &Options {
                alignment,
                ..Options::default()
            },
        );
        assert!(matches!(e, Error::Options(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "invalid option: alignment must be a power of two between 4 and 256, got {alignment}"
            )
        );
    }
    for alignment in [4, 64, 256] {
        let opts = Options {
            alignment,
            ..Options::default()
        };
        assert!(compile_opts(&bytes, &opts).is_ok(), "alignment {alignment}");
    }
}

/// Module names must be Rust identifiers (they name the generated module).
#[test]
fn bad_module_name() {
    let bytes = tiny_classifier(false).bytes();
    for name in ["", "my model", "a/b", "../up", "naïve", "my-model", "1st"] {
        let e = error_opts(
            &bytes,
            &Options {
                name: Some(name.into()),
                ..Options::default()
            },
        );
        assert!(matches!(e, Error::Options(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "invalid option: name `{name}` must be a Rust identifier: letters, digits \
                 and `_`, not starting with a digit"
            )
        );
    }
}

/// The default module name is the file stem with other characters replaced by `_`.
#[test]
fn default_name_is_sanitized() {
    let c = compile_bytes(
        &tiny_classifier(false).bytes(),
        "my model.v2.onnx",
        "my model.v2",
        &Options::default(),
    )
    .unwrap();
    assert_eq!(c.name, "my_model_v2");
    assert_eq!(c.code_file_name(), "my_model_v2.rs");
}

/// `parse_input_spec` rejects malformed `--input` values with `Error::Options`.
#[test]
fn bad_input_specs() {
    assert_eq!(
        kiln_compiler::parse_input_spec("x=1x3x8x8").unwrap(),
        ("x".to_owned(), dims_of(&[1, 3, 8, 8]))
    );
    // A dim may be a symbol; with commas a symbol may hold an `x`.
    let (_, dims) = kiln_compiler::parse_input_spec("x=1x3x48xW").unwrap();
    assert_eq!(fmt_dims(&dims), "[1, 3, 48, W]");
    let (_, dims) = kiln_compiler::parse_input_spec("ids=1,max_len").unwrap();
    assert_eq!(fmt_dims(&dims), "[1, max_len]");
    for (spec, message) in [
        ("x", "`x` should look like NAME=1x3x224x224"),
        (
            "x=1x-ax8",
            "`x=1x-ax8`: `-a` is neither a size nor a symbol name (shapes look like 1x3x224x224 or 1x3x48xW)",
        ),
        (
            "x=",
            "`x=`: `` is neither a size nor a symbol name (shapes look like 1x3x224x224 or 1x3x48xW)",
        ),
        (
            "x=-1x3",
            "`x=-1x3`: `-1` is neither a size nor a symbol name (shapes look like 1x3x224x224 or 1x3x48xW)",
        ),
    ] {
        let e = kiln_compiler::parse_input_spec(spec).unwrap_err();
        assert!(matches!(e, Error::Options(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("invalid option: {message}"),
            "{spec}"
        );
    }
}

/// `parse_dim_spec` reads `W=32..2048[:step]` and rejects ranges inference cannot use.
#[test]
fn dim_specs() {
    let r = kiln_compiler::parse_dim_spec("W=32..2048:32").unwrap();
    assert_eq!((&*r.name, r.min, r.max, r.step), ("W", 32, 2048, 32));
    assert_eq!(r.to_string(), "W=32..2048:32");
    let r = kiln_compiler::parse_dim_spec("seq_len=1..512").unwrap();
    assert_eq!((r.min, r.max, r.step, r.largest()), (1, 512, 1, 512));
    for (spec, why) in [
        ("W", "no `=`"),
        ("W=32", "no `..`"),
        ("W=a..2", "a bound is not a number"),
        ("W=1..2:x", "the step is not a number"),
        ("3W=1..2", "the name is not a symbol name"),
        (
            "W=0..8",
            "the smallest value must be at least 1 (a zero-sized dim is a separate build)",
        ),
        ("W=9..8", "9 is above 8"),
        ("W=1..8:0", "the step must be at least 1"),
        (
            "W=1..4294967296",
            "4294967296 is above the largest supported dim, 2^31",
        ),
    ] {
        let e = kiln_compiler::parse_dim_spec(spec).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("invalid option: `{spec}` should look like W=32..2048 or W=32..2048:8: {why}"),
            "{spec}"
        );
    }
}

/// A declared symbol compiles to one build over its range (`Dims`, `SYMBOLS`,
/// `arena_bytes`); what that build cannot serve is an error naming the option: the
/// CUDA target, and a symbol no input has as a dim of its own (run cannot read it).
#[test]
fn declared_symbols_compile_over_their_range() {
    let bytes = Model::new(13)
        .input_sym("x", &["N", "3"])
        .node(Node::new("Relu", &["x"], &["y"]))
        .output("y")
        .bytes();
    let opts = Options {
        symbol_ranges: vec![kiln_compiler::parse_dim_spec("N=2..8").unwrap()],
        ..Options::default()
    };
    let c = kiln_compiler::compile_bytes(&bytes, "t.onnx", "t", &opts).unwrap();
    for item in [
        "pub struct Dims",
        "pub const DIMS_MAX: Dims = Dims { n: 8 };",
        "pub fn arena_bytes(dims: &Dims)",
        "::kiln_runtime::dims::size(3i64 * s.n)",
    ] {
        assert!(c.code.contains(item), "{item} missing from:\n{}", c.code);
    }
    let cuda = Options {
        target: kiln_compiler::Target::Cuda,
        ..opts.clone()
    };
    let e = kiln_compiler::compile_bytes(&bytes, "t.onnx", "t", &cuda).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid option: dims declared with --dim build for the CPU target only, for now; fix \
         every dim with --input for --target cuda"
    );
    let unread = Options {
        symbol_ranges: vec![
            kiln_compiler::parse_dim_spec("N=2..8").unwrap(),
            kiln_compiler::parse_dim_spec("M=1..4").unwrap(),
        ],
        ..Options::default()
    };
    let e = kiln_compiler::compile_bytes(&bytes, "t.onnx", "t", &unread).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid option: --dim M=1..4: no input of the model (x) has `M` as a dim of its own, \
         so its value cannot be read from the input shapes"
    );
    // --input may rename it and give the others.
    let opts = Options {
        input_dims: vec![(
            "x".into(),
            kiln_compiler::parse_input_spec("x=Bx3").unwrap().1,
        )],
        ..Options::default()
    };
    let e = kiln_compiler::compile_bytes(&bytes, "t.onnx", "t", &opts).unwrap_err();
    assert!(
        e.to_string().contains("dim 0 is symbolic (`B`) in [B, 3]"),
        "{e}"
    );
    let opts = Options {
        input_dims: vec![(
            "x".into(),
            kiln_compiler::parse_input_spec("x=Bx4").unwrap().1,
        )],
        ..Options::default()
    };
    let e = kiln_compiler::compile_bytes(&bytes, "t.onnx", "t", &opts).unwrap_err();
    assert!(
        e.to_string()
            .contains("dim 1 is fixed to 3 by the model, --input gave 4"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------
// A passing model

/// The tiny classifier, with its symbolic batch given through `input_dims`, compiles to
/// code that parses, declares `ARENA_BYTES`, comments every kernel call with its node,
/// and embeds its weights; its memory plan validates.
#[test]
fn tiny_classifier_compiles() {
    let bytes = tiny_classifier(true).bytes();
    let opts = with_inputs(&[("x", &[2, 3, 8, 8])]);
    let c = compile_opts(&bytes, &opts).unwrap();

    syn::parse_file(&c.code).expect("the generated code parses");
    assert!(c.code.contains("pub const ARENA_BYTES"), "{}", c.code);
    assert_eq!(c.code.matches("include_bytes!").count(), 1);
    // Relu is fused into the convolution; every other node is one commented step.
    let steps: Vec<_> = c.program.steps.iter().map(|s| s.node.as_str()).collect();
    assert_eq!(steps, ["conv1", "gap", "fc", "softmax"]);
    for node in steps {
        assert!(
            c.code.lines().any(|l| {
                let l = l.trim_start();
                l.starts_with("// ") && l.contains(node)
            }),
            "no `// ` comment names `{node}`:\n{}",
            c.code
        );
    }
    kiln_compiler::plan::validate(&c.plan_input, &c.plan).expect("the plan validates");
    // Weights: conv 108 + 4, fc 20 + 5 floats (each entry aligned).
    assert!(c.weights.len() >= (108 + 4 + 20 + 5) * 4);
    assert_eq!(c.weights.len() % 4, 0);
}

/// With `WeightsMode::File` the generated code embeds nothing.
#[test]
fn weights_from_a_file_are_not_embedded() {
    let opts = Options {
        weights: WeightsMode::File,
        ..Options::default()
    };
    let c = compile_opts(&tiny_classifier(false).bytes(), &opts).unwrap();
    syn::parse_file(&c.code).expect("the generated code parses");
    assert!(!c.code.contains("include_bytes!"), "{}", c.code);
    assert!(c.code.contains("pub const ARENA_BYTES"));
}

/// `write_to` writes `NAME.rs` and `NAME.weights.bin` and leaves unchanged files alone.
#[test]
fn write_to_writes_code_and_weights() {
    let c = compile(&tiny_classifier(false).bytes()).unwrap();
    let tmp = TempDir::new("write-to");
    let dir = tmp.join("nested");
    let path = c.write_to(&dir).unwrap();
    assert_eq!(path, dir.join("test.rs"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), c.code);
    assert_eq!(
        std::fs::read(dir.join("test.weights.bin")).unwrap(),
        c.weights
    );
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    c.write_to(&dir).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        before
    );
}

/// An input that sets a shape must be known at compile time: the error names it, and
/// `Options::constant_inputs` binds it (it then leaves the generated inputs); a bound
/// value of the wrong type is an error naming the input.
#[test]
fn constant_inputs_bind_shape_inputs() {
    let bytes = Model::new(13)
        .input("x", &[2, 3])
        .typed_input("shape", INT64, &["2"])
        .node(Node::new("Reshape", &["x", "shape"], &["y"]).name("r"))
        .output("y")
        .bytes();
    let text = error(&bytes).to_string();
    assert!(
        text.contains("input 1 (`shape`, the target shape) must be a constant"),
        "{text}"
    );
    let bind = |t: kiln_compiler::tensor::Tensor| Options {
        constant_inputs: vec![("shape".into(), t)],
        ..Options::default()
    };
    let c = compile_opts(
        &bytes,
        &bind(kiln_compiler::tensor::Tensor::i64(vec![2], vec![3, 2])),
    )
    .expect("bound shape compiles");
    assert_eq!(c.program.inputs.len(), 1);
    assert_eq!(c.program.outputs[0].0.shape, vec![3, 2]);
    let wrong = kiln_compiler::tensor::Tensor::f32(vec![2], vec![3.0, 2.0]);
    assert_eq!(
        error_opts(&bytes, &bind(wrong)).to_string(),
        "input `shape`: is declared int64, the bound value is float32"
    );
}

/// Operators whose output extent the data decides: their inputs are checked at
/// compile time (each error names the node), and the CUDA target, which cannot bind an
/// extent at run time yet, says so naming the node instead of failing later.
#[test]
fn data_dependent_extents_are_checked() {
    let nms = |boxes: &[i64], scores: &[i64]| {
        Model::new(13)
            .input("boxes", boxes)
            .input("scores", scores)
            .node(Node::new("NonMaxSuppression", &["boxes", "scores"], &["sel"]).name("nms"))
            .output("sel")
            .bytes()
    };
    // NonMaxSuppression: boxes must be [batches, boxes, 4] ...
    assert_node_error(
        &error(&nms(&[1, 6, 5], &[1, 2, 6])),
        "nms",
        "NonMaxSuppression",
        "boxes must be [batches, boxes, 4] and scores [batches, classes, boxes], got [1, 6, 5]",
    );
    // ... agreeing with the scores on the number of boxes.
    assert_node_error(
        &error(&nms(&[1, 6, 4], &[1, 2, 7])),
        "nms",
        "NonMaxSuppression",
        "disagree on batches or boxes",
    );
    // Compress: the condition is bool.
    let bytes = Model::new(13)
        .input("x", &[3, 4])
        .input("c", &[3])
        .node(
            Node::new("Compress", &["x", "c"], &["y"])
                .name("compress")
                .int("axis", 0),
        )
        .output("y")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "compress",
        "Compress",
        "the condition has element type float32, expected bool",
    );
    // TopK reading k at run time: k is one int64.
    let bytes = Model::new(13)
        .input("x", &[3, 4])
        .typed_input("k", INT64, &["2"])
        .node(Node::new("TopK", &["x", "k"], &["v", "i"]).name("topk"))
        .output("v")
        .bytes();
    assert_node_error(
        &error(&bytes),
        "topk",
        "TopK",
        "k must be one int64, got int64 [2]",
    );
    // NonZero for the CUDA target.
    let bytes = Model::new(13)
        .input("x", &[3, 4])
        .node(Node::new("NonZero", &["x"], &["nz"]).name("nonzero"))
        .output("nz")
        .bytes();
    let opts = Options {
        target: kiln_compiler::Target::Cuda,
        ..Options::default()
    };
    let e = error_opts(&bytes, &opts);
    let text = e.to_string();
    assert!(
        matches!(&e, Error::Dynamic { node, op, .. } if node == "nonzero" && op == "NonZero"),
        "{e:?}"
    );
    assert!(
        text.contains("its output extent `nz[1]` depends on the data")
            && text.contains("CPU target only"),
        "{text}"
    );
    // The same model builds for the CPU, as a module that reports the extent.
    let compiled = compile(&bytes).expect("NonZero builds for the CPU");
    assert!(compiled.shapes_vary);
    assert!(compiled.code.contains("bind_extent(s, l, 0, n)"));
}

/// `--opt` names one value of its range for every declared symbol, and only where the
/// dims alone decide every shape; each mistake is an error naming it.
#[test]
fn opt_dims_are_checked() {
    let bytes = Model::new(13)
        .input_sym("x", &["N", "W"])
        .node(Node::new("Relu", &["x"], &["y"]))
        .output("y")
        .bytes();
    let with = |dims: &[&str], opt: &[&str]| Options {
        symbol_ranges: dims
            .iter()
            .map(|d| kiln_compiler::parse_dim_spec(d).unwrap())
            .collect(),
        opt_dims: opt
            .iter()
            .map(|o| kiln_compiler::parse_opt_spec(o).unwrap())
            .collect(),
        ..Options::default()
    };
    let ranges = ["N=1..4", "W=8..64:8"];
    let message = |dims: &[&str], opt: &[&str]| error_opts(&bytes, &with(dims, opt)).to_string();
    assert_eq!(
        message(&[], &["N=2"]),
        "invalid option: --opt N=..: --opt picks a point of the ranges --dim declares, and none \
         is declared"
    );
    assert_eq!(
        message(&ranges, &["N=2", "H=4"]),
        "invalid option: --opt H=..: `H` is not a symbol --dim declares (declared: N, W)"
    );
    assert_eq!(
        message(&ranges, &["N=2", "N=3"]),
        "invalid option: --opt N=..: `N` is given twice"
    );
    assert_eq!(
        message(&ranges, &["N=2"]),
        "invalid option: --opt needs a value for every declared symbol, and `W` (--dim \
         W=8..64:8) has none"
    );
    assert_eq!(
        message(&ranges, &["N=5", "W=16"]),
        "invalid option: --opt N=5 is not a value of --dim N=1..4"
    );
    assert_eq!(
        message(&ranges, &["N=2", "W=20"]),
        "invalid option: --opt W=20 is not a value of --dim W=8..64:8"
    );
    for bad in ["N", "N=x", "2=3", "N=-1"] {
        let e = kiln_compiler::parse_opt_spec(bad).unwrap_err().to_string();
        assert!(e.contains("should look like W=320"), "{bad}: {e}");
    }
    // A point of the ranges builds: the general module with the constant-shape path.
    let c = compile_opts(&bytes, &with(&ranges, &["W=16", "N=2"])).unwrap();
    for item in [
        "pub const DIMS_OPT: Dims = Dims { n: 2, w: 16 };",
        "pub const ARENA_BYTES_OPT: usize = 256;",
        "if s.n == 2 && s.w == 16 && arena.len_bytes() >= ARENA_BYTES_OPT {",
        "mod opt {",
    ] {
        assert!(c.code.contains(item), "{item} missing from:\n{}", c.code);
    }
    // An extent the data decides has no constant shape.
    let nonzero = Model::new(13)
        .input_sym("x", &["N", "3"])
        .node(Node::new("NonZero", &["x"], &["nz"]).name("nonzero"))
        .output("nz")
        .bytes();
    let e = error_opts(&nonzero, &with(&["N=1..4"], &["N=2"]));
    assert!(
        matches!(&e, Error::Dynamic { node, op, message } if node == "nonzero" && op == "NonZero"
            && message.contains("--opt builds the model with every shape fixed")),
        "{e:?}"
    );
}
