//! The operator registry: every ONNX operator Kiln supports is declared once, in the
//! module of its family, as an [`OpDef`] (name, opset range, element types, targets,
//! attribute parser) whose parser builds an [`Operator`]: shape and type inference,
//! constant evaluation and lowering to kernel calls. The supported list, the
//! unsupported-operators error and `docs/operators.md` all come from [`REGISTRY`].
//!
//! Families: [`elementwise`] (unary, binary, comparison, logic, Where, Cast, Clip,
//! variadic), [`linalg`] (Gemm, MatMul), [`conv`] (Conv, pooling, LRN), [`norm`]
//! (BatchNormalization, Softmax family, LayerNormalization, ...), [`shape`] (views,
//! Shape, Concat, Transpose, Slice, Split, Expand, Tile, Pad, constants, ...),
//! [`index`] (Gather/Scatter, OneHot, TopK, ArgMax, CumSum), [`reduce`].

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::dim::{Dim, dims_of, fixed_shape, fmt_dims};
use crate::ir::{Graph, Node, Value, ValueId};
use crate::lower::{Kernel, Lowering, Operand, TypedCall};
use crate::plan::BufferId;
use crate::tensor::{DType, Tensor};

pub mod attention;
pub mod attrs;
pub mod control;
pub mod conv;
pub mod conv_nd;
pub mod elementwise;
pub mod extent;
pub mod index;
pub mod linalg;
pub mod loss;
pub mod misc;
pub mod norm;
pub mod normalization;
pub mod quant;
pub mod recurrent;
pub mod reduce;
pub mod resize;
pub mod shape;

pub use attrs::Attrs;

pub type R<T> = Result<T, String>;

/// One operator with its attributes parsed. Implementations are plain structs in their
/// family's module; passes that rewrite a pattern downcast through [`Operator::as_any`].
pub trait Operator: fmt::Debug + Send + Sync + Any {
    /// The ONNX operator type.
    fn name(&self) -> &'static str;

    /// Element type, shape (and, for shape-only results such as `Shape`, the
    /// constant value) of each output.
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>>;

    /// The outputs' values when every input is constant (constant folding), given the
    /// inferred facts (every dim known); `None` where the operator is not evaluated at
    /// compile time.
    fn eval(&self, _cx: &InferCx, _outs: &[FixedFact]) -> R<Option<Vec<Tensor>>> {
        Ok(None)
    }

    /// Appends the steps computing the outputs.
    fn lower(&self, cx: &mut LowerCx) -> R<()>;

    /// True when the output shares its input's bytes (Reshape, Squeeze, ...): no step.
    fn is_view(&self) -> bool {
        false
    }

    fn as_any(&self) -> &dyn Any;
}

/// The `as_any` every operator implements the same way.
#[macro_export]
macro_rules! impl_as_any {
    () => {
        fn as_any(&self) -> &dyn ::std::any::Any {
            self
        }
    };
}

/// An operator as the graph holds it.
pub type Op = Arc<dyn Operator>;

impl dyn Operator {
    /// The operator as its concrete type, if it is one.
    pub fn downcast<T: Operator>(&self) -> Option<&T> {
        self.as_any().downcast_ref::<T>()
    }
}

/// What inference knows about one value: its element type, its dims (symbolic where
/// they depend on an input's symbolic dims) and, for shape-only results, its value.
#[derive(Debug, Clone)]
pub struct Fact {
    pub dtype: DType,
    pub shape: Vec<Dim>,
    pub constant: Option<Tensor>,
    /// An integer output's elements as dims in the symbols, when not constant
    /// ([`crate::ir::Value::sym`]).
    pub sym: Option<Vec<Dim>>,
    /// A data-dependent extent this node's outputs use ([`InferCx::extent`]): the
    /// symbol and its largest value. Inference binds it at a build's sampled points and
    /// records it otherwise ([`crate::ir::Graph::extents`]).
    pub extent: Option<(Dim, Dim)>,
}

