//! Lowering: the optimised graph → a target-independent [`Program`]: a sequence of
//! kernel calls whose parameters are fixed, over operands that are graph inputs,
//! weights (at fixed offsets in one blob) or buffers the planner will place.
//!
//! Each operator lowers itself ([`crate::ops::Operator::lower`]) through a
//! [`crate::ops::LowerCx`]; this module holds what they share: operands, buffers (any
//! element type, sized in `f32` units for the planner), the weights blob (every
//! element type at 64-byte aligned offsets) and the kernel calls. View operators
//! (Reshape, Flatten, Squeeze, Unsqueeze, Identity) produce no step: their output is
//! their input's operand. Last, [`crate::in_place::mark`] lists for each step the
//! operands its kernel could overwrite with its output.

use std::collections::{BTreeSet, HashMap};

use kiln_runtime::params::{self, MAX_RANK};

use crate::error::Error;
use crate::ir::*;
use crate::ops::{LowerCx, R};
use crate::plan::{BufferId, PlaneOrder};
use crate::window;

/// Weights are placed at multiples of this many bytes.
pub(crate) const WEIGHT_ALIGN: usize = 64;

/// Planner units (`f32` elements) holding `elems` elements of `dtype`: exactly `elems`
/// for float32 (the tuned kernels check lengths), rounded up to whole units otherwise.
/// A region starts at a planned offset (aligned to the plan's alignment), so any
/// element type's view of its first bytes is in bounds.
pub fn units(dtype: DType, elems: usize) -> usize {
    (elems * dtype.size()).div_ceil(4)
}

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
    /// A 3×3 stride-1 convolution as Winograd F(2×2, 3×3) or F(4×4, 3×3), its weights
    /// operand transformed at compile time for that variant
    /// (`kiln_runtime::kernels::winograd_weights`): operands X, the transformed W, the
    /// raw W where the direct kernel may take the layer at run time
    /// (`Conv2d::direct_rivals_winograd`), then the bias if any. CPU only: lowering
    /// chooses it where [`Choices::winograd`] allows.
    Winograd(params::Conv2d, params::Winograd),
    /// A convolution with the `Add` after it fused in (`kiln_runtime::kernels::
    /// conv2d_residual`): operands X, W, the residual, then the bias if any. CPU only:
    /// the fusion pass runs where [`Choices::residual_adds`] allows.
    ResidualConv2d(params::Conv2d),
    /// A direct convolution with the `MaxPool` after it fused in (`kiln_runtime::
    /// kernels::conv2d_max_pool`): operands X, W, then the bias if any; the output is
    /// the pooled one. CPU only: the fusion pass runs where [`Choices::max_pools`]
    /// allows.
    Conv2dMaxPool(params::Conv2d, params::Pool2d),
    /// A grouped convolution with the channel shuffle after it fused in
    /// (`kiln_runtime::kernels::conv2d_shuffled`): operands X, W, then the bias if any;
    /// the output is the shuffled one. CPU only: the fusion pass runs where
    /// [`Choices::channel_shuffles`] allows.
    ShuffledConv2d(params::Conv2d),
    Gemm(params::Gemm),
    MatMul(params::MatMul),
    /// A MatMul whose B is a constant matrix, packed at compile time into the panels
    /// `kiln_runtime::kernels::matmul_packed` reads (`kernels::pack_b`). CPU only:
    /// lowering chooses it where [`Choices::packed_weights`] allows.
    PackedMatMul(params::PackedMatMul),
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
    /// A kernel of `kiln_runtime::typed`, generic over element types.
    Typed(TypedCall),
}

impl Kernel {
    /// Scratch elements the kernel cannot run without, where it takes more when lent
    /// more (a convolution's images at once or single block, Winograd's bands): what
    /// a build over ranges, which lends every point the scratch planned at the largest,
    /// must hold. `None` where the planned scratch is all needed.
    pub fn least_scratch_len(&self) -> Option<usize> {
        match self {
            Kernel::Conv2d(c) | Kernel::ResidualConv2d(c) | Kernel::ShuffledConv2d(c) => {
                Some(c.least_scratch_len())
            }
            Kernel::Winograd(c, v) => Some(c.winograd_least_scratch_len(*v)),
            _ => None,
        }
    }
}

/// A call `kiln_runtime::typed::FUNC::<TYPES>(&PARAMS, inputs.., out)`.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedCall {
    pub func: &'static str,
    /// Generic arguments, in the kernel's order.
    pub types: Vec<DType>,
    /// The parameters as a Rust expression ([`crate::codegen::params_expr`]), with
    /// `$rt` standing for the runtime crate's path.
    pub params: Option<String>,
    /// The kernel returns `Result` (it checks indices read at run time).
    pub fallible: bool,
    /// The inputs are passed as one slice `&[a, b, ..]` (Concat).
    pub variadic: bool,
    /// Element type of each input, when it is not `types[0]`.
    pub input_types: Vec<DType>,
    /// The kernel returns `Result<usize, _>`: the data-dependent extent
    /// ([`crate::ir::Extent`]) this symbol stands for, which the run binds before
    /// later steps read it.
    pub binds: Option<String>,
}

