//! Dynamic shapes: one memory plan for every value of the symbols' declared ranges,
//! whose offsets generated code computes at run time with straight-line integer code.
//!
//! A buffer's size is a [`Dim`] in the symbols, each with a [`SymbolRange`]. The method:
//!
//! 1. A size provably monotone ([`Dim::is_monotone`]) is kept; any other is reserved at
//!    its upper bound over the ranges ([`Dim::upper_bound`]), a constant.
//! 2. The static planner ([`super::plan_with`]) packs the buffers at the largest point
//!    (every symbol at [`SymbolRange::largest`]) with the in-place aliases whose sizes
//!    are equal as expressions and the Concat slices whose offset in the parent is
//!    proved aligned, inside the parent and apart from its other slices at every point;
//!    never with segment overlaps, whose legality depends on each point's planes.
//! 3. Its order is kept. A block is a buffer with the aliases and slices placed on it;
//!    of two conflicting blocks, the one lower at the largest point is *below* the
//!    other. A block's offset is the aligned max of the ends of the blocks below it
//!    (0 if none), an alias sits at its target's offset, a slice at its parent's plus
//!    its offset there. In that order, by induction, no two conflicting blocks share a
//!    byte at any point; as sizes only grow with the symbols, no offset exceeds its
//!    value at the largest point, which is at most the static plan's.
//!
//! [`DynamicPlan::eval`] does what generated code will; [`validate_dynamic`]
//! checks a plan at sampled points, with the static validator at each.

use std::fmt;
use std::sync::Arc;

use super::interference::for_each_conflict;
use super::liveness::align_up;
use super::validate_dynamic::validate_dynamic;
use super::{
    BufferId, BufferRequest, Lifetime, MemoryPlan, PlanError, PlanInput, Strategy, alias, analyze,
    plan_with,
};
use crate::dim::{Dim, SymbolRange};

/// The static planner's input with symbolic sizes, and the symbols' ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicInput {
    /// Steps, alignment and buffers. Each buffer's `size` is ignored (it is `sizes`),
    /// and so is the byte offset of its `slice_of` where `slice_deltas` gives one.
    pub input: PlanInput,
    /// Per buffer: bytes, unaligned.
    pub sizes: Vec<Dim>,
    /// Per buffer: the byte offset of its `slice_of` in the Concat output when it
    /// depends on the symbols; None keeps the request's fixed offset.
    pub slice_deltas: Vec<Option<Dim>>,
    /// One per symbol the sizes use (others are ignored).
    pub ranges: Vec<SymbolRange>,
}

impl DynamicInput {
    /// No buffers over `steps` steps, with the default alignment.
    pub fn new(steps: usize, ranges: Vec<SymbolRange>) -> Self {
        Self {
            input: PlanInput::new(steps),
            sizes: Vec::new(),
            slice_deltas: Vec::new(),
            ranges,
        }
    }

    /// Adds a buffer of `size` bytes (its request's `size` is ignored).
    pub fn push(&mut self, request: BufferRequest, size: Dim) -> BufferId {
        self.sizes.push(size);
        self.slice_deltas.push(None);
        self.input.push(request)
    }

    /// Adds a Concat input that may be placed at bytes `delta..` of `parent`.
    pub fn push_slice(
        &mut self,
        request: BufferRequest,
        size: Dim,
        parent: BufferId,
        delta: Dim,
    ) -> BufferId {
        let request = BufferRequest {
            slice_of: Some((parent, 0)),
            ..request
        };
        let id = self.push(request, size);
        if let Some(slot) = self.slice_deltas.last_mut() {
            *slot = Some(delta);
        }
        id
    }

    /// The Concat output buffer `i` names and its byte offset there, as a dim.
    pub fn slice_request(&self, i: usize) -> Option<(BufferId, Dim)> {
        let (parent, fixed) = self.input.buffers.get(i)?.slice_of?;
        let delta = self.slice_deltas.get(i).cloned().flatten();
        Some((parent, delta.unwrap_or_else(|| Dim::from(fixed))))
    }

    fn name(&self, i: usize) -> String {
        self.input
            .buffers
            .get(i)
            .map_or_else(|| BufferId(i as u32).to_string(), |b| b.name.clone())
    }
}

/// Where a buffer's offset comes from, at any point of the ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DynamicOffset {
    /// The max of `offset + aligned size` of these buffers, rounded up to the
    /// alignment; 0 when the list is empty.
    Max(Vec<BufferId>),
    /// The offset of the buffer it is written over in place.
    Alias(BufferId),
    /// The offset of its Concat output plus this many bytes.
    Slice(BufferId, Dim),
}

/// One buffer of a [`DynamicPlan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicBuffer {
    pub name: String,
    pub lifetime: Lifetime,
    /// The size asked for: bytes, unaligned.
    pub requested: Dim,
    /// What the arena holds for it: `requested` when monotone, else its upper bound
    /// over the ranges (a constant).
    pub size: Dim,
    pub offset: DynamicOffset,
}

impl DynamicBuffer {
    /// Whether its size was reserved at its bound (not provably monotone).
    pub fn is_reserved(&self) -> bool {
        self.size != self.requested
    }
}

/// Offsets as functions of the symbols, for one build serving every value in range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicPlan {
    pub alignment: usize,
    /// The ranges of the symbols the sizes and slice offsets use, sorted by name.
    pub symbols: Vec<SymbolRange>,
    /// Per [`BufferId`].
    pub buffers: Vec<DynamicBuffer>,
    /// Every buffer once, each after the buffers its offset reads.
    pub order: Vec<BufferId>,
    /// The buffers below no other: the arena ends at the largest of their ends.
    pub top: Vec<BufferId>,
    /// The arena at the largest point, the most any point needs.
    pub arena_bytes_max: usize,
    /// The static plan at the largest point whose order this one keeps.
    pub at_max: MemoryPlan,
}