/// Fixed sizes or dims, for [`Fact::new`].
pub trait IntoDims {
    fn into_dims(self) -> Vec<Dim>;
}

impl IntoDims for Vec<Dim> {
    fn into_dims(self) -> Vec<Dim> {
        self
    }
}

impl IntoDims for &[Dim] {
    fn into_dims(self) -> Vec<Dim> {
        self.to_vec()
    }
}

impl IntoDims for Vec<usize> {
    fn into_dims(self) -> Vec<Dim> {
        dims_of(&self)
    }
}

impl IntoDims for &[usize] {
    fn into_dims(self) -> Vec<Dim> {
        dims_of(self)
    }
}

impl Fact {
    pub fn new(dtype: DType, shape: impl IntoDims) -> Fact {
        Fact {
            dtype,
            shape: shape.into_dims(),
            constant: None,
            sym: None,
            extent: None,
        }
    }

    /// This fact (the node's first output) introduces the data-dependent extent
    /// `symbol` ([`InferCx::extent`]), at most `bound`.
    pub fn with_extent(mut self, symbol: Dim, bound: Dim) -> Fact {
        self.extent = Some((symbol, bound));
        self
    }

    /// A rank-1 (or, for one element with `scalar`, rank-0) int64 tensor whose values
    /// are `dims`: a constant when every one is known, else a symbolic value.
    pub fn dims_value(dims: Vec<Dim>, scalar: bool) -> Fact {
        Fact::int_value(DType::I64, dims, scalar)
    }

    /// [`Fact::dims_value`] in element type `dtype` (an integer type, or a float one
    /// for a shape value Cast to float).
    pub fn int_value(dtype: DType, dims: Vec<Dim>, scalar: bool) -> Fact {
        let shape = if scalar { vec![] } else { vec![dims.len()] };
        match dims.iter().map(Dim::known).collect::<Option<Vec<i64>>>() {
            Some(v) => Fact::constant(Tensor::i64(shape, v).cast(dtype)),
            None => Fact {
                sym: Some(dims),
                ..Fact::new(dtype, shape)
            },
        }
    }

    pub fn constant(t: Tensor) -> Fact {
        Fact {
            dtype: t.dtype,
            shape: dims_of(&t.shape),
            constant: Some(t),
            sym: None,
            extent: None,
        }
    }

    /// The fixed shape, when every dim is known.
    pub fn fixed_shape(&self) -> Option<Vec<usize>> {
        fixed_shape(&self.shape)
    }
}

/// An output's type and fixed shape, as constant evaluation sees it (all inputs are
/// constant there, so every dim is known).
#[derive(Debug, Clone)]
pub struct FixedFact {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// Which element types an operator accepts, for its declaration and its docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Types {
    /// f32, f64, f16, bf16.
    Float,
    /// Every integer and float type.
    Numeric,
    /// Signed integers and floats.
    Signed,
    /// Integers.
    Int,
    /// bool only.
    Bool,
    /// Every type.
    All,
    /// Every type a kernel computes on: all but the storage-only ones.
    Dense,
    /// float32 only (a tuned kernel with no typed form yet).
    F32,
}

impl Types {
    /// Whether `d` is one of the types. The storage-only types (float8, float4, int4,
    /// int2: `DType::is_small`) are in `All` only: ONNX defines Cast, CastLike and
    /// (de)quantization on them, no arithmetic.
    pub fn allows(self, d: DType) -> bool {
        match self {
            Types::Float => d.is_float() && !d.is_small(),
            Types::Numeric => d != DType::Bool && !d.is_small(),
            Types::Signed => d.is_signed() && !d.is_small(),
            Types::Int => d.is_int(),
            Types::Bool => d == DType::Bool,
            Types::All => true,
            Types::Dense => !d.is_small(),
            Types::F32 => d == DType::F32,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Types::Float => "float (f32, f64, f16, bf16)",
            Types::Numeric => "numeric (every int and float)",
            Types::Signed => "signed ints and floats",
            Types::Int => "integers",
            Types::Bool => "bool",
            Types::All => "all",
            Types::Dense => "numeric and bool",
            Types::F32 => "float32",
        }
    }
}

