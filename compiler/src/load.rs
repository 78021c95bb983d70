//! Loading: ONNX protobuf → [`Graph`].
//!
//! Attributes are parsed here, once, into typed [`Op`] variants with the defaults of the
//! model's opset. Every unsupported operator is collected before failing, so one error
//! lists them all. Nothing in this module panics on a malformed file.

use std::collections::HashMap;
use std::path::Path;

use onnx_protobuf::{AttributeProto, Message, ModelProto, NodeProto, TensorProto};

use crate::error::{Error, UnsupportedOp};
use crate::ir::*;

/// Reads and parses `path`.
pub fn load_file(path: &Path) -> Result<Graph, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    load_bytes(&bytes).map_err(|e| match e {
        Error::Parse { message, .. } => Error::Parse {
            path: path.to_owned(),
            message,
        },
        e => e,
    })
}

/// Parses a serialized `ModelProto`.
pub fn load_bytes(bytes: &[u8]) -> Result<Graph, Error> {
    let model = ModelProto::parse_from_bytes(bytes).map_err(|e| Error::Parse {
        path: Default::default(),
        message: e.to_string(),
    })?;
    if model.graph.is_none() {
        return Err(Error::Parse {
            path: Default::default(),
            message: "the file holds no graph (is it an ONNX model?)".into(),
        });
    }
    Loader::new(&model)?.load()
}

/// Operator types Kiln implements (default ONNX domain).
const SUPPORTED: &[&str] = &[
    "Conv",
    "Gemm",
    "MatMul",
    "BatchNormalization",
    "Relu",
    "LeakyRelu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Neg",
    "Abs",
    "Sqrt",
    "Clip",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Sum",
    "Max",
    "Min",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "LRN",
    "Softmax",
    "LogSoftmax",
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

struct Loader<'m> {
    model: &'m ModelProto,
    opset: i64,
    graph: Graph,
    by_name: HashMap<String, ValueId>,
}

impl<'m> Loader<'m> {
    fn new(model: &'m ModelProto) -> Result<Self, Error> {
        let opset = model
            .opset_import
            .iter()
            .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
            .map(|o| o.version)
            // IR version 1/2 models predate opset_import and mean opset 1.
            .unwrap_or(1);
        Ok(Loader {
            model,
            opset,
            graph: Graph {
                name: model.graph.name.clone(),
                opset,
                ..Graph::default()
            },
            by_name: HashMap::new(),
        })
    }

    fn load(mut self) -> Result<Graph, Error> {
        let g = &*self.model.graph;
        self.check_supported(&g.node)?;

        for init in &g.initializer {
            let t = tensor_from_proto(init)
                .map_err(|m| Error::Model(format!("initializer `{}`: {m}", init.name)))?;
            self.define(&init.name, t.dtype, Some(t))?;
        }
        for vi in &g.input {
            if self.by_name.contains_key(&vi.name) {
                // Older IR versions list every initializer among the inputs too.
                continue;
            }
            let (dtype, dims) = value_info_type(vi).map_err(|m| Error::Input {
                input: vi.name.clone(),
                message: m,
            })?;
            let id = self.define(&vi.name, dtype, None)?;
            self.graph.inputs.push(Input { value: id, dims });
        }

        for index in topological_order(&g.node, &self.by_name, self.opset)? {
            let node = &g.node[index];
            let name = if node.name.is_empty() {
                format!("{}#{index}", node.op_type)
            } else {
                node.name.clone()
            };
            let op = parse_op(node, self.opset).map_err(|message| Error::Node {
                node: name.clone(),
                op: node.op_type.clone(),
                opset: self.opset,
                message,
            })?;
            let mut inputs = Vec::with_capacity(node.input.len());
            for input in &node.input {
                if input.is_empty() {
                    inputs.push(None);
                } else {
                    inputs.push(Some(self.by_name[input.as_str()]));
                }
            }
            let mut outputs = Vec::with_capacity(node.output.len());
            for (i, output) in node.output.iter().enumerate() {
                if output.is_empty() {
                    // An omitted optional output: give it a private name.
                    outputs.push(self.graph.add_value(Value {
                        name: format!("{name}:unused{i}"),
                        dtype: DType::F32,
                        shape: None,
                        constant: None,
                    }));
                    continue;
                }
                if self.by_name.contains_key(output) {
                    return Err(Error::Node {
                        node: name.clone(),
                        op: node.op_type.clone(),
                        opset: self.opset,
                        message: format!(
                            "output `{output}` is already defined elsewhere (ONNX graphs are SSA)"
                        ),
                    });
                }
                outputs.push(self.define(output, DType::F32, None)?);
            }
            self.graph.nodes.push(Node {
                name,
                op,
                inputs,
                outputs,
            });
        }

        for vi in &g.output {
            let id = *self.by_name.get(&vi.name).ok_or_else(|| {
                Error::Model(format!("graph output `{}` is produced by no node", vi.name))
            })?;
            self.graph.outputs.push(id);
        }
        if self.graph.outputs.is_empty() {
            return Err(Error::Model("the graph has no outputs".into()));
        }
        Ok(self.graph)
    }