/// A [`DynamicPlan`] at one point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvaluatedPlan {
    pub offsets: Vec<usize>,
    /// Per buffer: its reserved size there, rounded up to the alignment.
    pub aligned_sizes: Vec<usize>,
    pub arena_bytes: usize,
}

/// Errors of dynamic planning, naming the buffer and symbol at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DynamicPlanError {
    #[error("dynamic memory plan: the input has {found} {what} for {expected} buffers")]
    Shape {
        what: &'static str,
        expected: usize,
        found: usize,
    },
    #[error("dynamic memory plan: the range `{range}` {reason}")]
    BadRange { range: String, reason: &'static str },
    #[error(
        "dynamic memory plan: the {what} `{expr}` of buffer `{buffer}` uses `{symbol}`, which has no range"
    )]
    Unranged {
        buffer: String,
        what: &'static str,
        expr: String,
        symbol: String,
    },
    #[error("dynamic memory plan: the {what} `{expr}` of buffer `{buffer}` is {value} at {at}")]
    Negative {
        buffer: String,
        what: &'static str,
        expr: String,
        value: i64,
        at: String,
    },
    #[error("dynamic memory plan: the {what} `{expr}` of buffer `{buffer}` overflows at {at}")]
    Overflow {
        buffer: String,
        what: &'static str,
        expr: String,
        at: String,
    },
    #[error("dynamic memory plan: no value for symbol `{symbol}`")]
    Unbound { symbol: String },
    #[error("dynamic memory plan: {symbol} = {value} is not a value of its range `{range}`")]
    OutOfRange {
        symbol: String,
        value: i64,
        range: String,
    },
    #[error("dynamic memory plan, at the largest point: {0}")]
    Plan(#[from] PlanError),
    #[error("invalid dynamic memory plan: buffer `{buffer}` {reason}")]
    Malformed {
        buffer: String,
        reason: &'static str,
    },
    #[error("invalid dynamic memory plan at {at}: {source}")]
    Invalid {
        at: String,
        #[source]
        source: Box<PlanError>,
    },
    #[error("invalid dynamic memory plan at {at}: {reason}")]
    Bound { at: String, reason: String },
}

/// Plans `input` for every point of its ranges with every static strategy.
pub fn plan_dynamic(input: &DynamicInput) -> Result<DynamicPlan, DynamicPlanError> {
    plan_dynamic_with(input, Strategy::ALL)
}

/// Plans `input` for every point of its ranges, packing at the largest point with
/// `strategies`; the result has passed [`validate_dynamic`].
pub fn plan_dynamic_with(
    input: &DynamicInput,
    strategies: &[Strategy],
) -> Result<DynamicPlan, DynamicPlanError> {
    let n = input.input.buffers.len();
    for (what, found) in [
        ("sizes", input.sizes.len()),
        ("slice offsets", input.slice_deltas.len()),
    ] {
        if found != n {
            return Err(DynamicPlanError::Shape {
                what,
                expected: n,
                found,
            });
        }
    }
    let symbols = used_ranges(input)?;
    let (least, largest) = (Values::least(&symbols), Values::largest(&symbols));
    let sizes = (0..n)
        .map(|i| reserve(input, i, &symbols, &least))
        .collect::<Result<Vec<_>, _>>()?;
    let slices = provable_slices(input, &sizes, &symbols);
    let at_max = plan_with(&at_largest(input, &sizes, &slices, &largest)?, strategies)?;
    let Placement {
        offsets,
        order,
        top,
    } = place(input, &at_max, &slices)?;
    let buffers = offsets
        .into_iter()
        .enumerate()
        .map(|(i, offset)| DynamicBuffer {
            name: input.name(i),
            lifetime: at_max.lifetimes[i],
            requested: input.sizes[i].clone(),
            size: sizes[i].clone(),
            offset,
        })
        .collect();
    let mut plan = DynamicPlan {
        alignment: input.input.alignment,
        symbols,
        buffers,
        order,
        top,
        arena_bytes_max: 0,
        at_max,
    };
    plan.arena_bytes_max = plan.eval_values(&largest)?.arena_bytes;
    validate_dynamic(input, &plan)?;
    Ok(plan)
}

/// The ranges of the symbols the sizes and slice offsets use, by name; every range
/// well-formed and every such symbol ranged.
fn used_ranges(input: &DynamicInput) -> Result<Vec<SymbolRange>, DynamicPlanError> {
    let mut ranges = input.ranges.clone();
    ranges.sort_by(|a, b| a.name.cmp(&b.name));
    for (i, r) in ranges.iter().enumerate() {
        let reason = if r.min > r.max {
            Some("is empty (its min exceeds its max)")
        } else if i64::try_from(r.largest()).is_err() {
            Some("reaches past i64")
        } else if i > 0 && ranges[i - 1].name == r.name {
            Some("names a symbol that already has one")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(DynamicPlanError::BadRange {
                range: r.to_string(),
                reason,
            });
        }
    }
    let mut used = std::collections::BTreeSet::new();
    let slices = (0..input.sizes.len()).map(|i| input.slice_request(i).map(|(_, d)| d));
    for (i, (size, delta)) in input.sizes.iter().zip(slices).enumerate() {
        let dims = [
            ("size", Some(size)),
            ("offset in its Concat", delta.as_ref()),
        ];
        for (what, dim) in dims {
            for symbol in dim.map(Dim::symbols).unwrap_or_default() {
                if ranges.binary_search_by(|r| r.name.cmp(&symbol)).is_err() {
                    return Err(DynamicPlanError::Unranged {
                        buffer: input.name(i),
                        what,
                        expr: dim.map(Dim::to_string).unwrap_or_default(),
                        symbol: symbol.to_string(),
                    });
                }
                used.insert(symbol);
            }
        }
    }
    ranges.retain(|r| used.contains(&r.name));
    Ok(ranges)
}