/// What a parser sees of a node: its attributes, the opset it is read under, its
/// operator type and how many inputs and outputs it names.
pub struct ParseCx<'a> {
    pub attrs: Attrs<'a>,
    pub opset: i64,
    pub op_type: &'a str,
    pub n_inputs: usize,
    /// The node's position in the model's node list (`If` inlines by it).
    pub node_index: usize,
}

/// One supported operator: everything the rest of the compiler derives from.
pub struct OpDef {
    /// ONNX operator type (default domain).
    pub name: &'static str,
    /// The first opset whose definition Kiln implements.
    pub since: i64,
    /// Element types of its main input.
    pub types: Types,
    /// Whether the CUDA target has a kernel for it (for float32).
    pub cuda: bool,
    pub parse: fn(&ParseCx) -> R<Op>,
}

/// Every family's declarations.
pub const REGISTRY: &[&[OpDef]] = &[
    elementwise::UNARY,
    elementwise::BINARY,
    elementwise::OTHER,
    linalg::OPS,
    conv::OPS,
    conv_nd::OPS,
    norm::OPS,
    normalization::OPS,
    shape::OPS,
    index::OPS,
    extent::OPS,
    reduce::OPS,
    quant::OPS,
    resize::OPS,
    attention::OPS,
    recurrent::OPS,
    loss::OPS,
    misc::OPS,
    control::OPS,
];

/// The declaration of `op_type` in the default domain.
pub fn find(op_type: &str) -> Option<&'static OpDef> {
    REGISTRY
        .iter()
        .flat_map(|f| f.iter())
        .find(|d| d.name == op_type)
}

/// Every declaration, sorted by name.
pub fn all() -> Vec<&'static OpDef> {
    let mut v: Vec<&OpDef> = REGISTRY.iter().flat_map(|f| f.iter()).collect();
    v.sort_by_key(|d| d.name);
    v
}

/// `docs/operators.md`, generated from the registry (a test keeps the file current).
pub fn docs_markdown() -> String {
    let mut s = String::from(
        "# Supported operators\n\n\
         Generated from the operator registry (`compiler/src/ops/`) by\n\
         `cargo run -p kiln-compiler -- operators > docs/operators.md`; a test fails when\n\
         this file is stale.\n\n\
         | operator | since opset | element types | targets |\n|---|---|---|---|\n",
    );
    let defs = all();
    for d in &defs {
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            d.name,
            d.since,
            d.types.describe(),
            if d.cuda { "cpu, cuda (float32)" } else { "cpu" }
        ));
    }
    s.push_str(&format!("\n{} operators.\n", defs.len()));
    s
}

/// Inference's view of one node: its inputs' facts (present inputs only).
pub struct InferCx<'g> {
    pub graph: &'g Graph,
    pub node: &'g Node,
}

impl<'g> InferCx<'g> {
    pub fn opset(&self) -> i64 {
        self.graph.opset
    }