impl TypedCall {
    /// A call with parameters, all operands of `types[0]`.
    pub fn new<P: serde::Serialize>(func: &'static str, types: Vec<DType>, params: &P) -> Self {
        TypedCall {
            func,
            types,
            params: Some(crate::codegen::params_expr::to_expr(params)),
            fallible: false,
            variadic: false,
            input_types: Vec::new(),
            binds: None,
        }
    }

    /// A call without parameters.
    pub fn bare(func: &'static str, types: Vec<DType>) -> Self {
        TypedCall {
            func,
            types,
            params: None,
            fallible: false,
            variadic: false,
            input_types: Vec::new(),
            binds: None,
        }
    }

    pub fn fallible(mut self) -> Self {
        self.fallible = true;
        self
    }

    pub fn variadic(mut self) -> Self {
        self.variadic = true;
        self
    }

    /// The element type of each input (when they differ from `types[0]`).
    pub fn inputs(mut self, types: Vec<DType>) -> Self {
        self.input_types = types;
        self
    }

    /// The kernel returns the extent `symbol` stands for ([`TypedCall::binds`]).
    pub fn binds(mut self, symbol: Dim) -> Self {
        self.binds = symbol.symbols().into_iter().next().map(|s| s.to_string());
        self
    }
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
    /// Further outputs a multi-output kernel writes (TopK's indices, ...), after
    /// `output` in the kernel's argument order.
    pub extra_outputs: Vec<BufferId>,
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
    /// Length in planner units (`f32` elements; [`units`]).
    pub len: usize,
    pub scratch: bool,
    pub dtype: DType,
    /// Length in elements of `dtype`.
    pub elems: usize,
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
    /// Offset and length in `f32` units (the blob is read as `&[f32]`).
    pub offset: usize,
    pub len: usize,
    pub dtype: DType,
    pub elems: usize,
}

/// The lowered model: everything code generation needs except buffer offsets.
#[derive(Debug, Clone)]
pub struct Program {
    pub name: String,
    pub steps: Vec<Step>,
    pub buffers: Vec<Buffer>,
    /// The weights blob: every constant the steps read, little-endian, each entry at a
    /// 64-byte aligned offset; its length is a multiple of 8.
    pub weights: Vec<u8>,
    pub weight_entries: Vec<WeightEntry>,
    pub inputs: Vec<Io>,
    /// Each output and the buffer holding it after `run`.
    pub outputs: Vec<(Io, BufferId)>,
    /// ONNX values that are views (Reshape, Flatten, ...) of a planned buffer, by
    /// name: they share its bytes and need none of their own.
    pub views: Vec<(String, BufferId)>,
}

/// Kernels lowering may choose that not every target has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choices {
    /// 3×3 stride-1 convolutions with enough channels lower to [`Kernel::Winograd`].
    pub winograd: bool,
    /// Winograd's variant follows each layer's shape (`Conv2d::winograd`); else every
    /// layer is F(2×2, 3×3), whose weights serve every shape of a build over ranges.
    pub winograd_by_shape: bool,
    /// MatMuls by a constant matrix lower to [`Kernel::PackedMatMul`].
    pub packed_weights: bool,
    /// A 1×1 convolution's `Add` of a same-shaped tensor fuses into it
    /// ([`Kernel::ResidualConv2d`], `passes::fuse_residual_adds`).
    pub residual_adds: bool,
    /// A direct convolution's `MaxPool` fuses into it ([`Kernel::Conv2dMaxPool`],
    /// `passes::fuse_max_pools`).
    pub max_pools: bool,
    /// A grouped convolution's channel shuffle fuses into it
    /// ([`Kernel::ShuffledConv2d`], `passes::fuse_channel_shuffles`).
    pub channel_shuffles: bool,
}