/// Buffer `i`'s size as the arena holds it: as requested when monotone (then at
/// least its value at the least point, which must not be negative), else its upper
/// bound over the ranges.
fn reserve(
    input: &DynamicInput,
    i: usize,
    symbols: &[SymbolRange],
    least: &Values,
) -> Result<Dim, DynamicPlanError> {
    let size = &input.sizes[i];
    if size.is_monotone() {
        eval_bytes(size, least, &input.name(i), "size")?;
        return Ok(size.clone());
    }
    let bound = "its upper bound over the ranges";
    let overflow = || DynamicPlanError::Overflow {
        buffer: input.name(i),
        what: "size",
        expr: size.to_string(),
        at: bound.into(),
    };
    match size.upper_bound(symbols).ok_or_else(overflow)? {
        value if value < 0 => Err(DynamicPlanError::Negative {
            buffer: input.name(i),
            what: "size",
            expr: size.to_string(),
            value,
            at: bound.into(),
        }),
        value => Ok(Dim::from(value)),
    }
}

/// Per buffer, the Concat output and symbolic offset it may be placed at: its request,
/// where that offset is a multiple of the alignment and, at every point of the ranges
/// (by [`Dim::lower_bound`]), the slice is not empty (an empty one saves no copy, and
/// the static validator orders slices at one offset by id), the offset not negative,
/// and the slice inside its parent and apart from the parent's slices kept before it
/// (in id order).
fn provable_slices(
    input: &DynamicInput,
    sizes: &[Dim],
    symbols: &[SymbolRange],
) -> Vec<Option<(BufferId, Dim)>> {
    let n = sizes.len();
    let never_negative = |d: Dim| d.lower_bound(symbols).is_some_and(|v| v >= 0);
    let mut kept: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut slices: Vec<Option<(BufferId, Dim)>> = vec![None; n];
    for c in 0..n {
        let Some((parent, delta)) = input.slice_request(c) else {
            continue;
        };
        let p = parent.index();
        if p >= n || p == c {
            continue;
        }
        let size = &sizes[c];
        let apart = kept[p].iter().all(|&o| {
            let Some((_, other)) = &slices[o] else {
                return false;
            };
            never_negative(delta.clone() - other.clone() - sizes[o].clone())
                || never_negative(other.clone() - delta.clone() - size.clone())
        });
        let legal = delta.is_multiple_of(input.input.alignment as u64)
            && never_negative(size.clone() - 1usize)
            && never_negative(delta.clone())
            && never_negative(sizes[p].clone() - delta.clone() - size.clone())
            && apart;
        if legal {
            kept[p].push(c);
            slices[c] = Some((parent, delta));
        }
    }
    slices
}

/// The static planner's input at the largest point: sizes and slice offsets there,
/// in-place candidates only where the sizes are equal as expressions, no overlaps.
fn at_largest(
    input: &DynamicInput,
    sizes: &[Dim],
    slices: &[Option<(BufferId, Dim)>],
    largest: &Values,
) -> Result<PlanInput, DynamicPlanError> {
    let mut out = input.input.clone();
    for (i, b) in out.buffers.iter_mut().enumerate() {
        let name = input.name(i);
        b.size = eval_bytes(&sizes[i], largest, &name, "size")?;
        b.in_place_of
            .retain(|x| input.sizes.get(x.index()) == Some(&input.sizes[i]));
        b.slice_of = match &slices[i] {
            Some((p, delta)) => {
                let at = eval_bytes(delta, largest, &name, "offset in its Concat")?;
                Some((*p, at))
            }
            None => None,
        };
        b.overlap_of = None;
    }
    Ok(out)
}

/// What [`place`] decides: the fields of a [`DynamicPlan`] of the same names.
struct Placement {
    offsets: Vec<DynamicOffset>,
    order: Vec<BufferId>,
    top: Vec<BufferId>,
}