    /// Operand `i`, which must be present.
    pub fn input(&self, i: usize) -> R<&'g Value> {
        self.node
            .input(i)
            .map(|v| self.graph.value(v))
            .ok_or_else(|| format!("input {i} is missing"))
    }

    /// Operand `i` if present.
    pub fn opt(&self, i: usize) -> Option<&'g Value> {
        self.node.input(i).map(|v| self.graph.value(v))
    }

    /// Operand `i`'s dims, symbols included.
    pub fn dims(&self, i: usize) -> R<&'g [Dim]> {
        self.input(i).map(|v| v.dims())
    }

    /// Operand `i`'s fixed shape, for a rule that needs every dim known (the error
    /// names the symbolic dims).
    pub fn shape(&self, i: usize) -> R<&'g [usize]> {
        let v = self.input(i)?;
        match &v.shape {
            Some(s) => Ok(s),
            None => Err(format!(
                "input {i} (`{}`) has shape {}: {} needs every dim of it known at compile time",
                v.name,
                fmt_dims(v.dims()),
                self.node.op.name()
            )),
        }
    }

    pub fn dtype(&self, i: usize) -> R<DType> {
        self.input(i).map(|v| v.dtype)
    }

    /// Operand `i`'s constant value, required: `what` names it in the error.
    pub fn constant(&self, i: usize, what: &str) -> R<&'g Tensor> {
        let v = self.input(i)?;
        v.constant.as_ref().ok_or_else(|| {
            let mut m = format!(
                "input {i} (`{}`, the {what}) must be a constant once input shapes are fixed",
                v.name
            );
            let from = self.graph_inputs_behind(i);
            if !from.is_empty() && !self.graph.is_input(self.node.input(i).unwrap_or(ValueId(0))) {
                let names: Vec<String> = from.iter().map(|n| format!("`{n}`")).collect();
                m.push_str(&format!(
                    "; it is computed from graph input {} (bind with Options::constant_inputs / --constant)",
                    names.join(", ")
                ));
            }
            m
        })
    }

    /// Operand `i`'s elements as dims: from its constant, or from the symbolic value
    /// inference carried (`Shape` of a symbolic tensor and arithmetic on it); `None`
    /// when neither is known or the input is absent.
    pub fn dims_value(&self, i: usize) -> Option<Vec<Dim>> {
        let v = self.opt(i)?;
        match (&v.constant, &v.sym) {
            (Some(t), _) => Some(t.as_i64().into_iter().map(Dim::from).collect()),
            (None, Some(sym)) => Some(sym.clone()),
            (None, None) => None,
        }
    }

    /// [`InferCx::dims_value`], required: the error is [`InferCx::constant`]'s.
    pub fn dims_value_req(&self, i: usize, what: &str) -> R<Vec<Dim>> {
        match self.dims_value(i) {
            Some(d) => Ok(d),
            None => self.constant(i, what).map(|_| Vec::new()),
        }
    }

    /// The graph inputs operand `i` is computed from (walking producers upstream).
    pub fn graph_inputs_behind(&self, i: usize) -> Vec<String> {
        let g = self.graph;
        let Some(start) = self.node.input(i) else {
            return Vec::new();
        };
        let mut seen = vec![false; g.values.len()];
        let mut stack = vec![start];
        let mut found = Vec::new();
        while let Some(v) = stack.pop() {
            if std::mem::replace(&mut seen[v.index()], true) {
                continue;
            }
            if g.is_input(v) {
                found.push(g.value(v).name.clone());
                continue;
            }
            if let Some(n) = g.nodes.iter().find(|n| n.outputs.contains(&v)) {
                stack.extend(n.inputs.iter().flatten());
            }
        }
        found.sort();
        found
    }

    /// Operand `i`'s constant value if present and constant.
    pub fn opt_constant(&self, i: usize) -> Option<&'g Tensor> {
        self.opt(i).and_then(|v| v.constant.as_ref())
    }

    /// The present inputs, in order.
    pub fn inputs(&self) -> Vec<&'g Value> {
        self.node
            .inputs
            .iter()
            .flatten()
            .map(|&v| self.graph.value(v))
            .collect()
    }

    /// The symbol for an extent of this node's outputs that only the data decides
    /// (NonZero's count): `OUT[axis]`, after the first output and the axis of it.
    pub fn extent(&self, axis: usize) -> Dim {
        let out = self
            .node
            .outputs
            .first()
            .map(|&v| self.graph.value(v).name.as_str());
        Dim::sym(&format!("{}[{axis}]", out.unwrap_or("?")))
    }

    /// Number of outputs the node names.
    pub fn n_outputs(&self) -> usize {
        self.node.outputs.len()
    }

    /// Checks that input `i` has an element type in `types`.
    pub fn check_type(&self, i: usize, types: Types) -> R<DType> {
        let d = self.dtype(i)?;
        if types.allows(d) {
            Ok(d)
        } else {
            Err(format!(
                "input {i} has element type {d}; {} takes {}",
                self.node.op.name(),
                types.describe()
            ))
        }
    }

    /// Every constant input, in order, when all present inputs are constant.
    pub fn constants(&self) -> Option<Vec<&'g Tensor>> {
        self.inputs().iter().map(|v| v.constant.as_ref()).collect()
    }
}

