//! Lowering: the optimised graph → a target-independent [`Program`]: a sequence of
//! kernel calls whose parameters are fixed, over operands that are graph inputs,
//! weights (at fixed offsets in one blob) or buffers the planner will place.
//!
//! View operators (Reshape, Flatten, Squeeze, Unsqueeze, Identity) produce no step:
//! their output is their input's operand. Last, [`crate::in_place::mark`] lists for
//! each step the operands its kernel could overwrite with its output.

use std::collections::HashMap;

use kiln_runtime::params::{self, MAX_RANK};

use crate::error::Error;
use crate::infer::{matmul_operands, normalize_axis};
use crate::ir::*;
use crate::plan::{BufferId, PlaneOrder};
use crate::window;

/// Weights are placed at multiples of this many elements (64 bytes).
const WEIGHT_ALIGN_ELEMS: usize = 16;

/// Where a step's operand lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// The `i`-th graph input (the caller's buffer).
    Input(usize),
    /// A slice of the weights blob, in elements.
    Weight { offset: usize, len: usize },
    /// A planned arena buffer.
    Buffer(BufferId),
}

/// One kernel call with its parameters fixed.
#[derive(Debug, Clone, PartialEq)]
pub enum Kernel {
    Conv2d(params::Conv2d),
    Gemm(params::Gemm),
    MatMul(params::MatMul),
    BatchNorm(params::BatchNorm),
    ChannelAffine(params::ChannelAffine),
    Unary(params::Unary),
    Binary(params::Binary, params::Broadcast),
    /// `out = op(out, input)`: accumulation for variadic Sum/Max/Min.
    BinaryInPlace(params::Binary, params::Broadcast),
    Pool2d(params::Pool2d),
    ReduceMean(params::ReduceMean),
    Lrn(params::Lrn),
    Softmax(params::Softmax),
    Concat(params::Concat),
    Transpose(params::Transpose),
    Copy,
}

#[derive(Debug, Clone)]
pub struct Step {
    /// The ONNX node this step came from.
    pub node: String,
    /// Its ONNX operator type.
    pub op_type: &'static str,
    pub kernel: Kernel,
    pub inputs: Vec<Operand>,
    pub output: BufferId,
    /// Kernel scratch, planned as a buffer living for this step only.
    pub scratch: Option<BufferId>,
    /// Positions in `inputs` of the buffers this step's kernel could write its output
    /// over, in order of preference ([`crate::in_place`]); the planner keeps at most
    /// one, where that input dies here ([`crate::plan::MemoryPlan::alias_of`]).
    pub in_place: Vec<usize>,
    /// How the kernel walks operand 0 and its output plane by plane, when it does, so
    /// the planner may start the output inside that operand where it dies here
    /// (segment overlapping, [`crate::plan::MemoryPlan::overlap_of`]); CPU kernels only.
    pub overlap: Option<PlaneOrder>,
}

#[derive(Debug, Clone)]
pub struct Buffer {
    pub name: String,
    /// Length in `f32` elements.
    pub len: usize,
    pub scratch: bool,
}

/// A graph input or output as the generated module describes it.
#[derive(Debug, Clone)]
pub struct Io {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct WeightEntry {
    pub name: String,
    pub offset: usize,
    pub len: usize,
}

/// The lowered model: everything code generation needs except buffer offsets.
#[derive(Debug, Clone)]
pub struct Program {
    pub name: String,
    pub steps: Vec<Step>,
    pub buffers: Vec<Buffer>,
    pub weights: Vec<f32>,
    pub weight_entries: Vec<WeightEntry>,
    pub inputs: Vec<Io>,
    /// Each output and the buffer holding it after `run`.
    pub outputs: Vec<(Io, BufferId)>,
    /// ONNX values that are views (Reshape, Flatten, ...) of a planned buffer, by
    /// name: they share its bytes and need none of their own.
    pub views: Vec<(String, BufferId)>,
}

/// Lowers an inferred, optimised graph.
pub fn lower(graph: &Graph) -> Result<Program, Error> {
    let mut l = Lowering {
        graph,
        program: Program {
            name: graph.name.clone(),
            steps: Vec::new(),
            buffers: Vec::new(),
            weights: Vec::new(),
            weight_entries: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            views: Vec::new(),
        },
        operands: HashMap::new(),
    };
    for (i, input) in graph.inputs.iter().enumerate() {
        let v = graph.value(input.value);
        if v.dtype != DType::F32 {
            return Err(Error::Input {
                input: v.name.clone(),
                message: format!(
                    "has element type {}; the CPU target handles float32 only",
                    v.dtype
                ),
            });
        }
        l.operands.insert(input.value, Operand::Input(i));
        l.program.inputs.push(io(v));
    }
    for node in &graph.nodes {
        l.node(node).map_err(|message| Error::Node {
            node: node.name.clone(),
            op: node.op.onnx_name().into(),
            opset: graph.opset,
            message,
        })?;
    }
    l.outputs()?;
    crate::in_place::mark(&mut l.program);
    Ok(l.program)
}

fn io(v: &Value) -> Io {
    Io {
        name: v.name.clone(),
        dtype: v.dtype,
        shape: v.shape().to_vec(),
    }
}

struct Lowering<'g> {
    graph: &'g Graph,
    program: Program,
    operands: HashMap<ValueId, Operand>,
}

