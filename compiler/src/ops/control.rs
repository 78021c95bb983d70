//! Control flow: `If` whose condition is known at compile time is inlined (the taken
//! branch's nodes replace it; [`crate::load::inline_branch`]), so nothing of it reaches
//! lowering. Any other `If` is an error naming the node; `Loop` and `Scan` are not in
//! the registry, so the loader names them as unsupported.

use std::sync::Arc;

use super::{Fact, InferCx, LowerCx, OpDef, Operator, R, Types};
use crate::impl_as_any;

/// `If`: remembers where it sits in the model, so compile can splice in a branch.
#[derive(Debug, Clone)]
pub struct If {
    pub node_index: usize,
}

impl If {
    /// The branch to inline (`true`: then_branch), when the condition is constant.
    pub fn branch(&self, cx: &InferCx) -> R<bool> {
        let c = cx.constant(0, "condition")?;
        if c.data.len() != 1 {
            return Err(format!(
                "the condition holds {} values, expected one",
                c.data.len()
            ));
        }
        Ok(c.as_f64()[0] != 0.0)
    }
}

impl Operator for If {
    fn name(&self) -> &'static str {
        "If"
    }
    fn infer(&self, cx: &InferCx) -> R<Vec<Fact>> {
        // Reached only when the condition is not constant: compile inlines the rest.
        self.branch(cx).map_err(|e| {
            format!("{e}; Kiln compiles an If only when its condition is known at compile time")
        })?;
        Err("an If with a constant condition should have been inlined (a Kiln bug)".into())
    }
    fn lower(&self, _: &mut LowerCx) -> R<()> {
        Err("an If reached lowering (a Kiln bug)".into())
    }
    impl_as_any!();
}

pub const OPS: &[OpDef] = &[OpDef {
    name: "If",
    since: 1,
    types: Types::Bool,
    cuda: false,
    parse: |cx| {
        for b in ["then_branch", "else_branch"] {
            if cx.attrs.get(b).and_then(|a| a.g.as_ref()).is_none() {
                return Err(format!("attribute `{b}` (a graph) is required"));
            }
        }
        Ok(Arc::new(If {
            node_index: cx.node_index,
        }))
    },
}];