/// Lowering's view of one node: operands, output buffers, steps.
pub struct LowerCx<'a, 'g> {
    pub(crate) l: &'a mut Lowering<'g>,
    pub node: &'g Node,
}

impl<'a, 'g> LowerCx<'a, 'g> {
    pub fn graph(&self) -> &'g Graph {
        self.l.graph
    }

    /// Inference's view of this node, for lowering code that recomputes what `infer`
    /// derived (the kernel's parameters).
    pub fn infer_cx(&self) -> InferCx<'g> {
        InferCx {
            graph: self.l.graph,
            node: self.node,
        }
    }

    pub fn opset(&self) -> i64 {
        self.l.graph.opset
    }

    /// The kernels this lowering may choose beyond those every target has.
    pub fn choices(&self) -> crate::lower::Choices {
        self.l.choices
    }

    /// The shapes this node sees vary over a build's declared ranges, and it must not
    /// bake a table computed from them into the weights ([`crate::lower::lower`]).
    pub fn shapes_vary(&self) -> bool {
        let g = self.l.graph;
        self.node
            .outputs
            .iter()
            .any(|&v| self.l.vary.contains(&g.value(v).name))
    }

    pub fn input(&self, i: usize) -> R<&'g Value> {
        self.node
            .input(i)
            .map(|v| self.l.graph.value(v))
            .ok_or_else(|| format!("input {i} is missing"))
    }

    pub fn opt(&self, i: usize) -> Option<&'g Value> {
        self.node.input(i).map(|v| self.l.graph.value(v))
    }

    pub fn shape(&self, i: usize) -> R<&'g [usize]> {
        self.infer_cx().shape(i)
    }

    pub fn dims(&self, i: usize) -> R<&'g [Dim]> {
        self.infer_cx().dims(i)
    }

    pub fn dtype(&self, i: usize) -> R<DType> {
        self.input(i).map(|v| v.dtype)
    }

    pub fn constant(&self, i: usize, what: &str) -> R<&'g Tensor> {
        let v = self.input(i)?;
        v.constant
            .as_ref()
            .ok_or_else(|| format!("input {i} (`{}`, the {what}) must be a constant", v.name))
    }

    pub fn opt_constant(&self, i: usize) -> Option<&'g Tensor> {
        self.opt(i).and_then(|v| v.constant.as_ref())
    }

    pub fn out(&self, j: usize) -> R<&'g Value> {
        self.node
            .outputs
            .get(j)
            .map(|&v| self.l.graph.value(v))
            .ok_or_else(|| format!("output {j} is missing"))
    }

    /// A float32 weight this node's lowering derived from its constants at compile time
    /// (Winograd-transformed or packed weights), named `NODE:what` in the blob.
    pub fn derived_weight(&mut self, what: &str, shape: Vec<usize>, data: Vec<f32>) -> Operand {
        let name = format!("{}:{what}", self.node.name);
        let t = Tensor::new(shape, crate::tensor::Data::F32(data));
        self.l.weight(&name, &t)
    }

    /// Where input `i` lives (a weight is added to the blob on first use).
    pub fn operand(&mut self, i: usize) -> R<Operand> {
        let v = self
            .node
            .input(i)
            .ok_or_else(|| format!("input {i} is missing"))?;
        self.l.operand(v)
    }

    /// Every present input's operand, in order.
    pub fn operands(&mut self) -> R<Vec<Operand>> {
        let ids: Vec<_> = self.node.inputs.iter().flatten().copied().collect();
        ids.into_iter().map(|v| self.l.operand(v)).collect()
    }

    /// A new buffer for output `j`, bound to its value.
    pub fn output(&mut self, j: usize) -> R<BufferId> {
        let id = *self
            .node
            .outputs
            .get(j)
            .ok_or_else(|| format!("output {j} is missing"))?;
        let v = self.l.graph.value(id);
        let b = self.l.buffer(&v.name, v.dtype, v.len(), false);
        self.l.bind(id, Operand::Buffer(b));
        Ok(b)
    }

    /// Output `j` is input `i`'s bytes (a view).
    pub fn alias(&mut self, j: usize, i: usize) -> R<()> {
        let src = self.operand(i)?;
        let id = self.node.outputs[j];
        self.l.bind(id, src);
        if let Operand::Buffer(b) = src {
            let name = self.l.graph.value(id).name.clone();
            self.l.program.views.push((name, b));
        }
        Ok(())
    }

    /// The shapes of the present inputs, in order.
    pub fn inputs_shapes(&self) -> Vec<Vec<usize>> {
        self.node
            .inputs
            .iter()
            .flatten()
            .map(|&v| self.l.graph.value(v).shape().to_vec())
            .collect()
    }

    /// A constant the lowering made (a bound, a count), placed in the weights blob.
    pub fn weight(&mut self, name: &str, t: &Tensor) -> Operand {
        self.l.weight(name, t)
    }

    /// A buffer for an intermediate result of this node's steps.
    pub fn temp(&mut self, dtype: DType, elems: usize) -> BufferId {
        let name = format!("{}:tmp{}", self.node.name, self.l.program.buffers.len());
        self.l.buffer(&name, dtype, elems, false)
    }

    /// Appends a step, with `scratch_len` f32 elements of kernel scratch if non-zero.
    pub fn step(&mut self, kernel: Kernel, inputs: Vec<Operand>, output: BufferId) {
        self.step_with_scratch(kernel, inputs, output, 0);
    }

    pub fn step_with_scratch(
        &mut self,
        kernel: Kernel,
        inputs: Vec<Operand>,
        output: BufferId,
        scratch_len: usize,
    ) {
        self.l.push(self.node, kernel, inputs, output, scratch_len);
    }

    /// [`LowerCx::typed_multi`] for a kernel that also takes working memory: `scratch`
    /// elements of `dtype`, planned in the arena for this step only and passed after
    /// the outputs.
    pub fn typed_with_scratch(
        &mut self,
        call: TypedCall,
        inputs: Vec<Operand>,
        outs: &[(usize, DType, usize)],
        scratch: (DType, usize),
    ) -> R<()> {
        self.typed_multi(call, inputs, outs)?;
        let name = format!("{}:scratch", self.node.name);
        let b = self.l.buffer(&name, scratch.0, scratch.1, true);
        if let Some(s) = self.l.program.steps.last_mut() {
            s.scratch = Some(b);
        }
        Ok(())
    }

    /// Appends a typed kernel call writing outputs `js` (new buffers; an output the
    /// node does not name gets a buffer of its own that nothing reads).
    pub fn typed_multi(
        &mut self,
        call: TypedCall,
        inputs: Vec<Operand>,
        outs: &[(usize, DType, usize)],
    ) -> R<()> {
        let mut bufs = Vec::new();
        for &(j, dtype, elems) in outs {
            let named = self
                .node
                .outputs
                .get(j)
                .is_some_and(|&v| !self.l.graph.value(v).name.contains(":unused"));
            bufs.push(if named {
                self.output(j)?
            } else {
                self.temp(dtype, elems)
            });
        }
        let out = bufs[0];
        self.step(Kernel::Typed(call), inputs, out);
        if let Some(s) = self.l.program.steps.last_mut() {
            s.extra_outputs = bufs[1..].to_vec();
        }
        Ok(())
    }

    /// Appends a typed kernel call writing output `j` (a new buffer).
    pub fn typed(&mut self, call: TypedCall, inputs: Vec<Operand>, j: usize) -> R<BufferId> {
        let out = self.output(j)?;
        self.step(Kernel::Typed(call), inputs, out);
        Ok(out)
    }
}