type R<T> = Result<T, String>;

impl Lowering<'_> {
    fn operand(&mut self, v: ValueId) -> R<Operand> {
        if let Some(&o) = self.operands.get(&v) {
            return Ok(o);
        }
        let value = self.graph.value(v);
        let t = value
            .constant
            .as_ref()
            .ok_or_else(|| format!("reads `{}`, which nothing computed before it", value.name))?;
        let Data::F32(data) = &t.data else {
            return Err(format!(
                "reads the {} constant `{}` at run time; the CPU target handles float32 only",
                t.dtype, value.name
            ));
        };
        let offset = self
            .program
            .weights
            .len()
            .next_multiple_of(WEIGHT_ALIGN_ELEMS);
        self.program.weights.resize(offset, 0.0);
        self.program.weights.extend_from_slice(data);
        self.program.weight_entries.push(WeightEntry {
            name: value.name.clone(),
            offset,
            len: data.len(),
        });
        let o = Operand::Weight {
            offset,
            len: data.len(),
        };
        self.operands.insert(v, o);
        Ok(o)
    }

    fn buffer(&mut self, name: &str, len: usize, scratch: bool) -> BufferId {
        self.program.buffers.push(Buffer {
            name: name.to_owned(),
            len,
            scratch,
        });
        BufferId(self.program.buffers.len() as u32 - 1)
    }

    fn shape(&self, v: Option<ValueId>) -> R<&[usize]> {
        v.map(|v| self.graph.value(v).shape())
            .ok_or_else(|| "an input is missing".into())
    }

    fn push(
        &mut self,
        node: &Node,
        kernel: Kernel,
        inputs: Vec<Operand>,
        output: BufferId,
        scratch_len: usize,
    ) {
        let scratch = (scratch_len > 0)
            .then(|| self.buffer(&format!("{}:scratch", node.name), scratch_len, true));
        self.program.steps.push(Step {
            node: node.name.clone(),
            op_type: node.op.onnx_name(),
            kernel,
            inputs,
            output,
            scratch,
            in_place: Vec::new(),
            overlap: None,
        });
    }

    fn node(&mut self, node: &Node) -> R<()> {
        let g = self.graph;
        let out_value = g.value(node.outputs[0]);
        for v in node.inputs.iter().flatten().chain(&node.outputs[..1]) {
            let value = g.value(*v);
            let is_shape_input = matches!(
                node.op,
                Op::Reshape { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } | Op::Clip { .. }
            ) && node.inputs.first() != Some(&Some(*v))
                && node.outputs[0] != *v;
            if value.dtype != DType::F32 && !is_shape_input {
                return Err(format!(
                    "`{}` has element type {}; the CPU target handles float32 only",
                    value.name, value.dtype
                ));
            }
        }
        if node.op.is_view() {
            let src = self.operand(node.input(0).ok_or("input 0 is missing")?)?;
            self.operands.insert(node.outputs[0], src);
            if let Operand::Buffer(b) = src {
                self.program.views.push((out_value.name.clone(), b));
            }
            return Ok(());
        }
        let x_shape = self.shape(node.input(0))?.to_vec();
        let y_shape = out_value.shape().to_vec();
        let kernel = match &node.op {
            Op::Conv {
                window,
                group,
                activation,
            } => {
                let w_shape = self.shape(node.input(1))?;
                let win = Window2d::from(&window::resolve(
                    window,
                    &x_shape[2..],
                    Some(&w_shape[2..]),
                    false,
                )?);
                let p = params::Conv2d {
                    n: x_shape[0],
                    c_in: x_shape[1],
                    h_in: x_shape[2],
                    w_in: x_shape[3],
                    c_out: y_shape[1],
                    h_out: y_shape[2],
                    w_out: y_shape[3],
                    kernel: win.kernel,
                    stride: win.stride,
                    dilation: win.dilation,
                    pads: win.pads,
                    group: *group,
                    activation: activation_param(*activation),
                };
                let inputs = self.operands_of(node)?;
                let out = self.buffer(&out_value.name, out_value.len(), false);
                self.push(node, Kernel::Conv2d(p), inputs, out, p.scratch_len());
                return self.bind(node, out);
            }
            Op::Gemm {
                alpha,
                beta,
                trans_a,
                trans_b,
                activation,
            } => {
                let k = if *trans_a { x_shape[0] } else { x_shape[1] };
                let (m, n) = (y_shape[0], y_shape[1]);
                let c_strides = match node.input(2) {
                    None => [0, 0],
                    Some(c) => {
                        let cs = g.value(c).shape();
                        let full: Vec<usize> = std::iter::repeat_n(1, 2 - cs.len().min(2))
                            .chain(cs.iter().copied())
                            .collect();
                        [
                            if full[0] == 1 { 0 } else { full[1] },
                            if full[1] == 1 { 0 } else { 1 },
                        ]
                    }
                };
                Kernel::Gemm(params::Gemm {
                    m,
                    n,
                    k,
                    trans_a: *trans_a,
                    trans_b: *trans_b,
                    alpha: *alpha,
                    beta: *beta,
                    c_strides,
                    activation: activation_param(*activation),
                })
            }
            Op::MatMul => Kernel::MatMul(matmul_params(
                &x_shape,
                self.shape(node.input(1))?,
                &y_shape,
            )?),
            Op::BatchNormalization { epsilon } => Kernel::BatchNorm(params::BatchNorm {
                n: x_shape[0],
                c: x_shape[1],
                inner: x_shape[2..].iter().product(),
                epsilon: *epsilon,
            }),
            Op::ChannelAffine { activation } => Kernel::ChannelAffine(params::ChannelAffine {
                n: x_shape[0],
                c: x_shape[1],
                inner: x_shape[2..].iter().product(),
                activation: activation_param(*activation),
            }),
            Op::Unary(u) => Kernel::Unary(unary_param(*u)),
            Op::Clip { min, max } => {
                let bound = |m: &Option<f32>, k: usize, default: f32| -> R<f32> {
                    match (m, node.input(k)) {
                        (Some(v), _) => Ok(*v),
                        (None, None) => Ok(default),
                        (None, Some(v)) => g
                            .value(v)
                            .constant
                            .as_ref()
                            .and_then(|t| t.as_f32().first().copied())
                            .ok_or_else(|| "Clip bounds must be constant".into()),
                    }
                };
                let (lo, hi) = (bound(min, 1, f32::MIN)?, bound(max, 2, f32::MAX)?);
                let x = self.operand(node.input(0).ok_or("input 0 is missing")?)?;
                let out = self.buffer(&out_value.name, out_value.len(), false);
                self.push(
                    node,
                    Kernel::Unary(params::Unary::Clip { min: lo, max: hi }),
                    vec![x],
                    out,
                    0,
                );
                return self.bind(node, out);
            }
            Op::Binary(b) => {
                let bc = broadcast_params(&y_shape, &x_shape, self.shape(node.input(1))?)?;
                Kernel::Binary(binary_param(*b), bc)
            }
            Op::Variadic(b) => return self.variadic(node, *b, &y_shape),
            Op::MaxPool(w) | Op::AveragePool { window: w, .. } => {
                let win = Window2d::from(&window::resolve(w, &x_shape[2..], None, true)?);
                let kind = match node.op {
                    Op::AveragePool {
                        count_include_pad, ..
                    } => params::PoolKind::Average { count_include_pad },
                    _ => params::PoolKind::Max,
                };
                Kernel::Pool2d(params::Pool2d {
                    kind,
                    n: x_shape[0],
                    c: x_shape[1],
                    h_in: x_shape[2],
                    w_in: x_shape[3],
                    h_out: y_shape[2],
                    w_out: y_shape[3],
                    kernel: win.kernel,
                    stride: win.stride,
                    dilation: win.dilation,
                    pads: win.pads,
                })
            }
            Op::GlobalAveragePool => Kernel::ReduceMean(params::ReduceMean {
                outer: x_shape[0] * x_shape[1],
                inner: x_shape[2..].iter().product(),
            }),
            Op::Lrn {
                size,
                alpha,
                beta,
                bias,
            } => Kernel::Lrn(params::Lrn {
                n: x_shape[0],
                c: x_shape[1],
                inner: x_shape[2..].iter().product(),
                size: *size,
                alpha: *alpha,
                beta: *beta,
                bias: *bias,
            }),
            Op::Softmax { axis, log } => {
                let a = normalize_axis(*axis, x_shape.len())?;
                let outer = x_shape[..a].iter().product();
                let (len, inner) = if g.opset < 13 {
                    // Before opset 13 Softmax works on the input flattened to 2-D at `axis`.
                    (x_shape[a..].iter().product(), 1)
                } else {
                    (x_shape[a], x_shape[a + 1..].iter().product())
                };
                Kernel::Softmax(params::Softmax {
                    outer,
                    len,
                    inner,
                    log: *log,
                })
            }
            Op::Concat { axis } => {
                let a = normalize_axis(*axis, y_shape.len())?;
                Kernel::Concat(params::Concat {
                    outer: y_shape[..a].iter().product(),
                })
            }
            Op::Transpose { .. } => {
                let perm = match &node.op {
                    Op::Transpose { perm: Some(p) } => p.clone(),
                    _ => (0..x_shape.len()).rev().collect(),
                };
                if x_shape.len() > MAX_RANK {
                    return Err(format!(
                        "rank {} exceeds the supported {MAX_RANK}",
                        x_shape.len()
                    ));
                }
                let mut in_shape = [1; MAX_RANK];
                let mut p = [0; MAX_RANK];
                in_shape[..x_shape.len()].copy_from_slice(&x_shape);
                p[..perm.len()].copy_from_slice(&perm);
                for (i, slot) in p.iter_mut().enumerate().skip(perm.len()) {
                    *slot = i;
                }
                Kernel::Transpose(params::Transpose {
                    rank: x_shape.len(),
                    in_shape,
                    perm: p,
                })
            }
            Op::Constant(_) | Op::ConstantOfShape(_) | Op::Shape { .. } | Op::Gather { .. } => {
                return Err(
                    "should have been folded to a constant; its inputs are not constant".into(),
                );
            }
            Op::Cast { to } => {
                if *to != DType::F32 {
                    return Err(format!(
                        "casts to {to} at run time; the CPU target handles float32 only"
                    ));
                }
                Kernel::Copy
            }
            Op::Reshape { .. }
            | Op::Flatten { .. }
            | Op::Squeeze { .. }
            | Op::Unsqueeze { .. }
            | Op::Identity
            | Op::Dropout => unreachable!("views return above"),
        };
        let inputs = self.operands_of(node)?;
        let out = self.buffer(&out_value.name, out_value.len(), false);
        self.push(node, kernel, inputs, out, 0);
        self.bind(node, out)
    }

    fn operands_of(&mut self, node: &Node) -> R<Vec<Operand>> {
        node.inputs
            .iter()
            .flatten()
            .map(|&v| self.operand(v))
            .collect()
    }

    fn bind(&mut self, node: &Node, out: BufferId) -> R<()> {
        self.operands.insert(node.outputs[0], Operand::Buffer(out));
        Ok(())
    }

    /// `Sum(a, b, c, ...)` → `y = a + b; y += c; ...` (a copy for one input).
    fn variadic(&mut self, node: &Node, op: BinaryOp, y_shape: &[usize]) -> R<()> {
        let ins: Vec<ValueId> = node.inputs.iter().flatten().copied().collect();
        let out_value = self.graph.value(node.outputs[0]);
        let out = self.buffer(&out_value.name, out_value.len(), false);
        let first = self.operand(ins[0])?;
        if ins.len() == 1 {
            self.push(node, Kernel::Copy, vec![first], out, 0);
            return self.bind(node, out);
        }
        let a_shape = self.graph.value(ins[0]).shape().to_vec();
        let b_shape = self.graph.value(ins[1]).shape().to_vec();
        let second = self.operand(ins[1])?;
        let bc = broadcast_params(y_shape, &a_shape, &b_shape)?;
        self.push(
            node,
            Kernel::Binary(binary_param(op), bc),
            vec![first, second],
            out,
            0,
        );
        for &v in &ins[2..] {
            let s = self.graph.value(v).shape().to_vec();
            let bc = broadcast_params(y_shape, y_shape, &s)?;
            let o = self.operand(v)?;
            self.push(
                node,
                Kernel::BinaryInPlace(binary_param(op), bc),
                vec![o],
                out,
                0,
            );
        }
        self.bind(node, out)
    }

    /// Every graph output must be a buffer of its own that lives to the end; outputs that
    /// are inputs, weights or another output's buffer get a copy.
    fn outputs(&mut self) -> Result<(), Error> {
        let g = self.graph;
        let mut claimed: Vec<BufferId> = Vec::new();
        for &o in &g.outputs {
            let v = g.value(o);
            if v.dtype != DType::F32 {
                return Err(Error::Model(format!(
                    "output `{}` has element type {}; the CPU target handles float32 only",
                    v.name, v.dtype
                )));
            }
            let src = self
                .operand(o)
                .map_err(|m| Error::Model(format!("output `{}`: {m}", v.name)))?;
            let buffer = match src {
                Operand::Buffer(b) if !claimed.contains(&b) => b,
                src => {
                    let b = self.buffer(&v.name, v.len(), false);
                    self.program.steps.push(Step {
                        node: v.name.clone(),
                        op_type: "Identity",
                        kernel: Kernel::Copy,
                        inputs: vec![src],
                        output: b,
                        scratch: None,
                        in_place: Vec::new(),
                        overlap: None,
                    });
                    b
                }
            };
            claimed.push(buffer);
            self.program.outputs.push((io(v), buffer));
        }
        Ok(())
    }
}