/// Per buffer its [`DynamicOffset`], the order to compute them in, and the buffers
/// below no other: blocks (a buffer and the aliases and slices placed on it, over
/// the union of their lifetimes) keep the order of `at_max`.
fn place(
    input: &DynamicInput,
    at_max: &MemoryPlan,
    slices: &[Option<(BufferId, Dim)>],
) -> Result<Placement, DynamicPlanError> {
    let n = at_max.offsets.len();
    let malformed = |i: usize, reason| DynamicPlanError::Malformed {
        buffer: input.name(i),
        reason,
    };
    // Each buffer's block: follow aliases and slices to a buffer on neither,
    // remembering every root found so that each link is walked once.
    let next = |j: usize| match (at_max.alias_of[j], at_max.slice_of[j]) {
        (Some(x), _) | (None, Some((x, _))) if x.index() < n => Ok(Some(x.index())),
        (None, None) => Ok(None),
        _ => Err(malformed(j, "is placed on a buffer that does not exist")),
    };
    let mut found: Vec<Option<usize>> = vec![None; n];
    let mut path = Vec::new();
    for i in 0..n {
        let mut j = i;
        let r = loop {
            if let Some(r) = found[j] {
                break r;
            }
            if path.len() > n {
                return Err(malformed(i, "is in a cycle of aliases or slices"));
            }
            path.push(j);
            match next(j)? {
                Some(x) => j = x,
                None => break j,
            }
        };
        for k in path.drain(..) {
            found[k] = Some(r);
        }
    }
    let root: Vec<usize> = found.into_iter().map(|r| r.unwrap_or_default()).collect();
    let mut hull: Vec<Option<Lifetime>> = vec![None; n];
    for (i, &r) in root.iter().enumerate() {
        let l = at_max.lifetimes[i];
        hull[r] = Some(hull[r].map_or(l, |h| {
            Lifetime::new(h.first.min(l.first), h.last.max(l.last))
        }));
    }
    let mut blocks = PlanInput::new(input.input.steps);
    blocks.alignment = at_max.alignment;
    for (i, h) in hull.iter().enumerate() {
        let request = match h {
            Some(h) => BufferRequest::new("", at_max.aligned_sizes[i], h.first, vec![h.last]),
            None => BufferRequest::new("", 0, at_max.lifetimes[i].first, vec![]),
        };
        blocks.push(request);
    }
    let key = |id: BufferId| (at_max.offsets[id.index()], id);
    let mut below: Vec<Vec<BufferId>> = vec![Vec::new(); n];
    let mut covered = vec![false; n];
    for_each_conflict(&analyze(&blocks)?, |a, b| {
        let (low, high) = if key(a) < key(b) { (a, b) } else { (b, a) };
        below[high.index()].push(low);
        covered[low.index()] = true;
    });
    let mut offsets = Vec::with_capacity(n);
    for (i, (max, slice)) in reduce(below).into_iter().zip(slices).enumerate() {
        offsets.push(match (at_max.alias_of[i], slice) {
            (Some(x), _) => DynamicOffset::Alias(x),
            (None, Some((p, d))) if at_max.slice_of[i].is_some_and(|(q, _)| q == *p) => {
                DynamicOffset::Slice(*p, d.clone())
            }
            (None, _) if at_max.slice_of[i].is_some() => {
                return Err(malformed(i, "is a slice the dynamic planner did not allow"));
            }
            (None, _) => DynamicOffset::Max(max),
        });
    }
    // Blocks from the bottom up, then the buffers on them: an alias's target is
    // written strictly earlier, a slice's parent is a block.
    let mut order: Vec<BufferId> = (0..n as u32).map(BufferId).collect();
    order.sort_by_key(|&id| {
        let i = id.index();
        match root[i] == i {
            true => (false, at_max.offsets[i], id),
            false => (true, at_max.lifetimes[i].first, id),
        }
    });
    let top = (0..n)
        .filter(|&i| root[i] == i && at_max.aligned_sizes[i] > 0 && !covered[i])
        .map(|i| BufferId(i as u32))
        .collect();
    Ok(Placement {
        offsets,
        order,
        top,
    })
}

/// Cost above which [`reduce`] leaves the lists whole, per buffer.
const REDUCE_BUDGET_PER_BUFFER: usize = 64;

/// Drops `a` from `below[b]` where some `c` in `below[b]` has `a` in `below[c]`: then
/// `a` ends below `c`'s offset, so `c`'s end bounds it. Of the buffers dropped from one
/// list, the highest is bounded by one kept, and each other by a higher one, so the max
/// over the kept equals the max over all. Skipped where it would cost more than
/// [`REDUCE_BUDGET_PER_BUFFER`] list reads per buffer.
fn reduce(below: Vec<Vec<BufferId>>) -> Vec<Vec<BufferId>> {
    let n = below.len();
    let cost = below
        .iter()
        .flatten()
        .map(|c| below[c.index()].len())
        .fold(0usize, usize::saturating_add);
    if cost > n.saturating_mul(REDUCE_BUDGET_PER_BUFFER) {
        return below;
    }
    // mark[a] == b + 1: `a` is below some buffer of below[b].
    let mut mark = vec![0usize; n];
    let mut reduced = Vec::with_capacity(n);
    for (b, list) in below.iter().enumerate() {
        for c in list {
            for a in &below[c.index()] {
                mark[a.index()] = b + 1;
            }
        }
        reduced.push(
            list.iter()
                .copied()
                .filter(|a| mark[a.index()] != b + 1)
                .collect(),
        );
    }
    reduced
}

impl DynamicPlan {
    /// Offsets, aligned sizes and the arena with each symbol given by `values`:
    /// exactly what generated code computes, in `order`.
    pub fn eval(
        &self,
        values: &dyn Fn(&str) -> Option<i64>,
    ) -> Result<EvaluatedPlan, DynamicPlanError> {
        let mut point = Vec::with_capacity(self.symbols.len());
        for r in &self.symbols {
            let value = values(&r.name).ok_or_else(|| DynamicPlanError::Unbound {
                symbol: r.name.to_string(),
            })?;
            if !u64::try_from(value).is_ok_and(|v| r.admits(v)) {
                return Err(DynamicPlanError::OutOfRange {
                    symbol: r.name.to_string(),
                    value,
                    range: r.to_string(),
                });
            }
            point.push((r.name.clone(), value));
        }
        self.eval_values(&Values(point))
    }