    fn define(
        &mut self,
        name: &str,
        dtype: DType,
        constant: Option<Tensor>,
    ) -> Result<ValueId, Error> {
        let shape = constant.as_ref().map(|t| t.shape.clone());
        let id = self.graph.add_value(Value {
            name: name.to_owned(),
            dtype,
            shape,
            constant,
        });
        if self.by_name.insert(name.to_owned(), id).is_some() {
            return Err(Error::Model(format!("value `{name}` is defined twice")));
        }
        Ok(id)
    }

    /// Fails with one error listing every unsupported operator type.
    fn check_supported(&self, nodes: &[NodeProto]) -> Result<(), Error> {
        let mut found: Vec<UnsupportedOp> = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let default_domain = n.domain.is_empty() || n.domain == "ai.onnx";
            if default_domain && SUPPORTED.contains(&n.op_type.as_str()) {
                continue;
            }
            let opset = self
                .model
                .opset_import
                .iter()
                .find(|o| o.domain == n.domain || (default_domain && o.domain.is_empty()))
                .map_or(self.opset, |o| o.version);
            let node_name = if n.name.is_empty() {
                format!("#{i}")
            } else {
                n.name.clone()
            };
            match found
                .iter_mut()
                .find(|u| u.op_type == n.op_type && u.domain == n.domain)
            {
                Some(u) => {
                    u.count += 1;
                    if u.nodes.len() < 3 {
                        u.nodes.push(node_name);
                    }
                }
                None => found.push(UnsupportedOp {
                    op_type: n.op_type.clone(),
                    domain: n.domain.clone(),
                    opset,
                    count: 1,
                    nodes: vec![node_name],
                }),
            }
        }
        if found.is_empty() {
            Ok(())
        } else {
            Err(Error::Unsupported(found))
        }
    }
}

/// Kahn's algorithm, stable with respect to the file's order (which ONNX requires to
/// be topological already; some exporters get it wrong).
fn topological_order(
    nodes: &[NodeProto],
    defined: &HashMap<String, ValueId>,
    opset: i64,
) -> Result<Vec<usize>, Error> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            producer.insert(o.as_str(), i);
        }
    }
    let mut pending = vec![0usize; nodes.len()];
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for input in n.input.iter().filter(|s| !s.is_empty()) {
            if let Some(&p) = producer.get(input.as_str()) {
                pending[i] += 1;
                consumers[p].push(i);
            } else if !defined.contains_key(input.as_str()) {
                let name = if n.name.is_empty() {
                    format!("#{i}")
                } else {
                    n.name.clone()
                };
                return Err(Error::Node {
                    node: name,
                    op: n.op_type.clone(),
                    opset,
                    message: format!(
                        "reads `{input}`, which no node, graph input or initializer defines"
                    ),
                });
            }
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..nodes.len()).filter(|&i| pending[i] == 0).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &c in &consumers[i] {
            pending[c] -= 1;
            if pending[c] == 0 {
                ready.insert(c);
            }
        }
    }
    if order.len() != nodes.len() {
        // Name the nodes that never became ready: the cycle and everything after it.
        let stuck: Vec<String> = (0..nodes.len())
            .filter(|&i| pending[i] > 0)
            .map(|i| {
                let n = &nodes[i];
                let name = if n.name.is_empty() {
                    format!("#{i}")
                } else {
                    n.name.clone()
                };
                format!("`{name}` ({})", n.op_type)
            })
            .collect();
        let more = if stuck.len() > 5 { ", ..." } else { "" };
        return Err(Error::Model(format!(
            "the graph has a cycle; {} node{} can never run: {}{more}",
            stuck.len(),
            if stuck.len() == 1 { "" } else { "s" },
            stuck[..stuck.len().min(5)].join(", ")
        )));
    }
    Ok(order)
}

