//! A tiny fluent builder for ONNX models, shared by the integration tests.
//!
//! ```ignore
//! let bytes = Model::new(13)
//!     .input("x", &[1, 3, 8, 8])
//!     .init("w", &[4, 3, 3, 3], vec![0.1; 108])
//!     .node(Node::new("Conv", &["x", "w"], &["y"]).name("conv1"))
//!     .output("y")
//!     .bytes();
//! ```

#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::tensor_shape_proto::{Dimension, dimension};
use onnx_protobuf::{
    AttributeProto, GraphProto, Message, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, type_proto,
};

/// ONNX `TensorProto.DataType` codes used by the tests.
pub const FLOAT: i32 = 1;
pub const INT64: i32 = 7;

/// A model under construction.
pub struct Model {
    proto: ModelProto,
}

impl Model {
    /// An empty graph importing the default domain at `opset`.
    pub fn new(opset: i64) -> Self {
        let mut proto = ModelProto {
            ir_version: 8,
            producer_name: "kiln-tests".into(),
            ..Default::default()
        };
        proto.graph.mut_or_insert_default().name = "test".into();
        let m = Model { proto };
        m.opset("", opset)
    }

    /// Imports `domain` at `version` (`""` is the default ONNX domain).
    pub fn opset(mut self, domain: &str, version: i64) -> Self {
        self.proto.opset_import.push(OperatorSetIdProto {
            domain: domain.into(),
            version,
            ..Default::default()
        });
        self
    }

    fn graph(&mut self) -> &mut GraphProto {
        self.proto.graph.mut_or_insert_default()
    }

    /// A float32 graph input with fixed dims.
    pub fn input(self, name: &str, dims: &[i64]) -> Self {
        let dims: Vec<String> = dims.iter().map(i64::to_string).collect();
        let dims: Vec<&str> = dims.iter().map(String::as_str).collect();
        self.typed_input(name, FLOAT, &dims)
    }

    /// A float32 graph input whose dims are numbers (fixed) or names (symbolic),
    /// e.g. `&["batch", "3", "8", "8"]`.
    pub fn input_sym(self, name: &str, dims: &[&str]) -> Self {
        self.typed_input(name, FLOAT, dims)
    }

    /// A graph input of element type `elem_type` (see [`FLOAT`], [`INT64`]).
    pub fn typed_input(mut self, name: &str, elem_type: i32, dims: &[&str]) -> Self {
        let vi = value_info(name, elem_type, Some(dims));
        self.graph().input.push(vi);
        self
    }

    /// A graph output (its type is left for Kiln to infer).
    pub fn output(mut self, name: &str) -> Self {
        let vi = value_info(name, FLOAT, None);
        self.graph().output.push(vi);
        self
    }

    /// A float32 initializer stored in `float_data`.
    pub fn init(self, name: &str, dims: &[i64], data: Vec<f32>) -> Self {
        self.init_tensor(TensorProto {
            name: name.into(),
            dims: dims.to_vec(),
            data_type: FLOAT,
            float_data: data,
            ..Default::default()
        })
    }

    /// A float32 initializer stored as little-endian `raw_data`.
    pub fn init_raw(self, name: &str, dims: &[i64], data: &[f32]) -> Self {
        self.init_tensor(TensorProto {
            name: name.into(),
            dims: dims.to_vec(),
            data_type: FLOAT,
            raw_data: data.iter().flat_map(|x| x.to_le_bytes()).collect(),
            ..Default::default()
        })
    }

    /// An int64 initializer (shapes, axes).
    pub fn init_i64(self, name: &str, dims: &[i64], data: Vec<i64>) -> Self {
        self.init_tensor(TensorProto {
            name: name.into(),
            dims: dims.to_vec(),
            data_type: INT64,
            int64_data: data,
            ..Default::default()
        })
    }

    /// Any initializer, for tests that need a malformed one.
    pub fn init_tensor(mut self, t: TensorProto) -> Self {
        self.graph().initializer.push(t);
        self
    }

    pub fn node(mut self, node: Node) -> Self {
        self.graph().node.push(node.0);
        self
    }

    pub fn proto(self) -> ModelProto {
        self.proto
    }

    pub fn bytes(self) -> Vec<u8> {
        self.proto
            .write_to_bytes()
            .expect("serializing a ModelProto")
    }
}