    fn eval_values(&self, values: &Values) -> Result<EvaluatedPlan, DynamicPlanError> {
        let n = self.buffers.len();
        let mut aligned_sizes = Vec::with_capacity(n);
        for b in &self.buffers {
            let size = eval_bytes(&b.size, values, &b.name, "size")?;
            let aligned = align_up(size, self.alignment).ok_or_else(|| overflow(b, values))?;
            aligned_sizes.push(aligned);
        }
        let mut offsets: Vec<Option<usize>> = vec![None; n];
        let end = |offsets: &[Option<usize>], a: BufferId, b: &DynamicBuffer| {
            let placed = offsets.get(a.index()).copied().flatten();
            let end = placed.and_then(|o| o.checked_add(aligned_sizes[a.index()]));
            end.ok_or_else(|| malformed(b, "reads an offset not yet computed"))
        };
        for &id in &self.order {
            let b = self.buffers.get(id.index()).ok_or_else(|| {
                let buffer = id.to_string();
                DynamicPlanError::Malformed {
                    buffer,
                    reason: "is in the order but not in the plan",
                }
            })?;
            let offset = match &b.offset {
                DynamicOffset::Max(list) => {
                    let mut top = 0;
                    for &a in list {
                        top = top.max(end(&offsets, a, b)?);
                    }
                    align_up(top, self.alignment).ok_or_else(|| overflow(b, values))?
                }
                DynamicOffset::Alias(x) => offsets
                    .get(x.index())
                    .copied()
                    .flatten()
                    .ok_or_else(|| malformed(b, "is written over a buffer not yet placed"))?,
                DynamicOffset::Slice(p, delta) => {
                    let parent = offsets.get(p.index()).copied().flatten();
                    let parent = parent
                        .ok_or_else(|| malformed(b, "is a slice of a buffer not yet placed"))?;
                    let delta = eval_bytes(delta, values, &b.name, "offset in its Concat")?;
                    parent
                        .checked_add(delta)
                        .ok_or_else(|| overflow(b, values))?
                }
            };
            offsets[id.index()] = Some(offset);
        }
        let mut arena_bytes = 0;
        for &a in &self.top {
            let b = self
                .buffers
                .get(a.index())
                .ok_or_else(|| DynamicPlanError::Malformed {
                    buffer: a.to_string(),
                    reason: "is on top but not in the plan",
                })?;
            arena_bytes = arena_bytes.max(end(&offsets, a, b)?);
        }
        let offsets = offsets
            .into_iter()
            .enumerate()
            .map(|(i, o)| o.ok_or_else(|| malformed(&self.buffers[i], "is not in the order")));
        Ok(EvaluatedPlan {
            offsets: offsets.collect::<Result<_, _>>()?,
            aligned_sizes,
            arena_bytes,
        })
    }

    /// The plan at one point as a static [`PlanInput`] and [`MemoryPlan`] (reserved
    /// sizes, slice offsets as `input` names them there, no overlaps), for reports
    /// and for [`super::validate()`].
    pub fn at(
        &self,
        input: &DynamicInput,
        values: &dyn Fn(&str) -> Option<i64>,
    ) -> Result<(PlanInput, MemoryPlan), DynamicPlanError> {
        let n = input.input.buffers.len();
        if self.buffers.len() != n {
            return Err(DynamicPlanError::Shape {
                what: "planned buffers",
                expected: n,
                found: self.buffers.len(),
            });
        }
        let evaluated = self.eval(values)?;
        let values = Values(
            self.symbols
                .iter()
                .map(|r| (r.name.clone(), values(&r.name).unwrap_or_default()))
                .collect(),
        );
        let mut point = input.input.clone();
        let mut alias_of = vec![None; n];
        let mut slice_of = vec![None; n];
        for (i, (request, b)) in point.buffers.iter_mut().zip(&self.buffers).enumerate() {
            request.size = eval_bytes(&b.size, &values, &b.name, "size")?;
            request.overlap_of = None;
            request.slice_of = None;
            match &b.offset {
                DynamicOffset::Alias(x) => alias_of[i] = Some(*x),
                DynamicOffset::Slice(p, delta) => {
                    let what = "offset in its Concat";
                    slice_of[i] = Some((*p, eval_bytes(delta, &values, &b.name, what)?));
                    if let Some((q, named)) = input.slice_request(i) {
                        request.slice_of = Some((q, eval_bytes(&named, &values, &b.name, what)?));
                    }
                }
                DynamicOffset::Max(_) => {}
            }
        }
        let invalid = |source| DynamicPlanError::Invalid {
            at: values.to_string(),
            source: Box::new(source),
        };
        let live = analyze(&point).map_err(invalid)?;
        let none = vec![None; n];
        let blocks = alias::merge(&point, &live, &alias_of, &slice_of, &none).map_err(invalid)?;
        let merged = blocks.liveness().map_err(invalid)?;
        let plan = MemoryPlan {
            alignment: live.alignment,
            arena_bytes: evaluated.arena_bytes,
            offsets: evaluated.offsets,
            lifetimes: live.lifetimes.clone(),
            aligned_sizes: live.sizes.clone(),
            naive_bytes: live.naive_bytes,
            lower_bound_bytes: live.lower_bound_bytes,
            peak_step: live.peak_step,
            alias_of,
            in_place_lower_bound_bytes: merged.lower_bound_bytes,
            slice_of,
            overlap_of: none,
            strategy: "dynamic",
            strategies: Vec::new(),
        };
        Ok((point, plan))
    }

    /// Number of buffer ends the offsets and the arena read: the size of the max
    /// operations generated code performs.
    pub fn max_terms(&self) -> usize {
        let lists = self.buffers.iter().map(|b| match &b.offset {
            DynamicOffset::Max(list) => list.len(),
            _ => 0,
        });
        lists.sum::<usize>() + self.top.len()
    }
}

/// Symbol values at one point, sorted by name.
pub(super) struct Values(pub(super) Vec<(Arc<str>, i64)>);

impl Values {
    fn least(symbols: &[SymbolRange]) -> Values {
        Values(
            symbols
                .iter()
                .map(|r| (r.name.clone(), r.min as i64))
                .collect(),
        )
    }

    fn largest(symbols: &[SymbolRange]) -> Values {
        let at = |r: &SymbolRange| i64::try_from(r.largest()).unwrap_or(i64::MAX);
        Values(symbols.iter().map(|r| (r.name.clone(), at(r))).collect())
    }