fn value_info_type(vi: &onnx_protobuf::ValueInfoProto) -> Result<(DType, Vec<Dim>), String> {
    if !vi.type_.has_tensor_type() {
        return Err("only tensor inputs are supported".into());
    }
    let tt = vi.type_.tensor_type();
    let dtype = DType::from_onnx(tt.elem_type)
        .ok_or_else(|| format!("unsupported element type {}", tt.elem_type))?;
    let dims = tt
        .shape
        .dim
        .iter()
        .map(|d| {
            if d.has_dim_value() && d.dim_value() >= 0 {
                Dim::Fixed(d.dim_value() as usize)
            } else if d.has_dim_param() && !d.dim_param().is_empty() {
                Dim::Symbolic(d.dim_param().to_owned())
            } else if d.has_dim_value() {
                // Some exporters write -1 for "unknown": show what the model says.
                Dim::Symbolic(d.dim_value().to_string())
            } else {
                Dim::Symbolic("?".into())
            }
        })
        .collect();
    Ok((dtype, dims))
}

/// Decodes a `TensorProto` (typed fields or raw little-endian bytes).
pub fn tensor_from_proto(t: &TensorProto) -> Result<Tensor, String> {
    if !t.external_data.is_empty()
        || t.data_location.enum_value() == Ok(onnx_protobuf::tensor_proto::DataLocation::EXTERNAL)
    {
        return Err("external data files are not supported yet".into());
    }
    let dtype = DType::from_onnx(t.data_type)
        .ok_or_else(|| format!("unsupported element type {}", t.data_type))?;
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        shape.push(usize::try_from(d).map_err(|_| format!("negative dimension {d}"))?);
    }
    let len = crate::infer::check_elements(&shape)?;
    let raw = &t.raw_data;
    let data = if !raw.is_empty() {
        let size = dtype.size();
        if Some(raw.len()) != len.checked_mul(size) {
            return Err(format!(
                "raw data holds {} bytes, expected {len} elements of {dtype}",
                raw.len()
            ));
        }
        let chunks = raw.chunks_exact(size);
        match dtype {
            DType::F32 => Data::F32(
                chunks
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            DType::F64 => Data::F32(
                chunks
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32)
                    .collect(),
            ),
            DType::F16 => return Err("float16 tensors are not supported yet".into()),
            DType::I64 => Data::I64(
                chunks
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect(),
            ),
            DType::I32 => Data::I64(
                chunks
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                    .collect(),
            ),
            DType::I8 => Data::I64(raw.iter().map(|&b| b as i8 as i64).collect()),
            DType::U8 | DType::Bool => Data::I64(raw.iter().map(|&b| b as i64).collect()),
        }
    } else {
        let data = match dtype {
            DType::F32 => Data::F32(t.float_data.clone()),
            DType::F64 => Data::F32(t.double_data.iter().map(|&x| x as f32).collect()),
            DType::F16 => return Err("float16 tensors are not supported yet".into()),
            DType::I64 => Data::I64(t.int64_data.clone()),
            DType::I32 | DType::I8 | DType::U8 | DType::Bool => {
                Data::I64(t.int32_data.iter().map(|&x| x as i64).collect())
            }
        };
        let got = match &data {
            Data::F32(v) => v.len(),
            Data::I64(v) => v.len(),
        };
        if got != len {
            return Err(format!(
                "holds {got} values, its shape {shape:?} needs {len}"
            ));
        }
        data
    };
    Ok(Tensor { dtype, shape, data })
}

