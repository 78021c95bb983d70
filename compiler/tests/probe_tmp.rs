mod common;
use common::*;
use kiln_compiler::{Options, compile_bytes};
use std::panic::{AssertUnwindSafe, catch_unwind};

fn probe(name: &str, bytes: Vec<u8>, dims: &[(&str, &[usize])]) {
    let opts = Options {
        input_dims: dims
            .iter()
            .map(|(n, d)| (n.to_string(), d.to_vec()))
            .collect(),
        ..Options::default()
    };
    let r = catch_unwind(AssertUnwindSafe(|| {
        compile_bytes(&bytes, "t.onnx", "t", &opts).map(|c| {
            (
                c.plan.arena_bytes,
                syn::parse_file(&c.code)
                    .map(|_| ())
                    .map_err(|e| format!("{e}: {}", c.code)),
            )
        })
    }));
    match r {
        Err(_) => println!("PROBE {name}: PANIC"),
        Ok(Ok(a)) => println!("PROBE {name}: OK arena {a:?}"),
        Ok(Err(e)) => println!("PROBE {name}: ERR {e}"),
    }
}

fn relu(dims: &[i64]) -> Vec<u8> {
    Model::new(13)
        .input("x", dims)
        .node(Node::new("Relu", &["x"], &["y"]).name("r"))
        .output("y")
        .bytes()
}