/// Normalises a possibly negative axis against `rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> R<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a >= rank as i64 {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    } else {
        Ok(a as usize)
    }
}

/// `dims` as sizes for a check that reads only the rank and the dims at `known` (which
/// must be known): every other symbolic dim stands in as 1.
pub fn checkable_shape(dims: &[Dim], known: &[usize]) -> R<Vec<usize>> {
    for &i in known {
        if let Some(d) = dims.get(i)
            && !d.is_known()
        {
            return Err(format!(
                "dim {i} of {} must be known at compile time",
                fmt_dims(dims)
            ));
        }
    }
    Ok(dims.iter().map(|d| d.to_usize().unwrap_or(1)).collect())
}

/// `s` in a fixed array of `N` (a kernel parameter), the unused tail set to `fill`.
pub fn fixed<const N: usize>(s: &[usize], fill: usize) -> R<[usize; N]> {
    if s.len() > N {
        return Err(format!("rank {} exceeds the supported {N}", s.len()));
    }
    let mut a = [fill; N];
    a[..s.len()].copy_from_slice(s);
    Ok(a)
}

/// NumPy broadcasting of several shapes of dims. A symbolic dim against a known one
/// other than 1 takes the known one (the symbol must then be 1 or equal at run time);
/// two different symbols do not broadcast, since neither is known to be 1.
pub fn broadcast_dims(shapes: &[&[Dim]]) -> R<Vec<Dim>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![Dim::from(1usize); rank];
    for s in shapes {
        for (i, d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + i];
            if o.is(1) || o == d {
                *o = d.clone();
            } else if d.is(1) {
            } else if o.is_known() && !d.is_known() {
                // `d` must be 1 or `o` at run time; the result is `o`.
            } else if d.is_known() && !o.is_known() {
                *o = d.clone();
            } else {
                let all: Vec<String> = shapes.iter().map(|s| fmt_dims(s)).collect();
                return Err(format!("shapes {} do not broadcast", all.join(", ")));
            }
        }
    }
    Ok(out)
}