    pub(super) fn get(&self, name: &str) -> Option<i64> {
        let at = self.0.binary_search_by(|(s, _)| (**s).cmp(name)).ok()?;
        Some(self.0[at].1)
    }
}

impl fmt::Display for Values {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return write!(f, "the only point");
        }
        for (i, (s, v)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{s}={v}")?;
        }
        Ok(())
    }
}

/// `dim` at `values` as a byte count: not negative, no overflow.
fn eval_bytes(
    dim: &Dim,
    values: &Values,
    buffer: &str,
    what: &'static str,
) -> Result<usize, DynamicPlanError> {
    let value = dim
        .eval(&|s| values.get(s))
        .ok_or_else(|| DynamicPlanError::Overflow {
            buffer: buffer.to_owned(),
            what,
            expr: dim.to_string(),
            at: values.to_string(),
        })?;
    usize::try_from(value).map_err(|_| DynamicPlanError::Negative {
        buffer: buffer.to_owned(),
        what,
        expr: dim.to_string(),
        value,
        at: values.to_string(),
    })
}

fn overflow(b: &DynamicBuffer, values: &Values) -> DynamicPlanError {
    DynamicPlanError::Overflow {
        buffer: b.name.clone(),
        what: "offset",
        expr: b.size.to_string(),
        at: values.to_string(),
    }
}

