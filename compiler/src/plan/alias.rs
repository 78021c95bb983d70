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

/// Per buffer, the Concat output it is placed in as a slice and its byte offset there
/// ([`BufferRequest::slice_of`]), on top of the in-place aliases `alias_of`. Legal,
/// checked again by the validator from the definitions:
///
/// - the buffer is plain (not scratch, not a graph output), in no in-place alias (as
///   input or output), not itself a parent of slices, and read once by its parent's
///   step, which is its last reader, and written earlier;
/// - the parent is not scratch, not a slice, not written in place over another buffer;
/// - the offset is a multiple of the alignment and the slice (aligned) lies inside the
///   parent (aligned), apart from the parent's other slices.
///
/// Then, parent by parent in id order, a parent's slices are kept only where they do
/// not raise the lower bound of the blocks kept so far (reserving the whole output
/// early can cost more than the copy it saves); the strategies then place the blocks
/// with the kept slices and without, and the smaller arena wins.
pub fn choose_slices(
    input: &PlanInput,
    live: &Liveness,
    alias_of: &[Option<BufferId>],
    overlap_of: &[Option<(BufferId, isize)>],
) -> Result<Vec<Option<(BufferId, usize)>>, PlanError> {
    let n = input.buffers.len();
    let mut in_alias = vec![false; n];
    let overlaps = overlap_of.iter().map(|o| o.map(|(x, _)| x));
    let pairs = alias_of.iter().copied().enumerate();
    for (y, x) in pairs.chain(overlaps.enumerate()) {
        if let Some(x) = x {
            in_alias[y] = true;
            if let Some(slot) = in_alias.get_mut(x.index()) {
                *slot = true;
            }
        }
    }
    let mut is_parent = vec![false; n];
    for b in &input.buffers {
        if let Some((p, _)) = b.slice_of
            && p.index() < n
        {
            is_parent[p.index()] = true;
        }
    }
    // Legal candidates, grouped by parent: (child, delta), each apart from the others.
    let mut groups: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (c, child) in input.buffers.iter().enumerate() {
        let Some((p, delta)) = child.slice_of else {
            continue;
        };
        let Some(parent) = input.buffers.get(p.index()) else {
            continue;
        };
        let (life, size) = (live.lifetimes[c], live.sizes[c]);
        let apart = |group: &[(usize, usize)]| {
            group
                .iter()
                .all(|&(o, d)| delta.saturating_add(size) <= d || d + live.sizes[o] <= delta)
        };
        // An empty input has nothing for the Concat to copy: no slice (and an empty
        // slice at a sibling's offset would look like an overlap to the validator).
        let legal = p.index() != c
            && size > 0
            && !child.scratch
            && !child.live_to_end
            && !in_alias[c]
            && !is_parent[c]
            && !parent.scratch
            && parent.slice_of.is_none()
            && alias_of[p.index()].is_none()
            && life.first < parent.def
            && life.last == parent.def
            && child.uses.iter().filter(|&&u| u == parent.def).count() == 1
            && delta.is_multiple_of(input.alignment)
            && delta
                .checked_add(size)
                .is_some_and(|end| end <= live.sizes[p.index()])
            && apart(&groups[p.index()]);
        if legal {
            groups[p.index()].push((c, delta));
        }
    }
    // Keep each parent's slices where they do not raise the bound.
    let mut slice_of = vec![None; n];
    let mut bound = super::analyze(&merge(input, live, alias_of, &slice_of, overlap_of)?.input)?
        .lower_bound_bytes;
    for (p, group) in groups.iter().enumerate() {
        if group.is_empty() {
            continue;
        }
        let mut tried = slice_of.clone();
        for &(c, delta) in group {
            tried[c] = Some((BufferId(p as u32), delta));
        }
        let with = super::analyze(&merge(input, live, alias_of, &tried, overlap_of)?.input)?
            .lower_bound_bytes;
        if with <= bound {
            (slice_of, bound) = (tried, with);
        }
    }
    Ok(slice_of)
}