/// Attribute lookup for one node, used only while loading.
struct Attrs<'a>(&'a [AttributeProto]);

impl<'a> Attrs<'a> {
    fn get(&self, name: &str) -> Option<&'a AttributeProto> {
        self.0.iter().find(|a| a.name == name)
    }
    fn int(&self, name: &str) -> Option<i64> {
        self.get(name).map(|a| a.i)
    }
    fn float(&self, name: &str) -> Option<f32> {
        self.get(name).map(|a| a.f)
    }
    fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.get(name).map(|a| a.ints.clone())
    }
    fn usizes(&self, name: &str) -> Result<Option<Vec<usize>>, String> {
        match self.ints(name) {
            None => Ok(None),
            Some(v) => v
                .iter()
                .map(|&x| {
                    usize::try_from(x)
                        .map_err(|_| format!("attribute `{name}` has a negative value {x}"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
        }
    }
    fn string(&self, name: &str) -> Option<String> {
        self.get(name)
            .map(|a| String::from_utf8_lossy(&a.s).into_owned())
    }
    fn tensor(&self, name: &str) -> Result<Option<Tensor>, String> {
        match self.get(name) {
            Some(a) if a.t.is_some() => tensor_from_proto(&a.t).map(Some),
            _ => Ok(None),
        }
    }
    fn window(&self) -> Result<Window, String> {
        let auto_pad = match self.string("auto_pad").as_deref() {
            None | Some("NOTSET") | Some("") => AutoPad::NotSet,
            Some("SAME_UPPER") => AutoPad::SameUpper,
            Some("SAME_LOWER") => AutoPad::SameLower,
            Some("VALID") => AutoPad::Valid,
            Some(other) => return Err(format!("unknown auto_pad `{other}`")),
        };
        Ok(Window {
            kernel_shape: self.usizes("kernel_shape")?,
            strides: self.usizes("strides")?,
            dilations: self.usizes("dilations")?,
            pads: self.usizes("pads")?,
            auto_pad,
            ceil_mode: self.int("ceil_mode").unwrap_or(0) != 0,
        })
    }
}

fn parse_op(node: &NodeProto, opset: i64) -> Result<Op, String> {
    let a = Attrs(&node.attribute);
    let unary = |u| Ok(Op::Unary(u));
    match node.op_type.as_str() {
        "Conv" => Ok(Op::Conv {
            window: a.window()?,
            group: positive(a.int("group").unwrap_or(1), "group")?,
            activation: None,
        }),
        "Gemm" => Ok(Op::Gemm {
            alpha: a.float("alpha").unwrap_or(1.0),
            beta: a.float("beta").unwrap_or(1.0),
            trans_a: a.int("transA").unwrap_or(0) != 0,
            trans_b: a.int("transB").unwrap_or(0) != 0,
            activation: None,
        }),
        "MatMul" => Ok(Op::MatMul),
        "BatchNormalization" => Ok(Op::BatchNormalization {
            epsilon: a.float("epsilon").unwrap_or(1e-5),
        }),
        "Relu" => unary(UnaryOp::Relu),
        "LeakyRelu" => unary(UnaryOp::LeakyRelu {
            alpha: a.float("alpha").unwrap_or(0.01),
        }),
        "Sigmoid" => unary(UnaryOp::Sigmoid),
        "Tanh" => unary(UnaryOp::Tanh),
        "Exp" => unary(UnaryOp::Exp),
        "Neg" => unary(UnaryOp::Neg),
        "Abs" => unary(UnaryOp::Abs),
        "Sqrt" => unary(UnaryOp::Sqrt),
        "Clip" if opset < 11 => Ok(Op::Clip {
            min: Some(a.float("min").unwrap_or(f32::MIN)),
            max: Some(a.float("max").unwrap_or(f32::MAX)),
        }),
        "Clip" => Ok(Op::Clip {
            min: None,
            max: None,
        }),
        "Add" => Ok(Op::Binary(BinaryOp::Add)),
        "Sub" => Ok(Op::Binary(BinaryOp::Sub)),
        "Mul" => Ok(Op::Binary(BinaryOp::Mul)),
        "Div" => Ok(Op::Binary(BinaryOp::Div)),
        "Sum" => Ok(Op::Variadic(BinaryOp::Add)),
        "Max" => Ok(Op::Variadic(BinaryOp::Max)),
        "Min" => Ok(Op::Variadic(BinaryOp::Min)),
        "MaxPool" => {
            if a.int("storage_order").unwrap_or(0) != 0 {
                return Err("storage_order=1 is not supported".into());
            }
            Ok(Op::MaxPool(a.window()?))
        }
        "AveragePool" => Ok(Op::AveragePool {
            window: a.window()?,
            count_include_pad: a.int("count_include_pad").unwrap_or(0) != 0,
        }),
        "GlobalAveragePool" => Ok(Op::GlobalAveragePool),
        "LRN" => Ok(Op::Lrn {
            size: positive(a.int("size").ok_or("attribute `size` is required")?, "size")?,
            alpha: a.float("alpha").unwrap_or(1e-4),
            beta: a.float("beta").unwrap_or(0.75),
            bias: a.float("bias").unwrap_or(1.0),
        }),
        "Softmax" | "LogSoftmax" => Ok(Op::Softmax {
            axis: a.int("axis").unwrap_or(if opset < 13 { 1 } else { -1 }),
            log: node.op_type == "LogSoftmax",
        }),
        "Concat" => Ok(Op::Concat {
            axis: a.int("axis").ok_or("attribute `axis` is required")?,
        }),
        "Transpose" => Ok(Op::Transpose {
            perm: a.usizes("perm")?,
        }),
        "Reshape" => Ok(Op::Reshape {
            allow_zero: a.int("allowzero").unwrap_or(0) != 0,
        }),
        "Flatten" => Ok(Op::Flatten {
            axis: a.int("axis").unwrap_or(1),
        }),
        "Squeeze" => Ok(Op::Squeeze {
            axes: a.ints("axes"),
        }),
        "Unsqueeze" => Ok(Op::Unsqueeze {
            axes: a.ints("axes"),
        }),
        "Identity" => Ok(Op::Identity),
        "Dropout" => Ok(Op::Dropout),
        "Constant" => constant_attr(&a).map(Op::Constant),
        "ConstantOfShape" => Ok(Op::ConstantOfShape(
            a.tensor("value")?
                .unwrap_or_else(|| Tensor::f32(vec![1], vec![0.0])),
        )),
        "Shape" => Ok(Op::Shape {
            start: a.int("start").unwrap_or(0),
            end: a.int("end"),
        }),
        "Gather" => Ok(Op::Gather {
            axis: a.int("axis").unwrap_or(0),
        }),
        "Cast" => {
            let to = a.int("to").ok_or("attribute `to` is required")?;
            let to = DType::from_onnx(to as i32)
                .ok_or_else(|| format!("unsupported target type {to}"))?;
            Ok(Op::Cast { to })
        }
        other => Err(format!("operator `{other}` is not supported")),
    }
}

fn constant_attr(a: &Attrs) -> Result<Tensor, String> {
    if let Some(t) = a.tensor("value")? {
        return Ok(t);
    }
    if let Some(f) = a.get("value_float") {
        return Ok(Tensor::f32(vec![], vec![f.f]));
    }
    if let Some(f) = a.get("value_floats") {
        return Ok(Tensor::f32(vec![f.floats.len()], f.floats.clone()));
    }
    if let Some(i) = a.get("value_int") {
        return Ok(Tensor::i64(vec![], vec![i.i]));
    }
    if let Some(i) = a.get("value_ints") {
        return Ok(Tensor::i64(vec![i.ints.len()], i.ints.clone()));
    }
    Err("Constant needs a `value` (or value_float(s)/value_int(s)) attribute".into())
}

fn positive(v: i64, name: &str) -> Result<usize, String> {
    if v >= 1 {
        Ok(v as usize)
    } else {
        Err(format!("attribute `{name}` must be positive, got {v}"))
    }
}