/// A resolved 2-D window in the array form `Conv2d` and `Pool2d` share.
struct Window2d {
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    /// `[top, left, bottom, right]`
    pads: [usize; 4],
}

impl From<&window::Spatial> for Window2d {
    fn from(sp: &window::Spatial) -> Self {
        Window2d {
            kernel: [sp.kernel[0], sp.kernel[1]],
            stride: [sp.strides[0], sp.strides[1]],
            dilation: [sp.dilations[0], sp.dilations[1]],
            pads: [
                sp.pads_begin[0],
                sp.pads_begin[1],
                sp.pads_end[0],
                sp.pads_end[1],
            ],
        }
    }
}

fn activation_param(a: Option<Activation>) -> params::Activation {
    match a {
        None => params::Activation::None,
        Some(Activation::Relu) => params::Activation::Relu,
        Some(Activation::LeakyRelu { alpha }) => params::Activation::LeakyRelu { alpha },
        Some(Activation::Clip { min, max }) => params::Activation::Clip { min, max },
        Some(Activation::Sigmoid) => params::Activation::Sigmoid,
    }
}

fn unary_param(u: UnaryOp) -> params::Unary {
    match u {
        UnaryOp::Relu => params::Unary::Relu,
        UnaryOp::LeakyRelu { alpha } => params::Unary::LeakyRelu { alpha },
        UnaryOp::Sigmoid => params::Unary::Sigmoid,
        UnaryOp::Tanh => params::Unary::Tanh,
        UnaryOp::Exp => params::Unary::Exp,
        UnaryOp::Neg => params::Unary::Neg,
        UnaryOp::Abs => params::Unary::Abs,
        UnaryOp::Sqrt => params::Unary::Sqrt,
    }
}