fn value_info(name: &str, elem_type: i32, dims: Option<&[&str]>) -> ValueInfoProto {
    let mut tensor = type_proto::Tensor {
        elem_type,
        ..Default::default()
    };
    if let Some(dims) = dims {
        let mut shape = TensorShapeProto::new();
        for d in dims {
            let value = match d.parse::<i64>() {
                Ok(v) => dimension::Value::DimValue(v),
                Err(_) => dimension::Value::DimParam((*d).into()),
            };
            shape.dim.push(Dimension {
                value: Some(value),
                ..Default::default()
            });
        }
        tensor.shape = Some(shape).into();
    }
    ValueInfoProto {
        name: name.into(),
        type_: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(tensor)),
            ..Default::default()
        })
        .into(),
        ..Default::default()
    }
}

/// A node under construction.
pub struct Node(pub NodeProto);

impl Node {
    pub fn new(op_type: &str, inputs: &[&str], outputs: &[&str]) -> Self {
        Node(NodeProto {
            op_type: op_type.into(),
            input: inputs.iter().map(|s| (*s).into()).collect(),
            output: outputs.iter().map(|s| (*s).into()).collect(),
            ..Default::default()
        })
    }

    pub fn name(mut self, name: &str) -> Self {
        self.0.name = name.into();
        self
    }

    pub fn domain(mut self, domain: &str) -> Self {
        self.0.domain = domain.into();
        self
    }

    fn attr(
        mut self,
        name: &str,
        ty: AttributeType,
        fill: impl FnOnce(&mut AttributeProto),
    ) -> Self {
        let mut a = AttributeProto {
            name: name.into(),
            type_: ty.into(),
            ..Default::default()
        };
        fill(&mut a);
        self.0.attribute.push(a);
        self
    }

    pub fn int(self, name: &str, v: i64) -> Self {
        self.attr(name, AttributeType::INT, |a| a.i = v)
    }

    pub fn ints(self, name: &str, v: &[i64]) -> Self {
        self.attr(name, AttributeType::INTS, |a| a.ints = v.to_vec())
    }

    pub fn float(self, name: &str, v: f32) -> Self {
        self.attr(name, AttributeType::FLOAT, |a| a.f = v)
    }

    pub fn string(self, name: &str, v: &str) -> Self {
        self.attr(name, AttributeType::STRING, |a| a.s = v.as_bytes().to_vec())
    }

    /// A float32 tensor attribute (e.g. `ConstantOfShape`'s `value`).
    pub fn tensor(self, name: &str, dims: &[i64], data: Vec<f32>) -> Self {
        let t = TensorProto {
            dims: dims.to_vec(),
            data_type: FLOAT,
            float_data: data,
            ..Default::default()
        };
        self.attr(name, AttributeType::TENSOR, |a| a.t = Some(t).into())
    }
}

/// Deterministic pseudo-random numbers (xorshift64*), so failures reproduce.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// `n` deterministic small floats.
    pub fn floats(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.below(2001) as f32 - 1000.0) / 4000.0)
            .collect()
    }
}

/// A small valid classifier: Conv(3→4, 3×3, pad 1) → Relu → GlobalAveragePool →
/// Flatten → Gemm(4→5) → Softmax, with input `x` of shape `[batch, 3, 8, 8]`
/// (`batch` symbolic when `symbolic_batch`, else 2). Node names are `conv1`, `relu1`,
/// `gap`, `flatten`, `fc`, `softmax`; the output is `prob`.
pub fn tiny_classifier(symbolic_batch: bool) -> Model {
    let mut rng = Rng::new(7);
    let batch = if symbolic_batch { "batch" } else { "2" };
    Model::new(13)
        .input_sym("x", &[batch, "3", "8", "8"])
        .init_raw("conv1.w", &[4, 3, 3, 3], &rng.floats(4 * 3 * 3 * 3))
        .init("conv1.b", &[4], rng.floats(4))
        .init("fc.w", &[5, 4], rng.floats(5 * 4))
        .init("fc.b", &[5], rng.floats(5))
        .node(
            Node::new("Conv", &["x", "conv1.w", "conv1.b"], &["c1"])
                .name("conv1")
                .ints("kernel_shape", &[3, 3])
                .ints("pads", &[1, 1, 1, 1]),
        )
        .node(Node::new("Relu", &["c1"], &["r1"]).name("relu1"))
        .node(Node::new("GlobalAveragePool", &["r1"], &["g"]).name("gap"))
        .node(Node::new("Flatten", &["g"], &["f"]).name("flatten"))
        .node(
            Node::new("Gemm", &["f", "fc.w", "fc.b"], &["logits"])
                .name("fc")
                .int("transB", 1),
        )
        .node(
            Node::new("Softmax", &["logits"], &["prob"])
                .name("softmax")
                .int("axis", 1),
        )
        .output("prob")
}

