//! The malformed-model corpus (issue 18): each model is broken in one way a damaged
//! file, a buggy exporter or a hostile input could be, and each must give a clear
//! `Err` — naming the node, its operator and what was expected where a node is at
//! fault — and never a panic. The expected text is asserted, not just `is_err`.
//!
//! Files under `tests/fuzz_regressions/` are inputs the fuzzer (`compiler/fuzz/`) found
//! and that once panicked, hung or allocated past the cap; `fuzz_regressions` replays
//! every one.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use common::{INT64, Model, Node, tiny_classifier};
use kiln_compiler::{Options, compile_bytes};
use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::{StringStringEntryProto, TensorProto};

/// One malformed model: its bytes, the options it is compiled with, and the pieces of
/// text its error must contain.
struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    opts: Options,
    expected: Vec<&'static str>,
}

fn case(name: &'static str, bytes: Vec<u8>, expected: &[&'static str]) -> Case {
    Case {
        name,
        bytes,
        opts: Options::default(),
        expected: expected.to_vec(),
    }
}

fn with_dims(mut c: Case, dims: &[(&str, &[usize])]) -> Case {
    c.opts.input_dims = dims
        .iter()
        .map(|(n, d)| ((*n).to_owned(), kiln_compiler::dim::dims_of(d)))
        .collect();
    c
}

/// A one-node model: `x` (float, `dims`) → `op` → `y`.
fn unary(op: Node, dims: &[i64]) -> Model {
    Model::new(13).input("x", dims).node(op).output("y")
}

fn float_tensor(name: &str, dims: &[i64]) -> TensorProto {
    let n: i64 = dims.iter().product();
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 1,
        float_data: vec![0.5; n.max(0) as usize],
        ..Default::default()
    }
}

fn with_weight(w: TensorProto) -> Vec<u8> {
    Model::new(13)
        .input("x", &[2, 2])
        .init_tensor(w)
        .node(Node::new("Add", &["x", "w"], &["y"]).name("add"))
        .output("y")
        .bytes()
}

/// An attribute of the given ONNX type whose value fields are left empty (the wrong
/// type for what the operator reads).
fn attr_of_type(mut n: Node, name: &str, ty: AttributeType) -> Node {
    n.0.attribute.push(onnx_protobuf::AttributeProto {
        name: name.into(),
        type_: ty.into(),
        s: b"three".to_vec(),
        f: 2.5,
        ..Default::default()
    });
    n
}

