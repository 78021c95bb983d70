//! Loading: ONNX protobuf → [`Graph`].
//!
//! Attributes are parsed here, once, into typed [`Op`] variants with the defaults of the
//! model's opset. Every unsupported operator is collected before failing, so one error
//! lists them all. Nothing in this module panics on a malformed file.

#[allow(unused_imports)]
use kiln_runtime::typed::Elem as _;
use std::collections::HashMap;
use std::path::Path;

use onnx_protobuf::{Message, ModelProto, NodeProto, TensorProto};

use crate::dispatch_dtype;
use crate::error::{Error, UnsupportedOp};
use crate::ir::*;
use crate::ops::{Attrs, ParseCx};
use crate::tensor::Scalar;

/// The newest default-domain opset Kiln knows (onnx 1.23.2's, whose node tests run).
pub const MAX_OPSET: i64 = 28;

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
    load_proto(&parse_model(bytes)?)
}

/// Decodes a serialized `ModelProto`, which must hold a graph.
pub fn parse_model(bytes: &[u8]) -> Result<ModelProto, Error> {
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
    Ok(model)
}

/// Builds the graph of a decoded model.
pub fn load_proto(model: &ModelProto) -> Result<Graph, Error> {
    Loader::new(model)?.load()
}

/// Replaces node `index` of the main graph (an `If`) by the nodes of its
/// `then_branch` (or `else_branch`): the branch's initializers join the graph's, and
/// each branch output is copied to the `If`'s output by an Identity node. Nested `If`s
/// come along as nodes and are inlined in turn.
pub fn inline_branch(model: &mut ModelProto, index: usize, then: bool) -> Result<(), Error> {
    let graph = model.graph.mut_or_insert_default();
    let node = graph
        .node
        .get(index)
        .cloned()
        .ok_or_else(|| Error::Model(format!("no node #{index} to inline")))?;
    let which = if then { "then_branch" } else { "else_branch" };
    let branch = node
        .attribute
        .iter()
        .find(|a| a.name == which)
        .and_then(|a| a.g.as_ref())
        .ok_or_else(|| Error::Model(format!("If node #{index} has no `{which}` graph")))?
        .clone();
    if branch.output.len() != node.output.len() {
        return Err(Error::Model(format!(
            "If node #{index}: `{which}` has {} outputs, the node {}",
            branch.output.len(),
            node.output.len()
        )));
    }
    let mut nodes = branch.node.clone();
    for (k, (out, bout)) in node.output.iter().zip(&branch.output).enumerate() {
        if out.is_empty() {
            continue;
        }
        let mut id = NodeProto::new();
        id.op_type = "Identity".into();
        id.name = format!("{}/{which}/out{k}", node.name);
        id.input.push(bout.name.clone());
        id.output.push(out.clone());
        nodes.push(id);
    }
    graph.initializer.extend(branch.initializer.iter().cloned());
    graph.node.splice(index..=index, nodes);
    Ok(())
}

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
        if !(1..=MAX_OPSET).contains(&opset) {
            return Err(Error::Model(format!(
                "the model imports opset {opset} of the default domain; Kiln knows opsets 1 to {MAX_OPSET}"
            )));
        }
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
            if g.initializer.iter().any(|t| t.name == vi.name) {
                // Older IR versions list every initializer among the inputs too (any
                // other repeated name is an error of `define`).
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
            let op = parse_op(node, index, self.opset).map_err(|message| Error::Node {
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
                    outputs.push(
                        self.graph
                            .add_value(Value::unknown(format!("{name}:unused{i}"), DType::F32)),
                    );
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
        let value = match constant {
            Some(t) => Value::constant(name.to_owned(), t),
            None => Value::unknown(name.to_owned(), dtype),
        };
        let id = self.graph.add_value(value);
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
            if default_domain && crate::ops::find(&n.op_type).is_some() {
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
            if defined.contains_key(o.as_str()) {
                return Err(Error::Node {
                    node: if n.name.is_empty() {
                        format!("#{i}")
                    } else {
                        n.name.clone()
                    },
                    op: n.op_type.clone(),
                    opset,
                    message: format!(
                        "output `{o}` is already defined as a graph input or initializer (ONNX graphs are SSA)"
                    ),
                });
            }
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
    let dtype = DType::from_onnx(tt.elem_type).ok_or_else(|| {
        format!(
            "element type {} is not supported",
            DType::onnx_code_name(tt.elem_type)
        )
    })?;
    let dims = tt
        .shape
        .dim
        .iter()
        .enumerate()
        .map(|(axis, d)| {
            if d.has_dim_value() && d.dim_value() >= 0 {
                Dim::from(d.dim_value())
            } else if d.has_dim_param() && !matches!(d.dim_param(), "" | "?") {
                Dim::sym(d.dim_param())
            } else {
                // Unnamed, `?` or -1 (exporters' "unknown"): a symbol of its own, named
                // after the input and axis, so that two unknown dims are not taken as
                // equal.
                Dim::sym(&format!("{}[{axis}]", vi.name))
            }
        })
        .collect();
    Ok((dtype, dims))
}

/// Decodes a `TensorProto` (typed fields or raw little-endian bytes) into its own
/// element type.
pub fn tensor_from_proto(t: &TensorProto) -> Result<Tensor, String> {
    if !t.external_data.is_empty()
        || t.data_location.enum_value() == Ok(onnx_protobuf::tensor_proto::DataLocation::EXTERNAL)
    {
        return Err("external data files are not supported yet".into());
    }
    let dtype = DType::from_onnx(t.data_type).ok_or_else(|| {
        format!(
            "element type {} is not supported",
            DType::onnx_code_name(t.data_type)
        )
    })?;
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        shape.push(usize::try_from(d).map_err(|_| format!("negative dimension {d}"))?);
    }
    let len = crate::infer::check_elements(&shape)?;
    let raw = &t.raw_data;
    let data = if dtype.is_small() {
        // One byte per float8 element, two 4-bit or four 2-bit elements per byte
        // (first element in the low bits), in raw_data or one byte per int32_data entry.
        let bytes: Vec<u8> = if raw.is_empty() {
            t.int32_data.iter().map(|&x| x as u8).collect()
        } else {
            raw.clone()
        };
        let bits = dtype.onnx_bits();
        let want = len
            .checked_mul(bits)
            .ok_or_else(|| format!("{len} elements of {dtype} overflow"))?
            .div_ceil(8);
        if bytes.len() != want {
            return Err(format!(
                "holds {} bytes, its shape {shape:?} needs {want} for {len} elements of {dtype}",
                bytes.len()
            ));
        }
        let codes: Vec<u8> = (0..len)
            .map(|i| (bytes[i * bits / 8] >> (i * bits % 8)) & ((1u16 << bits) - 1) as u8)
            .collect();
        Data::from_codes(dtype, &codes).ok_or_else(|| format!("{dtype} is not a small type"))?
    } else if !raw.is_empty() {
        if Some(raw.len()) != len.checked_mul(dtype.size()) {
            return Err(format!(
                "raw data holds {} bytes, expected {len} elements of {dtype}",
                raw.len()
            ));
        }
        dispatch_dtype!(dtype, T => {
            let mut v = vec![T::default(); len];
            bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(raw);
            T::wrap(v)
        })
    } else {
        // Typed fields: float_data (f32), double_data (f64), int64_data (i64),
        // uint64_data (u32, u64), int32_data (everything else, f16/bf16 as bits).
        let data = match dtype {
            DType::F32 => Data::F32(t.float_data.clone()),
            DType::F64 => Data::F64(t.double_data.clone()),
            DType::I64 => Data::I64(t.int64_data.clone()),
            DType::U32 => Data::U32(t.uint64_data.iter().map(|&x| x as u32).collect()),
            DType::U64 => Data::U64(t.uint64_data.clone()),
            DType::F16 => Data::F16(
                t.int32_data
                    .iter()
                    .map(|&x| half::f16::from_bits(x as u16))
                    .collect(),
            ),
            DType::BF16 => Data::BF16(
                t.int32_data
                    .iter()
                    .map(|&x| half::bf16::from_bits(x as u16))
                    .collect(),
            ),
            DType::Bool => Data::Bool(
                t.int32_data
                    .iter()
                    .map(|&x| kiln_runtime::typed::Bool((x != 0) as u8))
                    .collect(),
            ),
            d => {
                dispatch_dtype!(d, T => T::wrap(t.int32_data.iter().map(|&x| T::from_i64(x as i64)).collect()))
            }
        };
        if data.len() != len {
            return Err(format!(
                "holds {} values, its shape {shape:?} needs {len}",
                data.len()
            ));
        }
        data
    };
    Ok(Tensor::new(shape, data))
}

/// Parses a node's operator through its registry declaration.
fn parse_op(node: &NodeProto, index: usize, opset: i64) -> Result<Op, String> {
    let def = crate::ops::find(&node.op_type)
        .ok_or_else(|| format!("operator `{}` is not supported", node.op_type))?;
    (def.parse)(&ParseCx {
        attrs: Attrs(&node.attribute),
        opset,
        op_type: &node.op_type,
        n_inputs: node.input.len(),
        node_index: index,
    })
}