fn binary_param(b: BinaryOp) -> params::Binary {
    match b {
        BinaryOp::Add => params::Binary::Add,
        BinaryOp::Sub => params::Binary::Sub,
        BinaryOp::Mul => params::Binary::Mul,
        BinaryOp::Div => params::Binary::Div,
        BinaryOp::Max => params::Binary::Max,
        BinaryOp::Min => params::Binary::Min,
    }
}

/// Element strides of `shape` (right-aligned to `rank`) with 0 on broadcast dims.
fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let rank = out.len();
    let mut strides = vec![0; rank];
    let mut s = 1;
    for i in (0..shape.len()).rev() {
        let d = rank - shape.len() + i;
        strides[d] = if shape[i] == 1 && out[d] != 1 { 0 } else { s };
        s *= shape[i];
    }
    strides
}

/// Broadcast parameters with size-1 dims dropped and contiguous dims merged, so the
/// common cases reach the kernel as rank 1 or 2.
pub fn broadcast_params(out: &[usize], a: &[usize], b: &[usize]) -> R<params::Broadcast> {
    let (sa, sb) = (broadcast_strides(a, out), broadcast_strides(b, out));
    let mut dims: Vec<(usize, usize, usize)> = Vec::new();
    for d in 0..out.len() {
        if out[d] == 1 {
            continue;
        }
        let cur = (out[d], sa[d], sb[d]);
        if let Some(last) = dims.last_mut()
            && last.1 == cur.1 * cur.0
            && last.2 == cur.2 * cur.0
        {
            *last = (last.0 * cur.0, cur.1, cur.2);
            continue;
        }
        dims.push(cur);
    }
    if dims.len() > MAX_RANK {
        return Err(format!(
            "broadcast of rank {} exceeds the supported {MAX_RANK}",
            dims.len()
        ));
    }
    let mut p = params::Broadcast {
        rank: dims.len(),
        shape: [1; MAX_RANK],
        a_strides: [0; MAX_RANK],
        b_strides: [0; MAX_RANK],
    };
    for (i, (n, x, y)) in dims.into_iter().enumerate() {
        p.shape[i] = n;
        p.a_strides[i] = x;
        p.b_strides[i] = y;
    }
    Ok(p)
}

