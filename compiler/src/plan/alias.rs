//! Pass 1b: in-place aliases. A buffer whose writer may overwrite one of its inputs
//! ([`BufferRequest::in_place_of`]) shares that input's bytes when the input dies at
//! that very step, so the two count once instead of twice at the step where both are
//! live; through chains (conv → BatchNorm → Relu) one block of memory serves several
//! tensors.
//!
//! [`choose`] keeps the legal candidates; [`merge`] turns every chain of aliases into one
//! block (the union of its lifetimes) that the strategies place like any buffer, so
//! the members get equal offsets by construction. Legality, checked again by the
//! validator from the definitions:
//!
//! - the input is a plain buffer (not scratch, not a graph output) of exactly the
//!   output's size, and the output is not scratch;
//! - the input is written before the output's step and last read at it;
//! - no other buffer takes the same input.

use super::{BufferId, BufferRequest, Liveness, PlanError, PlanInput};

/// Per buffer, the input it is written over, if any: every legal candidate, the first
/// legal one in each buffer's preference order, buffers in id order.
pub fn choose(input: &PlanInput, live: &Liveness) -> Vec<Option<BufferId>> {
    let n = input.buffers.len();
    let mut taken = vec![false; n];
    let mut alias_of = vec![None; n];
    for (y, out) in input.buffers.iter().enumerate() {
        if out.scratch {
            continue;
        }
        let legal = |x: &BufferId| {
            let Some(inp) = input.buffers.get(x.index()) else {
                return false;
            };
            let life = live.lifetimes[x.index()];
            x.index() != y
                && !taken[x.index()]
                && !inp.scratch
                && !inp.live_to_end
                && inp.size == out.size
                && life.first < out.def
                && life.last == out.def
        };
        if let Some(&x) = out.in_place_of.iter().find(|x| legal(x)) {
            taken[x.index()] = true;
            alias_of[y] = Some(x);
        }
    }
    alias_of
}

/// Chains of aliases as blocks: a [`PlanInput`] with one buffer per block, and the block
/// of every buffer.
pub struct Blocks {
    pub input: PlanInput,
    /// Per buffer: the index of its block in `input.buffers`.
    pub block_of: Vec<usize>,
}

/// Merges every chain of `alias_of` into one block living from its first member's
/// first step to its last member's last step. Blocks are numbered in the order of
/// their first member's id, so a plan without aliases has the input's own order.
pub fn merge(
    input: &PlanInput,
    live: &Liveness,
    alias_of: &[Option<BufferId>],
) -> Result<Blocks, PlanError> {
    let n = input.buffers.len();
    // An alias's input starts strictly earlier, so in order of first step every
    // buffer's input already has its block.
    let mut by_first: Vec<usize> = (0..n).collect();
    by_first.sort_unstable_by_key(|&i| (live.lifetimes[i].first, i));
    let mut root: Vec<usize> = (0..n).collect();
    for &i in &by_first {
        if let Some(x) = alias_of.get(i).copied().flatten() {
            let starts_before = |x: usize| live.lifetimes[x].first < live.lifetimes[i].first;
            if x.index() >= n || !starts_before(x.index()) {
                return Err(bad_alias(input, i, x, "is not a buffer written before it"));
            }
            root[i] = root[x.index()];
        }
    }
    let mut block_of = vec![usize::MAX; n];
    let mut blocks: Vec<BufferRequest> = Vec::new();
    for i in 0..n {
        let r = root[i];
        if block_of[r] == usize::MAX {
            block_of[r] = blocks.len();
            let b = &input.buffers[r];
            blocks.push(BufferRequest {
                in_place_of: Vec::new(),
                ..b.clone()
            });
        }
        if r == i {
            continue;
        }
        block_of[i] = block_of[r];
        // Extend the block over member i: it starts later and ends at least as late.
        let block = &mut blocks[block_of[r]];
        let (b, life) = (&input.buffers[i], live.lifetimes[i]);
        if block.size != b.size {
            return Err(bad_alias(input, i, BufferId(r as u32), "differs in size"));
        }
        block.live_to_end |= b.live_to_end;
        block.uses = vec![life.last.max(block.uses.iter().copied().max().unwrap_or(0))];
    }
    let mut merged = PlanInput::new(input.steps);
    merged.alignment = input.alignment;
    merged.buffers = blocks;
    Ok(Blocks {
        input: merged,
        block_of,
    })
}