fn malformed(b: &DynamicBuffer, reason: &'static str) -> DynamicPlanError {
    DynamicPlanError::Malformed {
        buffer: b.name.clone(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w() -> Dim {
        Dim::sym("W")
    }

    fn h() -> Dim {
        Dim::sym("H")
    }

    fn point(w: i64, h: i64) -> impl Fn(&str) -> Option<i64> {
        move |s| match s {
            "W" => Some(w),
            "H" => Some(h),
            _ => None,
        }
    }

    /// `a` (steps 0..=1) and `b` (1..=2) conflict; `c` (2..=3) may reuse `a`'s bytes.
    fn three() -> DynamicInput {
        let mut input = DynamicInput::new(4, vec![SymbolRange::new("W", 1, 8)]);
        input.push(BufferRequest::new("a", 0, 0, vec![1]), w() * 256);
        input.push(BufferRequest::new("b", 0, 1, vec![2]), w() * 512);
        input.push(BufferRequest::output("c", 0, 2), w() * 256 + 100);
        input
    }

    #[test]
    fn offsets_follow_the_symbols_in_the_order_of_the_largest_point() {
        let plan = plan_dynamic(&three()).unwrap();
        // At W = 8 the static plan puts b (4 KiB) at 0, then a and c above it.
        assert_eq!(plan.at_max.offsets, vec![4096, 0, 4096]);
        assert_eq!(plan.at_max.arena_bytes, 6400);
        let (a, b) = (BufferId(0), BufferId(1));
        let offsets: Vec<_> = plan.buffers.iter().map(|b| b.offset.clone()).collect();
        use DynamicOffset::Max;
        assert_eq!(offsets, vec![Max(vec![b]), Max(vec![]), Max(vec![b])]);
        assert_eq!(plan.order, vec![b, a, BufferId(2)]);
        assert_eq!(plan.top, vec![a, BufferId(2)]);
        assert_eq!(plan.arena_bytes_max, 6400);
        // W = 2: b holds 1 KiB, c 612 bytes (768 aligned).
        let at2 = plan.eval(&point(2, 0)).unwrap();
        assert_eq!(at2.offsets, vec![1024, 0, 1024]);
        assert_eq!(at2.aligned_sizes, vec![512, 1024, 768]);
        assert_eq!(at2.arena_bytes, 1792);
        assert_eq!(plan.max_terms(), 4);
        assert!(plan.buffers.iter().all(|b| !b.is_reserved()));
    }

    #[test]
    fn a_size_not_provably_monotone_is_reserved_at_its_bound() {
        let mut input = three();
        input.ranges = vec![SymbolRange::new("W", 16, 64)];
        input.sizes[0] = Dim::from(1000usize) - w();
        let plan = plan_dynamic(&input).unwrap();
        let a = &plan.buffers[0];
        assert!(a.is_reserved());
        assert_eq!(a.size, Dim::from(984usize), "1000 - W at W = 16");
        for v in [16, 40, 64] {
            let at = plan.eval(&point(v, 0)).unwrap();
            assert_eq!(at.aligned_sizes[0], 1024, "W = {v}");
        }
        // It does not shrink the arena, b and c still do.
        let (small, large) = (plan.eval(&point(16, 0)), plan.eval(&point(64, 0)));
        assert!(small.unwrap().arena_bytes < large.unwrap().arena_bytes);
    }

    /// conv → bn (over conv) → relu (over bn), 4·W·H bytes each, and x beside them.
    fn chain(bn_size: Dim) -> DynamicInput {
        let ranges = vec![SymbolRange::new("W", 1, 64), SymbolRange::new("H", 1, 8)];
        let mut input = DynamicInput::new(4, ranges);
        let size = w() * h() * 4;
        let conv = input.push(BufferRequest::new("conv", 0, 0, vec![1]), size.clone());
        input.push(BufferRequest::new("x", 0, 0, vec![2]), w() * 64);
        let bn = BufferRequest {
            in_place_of: vec![conv],
            ..BufferRequest::new("bn", 0, 1, vec![2])
        };
        let bn = input.push(bn, bn_size);
        let relu = BufferRequest {
            in_place_of: vec![bn],
            ..BufferRequest::output("relu", 0, 2)
        };
        input.push(relu, size);
        input
    }

    #[test]
    fn an_in_place_chain_shares_its_offset_at_every_point() {
        // H*W*4 is W*H*4: equal as expressions, so the aliases stand.
        let plan = plan_dynamic(&chain(h() * w() * 4)).unwrap();
        assert_eq!(plan.buffers[2].offset, DynamicOffset::Alias(BufferId(0)));
        assert_eq!(plan.buffers[3].offset, DynamicOffset::Alias(BufferId(2)));
        for (wv, hv) in [(1, 1), (7, 3), (64, 8)] {
            let at = plan.eval(&point(wv, hv)).unwrap();
            assert_eq!(at.offsets[0], at.offsets[2]);
            assert_eq!(at.offsets[0], at.offsets[3]);
        }
        // 32·W is 4·W·H at H = 8 only: no alias, though the sizes agree at the max.
        let plan = plan_dynamic(&chain(w() * 32)).unwrap();
        assert!(matches!(plan.buffers[2].offset, DynamicOffset::Max(_)));
        assert_eq!(plan.at_max.alias_of[2], None);
        let at = plan.eval(&point(64, 1)).unwrap();
        assert_ne!(
            at.offsets[0], at.offsets[2],
            "bn needs 8 KiB where conv has 256 B"
        );
    }

    /// A Concat P of c (256·W bytes, at 0) and d (256·H, at 256·W), with t live
    /// between them.
    fn concat(d_delta: Dim) -> DynamicInput {
        let ranges = vec![SymbolRange::new("W", 1, 16), SymbolRange::new("H", 1, 16)];
        let mut input = DynamicInput::new(5, ranges);
        let p = BufferId(3);
        let c = BufferRequest::new("c", 0, 0, vec![3]);
        input.push_slice(c, w() * 256, p, Dim::from(0usize));
        input.push(BufferRequest::new("t", 0, 1, vec![2]), Dim::from(256usize));
        let d = BufferRequest::new("d", 0, 2, vec![3]);
        input.push_slice(d, h() * 256, p, d_delta);
        input.push(BufferRequest::new("P", 0, 3, vec![4]), (w() + h()) * 256);
        input.push(BufferRequest::output("r", 0, 4), Dim::from(256usize));
        input
    }

    #[test]
    fn a_concat_slice_sits_at_its_symbolic_offset() {
        let plan = plan_dynamic(&concat(w() * 256)).unwrap();
        let p = BufferId(3);
        assert_eq!(
            plan.buffers[0].offset,
            DynamicOffset::Slice(p, Dim::from(0usize))
        );
        assert_eq!(plan.buffers[2].offset, DynamicOffset::Slice(p, w() * 256));
        let at = plan.eval(&point(3, 5)).unwrap();
        assert_eq!(at.offsets[2], at.offsets[3] + 768);
        assert_eq!(at.offsets[0], at.offsets[3]);
        // Not always aligned (W·64 with alignment 256): copied instead.
        let plan = plan_dynamic(&concat(w() * 64)).unwrap();
        assert!(matches!(plan.buffers[2].offset, DynamicOffset::Max(_)));
        // On c's bytes when W > 0: not apart from the slice kept before it.
        let plan = plan_dynamic(&concat(Dim::from(0usize))).unwrap();
        assert!(matches!(plan.buffers[2].offset, DynamicOffset::Max(_)));
        // Past P's end when H > 1: not inside its parent.
        let plan = plan_dynamic(&concat(w() * 512)).unwrap();
        assert!(matches!(plan.buffers[2].offset, DynamicOffset::Max(_)));
    }

    #[test]
    fn a_long_in_place_chain_is_one_block() {
        let n = 5000;
        let mut input = DynamicInput::new(n + 1, vec![SymbolRange::new("W", 1, 8)]);
        for i in 0..n {
            let request = BufferRequest {
                in_place_of: (i > 0)
                    .then(|| BufferId(i as u32 - 1))
                    .into_iter()
                    .collect(),
                ..BufferRequest::new(format!("t{i}"), 0, i, vec![i + 1])
            };
            input.push(request, w() * 100);
        }
        let plan = plan_dynamic(&input).unwrap();
        assert_eq!(plan.buffers[0].offset, DynamicOffset::Max(vec![]));
        assert!(
            plan.buffers[1..]
                .iter()
                .enumerate()
                .all(|(i, b)| { b.offset == DynamicOffset::Alias(BufferId(i as u32)) })
        );
        let at = plan.eval(&point(3, 0)).unwrap();
        assert!(at.offsets.iter().all(|&o| o == 0));
        assert_eq!(at.arena_bytes, 512);
    }

    #[test]
    fn a_slice_that_may_be_empty_is_copied() {
        // c holds (W+1)/4 * 256 bytes: none at W = 1..=2, where the static validator
        // would see two slices at offset 0.
        let mut input = concat(w() * 256);
        input.ranges[0] = SymbolRange::new("W", 1, 16);
        input.sizes[0] = (w() + 1usize).div_floor(4) * 256;
        input.slice_deltas[2] = Some(input.sizes[0].clone());
        input.sizes[3] = input.sizes[0].clone() + h() * 256;
        let plan = plan_dynamic(&input).unwrap();
        assert!(matches!(plan.buffers[0].offset, DynamicOffset::Max(_)));
        let delta = input.sizes[0].clone();
        assert_eq!(
            plan.buffers[2].offset,
            DynamicOffset::Slice(BufferId(3), delta)
        );
    }

    #[test]
    fn a_buffer_on_top_of_a_chain_reads_only_the_one_below_it() {
        // a, b, c all live together: stacked, c reads b's end only.
        let mut input = DynamicInput::new(2, vec![SymbolRange::new("W", 1, 4)]);
        for (name, k) in [("a", 3usize), ("b", 2), ("c", 1)] {
            input.push(BufferRequest::new(name, 0, 0, vec![1]), w() * (256 * k));
        }
        let plan = plan_dynamic(&input).unwrap();
        assert_eq!(plan.at_max.offsets, vec![0, 3072, 5120]);
        let lists: Vec<_> = plan.buffers.iter().map(|b| b.offset.clone()).collect();
        use DynamicOffset::Max;
        let ids = [BufferId(0), BufferId(1)];
        assert_eq!(
            lists,
            vec![Max(vec![]), Max(vec![ids[0]]), Max(vec![ids[1]])]
        );
        assert_eq!(plan.top, vec![BufferId(2)]);
        assert_eq!(plan.eval(&point(1, 0)).unwrap().arena_bytes, 1536);
    }

    #[test]
    fn bad_inputs_are_errors_naming_the_buffer_and_symbol() {
        let err = |f: &dyn Fn(&mut DynamicInput)| {
            let mut input = three();
            f(&mut input);
            plan_dynamic(&input).unwrap_err()
        };
        let e = err(&|i| i.sizes[1] = Dim::sym("N") * 4);
        assert_eq!(
            e.to_string(),
            "dynamic memory plan: the size `4*N` of buffer `b` uses `N`, which has no range"
        );
        let e = err(&|i| i.ranges = vec![SymbolRange::new("W", 9, 8)]);
        assert!(matches!(e, DynamicPlanError::BadRange { .. }), "{e}");
        let e = err(&|i| i.ranges.push(SymbolRange::new("W", 1, 2)));
        assert!(matches!(e, DynamicPlanError::BadRange { .. }), "{e}");
        let e = err(&|i| i.ranges = vec![SymbolRange::new("W", 1, u64::MAX)]);
        assert!(matches!(e, DynamicPlanError::BadRange { .. }), "{e}");
        let e = err(&|i| i.sizes[2] = w() - 100);
        assert_eq!(
            e.to_string(),
            "dynamic memory plan: the size `W - 100` of buffer `c` is -99 at W=1"
        );
        let e = err(&|i| i.sizes[2] = Dim::from(5usize) - w() * w());
        assert!(
            matches!(e, DynamicPlanError::Negative { value: -59, .. }),
            "{e}"
        );
        let e = err(&|i| {
            i.ranges = vec![SymbolRange::new("W", 1, 1 << 20)];
            i.sizes[0] = w() * w() * w() * w();
        });
        assert!(matches!(e, DynamicPlanError::Overflow { .. }), "{e}");
        let e = err(&|i| {
            i.sizes.pop();
        });
        assert!(matches!(e, DynamicPlanError::Shape { .. }), "{e}");
        let e = err(&|i| i.input.buffers[0].def = 9);
        assert!(
            matches!(e, DynamicPlanError::Plan(PlanError::DefOutOfRange { .. })),
            "{e}"
        );
        let e = err(&|i| {
            i.input.buffers[0].slice_of = Some((BufferId(1), 0));
            i.slice_deltas[0] = Some(Dim::sym("Q"));
        });
        assert!(matches!(e, DynamicPlanError::Unranged { .. }), "{e}");
    }

    #[test]
    fn eval_needs_every_symbol_in_its_range() {
        let mut input = three();
        input.ranges = vec![SymbolRange {
            step: 2,
            ..SymbolRange::new("W", 2, 8)
        }];
        let plan = plan_dynamic(&input).unwrap();
        assert_eq!(
            plan.eval(&|_| None).unwrap_err(),
            DynamicPlanError::Unbound { symbol: "W".into() }
        );
        for bad in [0, 3, 10, -2] {
            let e = plan.eval(&point(bad, 0)).unwrap_err();
            assert!(
                matches!(e, DynamicPlanError::OutOfRange { .. }),
                "{bad}: {e}"
            );
        }
        assert!(plan.eval(&point(6, 0)).is_ok());
    }

    #[test]
    fn the_validator_rejects_broken_plans() {
        let input = chain(w() * h() * 4);
        let good = plan_dynamic(&input).unwrap();
        validate_dynamic(&input, &good).unwrap();
        let broken = |f: &dyn Fn(&mut DynamicPlan)| {
            let mut plan = good.clone();
            f(&mut plan);
            validate_dynamic(&input, &plan).unwrap_err()
        };
        // conv forgets x below it: the two overlap at every point.
        let below_conv = good.buffers[0].offset.clone();
        assert_eq!(below_conv, DynamicOffset::Max(vec![BufferId(1)]));
        let e = broken(&|p| p.buffers[0].offset = DynamicOffset::Max(vec![]));
        assert!(
            matches!(&e, DynamicPlanError::Invalid { source, .. } if matches!(**source, PlanError::Overlap { .. })),
            "{e}"
        );
        let e = broken(&|p| p.arena_bytes_max -= 1);
        assert!(matches!(e, DynamicPlanError::Bound { .. }), "{e}");
        let e = broken(&|p| p.buffers[3].offset = DynamicOffset::Alias(BufferId(1)));
        assert!(matches!(e, DynamicPlanError::Malformed { .. }), "{e}");
        let e = broken(&|p| p.buffers[1].size = Dim::from(64usize) - w());
        assert!(matches!(e, DynamicPlanError::Malformed { .. }), "{e}");
        let e = broken(&|p| {
            p.order.pop();
        });
        assert!(matches!(e, DynamicPlanError::Malformed { .. }), "{e}");
        // A reservation smaller than the request at some point.
        let e = broken(&|p| p.buffers[1].size = Dim::from(256usize));
        assert!(matches!(e, DynamicPlanError::Bound { .. }), "{e}");
        // The top list missing the highest block: the arena ends too early.
        let e = broken(&|p| p.top.clear());
        assert!(matches!(e, DynamicPlanError::Invalid { .. }), "{e}");
    }
}