#[test]
fn probes() {
    probe("huge fixed dims", relu(&[i64::MAX, i64::MAX]), &[]);
    probe("huge fixed dim 2^62", relu(&[1 << 62]), &[]);
    probe("huge fixed dim 2^40", relu(&[1 << 40, 1 << 20]), &[]);
    probe("zero dim", relu(&[0, 3]), &[]);
    probe("negative dim_value", relu(&[-3, 3]), &[]);
    probe(
        "huge --input",
        Model::new(13)
            .input_sym("x", &["n", "n"])
            .node(Node::new("Relu", &["x"], &["y"]))
            .output("y")
            .bytes(),
        &[("x", &[usize::MAX, 4])],
    );
    probe(
        "reshape huge target",
        Model::new(13)
            .input("x", &[2, 3])
            .init_i64("s", &[2], vec![i64::MAX, 4])
            .node(Node::new("Reshape", &["x", "s"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "reshape -1 huge",
        Model::new(13)
            .input("x", &[2, 3])
            .init_i64("s", &[3], vec![-1, 1 << 40, 1 << 40])
            .node(Node::new("Reshape", &["x", "s"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "reshape zero -1",
        Model::new(13)
            .input("x", &[0, 3])
            .init_i64("s", &[2], vec![-1, 0])
            .node(Node::new("Reshape", &["x", "s"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "conv group huge",
        Model::new(13)
            .input("x", &[1, 3, 8, 8])
            .init("w", &[4, 3, 3, 3], vec![0.0; 108])
            .node(Node::new("Conv", &["x", "w"], &["y"]).int("group", i64::MAX))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "conv dilation huge",
        Model::new(13)
            .input("x", &[1, 3, 8, 8])
            .init("w", &[4, 3, 3, 3], vec![0.0; 108])
            .node(Node::new("Conv", &["x", "w"], &["y"]).ints("dilations", &[i64::MAX, 1]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "conv pads huge",
        Model::new(13)
            .input("x", &[1, 3, 8, 8])
            .init("w", &[4, 3, 3, 3], vec![0.0; 108])
            .node(Node::new("Conv", &["x", "w"], &["y"]).ints("pads", &[i64::MAX, 0, i64::MAX, 0]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "conv pads big",
        Model::new(13)
            .input("x", &[1, 3, 8, 8])
            .init("w", &[4, 3, 3, 3], vec![0.0; 108])
            .node(
                Node::new("Conv", &["x", "w"], &["y"])
                    .ints("pads", &[1 << 20, 1 << 20, 1 << 20, 1 << 20]),
            )
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "pool kernel huge",
        Model::new(13)
            .input("x", &[1, 3, 8, 8])
            .node(Node::new("MaxPool", &["x"], &["y"]).ints("kernel_shape", &[i64::MAX, 2]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "pool strides huge same",
        Model::new(13)
            .input("x", &[1, 3, 8, 8])
            .node(
                Node::new("MaxPool", &["x"], &["y"])
                    .ints("kernel_shape", &[2, 2])
                    .ints("strides", &[i64::MAX, 1])
                    .string("auto_pad", "SAME_UPPER"),
            )
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "pool ceil",
        Model::new(13)
            .input("x", &[1, 3, 8, 8])
            .node(
                Node::new("MaxPool", &["x"], &["y"])
                    .ints("kernel_shape", &[2, 2])
                    .ints("strides", &[i64::MAX, 1])
                    .int("ceil_mode", 1),
            )
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "constantofshape huge",
        Model::new(13)
            .input("x", &[2])
            .init_i64("s", &[2], vec![1 << 40, 1 << 40])
            .node(Node::new("ConstantOfShape", &["s"], &["c"]))
            .node(Node::new("Add", &["x", "c"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "relu two outputs, second is graph output",
        Model::new(13)
            .input("x", &[2])
            .node(Node::new("Relu", &["x"], &["y", "z"]))
            .output("z")
            .bytes(),
        &[],
    );
    probe(
        "dropout 3 outputs",
        Model::new(13)
            .input("x", &[2])
            .node(Node::new("Dropout", &["x"], &["y", "m", "z"]))
            .output("z")
            .bytes(),
        &[],
    );
    probe(
        "dropout mask output",
        Model::new(13)
            .input("x", &[2])
            .node(Node::new("Dropout", &["x"], &["y", "m"]))
            .output("m")
            .bytes(),
        &[],
    );
    probe(
        "node no outputs",
        Model::new(13)
            .input("x", &[2])
            .node(Node::new("Relu", &["x"], &[]))
            .node(Node::new("Neg", &["x"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "node no inputs",
        Model::new(13)
            .input("x", &[2])
            .node(Node::new("Relu", &[], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "identity no inputs",
        Model::new(13)
            .input("x", &[2])
            .node(Node::new("Identity", &[], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "identity no inputs to relu",
        Model::new(13)
            .input("x", &[2])
            .node(Node::new("Identity", &[], &["a"]))
            .node(Node::new("Relu", &["a"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "output is input",
        Model::new(13).input("x", &[2]).output("x").bytes(),
        &[],
    );
    probe(
        "output is init",
        Model::new(13)
            .input("x", &[2])
            .init("w", &[2], vec![1.0, 2.0])
            .output("w")
            .bytes(),
        &[],
    );
    probe(
        "output twice",
        Model::new(13)
            .input("x", &[2])
            .node(Node::new("Relu", &["x"], &["y"]))
            .output("y")
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "no inputs const only",
        Model::new(13)
            .init("w", &[2], vec![1.0, 2.0])
            .node(Node::new("Relu", &["w"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "transpose rank 9",
        Model::new(13)
            .input("x", &[1, 1, 1, 1, 1, 1, 1, 1, 2])
            .node(Node::new("Transpose", &["x"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "add rank 9",
        Model::new(13)
            .input("x", &[2, 1, 2, 1, 2, 1, 2, 1, 2])
            .input("z", &[1, 2, 1, 2, 1, 2, 1, 2, 1])
            .node(Node::new("Add", &["x", "z"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "matmul rank 1x1",
        Model::new(13)
            .input("x", &[3])
            .init("w", &[3], vec![1.0; 3])
            .node(Node::new("MatMul", &["x", "w"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "matmul big batch",
        Model::new(13)
            .input("x", &[2, 1, 2, 1, 2, 1, 2, 1, 2, 3, 4])
            .init("w", &[4, 2], vec![1.0; 8])
            .node(Node::new("MatMul", &["x", "w"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "softmax scalar",
        Model::new(13)
            .input("x", &[])
            .node(Node::new("Softmax", &["x"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "gemm vector",
        Model::new(13)
            .input("x", &[3])
            .init("w", &[3, 2], vec![1.0; 6])
            .node(Node::new("Gemm", &["x", "w"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "gemm C bad",
        Model::new(13)
            .input("x", &[2, 3])
            .init("w", &[3, 2], vec![1.0; 6])
            .init("c", &[3], vec![1.0; 3])
            .node(Node::new("Gemm", &["x", "w", "c"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "gemm C rank3",
        Model::new(13)
            .input("x", &[2, 3])
            .init("w", &[3, 2], vec![1.0; 6])
            .init("c", &[1, 1, 2], vec![1.0; 2])
            .node(Node::new("Gemm", &["x", "w", "c"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "bn rank 1",
        Model::new(13)
            .input("x", &[3])
            .node(Node::new("BatchNormalization", &["x"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "bn missing params",
        Model::new(13)
            .input("x", &[1, 3, 2, 2])
            .init("s", &[3], vec![1.0; 3])
            .node(Node::new("BatchNormalization", &["x", "s"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "gap rank2",
        Model::new(13)
            .input("x", &[1, 3])
            .node(Node::new("GlobalAveragePool", &["x"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "lrn size 0",
        Model::new(13)
            .input("x", &[1, 3, 2, 2])
            .node(Node::new("LRN", &["x"], &["y"]).int("size", 0))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "lrn huge",
        Model::new(13)
            .input("x", &[1, 3, 2, 2])
            .node(Node::new("LRN", &["x"], &["y"]).int("size", i64::MAX))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "lrn rank 2",
        Model::new(13)
            .input("x", &[1, 3])
            .node(Node::new("LRN", &["x"], &["y"]).int("size", 3))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "concat const mixed",
        Model::new(13)
            .input("x", &[4])
            .init("a", &[2], vec![1.0; 2])
            .init_i64("b", &[2], vec![1, 2])
            .node(Node::new("Concat", &["a", "b"], &["c"]).int("axis", 0))
            .node(Node::new("Add", &["x", "c"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "concat scalar",
        Model::new(13)
            .input("x", &[])
            .node(Node::new("Concat", &["x", "x"], &["y"]).int("axis", 0))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "gather const scalar data",
        Model::new(13)
            .input("x", &[2])
            .init("d", &[], vec![1.0])
            .init_i64("i", &[], vec![0])
            .node(Node::new("Gather", &["d", "i"], &["g"]))
            .node(Node::new("Add", &["x", "g"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "gather oob",
        Model::new(13)
            .input("x", &[2])
            .init("d", &[2], vec![1.0, 2.0])
            .init_i64("i", &[], vec![5])
            .node(Node::new("Gather", &["d", "i"], &["g"]))
            .node(Node::new("Add", &["x", "g"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "gather runtime",
        Model::new(13)
            .input("x", &[2])
            .init_i64("i", &[], vec![0])
            .node(Node::new("Gather", &["x", "i"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "shape of input",
        Model::new(13)
            .input("x", &[2, 3])
            .node(Node::new("Shape", &["x"], &["s"]))
            .node(Node::new("Reshape", &["x", "s"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "shape output",
        Model::new(13)
            .input("x", &[2, 3])
            .node(Node::new("Shape", &["x"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "constant output",
        Model::new(13)
            .input("x", &[2, 3])
            .node(Node::new("Constant", &[], &["y"]).float("value_float", 1.0))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "constant no attr",
        Model::new(13)
            .input("x", &[2, 3])
            .node(Node::new("Constant", &[], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "cast to int",
        Model::new(13)
            .input("x", &[2, 3])
            .node(Node::new("Cast", &["x"], &["y"]).int("to", 7))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "cast to bad",
        Model::new(13)
            .input("x", &[2, 3])
            .node(Node::new("Cast", &["x"], &["y"]).int("to", 1 << 40))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "cast to f16",
        Model::new(13)
            .input("x", &[2, 3])
            .node(Node::new("Cast", &["x"], &["a"]).int("to", 10))
            .node(Node::new("Relu", &["a"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "squeeze axes runtime",
        Model::new(13)
            .input("x", &[1, 3])
            .input("a", &[1])
            .node(Node::new("Squeeze", &["x", "a"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "unsqueeze repeated",
        Model::new(13)
            .input("x", &[3])
            .node(Node::new("Unsqueeze", &["x"], &["y"]).ints("axes", &[0, 0]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "unsqueeze no axes",
        Model::new(13)
            .input("x", &[3])
            .node(Node::new("Unsqueeze", &["x"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "flatten axis big",
        Model::new(13)
            .input("x", &[3])
            .node(Node::new("Flatten", &["x"], &["y"]).int("axis", i64::MAX))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "flatten axis min",
        Model::new(13)
            .input("x", &[3])
            .node(Node::new("Flatten", &["x"], &["y"]).int("axis", i64::MIN))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "softmax axis min",
        Model::new(13)
            .input("x", &[3])
            .node(Node::new("Softmax", &["x"], &["y"]).int("axis", i64::MIN))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "shape start min",
        Model::new(13)
            .input("x", &[3])
            .node(Node::new("Shape", &["x"], &["s"]).int("start", i64::MIN))
            .node(Node::new("Cast", &["s"], &["f"]).int("to", 1))
            .node(Node::new("Add", &["x", "f"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "clip inputs",
        Model::new(13)
            .input("x", &[3])
            .input("lo", &[])
            .node(Node::new("Clip", &["x", "lo"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "sum no inputs",
        Model::new(13)
            .input("x", &[3])
            .node(Node::new("Sum", &[], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "sum one input",
        Model::new(13)
            .input("x", &[3])
            .node(Node::new("Sum", &["x"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "sum empty-first",
        Model::new(13)
            .input("x", &[3])
            .node(Node::new("Sum", &["", "x"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "opset 0",
        {
            let mut m = Model::new(13)
                .input("x", &[3])
                .node(Node::new("Softmax", &["x"], &["y"]))
                .output("y")
                .proto();
            m.opset_import.clear();
            onnx_protobuf::Message::write_to_bytes(&m).unwrap()
        },
        &[],
    );
    probe(
        "opset negative",
        Model::new(-5)
            .input("x", &[3])
            .node(Node::new("Clip", &["x"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "empty names",
        Model::new(13)
            .input("", &[3])
            .node(Node::new("Relu", &[""], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "weird names",
        Model::new(13)
            .input("x-y.z/0", &[3])
            .node(Node::new("Relu", &["x-y.z/0"], &["fn"]).name("*/ // \n\""))
            .output("fn")
            .bytes(),
        &[],
    );
    probe(
        "unicode names",
        Model::new(13)
            .input("ü", &[3])
            .node(Node::new("Relu", &["ü"], &["r#y"]).name("név"))
            .output("r#y")
            .bytes(),
        &[],
    );
    probe(
        "names collide when sanitized",
        Model::new(13)
            .input("a.b", &[3])
            .node(Node::new("Relu", &["a.b"], &["a_b"]))
            .node(Node::new("Neg", &["a_b"], &["a-b"]))
            .output("a-b")
            .output("a_b")
            .bytes(),
        &[],
    );
    probe(
        "input no type",
        {
            let mut m = Model::new(13)
                .input("x", &[3])
                .node(Node::new("Relu", &["x"], &["y"]))
                .output("y")
                .proto();
            m.graph.mut_or_insert_default().input[0].type_ = Default::default();
            onnx_protobuf::Message::write_to_bytes(&m).unwrap()
        },
        &[],
    );
    probe(
        "input no shape",
        {
            let mut m = Model::new(13)
                .input("x", &[1, 3, 4, 4])
                .init("w", &[2, 3, 1, 1], vec![0.0; 6])
                .node(Node::new("Conv", &["x", "w"], &["y"]))
                .output("y")
                .proto();
            if let Some(onnx_protobuf::type_proto::Value::TensorType(t)) =
                &mut m.graph.mut_or_insert_default().input[0]
                    .type_
                    .mut_or_insert_default()
                    .value
            {
                t.shape = Default::default();
            }
            onnx_protobuf::Message::write_to_bytes(&m).unwrap()
        },
        &[],
    );
    probe(
        "sym dim empty name",
        Model::new(13)
            .input_sym("x", &["", "3"])
            .node(Node::new("Relu", &["x"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "raw f64 init",
        Model::new(13)
            .input("x", &[2])
            .init_tensor(onnx_protobuf::TensorProto {
                name: "w".into(),
                dims: vec![2],
                data_type: 11,
                raw_data: vec![0; 16],
                ..Default::default()
            })
            .node(Node::new("Add", &["x", "w"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "raw f16 init",
        Model::new(13)
            .input("x", &[2])
            .init_tensor(onnx_protobuf::TensorProto {
                name: "w".into(),
                dims: vec![2],
                data_type: 10,
                raw_data: vec![0; 4],
                ..Default::default()
            })
            .node(Node::new("Add", &["x", "w"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "dims huge no data",
        Model::new(13)
            .input("x", &[2])
            .init_tensor(onnx_protobuf::TensorProto {
                name: "w".into(),
                dims: vec![1 << 40, 1 << 20],
                data_type: 1,
                ..Default::default()
            })
            .node(Node::new("Add", &["x", "w"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "dims huge raw overflow mul",
        Model::new(13)
            .input("x", &[2])
            .init_tensor(onnx_protobuf::TensorProto {
                name: "w".into(),
                dims: vec![1 << 61],
                data_type: 1,
                raw_data: vec![0; 4],
                ..Default::default()
            })
            .node(Node::new("Add", &["x", "w"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "reshape on empty zero",
        Model::new(13)
            .input("x", &[2, 3])
            .init_i64("s", &[0], vec![])
            .node(Node::new("Reshape", &["x", "s"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "conv 0 out channels",
        Model::new(13)
            .input("x", &[1, 3, 8, 8])
            .init("w", &[0, 3, 3, 3], vec![])
            .node(Node::new("Conv", &["x", "w"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "conv 0 in channels",
        Model::new(13)
            .input("x", &[1, 0, 8, 8])
            .init("w", &[2, 0, 3, 3], vec![])
            .node(Node::new("Conv", &["x", "w"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "conv group weird",
        Model::new(13)
            .input("x", &[1, 4, 8, 8])
            .init("w", &[3, 2, 3, 3], vec![0.0; 54])
            .node(Node::new("Conv", &["x", "w"], &["y"]).int("group", 2))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "conv kernel_shape disagrees",
        Model::new(13)
            .input("x", &[1, 3, 8, 8])
            .init("w", &[4, 3, 3, 3], vec![0.0; 108])
            .node(Node::new("Conv", &["x", "w"], &["y"]).ints("kernel_shape", &[2, 2]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "conv rank3",
        Model::new(13)
            .input("x", &[1, 3, 8])
            .init("w", &[4, 3, 3], vec![0.0; 36])
            .node(Node::new("Conv", &["x", "w"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "conv runtime weight",
        Model::new(13)
            .input("x", &[1, 3, 8, 8])
            .input("w", &[4, 3, 3, 3])
            .node(Node::new("Conv", &["x", "w"], &["y"]))
            .output("y")
            .bytes(),
        &[],
    );
    probe(
        "bn conv fold zero var",
        Model::new(13)
            .input("x", &[1, 1, 2, 2])
            .init("w", &[1, 1, 1, 1], vec![1.0])
            .init("s", &[1], vec![1.0])
            .init("b", &[1], vec![0.0])
            .init("m", &[1], vec![0.0])
            .init("v", &[1], vec![-1.0])
            .node(Node::new("Conv", &["x", "w"], &["c"]))
            .node(
                Node::new("BatchNormalization", &["c", "s", "b", "m", "v"], &["y"])
                    .float("epsilon", 0.0),
            )
            .output("y")
            .bytes(),
        &[],
    );
}
#[test]
fn weird_code() {
    let b = Model::new(13)
        .input("x-y.z/0", &[3])
        .node(Node::new("Relu", &["x-y.z/0"], &["fn"]).name("*/ // \nfn evil() {}\""))
        .output("fn")
        .bytes();
    let c = compile_bytes(&b, "t\n.onnx", "t", &Options::default()).unwrap();
    println!("{}", c.code);
}