fn matmul_params(a: &[usize], b: &[usize], y: &[usize]) -> R<params::MatMul> {
    let (a2, b2) = matmul_operands(a, b);
    let (m, k, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 1]);
    let batch_rank = a2.len().max(b2.len()) - 2;
    if batch_rank > MAX_RANK {
        return Err(format!(
            "batch rank {batch_rank} exceeds the supported {MAX_RANK}"
        ));
    }
    let batch: Vec<usize> = y[..y.len() - (a.len() > 1) as usize - (b.len() > 1) as usize].to_vec();
    let batch = if batch.len() == batch_rank {
        batch
    } else {
        vec![1; batch_rank]
    };
    let sa = broadcast_strides(&a2[..a2.len() - 2], &batch);
    let sb = broadcast_strides(&b2[..b2.len() - 2], &batch);
    let mut p = params::MatMul {
        m,
        n,
        k,
        batch_rank,
        batch_shape: [1; MAX_RANK],
        a_batch_strides: [0; MAX_RANK],
        b_batch_strides: [0; MAX_RANK],
    };
    p.batch_shape[..batch_rank].copy_from_slice(&batch);
    p.a_batch_strides[..batch_rank].copy_from_slice(&sa);
    p.b_batch_strides[..batch_rank].copy_from_slice(&sb);
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_merges_contiguous_dims() {
        let p = broadcast_params(&[1, 64, 56, 56], &[1, 64, 56, 56], &[1, 64, 56, 56]).unwrap();
        assert_eq!(
            (p.rank, p.shape[0], p.a_strides[0], p.b_strides[0]),
            (1, 64 * 56 * 56, 1, 1)
        );
        let p = broadcast_params(&[1, 64, 56, 56], &[1, 64, 56, 56], &[64, 1, 1]).unwrap();
        assert_eq!(p.rank, 2);
        assert_eq!((p.shape[0], p.shape[1]), (64, 56 * 56));
        assert_eq!(
            (
                p.a_strides[0],
                p.a_strides[1],
                p.b_strides[0],
                p.b_strides[1]
            ),
            (3136, 1, 1, 0)
        );
        let p = broadcast_params(&[3, 4], &[3, 4], &[]).unwrap();
        assert_eq!((p.rank, p.shape[0], p.b_strides[0]), (1, 12, 0));
    }
}