/// Chains of aliases as blocks: a [`PlanInput`] with one buffer per block, and the block
/// of every buffer.
pub struct Blocks {
    pub input: PlanInput,
    /// Per buffer: the index of its block in `input.buffers`.
    pub block_of: Vec<usize>,
    /// Per buffer: its byte offset inside its block (non-zero for slices and for the
    /// members of a block with an overlap).
    pub delta: Vec<usize>,
    /// `(low, high, distance)`: a block with a segment overlap is two blocks, tied:
    /// `low` holds the overlap's output, from the block's start for the block's whole
    /// life, and `high`, at `distance` above it, the rest of the input's bytes until
    /// the overlap's step. After that step the bytes of `high` are free.
    pub ties: Vec<(usize, usize, usize)>,
}

impl Blocks {
    /// The blocks' liveness, with the ties of overlapped blocks.
    pub fn liveness(&self) -> Result<Liveness, PlanError> {
        let mut live = super::analyze(&self.input)?;
        for &(low, high, distance) in &self.ties {
            live.tied[low] = Some((BufferId(high as u32), distance as isize));
            live.tied[high] = Some((BufferId(low as u32), -(distance as isize)));
        }
        Ok(live)
    }
}

/// Merges every chain of in-place aliases (`alias_of`) and segment overlaps
/// (`overlap_of`: an output at a signed byte distance from its input) into one block
/// living from its first member's first step to its last member's last step, and every
/// slice of `slice_of` into its parent's block (which then starts at the slice's first
/// step). A block spans its members' bytes, from the lowest to the highest; one with an
/// overlap is cut in two tied blocks ([`Blocks::ties`]), as its input's bytes above
/// the output are free once the overlap's step is over. A chain holds at most one
/// overlap. Blocks are numbered in the order of their first member's id (the upper
/// parts of overlapped blocks after all others), so a plan without aliases has the
/// input's own order.
pub fn merge(
    input: &PlanInput,
    live: &Liveness,
    alias_of: &[Option<BufferId>],
    slice_of: &[Option<(BufferId, usize)>],
    overlap_of: &[Option<(BufferId, isize)>],
) -> Result<Blocks, PlanError> {
    let n = input.buffers.len();
    // An alias's input starts strictly earlier, so in order of first step every
    // buffer's input already has its block. `rel`: byte offset from the root.
    let mut by_first: Vec<usize> = (0..n).collect();
    by_first.sort_unstable_by_key(|&i| (live.lifetimes[i].first, i));
    let mut root: Vec<usize> = (0..n).collect();
    let mut rel = vec![0isize; n];
    for &i in &by_first {
        let alias = alias_of.get(i).copied().flatten();
        let overlap = overlap_of.get(i).copied().flatten();
        let (x, d) = match (alias, overlap) {
            (None, None) => continue,
            (Some(x), None) => (x, 0),
            (None, Some((x, d))) => (x, d),
            (Some(x), Some(_)) => {
                return Err(bad_alias(
                    input,
                    i,
                    x,
                    "is both written in place and overlapped",
                ));
            }
        };
        let starts_before = |x: usize| live.lifetimes[x].first < live.lifetimes[i].first;
        if x.index() >= n || !starts_before(x.index()) {
            return Err(bad_alias(input, i, x, "is not a buffer written before it"));
        }
        if alias.is_some() && input.buffers[i].size != input.buffers[x.index()].size {
            return Err(bad_alias(input, i, x, "differs in size"));
        }
        (root[i], rel[i]) = (root[x.index()], rel[x.index()] + d);
    }
    // A slice joins its parent's block at its offset there. It is in no alias chain
    // and parents no slice, so no other buffer's root is the slice.
    let mut is_root_of_others = vec![false; n];
    for (i, &r) in root.iter().enumerate() {
        is_root_of_others[r] |= r != i;
    }
    for (c, s) in slice_of.iter().enumerate() {
        let Some((p, d)) = *s else { continue };
        let p_slice = slice_of.get(p.index()).copied().flatten();
        if p.index() >= n || p.index() == c || p_slice.is_some() || root[c] != c {
            return Err(bad_alias(
                input,
                c,
                p,
                "is not a buffer it can be a slice of",
            ));
        }
        if is_root_of_others[c] {
            return Err(bad_alias(
                input,
                c,
                p,
                "takes a slice written over in place",
            ));
        }
        let fits = d
            .checked_add(live.sizes[c])
            .is_some_and(|end| end <= live.sizes[p.index()]);
        if !fits {
            return Err(bad_alias(input, c, p, "is too small for it"));
        }
        (root[c], rel[c]) = (root[p.index()], rel[p.index()] + d as isize);
    }
    // Each block's extent, lifetime and graph-output flag over its members.
    let mut low = vec![0isize; n];
    let mut high = vec![0isize; n];
    let mut life = live.lifetimes.clone();
    let mut to_end = vec![false; n];
    let mut members = vec![0usize; n];
    for i in 0..n {
        let (r, l) = (root[i], live.lifetimes[i]);
        let end = rel[i] + live.sizes[i] as isize;
        (low[r], high[r]) = if members[r] == 0 {
            (rel[i], end)
        } else {
            (low[r].min(rel[i]), high[r].max(end))
        };
        life[r].first = life[r].first.min(l.first);
        life[r].last = life[r].last.max(l.last);
        to_end[r] |= input.buffers[i].live_to_end;
        members[r] += 1;
    }
    let mut block_of = vec![usize::MAX; n];
    let mut blocks: Vec<BufferRequest> = Vec::new();
    for i in 0..n {
        let r = root[i];
        if block_of[r] == usize::MAX {
            block_of[r] = blocks.len();
            let mut block = BufferRequest {
                in_place_of: Vec::new(),
                slice_of: None,
                overlap_of: None,
                ..input.buffers[r].clone()
            };
            if members[r] > 1 {
                block.size = (high[r] - low[r]) as usize;
                block.def = life[r].first;
                block.uses = vec![life[r].last];
                block.live_to_end = to_end[r];
            }
            blocks.push(block);
        }
        block_of[i] = block_of[r];
    }
    let delta: Vec<usize> = (0..n).map(|i| (rel[i] - low[root[i]]) as usize).collect();
    // Cut each overlapped block above its output's bytes. The output starts below its
    // input (`PlaneOrder::closest_delta` is negative), so at the block's start; the
    // members after it have its size, those before it die at its step.
    let mut ties = Vec::new();
    let mut overlapped = vec![false; n];
    for (y, o) in overlap_of.iter().enumerate() {
        let Some((x, _)) = *o else { continue };
        let r = root[y];
        if std::mem::replace(&mut overlapped[r], true) {
            return Err(bad_alias(
                input,
                y,
                x,
                "is in a chain that already overlaps",
            ));
        }
        let (b, out) = (block_of[y], live.sizes[y]);
        let size = blocks[b].size;
        if delta[y] != 0 || size <= out {
            return Err(bad_alias(input, y, x, "does not start below it"));
        }
        let def = input.buffers[y].def;
        let high = BufferRequest::new(
            format!("{}:input-rest", input.buffers[y].name),
            size - out,
            blocks[b].def,
            vec![def],
        );
        blocks[b].size = out;
        ties.push((b, blocks.len(), out));
        blocks.push(high);
    }
    let mut merged = PlanInput::new(input.steps);
    merged.alignment = input.alignment;
    merged.buffers = blocks;
    Ok(Blocks {
        input: merged,
        block_of,
        delta,
        ties,
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
        let blocks = merge(&input, &live, &alias_of, &[], &[]).unwrap();
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

    #[test]
    fn slices_are_kept_where_they_do_not_raise_the_bound() {
        use super::super::testutil::concat_example;
        let p = BufferId(3);
        let input = concat_example(256);
        let live = analyze(&input).unwrap();
        let none = vec![None; 5];
        let slices = choose_slices(&input, &live, &none, &[]).unwrap();
        assert_eq!(slices, vec![Some((p, 0)), None, Some((p, 256)), None, None]);
        let blocks = merge(&input, &live, &none, &slices, &[]).unwrap();
        assert_eq!(blocks.block_of, vec![0, 1, 0, 0, 2]);
        assert_eq!(blocks.delta, vec![0, 0, 256, 0, 0]);
        let merged = analyze(&blocks.input).unwrap();
        assert_eq!(merged.lifetimes[0], Lifetime::new(0, 4));
        assert_eq!(
            (live.lower_bound_bytes, merged.lower_bound_bytes),
            (1280, 1024)
        );
        // Reserving P from step 0 would raise the bound: no slice.
        let input = concat_example(8192);
        let live = analyze(&input).unwrap();
        let slices = choose_slices(&input, &live, &none, &[]).unwrap();
        assert!(slices.iter().all(Option::is_none));
    }

    #[test]
    fn illegal_slices_are_dropped() {
        let p = BufferId(3);
        let none = vec![None; 5];
        let slices = |f: &dyn Fn(&mut PlanInput)| {
            let mut input = super::super::testutil::concat_example(256);
            f(&mut input);
            let live = analyze(&input).unwrap();
            choose_slices(&input, &live, &none, &[]).unwrap()
        };
        // c is read after the Concat.
        assert_eq!(slices(&|i| i.buffers[0].uses.push(4))[0], None);
        // A misaligned byte offset.
        let misaligned = slices(&|i| i.buffers[2].slice_of = Some((p, 128)));
        assert_eq!(misaligned, vec![Some((p, 0)), None, None, None, None]);
        // Past the parent's end, a graph output, read twice by the Concat.
        assert_eq!(slices(&|i| i.buffers[2].slice_of = Some((p, 768)))[2], None);
        assert_eq!(slices(&|i| i.buffers[0].live_to_end = true)[0], None);
        assert_eq!(slices(&|i| i.buffers[0].uses.push(3))[0], None);
        // Overlapping the parent's other slice.
        assert_eq!(slices(&|i| i.buffers[2].slice_of = Some((p, 0)))[2], None);
        // A slice of a slice: d inside c, which is inside P.
        let nested = slices(&|i| i.buffers[2].slice_of = Some((BufferId(0), 0)));
        assert_eq!(nested[0], None);
        // An empty input: nothing to copy, no slice.
        assert_eq!(slices(&|i| i.buffers[0].size = 0)[0], None);
        // In an in-place alias.
        let input = super::super::testutil::concat_example(256);
        let live = analyze(&input).unwrap();
        let mut alias_of = none.clone();
        alias_of[1] = Some(BufferId(0));
        assert_eq!(
            choose_slices(&input, &live, &alias_of, &[]).unwrap()[0],
            None
        );
    }

    /// A Concat whose empty first input is written after the second planned as a
    /// strategy bug: the empty slice sat at its sibling's offset (found by the dynamic
    /// planner's property tests).
    #[test]
    fn an_empty_concat_input_plans() {
        let p = BufferId(2);
        let mut input = PlanInput::new(4);
        input.push(BufferRequest {
            slice_of: Some((p, 0)),
            ..BufferRequest::new("empty", 0, 1, vec![2])
        });
        input.push(BufferRequest {
            slice_of: Some((p, 0)),
            ..BufferRequest::new("d", 256, 0, vec![2])
        });
        input.push(BufferRequest::new("P", 256, 2, vec![3]));
        input.push(BufferRequest::output("r", 256, 3));
        let plan = super::super::plan(&input).expect("plans");
        assert_eq!(plan.slice(BufferId(0)), None);
    }
}