fn corpus() -> Vec<Case> {
    let tiny = tiny_classifier(false).bytes();
    vec![
        // --- truncated and foreign files
        case(
            "empty file",
            Vec::new(),
            &["not a readable ONNX model", "holds no graph"],
        ),
        case(
            "truncated in the middle",
            tiny[..tiny.len() / 2].to_vec(),
            &["not a readable ONNX model"],
        ),
        case(
            "a text file",
            b"this is not a model\n".to_vec(),
            &["not a readable ONNX model"],
        ),
        // --- wrong types
        case(
            "Add of float and int64",
            Model::new(13)
                .input("a", &[2])
                .typed_input("b", INT64, &["2"])
                .node(Node::new("Add", &["a", "b"], &["y"]).name("mixed"))
                .output("y")
                .bytes(),
            &["node `mixed` (Add, opset 13)", "float32", "int64"],
        ),
        case(
            "graph input of an unknown element type (code 99)",
            Model::new(13)
                .typed_input("x", 99, &["2"])
                .node(Node::new("Relu", &["x"], &["y"]))
                .output("y")
                .bytes(),
            &["input `x`", "element type", "not supported"],
        ),
        case(
            "initializer of element type string",
            with_weight(TensorProto {
                data_type: 8,
                ..float_tensor("w", &[2, 2])
            }),
            &["initializer `w`", "element type", "not supported"],
        ),
        // --- graph structure
        case(
            "cycle",
            Model::new(13)
                .input("x", &[2])
                .node(Node::new("Add", &["x", "b"], &["a"]).name("n_a"))
                .node(Node::new("Relu", &["a"], &["b"]).name("n_b"))
                .output("b")
                .bytes(),
            &["cycle", "`n_a` (Add)", "`n_b` (Relu)"],
        ),
        case(
            "self-loop",
            Model::new(13)
                .input("x", &[2])
                .node(Node::new("Add", &["x", "a"], &["a"]).name("loop"))
                .output("a")
                .bytes(),
            &["cycle", "`loop` (Add)"],
        ),
        case(
            "dangling node input",
            Model::new(13)
                .input("x", &[2])
                .node(Node::new("Add", &["x", "ghost"], &["y"]).name("add"))
                .output("y")
                .bytes(),
            &["node `add` (Add, opset 13)", "reads `ghost`, which no node"],
        ),
        case(
            "dangling graph output",
            Model::new(13)
                .input("x", &[2])
                .node(Node::new("Relu", &["x"], &["y"]))
                .output("z")
                .bytes(),
            &["graph output `z` is produced by no node"],
        ),
        case(
            "two nodes write one value",
            Model::new(13)
                .input("x", &[2])
                .node(Node::new("Relu", &["x"], &["y"]).name("first"))
                .node(Node::new("Neg", &["x"], &["y"]).name("second"))
                .output("y")
                .bytes(),
            &["(Neg, opset 13)", "output `y` is already defined elsewhere"],
        ),
        case(
            "a node writes a graph input",
            Model::new(13)
                .input("x", &[2])
                .node(Node::new("Relu", &["x"], &["x"]).name("overwrite"))
                .output("x")
                .bytes(),
            &[
                "node `overwrite` (Relu, opset 13)",
                "output `x` is already defined",
            ],
        ),
        case(
            "initializer defined twice",
            Model::new(13)
                .input("x", &[2, 2])
                .init_tensor(float_tensor("w", &[2, 2]))
                .init_tensor(float_tensor("w", &[2, 2]))
                .node(Node::new("Add", &["x", "w"], &["y"]))
                .output("y")
                .bytes(),
            &["value `w` is defined twice"],
        ),
        case(
            "graph input listed twice",
            Model::new(13)
                .input("x", &[2])
                .input("x", &[2])
                .node(Node::new("Relu", &["x"], &["y"]))
                .output("y")
                .bytes(),
            &["value `x` is defined twice"],
        ),
        case(
            "empty graph",
            Model::new(13).bytes(),
            &["the graph has no outputs"],
        ),
        case(
            "nodes but no outputs",
            Model::new(13)
                .input("x", &[2])
                .node(Node::new("Relu", &["x"], &["y"]))
                .bytes(),
            &["the graph has no outputs"],
        ),
        case(
            "a required input left empty",
            Model::new(13)
                .input("x", &[2])
                .node(Node::new("Add", &["x", ""], &["y"]).name("add"))
                .output("y")
                .bytes(),
            &["node `add` (Add, opset 13)", "input 1 is missing"],
        ),
        case(
            "too few inputs",
            Model::new(13)
                .input("x", &[1, 1, 4, 4])
                .node(Node::new("Conv", &["x"], &["y"]).name("conv"))
                .output("y")
                .bytes(),
            &["node `conv` (Conv, opset 13)", "input 1 is missing"],
        ),
        // --- shapes
        with_dims(
            case(
                "input dims whose product overflows usize",
                Model::new(13)
                    .input_sym("x", &["a", "b"])
                    .node(Node::new("Relu", &["x"], &["y"]))
                    .output("y")
                    .bytes(),
                &["too large", "at most 17179869184 elements"],
            ),
            &[("x", &[usize::MAX, usize::MAX])],
        ),
        case(
            "declared dims whose product overflows usize",
            unary(Node::new("Relu", &["x"], &["y"]), &[i64::MAX, i64::MAX, 4]).bytes(),
            &["too large", "at most 17179869184 elements"],
        ),
        case(
            "negative declared dim",
            unary(Node::new("Relu", &["x"], &["y"]), &[2, -5]).bytes(),
            &["input `x`", "(`x[1]`)"],
        ),
        case(
            "initializer with a negative dim",
            with_weight(TensorProto {
                dims: vec![2, -2],
                ..float_tensor("w", &[2, 2])
            }),
            &["initializer `w`", "negative dimension -2"],
        ),
        case(
            "initializer dims overflow",
            with_weight(TensorProto {
                dims: vec![i64::MAX, i64::MAX],
                ..float_tensor("w", &[2, 2])
            }),
            &["initializer `w`", "too large"],
        ),
        case(
            "initializer holds fewer values than its dims",
            with_weight(TensorProto {
                dims: vec![2, 3],
                ..float_tensor("w", &[2, 2])
            }),
            &[
                "initializer `w`",
                "holds 4 values, its shape [2, 3] needs 6",
            ],
        ),
        case(
            "initializer raw data too short",
            with_weight(TensorProto {
                float_data: Vec::new(),
                raw_data: vec![0; 10],
                ..float_tensor("w", &[2, 2])
            }),
            &[
                "initializer `w`",
                "raw data holds 10 bytes, expected 4 elements",
            ],
        ),
        case(
            "Reshape to two -1 dims",
            Model::new(13)
                .input("x", &[2, 6])
                .init_i64("s", &[2], vec![-1, -1])
                .node(Node::new("Reshape", &["x", "s"], &["y"]).name("reshape"))
                .output("y")
                .bytes(),
            &["node `reshape` (Reshape, opset 13)", "-1"],
        ),
        case(
            "Reshape to a shape of another size",
            Model::new(13)
                .input("x", &[2, 6])
                .init_i64("s", &[2], vec![5, 5])
                .node(Node::new("Reshape", &["x", "s"], &["y"]).name("reshape"))
                .output("y")
                .bytes(),
            &["node `reshape` (Reshape, opset 13)", "12"],
        ),
        case(
            "MatMul inner dims disagree",
            Model::new(13)
                .input("a", &[2, 3])
                .input("b", &[4, 5])
                .node(Node::new("MatMul", &["a", "b"], &["y"]).name("mm"))
                .output("y")
                .bytes(),
            &["node `mm` (MatMul, opset 13)", "3", "4"],
        ),
        case(
            "Add of shapes that do not broadcast",
            Model::new(13)
                .input("a", &[2, 3])
                .input("b", &[4])
                .node(Node::new("Add", &["a", "b"], &["y"]).name("add"))
                .output("y")
                .bytes(),
            &["node `add` (Add, opset 13)", "broadcast"],
        ),
        case(
            "ConstantOfShape of a huge shape",
            Model::new(13)
                .init_i64("s", &[2], vec![1 << 40, 1 << 40])
                .node(Node::new("ConstantOfShape", &["s"], &["y"]).name("cos"))
                .output("y")
                .bytes(),
            &["node `cos` (ConstantOfShape, opset 13)", "too large"],
        ),
        case(
            "ConstantOfShape of a negative dim",
            Model::new(13)
                .init_i64("s", &[2], vec![3, -4])
                .node(Node::new("ConstantOfShape", &["s"], &["y"]).name("cos"))
                .output("y")
                .bytes(),
            &["node `cos` (ConstantOfShape, opset 13)", "-4"],
        ),
        // --- attributes out of range
        case(
            "Softmax axis out of range",
            unary(
                Node::new("Softmax", &["x"], &["y"])
                    .name("sm")
                    .int("axis", 5),
                &[2, 3],
            )
            .bytes(),
            &[
                "node `sm` (Softmax, opset 13)",
                "axis 5 is out of range for rank 2",
            ],
        ),
        case(
            "Softmax axis i64::MIN",
            unary(
                Node::new("Softmax", &["x"], &["y"])
                    .name("sm")
                    .int("axis", i64::MIN),
                &[2, 3],
            )
            .bytes(),
            &["node `sm` (Softmax, opset 13)", "out of range for rank 2"],
        ),
        case(
            "Concat axis out of range",
            Model::new(13)
                .input("a", &[2, 3])
                .input("b", &[2, 3])
                .node(
                    Node::new("Concat", &["a", "b"], &["y"])
                        .name("cat")
                        .int("axis", 7),
                )
                .output("y")
                .bytes(),
            &["node `cat` (Concat, opset 13)", "axis 7"],
        ),
        case(
            "Transpose perm not a permutation",
            unary(
                Node::new("Transpose", &["x"], &["y"])
                    .name("tr")
                    .ints("perm", &[0, 0]),
                &[2, 3],
            )
            .bytes(),
            &["node `tr` (Transpose, opset 13)", "perm"],
        ),
        case(
            "Transpose perm out of range",
            unary(
                Node::new("Transpose", &["x"], &["y"])
                    .name("tr")
                    .ints("perm", &[0, i64::MAX]),
                &[2, 3],
            )
            .bytes(),
            &["node `tr` (Transpose, opset 13)", "perm"],
        ),
        case(
            "MaxPool with a negative kernel",
            unary(
                Node::new("MaxPool", &["x"], &["y"])
                    .name("pool")
                    .ints("kernel_shape", &[2, -2]),
                &[1, 1, 4, 4],
            )
            .bytes(),
            &["node `pool` (MaxPool, opset 13)", "negative value -2"],
        ),
        case(
            "MaxPool with a zero stride",
            unary(
                Node::new("MaxPool", &["x"], &["y"])
                    .name("pool")
                    .ints("kernel_shape", &[2, 2])
                    .ints("strides", &[0, 1]),
                &[1, 1, 4, 4],
            )
            .bytes(),
            &["node `pool` (MaxPool, opset 13)", "stride"],
        ),
        case(
            "MaxPool window larger than its input",
            unary(
                Node::new("MaxPool", &["x"], &["y"])
                    .name("pool")
                    .ints("kernel_shape", &[9, 9]),
                &[1, 1, 4, 4],
            )
            .bytes(),
            &["node `pool` (MaxPool, opset 13)"],
        ),
        case(
            "Conv with a huge group",
            Model::new(13)
                .input("x", &[1, 4, 4, 4])
                .init_tensor(float_tensor("w", &[4, 1, 1, 1]))
                .node(
                    Node::new("Conv", &["x", "w"], &["y"])
                        .name("conv")
                        .int("group", i64::MAX),
                )
                .output("y")
                .bytes(),
            &["node `conv` (Conv, opset 13)", "group"],
        ),
        case(
            "Gather axis out of range",
            Model::new(13)
                .input("x", &[2, 3])
                .init_i64("i", &[1], vec![0])
                .node(
                    Node::new("Gather", &["x", "i"], &["y"])
                        .name("g")
                        .int("axis", -3),
                )
                .output("y")
                .bytes(),
            &["node `g` (Gather, opset 13)", "axis -3"],
        ),
        case(
            "Gather constant index out of range",
            Model::new(13)
                .init_tensor(float_tensor("x", &[2, 3]))
                .init_i64("i", &[1], vec![7])
                .node(Node::new("Gather", &["x", "i"], &["y"]).name("g"))
                .output("y")
                .bytes(),
            &["node `g` (Gather, opset 13)", "7"],
        ),
        case(
            "Flatten axis out of range",
            unary(
                Node::new("Flatten", &["x"], &["y"])
                    .name("fl")
                    .int("axis", 9),
                &[2, 3],
            )
            .bytes(),
            &["node `fl` (Flatten, opset 13)", "axis 9"],
        ),
        case(
            "Split sizes that do not add up",
            Model::new(13)
                .input("x", &[6])
                .init_i64("s", &[2], vec![2, 2])
                .node(Node::new("Split", &["x", "s"], &["a", "b"]).name("split"))
                .output("a")
                .output("b")
                .bytes(),
            &["node `split` (Split, opset 13)"],
        ),
        case(
            "Slice with a zero step",
            Model::new(13)
                .input("x", &[6])
                .init_i64("st", &[1], vec![0])
                .init_i64("en", &[1], vec![6])
                .init_i64("ax", &[1], vec![0])
                .init_i64("sp", &[1], vec![0])
                .node(Node::new("Slice", &["x", "st", "en", "ax", "sp"], &["y"]).name("slice"))
                .output("y")
                .bytes(),
            &["node `slice` (Slice, opset 13)", "step"],
        ),
        // --- attributes of the wrong type
        case(
            "Softmax axis given as a string",
            unary(
                attr_of_type(
                    Node::new("Softmax", &["x"], &["y"]).name("sm"),
                    "axis",
                    AttributeType::STRING,
                ),
                &[2, 3],
            )
            .bytes(),
            &["node `sm` (Softmax, opset 13)", "`axis`"],
        ),
        case(
            "Conv strides given as a float",
            Model::new(13)
                .input("x", &[1, 1, 4, 4])
                .init_tensor(float_tensor("w", &[1, 1, 1, 1]))
                .node(attr_of_type(
                    Node::new("Conv", &["x", "w"], &["y"]).name("conv"),
                    "strides",
                    AttributeType::FLOAT,
                ))
                .output("y")
                .bytes(),
            &["node `conv` (Conv, opset 13)", "`strides`"],
        ),
        case(
            "LeakyRelu alpha given as a graph",
            unary(
                attr_of_type(
                    Node::new("LeakyRelu", &["x"], &["y"]).name("lr"),
                    "alpha",
                    AttributeType::GRAPH,
                ),
                &[2, 3],
            )
            .bytes(),
            &["node `lr` (LeakyRelu, opset 13)", "`alpha`"],
        ),
        case(
            "Constant with no value",
            Model::new(13)
                .node(Node::new("Constant", &[], &["y"]).name("c"))
                .output("y")
                .bytes(),
            &["node `c` (Constant, opset 13)"],
        ),
        // --- external data
        case(
            "external data in a missing file",
            with_weight({
                let mut w = float_tensor("w", &[2, 2]);
                w.float_data.clear();
                w.external_data.push(StringStringEntryProto {
                    key: "location".into(),
                    value: "does_not_exist.bin".into(),
                    ..Default::default()
                });
                w
            }),
            &["initializer `w`", "external data"],
        ),
        case(
            "external data of an oversized length",
            with_weight({
                let mut w = float_tensor("w", &[2, 2]);
                w.float_data.clear();
                w.data_location = onnx_protobuf::tensor_proto::DataLocation::EXTERNAL.into();
                for (k, v) in [
                    ("location", "w.bin"),
                    ("offset", "0"),
                    ("length", "18446744073709551615"),
                ] {
                    w.external_data.push(StringStringEntryProto {
                        key: k.into(),
                        value: v.into(),
                        ..Default::default()
                    });
                }
                w
            }),
            &["initializer `w`", "external data"],
        ),
        // --- opsets
        case(
            "opset 0",
            Model::new(0)
                .input("x", &[2])
                .node(Node::new("Relu", &["x"], &["y"]).name("relu"))
                .output("y")
                .bytes(),
            &["imports opset 0 of the default domain; Kiln knows opsets 1 to 28"],
        ),
        case(
            "opset -5",
            Model::new(-5)
                .input("x", &[2])
                .node(Node::new("Relu", &["x"], &["y"]).name("relu"))
                .output("y")
                .bytes(),
            &["imports opset -5 of the default domain; Kiln knows opsets 1 to 28"],
        ),
        case(
            "opset from the future",
            Model::new(1000)
                .input("x", &[2])
                .node(Node::new("Relu", &["x"], &["y"]).name("relu"))
                .output("y")
                .bytes(),
            &["imports opset 1000 of the default domain; Kiln knows opsets 1 to 28"],
        ),
    ]
}