/// A fresh, empty directory under the system temp dir, unique to this process and
/// call, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "kiln-compiler-tests-{}-{tag}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A valid model that uses most supported operators (opset 13), with input `x` of
/// shape `[1, 4, 6, 6]` and output `out` of shape `[1, 6]`. It includes shape
/// arithmetic (`Shape` → `Gather` → `Unsqueeze` → `Concat` → `Reshape`) that shape
/// inference folds to constants.
pub fn kitchen_sink() -> Model {
    let mut rng = Rng::new(11);
    let n = |op: &str, ins: &[&str], out: &str| Node::new(op, ins, &[out]).name(out);
    Model::new(13)
        .input("x", &[1, 4, 6, 6])
        .init("conv.w", &[4, 4, 3, 3], rng.floats(144))
        .init("bn.scale", &[4], vec![1.0, 0.5, 2.0, 1.5])
        .init("bn.bias", &[4], rng.floats(4))
        .init("bn.mean", &[4], rng.floats(4))
        .init("bn.var", &[4], vec![1.0, 0.25, 2.0, 0.5])
        .init_i64("zero", &[], vec![0])
        .init_i64("axes0", &[1], vec![0])
        .init_i64("minus1", &[1], vec![-1])
        .init("mm.w", &[72, 6], rng.floats(72 * 6))
        .init("mm.b", &[6], rng.floats(6))
        .init("lo", &[], vec![-0.5])
        .init("hi", &[], vec![0.5])
        .init_i64("axes2", &[1], vec![2])
        .init_i64("six", &[1], vec![6])
        .node(
            n("Conv", &["x", "conv.w"], "conv")
                .ints("kernel_shape", &[3, 3])
                .ints("pads", &[1, 1, 1, 1]),
        )
        .node(n(
            "BatchNormalization",
            &["conv", "bn.scale", "bn.bias", "bn.mean", "bn.var"],
            "bn",
        ))
        .node(n("LeakyRelu", &["bn"], "lrelu").float("alpha", 0.1))
        .node(
            n("MaxPool", &["lrelu"], "maxpool")
                .ints("kernel_shape", &[2, 2])
                .ints("strides", &[2, 2]),
        )
        .node(
            n("AveragePool", &["lrelu"], "avgpool")
                .ints("kernel_shape", &[3, 3])
                .ints("strides", &[2, 2])
                .ints("pads", &[1, 1, 1, 1])
                .int("count_include_pad", 1),
        )
        .node(n("Concat", &["maxpool", "avgpool"], "concat").int("axis", 1))
        .node(n("LRN", &["concat"], "lrn").int("size", 3))
        .node(n("Transpose", &["lrn"], "transpose").ints("perm", &[0, 2, 3, 1]))
        .node(n("Shape", &["x"], "shape"))
        .node(n("Gather", &["shape", "zero"], "batch"))
        .node(n("Unsqueeze", &["batch", "axes0"], "batch1"))
        .node(n("Concat", &["batch1", "minus1"], "target").int("axis", 0))
        .node(n("Reshape", &["transpose", "target"], "flat"))
        .node(n("MatMul", &["flat", "mm.w"], "matmul"))
        .node(n("Add", &["matmul", "mm.b"], "add"))
        .node(n("Clip", &["add", "lo", "hi"], "clip"))
        .node(n("Sigmoid", &["add"], "sigmoid"))
        .node(n("Tanh", &["add"], "tanh"))
        .node(n("Sum", &["clip", "sigmoid", "tanh"], "sum"))
        .node(n("Dropout", &["sum"], "dropout"))
        .node(n("Identity", &["dropout"], "identity"))
        .node(n("Unsqueeze", &["identity", "axes2"], "unsqueeze"))
        .node(n("Squeeze", &["unsqueeze", "axes2"], "squeeze"))
        .node(
            Node::new("ConstantOfShape", &["six"], &["half"])
                .name("half")
                .tensor("value", &[1], vec![0.5]),
        )
        .node(n("Mul", &["squeeze", "half"], "mul"))
        .node(n("Cast", &["mul"], "cast").int("to", FLOAT as i64))
        .node(n("Neg", &["cast"], "neg"))
        .node(n("Exp", &["neg"], "exp"))
        .node(n("Abs", &["exp"], "abs"))
        .node(n("Sqrt", &["abs"], "sqrt"))
        .node(n("Div", &["cast", "sqrt"], "div"))
        .node(n("Sub", &["div", "cast"], "sub"))
        .node(n("Max", &["sub", "cast"], "max"))
        .node(n("Min", &["max", "div", "sub"], "min"))
        .node(n("Relu", &["min"], "relu"))
        .node(n("Softmax", &["relu"], "softmax").int("axis", 1))
        .node(n("LogSoftmax", &["softmax"], "out").int("axis", -1))
        .output("out")
}
