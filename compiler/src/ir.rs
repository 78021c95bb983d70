//! The typed graph IR every pass works on.
//!
//! Values and nodes live in arenas indexed by [`ValueId`] and [`NodeId`], which cannot
//! be mixed up. Operator attributes are parsed once, at load time, into an operator of
//! the registry ([`crate::ops`]); nothing after loading looks an attribute up by name.

macro_rules! define_index {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

define_index!(
    /// A tensor in the graph: input, weight or intermediate.
    ValueId
);
define_index!(
    /// An operator node.
    NodeId
);

pub use crate::ops::Op;
pub use crate::tensor::{DType, Data, Tensor};

pub use crate::dim::Dim;

/// A tensor in the graph.
#[derive(Debug, Clone)]
pub struct Value {
    pub name: String,
    pub dtype: DType,
    /// The dims inference found, symbols included; `None` until it has run. Change
    /// through [`Value::set_dims`], which keeps `shape` in step.
    pub dims: Option<Vec<Dim>>,
    /// The fixed shape, set when every dim is known (what lowering needs).
    pub shape: Option<Vec<usize>>,
    /// Set for weights and folded constants.
    pub constant: Option<Tensor>,
    /// The elements, as dims, of an integer tensor of rank 0 or 1 that is not
    /// constant but computed from symbolic shapes (`Shape`, then `Gather`, `Concat`,
    /// arithmetic...): what lets a `Reshape` target or an `Expand` shape stay exact
    /// in the symbols. `None` when unknown or when `constant` is set.
    pub sym: Option<Vec<Dim>>,
}

impl Value {
    /// A value whose shape inference has yet to find.
    pub fn unknown(name: String, dtype: DType) -> Value {
        Value {
            name,
            dtype,
            dims: None,
            shape: None,
            constant: None,
            sym: None,
        }
    }

    /// A weight or folded constant.
    pub fn constant(name: String, t: Tensor) -> Value {
        Value {
            name,
            dtype: t.dtype,
            dims: Some(crate::dim::dims_of(&t.shape)),
            shape: Some(t.shape.clone()),
            constant: Some(t),
            sym: None,
        }
    }

    /// Sets the dims, and the fixed shape when every dim is known.
    pub fn set_dims(&mut self, dims: Vec<Dim>) {
        self.shape = crate::dim::fixed_shape(&dims);
        self.dims = Some(dims);
    }

    /// The dims, symbols included (empty before inference).
    pub fn dims(&self) -> &[Dim] {
        self.dims.as_deref().unwrap_or(&[])
    }

    /// The fixed shape (empty before inference or while a dim is symbolic).
    pub fn shape(&self) -> &[usize] {
        self.shape.as_deref().unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.shape().iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A graph input the caller provides, with its declared dims.
#[derive(Debug, Clone)]
pub struct Input {
    pub value: ValueId,
    pub dims: Vec<Dim>,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub op: Op,
    /// Optional inputs that are absent in the model are `None`.
    pub inputs: Vec<Option<ValueId>>,
    pub outputs: Vec<ValueId>,
}

impl Node {
    /// The `i`-th input, if present.
    pub fn input(&self, i: usize) -> Option<ValueId> {
        self.inputs.get(i).copied().flatten()
    }
}

/// The whole model.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    pub name: String,
    pub opset: i64,
    pub values: Vec<Value>,
    /// In execution order (topological).
    pub nodes: Vec<Node>,
    pub inputs: Vec<Input>,
    pub outputs: Vec<ValueId>,
    /// Extents only the data decides (NonZero's count, TopK's run-time k), in node
    /// order: each is a symbol in the dims of its node's outputs, bound when the
    /// node runs ([`crate::dynamic`]).
    pub extents: Vec<Extent>,
}

/// An output extent that depends on the data: the symbol standing for it in the
/// outputs' dims, and the largest value it can take (in the other symbols).
#[derive(Debug, Clone, PartialEq)]
pub struct Extent {
    /// `OUT[axis]`: the node's first output and the axis of it the extent is.
    pub symbol: String,
    pub bound: Dim,
    /// The node, for messages.
    pub node: String,
    pub op: &'static str,
}

impl Graph {
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    pub fn value_mut(&mut self, id: ValueId) -> &mut Value {
        &mut self.values[id.index()]
    }

    pub fn add_value(&mut self, v: Value) -> ValueId {
        self.values.push(v);
        ValueId(self.values.len() as u32 - 1)
    }

    pub fn is_input(&self, id: ValueId) -> bool {
        self.inputs.iter().any(|i| i.value == id)
    }

    pub fn is_output(&self, id: ValueId) -> bool {
        self.outputs.contains(&id)
    }

    /// Number of node inputs reading each value (graph outputs not counted).
    pub fn use_counts(&self) -> Vec<usize> {
        let mut n = vec![0; self.values.len()];
        for node in &self.nodes {
            for v in node.inputs.iter().flatten() {
                n[v.index()] += 1;
            }
        }
        n
    }

    /// Replaces every read of `from` (by nodes and graph outputs) with `to`.
    pub fn replace_uses(&mut self, from: ValueId, to: ValueId) {
        for node in &mut self.nodes {
            for v in node.inputs.iter_mut().flatten() {
                if *v == from {
                    *v = to;
                }
            }
        }
        for o in &mut self.outputs {
            if *o == from {
                *o = to;
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid,
}

/// Attributes shared by convolution and pooling windows.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub kernel_shape: Option<Vec<usize>>,
    pub strides: Option<Vec<usize>>,
    pub dilations: Option<Vec<usize>>,
    /// `[x1_begin, x2_begin, ..., x1_end, x2_end, ...]` as in ONNX.
    pub pads: Option<Vec<usize>>,
    pub auto_pad: AutoPad,
    pub ceil_mode: bool,
}

/// An activation fused into a producer by the fusion pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Activation {
    Relu,
    LeakyRelu { alpha: f32 },
    Clip { min: f32, max: f32 },
    Sigmoid,
    HardSigmoid { alpha: f32, beta: f32 },
    HardSwish,
    Swish { alpha: f32 },
}