/// Lowers an inferred, optimised graph. `vary` names the values a build over declared
/// ranges leaves to run time (`Options::unfolded`): a node writing one computes on each
/// run what lowering would otherwise compute from its shapes.
pub fn lower(graph: &Graph, vary: &BTreeSet<String>, choices: Choices) -> Result<Program, Error> {
    let mut l = Lowering {
        graph,
        vary,
        choices,
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
        l.operands.insert(input.value, Operand::Input(i));
        l.program.inputs.push(io(v));
    }
    for node in &graph.nodes {
        let op = node.op.clone();
        op.lower(&mut LowerCx { l: &mut l, node })
            .map_err(|message| Error::Node {
                node: node.name.clone(),
                op: node.op.name().into(),
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

pub(crate) struct Lowering<'g> {
    pub(crate) graph: &'g Graph,
    pub(crate) vary: &'g BTreeSet<String>,
    pub(crate) choices: Choices,
    pub(crate) program: Program,
    operands: HashMap<ValueId, Operand>,
}

impl Lowering<'_> {
    pub(crate) fn operand(&mut self, v: ValueId) -> R<Operand> {
        if let Some(&o) = self.operands.get(&v) {
            return Ok(o);
        }
        let value = self.graph.value(v);
        let t = value
            .constant
            .as_ref()
            .ok_or_else(|| format!("reads `{}`, which nothing computed before it", value.name))?;
        let o = self.weight(&value.name, t);
        self.operands.insert(v, o);
        Ok(o)
    }

    /// Appends `t` to the weights blob.
    pub(crate) fn weight(&mut self, name: &str, t: &Tensor) -> Operand {
        let w = &mut self.program.weights;
        let offset = w.len().next_multiple_of(WEIGHT_ALIGN);
        w.resize(offset, 0);
        w.extend_from_slice(t.data.bytes());
        w.resize(w.len().next_multiple_of(8), 0);
        let len = units(t.dtype, t.data.len());
        self.program.weight_entries.push(WeightEntry {
            name: name.to_owned(),
            offset: offset / 4,
            len,
            dtype: t.dtype,
            elems: t.data.len(),
        });
        Operand::Weight {
            offset: offset / 4,
            len,
        }
    }

    pub(crate) fn buffer(
        &mut self,
        name: &str,
        dtype: DType,
        elems: usize,
        scratch: bool,
    ) -> BufferId {
        self.program.buffers.push(Buffer {
            name: name.to_owned(),
            len: units(dtype, elems),
            scratch,
            dtype,
            elems,
        });
        BufferId(self.program.buffers.len() as u32 - 1)
    }

    pub(crate) fn bind(&mut self, v: ValueId, o: Operand) {
        self.operands.insert(v, o);
    }

    pub(crate) fn push(
        &mut self,
        node: &Node,
        kernel: Kernel,
        inputs: Vec<Operand>,
        output: BufferId,
        scratch_len: usize,
    ) {
        let scratch = (scratch_len > 0).then(|| {
            self.buffer(
                &format!("{}:scratch", node.name),
                DType::F32,
                scratch_len,
                true,
            )
        });
        self.program.steps.push(Step {
            node: node.name.clone(),
            op_type: node.op.name(),
            kernel,
            inputs,
            output,
            extra_outputs: Vec::new(),
            scratch,
            in_place: Vec::new(),
            overlap: None,
        });
    }

    /// Every graph output must be a buffer of its own that lives to the end; outputs that
    /// are inputs, weights or another output's buffer get a copy.
    fn outputs(&mut self) -> Result<(), Error> {
        let g = self.graph;
        let mut claimed: Vec<BufferId> = Vec::new();
        for &o in &g.outputs {
            let v = g.value(o);
            let src = self
                .operand(o)
                .map_err(|m| Error::Model(format!("output `{}`: {m}", v.name)))?;
            let buffer = match src {
                Operand::Buffer(b) if !claimed.contains(&b) => b,
                src => {
                    let b = self.buffer(&v.name, v.dtype, v.len(), false);
                    self.program.steps.push(Step {
                        node: v.name.clone(),
                        op_type: "Identity",
                        kernel: copy_kernel(v.dtype),
                        inputs: vec![src],
                        output: b,
                        extra_outputs: Vec::new(),
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

/// Copies a value of `dtype` (the tuned `f32` copy, or the typed one).
pub(crate) fn copy_kernel(dtype: DType) -> Kernel {
    if dtype == DType::F32 {
        Kernel::Copy
    } else {
        Kernel::Typed(TypedCall::bare("copy", vec![dtype]))
    }
}

/// A resolved 2-D window in the array form `Conv2d` and `Pool2d` share.
pub(crate) struct Window2d {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    /// `[top, left, bottom, right]`
    pub pads: [usize; 4],
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

pub(crate) fn activation_param(a: Option<Activation>) -> params::Activation {
    match a {
        None => params::Activation::None,
        Some(Activation::Relu) => params::Activation::Relu,
        Some(Activation::LeakyRelu { alpha }) => params::Activation::LeakyRelu { alpha },
        Some(Activation::Clip { min, max }) => params::Activation::Clip { min, max },
        Some(Activation::Sigmoid) => params::Activation::Sigmoid,
        Some(Activation::HardSigmoid { alpha, beta }) => {
            params::Activation::HardSigmoid { alpha, beta }
        }
        Some(Activation::HardSwish) => params::Activation::HardSwish,
        Some(Activation::Swish { alpha }) => params::Activation::Swish { alpha },
    }
}

/// Element strides of `shape` (right-aligned to `rank`) with 0 on broadcast dims.
pub(crate) fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
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