fn bad_alias(input: &PlanInput, y: usize, x: BufferId, reason: &str) -> PlanError {
    let name = |i: usize| {
        input
            .buffers
            .get(i)
            .map_or_else(|| x.to_string(), |b| b.name.clone())
    };
    PlanError::BadAlias {
        buffer: name(y),
        input: name(x.index()),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Lifetime, analyze};
    use super::*;

    /// conv (0) → bn (1, over conv) → relu (2, over bn) → a reader at 3; plus a
    /// tensor read after the relu that must not be overwritten.
    fn chain() -> PlanInput {
        let mut input = PlanInput::new(5);
        let conv = input.push(BufferRequest::new("conv", 1000, 0, vec![1]));
        let bn = input.push(BufferRequest {
            in_place_of: vec![conv],
            ..BufferRequest::new("bn", 1000, 1, vec![2])
        });
        input.push(BufferRequest {
            in_place_of: vec![bn],
            ..BufferRequest::new("relu", 1000, 2, vec![3])
        });
        input
    }

    #[test]
    fn a_chain_becomes_one_block() {
        let input = chain();
        let live = analyze(&input).unwrap();
        let alias_of = choose(&input, &live);
        assert_eq!(alias_of, vec![None, Some(BufferId(0)), Some(BufferId(1))]);
        let blocks = merge(&input, &live, &alias_of).unwrap();
        assert_eq!(blocks.block_of, vec![0, 0, 0]);
        let merged = analyze(&blocks.input).unwrap();
        assert_eq!(merged.lifetimes, vec![Lifetime::new(0, 3)]);
        assert_eq!(merged.lower_bound_bytes, 1024);
        assert_eq!(live.lower_bound_bytes, 2048);
    }

    #[test]
    fn illegal_candidates_are_dropped() {
        // The input is read again after the step.
        let mut input = chain();
        input.buffers[0].uses.push(4);
        let live = analyze(&input).unwrap();
        assert_eq!(choose(&input, &live)[1], None);
        // Sizes differ.
        let mut input = chain();
        input.buffers[1].size = 999;
        let live = analyze(&input).unwrap();
        assert_eq!(choose(&input, &live)[1], None);
        // A graph output or scratch is never overwritten; scratch never overwrites.
        let mut input = chain();
        input.buffers[0].live_to_end = true;
        let live = analyze(&input).unwrap();
        assert_eq!(choose(&input, &live)[1], None);
        let mut input = chain();
        input.buffers[2].scratch = true;
        input.buffers[2].uses.clear();
        let live = analyze(&input).unwrap();
        assert_eq!(choose(&input, &live)[2], None);
        // Unknown ids and self-references are ignored.
        let mut input = chain();
        input.buffers[1].in_place_of = vec![BufferId(7), BufferId(1), BufferId(0)];
        let live = analyze(&input).unwrap();
        assert_eq!(choose(&input, &live)[1], Some(BufferId(0)));
    }

    #[test]
    fn an_input_is_taken_once_and_preference_order_holds() {
        let mut input = PlanInput::new(3);
        let a = input.push(BufferRequest::new("a", 256, 0, vec![1]));
        let b = input.push(BufferRequest::new("b", 256, 0, vec![1]));
        input.push(BufferRequest {
            in_place_of: vec![a, b],
            ..BufferRequest::new("y", 256, 1, vec![2])
        });
        input.push(BufferRequest {
            in_place_of: vec![a, b],
            ..BufferRequest::new("z", 256, 1, vec![2])
        });
        let live = analyze(&input).unwrap();
        assert_eq!(choose(&input, &live), vec![None, None, Some(a), Some(b)]);
    }
}