/// Every case fails with its expected text and none panics; all failures are reported
/// together, each with the error it gave.
#[test]
fn malformed_models_give_clear_errors() {
    let mut failures = Vec::new();
    for c in corpus() {
        let result = catch_unwind(AssertUnwindSafe(|| {
            compile_bytes(&c.bytes, "malformed.onnx", "malformed", &c.opts)
        }));
        let text = match result {
            Err(_) => {
                failures.push(format!("{}: PANICKED", c.name));
                continue;
            }
            Ok(Ok(_)) => {
                failures.push(format!("{}: compiled, expected an error", c.name));
                continue;
            }
            Ok(Err(e)) => e.to_string(),
        };
        println!("{:<50} {text}", c.name);
        let missing: Vec<_> = c.expected.iter().filter(|x| !text.contains(**x)).collect();
        if !missing.is_empty() {
            failures.push(format!("{}: {missing:?} missing from: {text}", c.name));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Zero-sized dims are legal: a model over them compiles (or fails with a clear error
/// naming the node), and never panics.
#[test]
fn zero_dims_compile_or_fail_cleanly() {
    for (op, dims) in [
        (Node::new("Relu", &["x"], &["y"]), vec![0, 3]),
        (
            Node::new("Softmax", &["x"], &["y"]).int("axis", 1),
            vec![2, 0],
        ),
        (Node::new("ReduceSum", &["x"], &["y"]), vec![0, 4]),
        (Node::new("Transpose", &["x"], &["y"]), vec![3, 0, 2]),
        (
            Node::new("MaxPool", &["x"], &["y"]).ints("kernel_shape", &[1, 1]),
            vec![0, 1, 2, 2],
        ),
    ] {
        let name = op.0.op_type.clone();
        let bytes = unary(op.name("n"), &dims).bytes();
        let r = catch_unwind(AssertUnwindSafe(|| {
            compile_bytes(&bytes, "zero.onnx", "zero", &Options::default())
        }));
        match r {
            Err(_) => panic!("{name} over {dims:?} panicked"),
            Ok(Ok(c)) => assert!(
                c.code.contains("pub fn run"),
                "{name}: no run in the module"
            ),
            Ok(Err(e)) => {
                let text = e.to_string();
                assert!(
                    text.contains(&format!("node `n` ({name}, opset 13)")),
                    "{name} over {dims:?}: {text}"
                );
            }
        }
    }
}

/// Every input the fuzzer found (tests/fuzz_regressions/*.onnx and *.bin) compiles or
/// fails with an error; none panics. The cases with a specific expected error have
/// their own test below.
#[test]
fn fuzz_regressions_never_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("tests/fuzz_regressions exists") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("readable");
        let r = catch_unwind(AssertUnwindSafe(|| {
            compile_bytes(&bytes, "fuzz.onnx", "fuzz", &Options::default())
        }));
        assert!(r.is_ok(), "{} panicked", path.display());
        n += 1;
    }
    assert!(n > 0, "no regression files in {}", dir.display());
}

/// The fuzzer's out-of-memory find: a ConstantOfShape of 2^30 float32 elements was
/// folded at compile time (4 GiB from a small file). Now the fold limit is 2^28 and the
/// error names the node and the shape.
#[test]
fn fuzz_constant_of_shape_4gib_is_an_error() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_regressions/constant_of_shape_4gib.onnx");
    let bytes = std::fs::read(path).expect("the regression file");
    let e = compile_bytes(&bytes, "fuzz.onnx", "fuzz", &Options::default())
        .expect_err("a 2^30-element constant must not fold");
    let text = e.to_string();
    assert!(
        text.starts_with("node `cos` (ConstantOfShape, opset 13): ")
            && text.contains("[1048576, 1024] is too large to compute at compile time"),
        "{text}"
    );
}