/// NumPy broadcasting of several shapes.
pub fn broadcast(shapes: &[&[usize]]) -> R<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(format!("shapes {shapes:?} do not broadcast"));
            }
        }
    }
    Ok(out)
}

/// The most elements a folded constant may have (the model zoo builds weights of up to
/// 10^8 elements with `ConstantOfShape`). 2^28 (1 GiB of float32) bounds what a small
/// file can make the compiler allocate: at 2^30 the fuzzer found a 214 KB model whose
/// ConstantOfShape asked for 4 GiB (tests/fuzz_regressions/constant_of_shape_4gib.onnx).
pub const MAX_FOLDED_ELEMENTS: usize = 1 << 28;

/// Whether a constant of `shape` is small enough to compute at compile time.
pub fn foldable(shape: &[usize]) -> bool {
    crate::infer::check_elements(shape).is_ok_and(|n| n <= MAX_FOLDED_ELEMENTS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn docs_are_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operators.md");
        let want = super::docs_markdown();
        let have = std::fs::read_to_string(path).unwrap_or_default();
        if std::env::var_os("KILN_UPDATE_DOCS").is_some() {
            std::fs::write(path, &want).expect("write docs/operators.md");
            return;
        }
        assert!(
            have == want,
            "docs/operators.md is stale: run `KILN_UPDATE_DOCS=1 cargo test -p kiln-compiler docs_are_current`"
        );
    }

    #[test]
    fn every_operator_is_declared_once() {
        let all = super::all();
        for w in all.windows(2) {
            assert_ne!(w[0].name, w[1].name, "declared twice");
        }
    }
}
