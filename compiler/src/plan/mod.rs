//! Static memory planning: give every buffer a fixed byte offset in one arena.
//!
//! The planner knows nothing about ONNX, kernels or targets. It sees a list of
//! [`BufferRequest`]s over a fixed execution order of `steps` steps and returns a
//! [`MemoryPlan`]: one aligned offset per buffer such that two buffers that are live
//! at the same step never share a byte.
//!
//! A buffer may name inputs its writer could overwrite ([`BufferRequest::in_place_of`]:
//! elementwise and row-wise kernels); where such an input dies at that step, the
//! planner puts the output over it (in place), and the two share bytes.
//! A Concat's input may name the Concat's output and its byte offset there
//! ([`BufferRequest::slice_of`]); where the Concat is its last reader, the planner may
//! place it there (a slice), reserving the output from the slice's first step, so the
//! Concat need not copy it ([`MemoryPlan::slice_of`]).
//! A pooling output may name its input and the kernel's plane order
//! ([`BufferRequest::overlap_of`]); where the input dies there, the planner may start
//! the output inside the input, as close as the plane order allows (segment
//! overlapping, [`MemoryPlan::overlap_of`]).
//!
//! One pass per module, each with one entry point:
//!
//! 1. [`liveness::analyze`] — lifetimes, aligned sizes, the naive total and the
//!    liveness lower bound (no arena without aliasing can be smaller).
//!    [`alias::choose`] keeps the legal in-place candidates, [`overlap::choose`] the
//!    legal segment overlaps and [`alias::choose_slices`] the legal Concat slices that
//!    do not raise the bound, and [`alias::merge`] makes every chain of aliases and
//!    overlaps, and every parent with its slices, one block; the strategies place
//!    blocks.
//! 2. [`interference`] — which buffers conflict: adjacency lists built by a sweep
//!    line when the edges are few (as in real models), else a segment tree over
//!    time queried on demand; never an O(n²) matrix.
//! 3. Strategies, all tried: [`offsets::greedy_by_size`] and
//!    [`offsets::greedy_by_breadth`] (TFLite-GPU's offset planners),
//!    [`pools::plan_pools`] (seed 000's colouring into pools laid end to end), and
//!    [`improve::local_search`] (the better greedy order, improved by a bounded
//!    local search), each with the in-place aliases and slices, with the aliases only,
//!    both again with the overlaps, and without any alias. The smallest arena wins;
//!    ties go to the earlier set, then to the first in [`Strategy::ALL`].
//! 4. [`validate::validate`] — an independent checker run on every candidate.
//! 5. [`report`] — a text table and a JSON document for humans and tools;
//!    [`svg::svg`] — the arena as a picture (time × offset).
//!
//! Dynamic shapes: [`dynamic::plan_dynamic`] packs symbolic sizes once, at the
//! largest point of their ranges, keeping the order as offsets computed at run time;
//! [`validate_dynamic::validate_dynamic`] is its checker.
//!
//! Invariants of a returned plan (checked by the validator): every offset is a
//! multiple of `alignment`; every buffer lies inside `arena_bytes`; `arena_bytes`
//! is exactly the largest end; two buffers whose inclusive lifetimes intersect
//! occupy disjoint byte ranges, unless one is the legal in-place alias of the other
//! ([`MemoryPlan::alias_of`]), and then they occupy the very same bytes, or a slice
//! of the other ([`MemoryPlan::slice_of`]), and then it lies inside it and nothing
//! else touches the parent's bytes from the slice's first step on, or an overlap of
//! the other ([`MemoryPlan::overlap_of`]), and then no output plane lands on an input
//! plane before the kernel has read it; zero-size
//! buffers sit at offset 0 and conflict with nothing.

use std::fmt;

pub mod alias;
pub mod dynamic;
pub mod improve;
pub mod interference;
pub mod liveness;
pub mod offsets;
pub mod overlap;
pub mod pools;
pub mod report;
mod strategy;
pub mod svg;
pub mod validate;
pub mod validate_dynamic;

#[cfg(test)]
mod dynamic_proptests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod simulate;
#[cfg(test)]
mod testutil;

pub use liveness::{Liveness, analyze};
pub use overlap::PlaneOrder;
pub use report::{json_report, text_report};
pub use strategy::Strategy;
pub use svg::svg;
pub use validate::validate;

/// Alignment used when a caller has no stronger requirement: enough for AVX-512
/// and for CUDA's 256-byte allocation granularity.
pub const DEFAULT_ALIGNMENT: usize = 256;

/// A typed index of a buffer in a [`PlanInput`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub u32);

impl BufferId {
    /// The position of this buffer in [`PlanInput::buffers`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for BufferId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "buffer#{}", self.0)
    }
}

/// One tensor (or kernel scratch area) that needs arena memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferRequest {
    pub name: String,
    /// Bytes, unaligned.
    pub size: usize,
    /// Step index that writes it.
    pub def: usize,
    /// Step indices that read it (may be empty).
    pub uses: Vec<usize>,
    /// Graph outputs: live until the last step.
    pub live_to_end: bool,
    /// Kernel scratch: lives only during `def`.
    pub scratch: bool,
    /// Buffers the step `def` may write this one over, in order of preference: its
    /// kernel reads each element of such an input before writing the same element of
    /// the output. The planner keeps one where it is legal ([`alias`]).
    pub in_place_of: Vec<BufferId>,
    /// `(parent, delta)`: the step writing `parent` only copies this buffer, unchanged,
    /// to bytes `delta..` of it (a Concat's input). The planner may place this buffer
    /// there, a slice of its parent, so that the copy disappears ([`alias`]).
    pub slice_of: Option<(BufferId, usize)>,
    /// `(input, order)`: the step `def` reads that input and writes this buffer plane by
    /// plane in `order`, so this buffer may start inside the input ([`overlap`]).
    pub overlap_of: Option<(BufferId, PlaneOrder)>,
}

impl BufferRequest {
    /// An ordinary intermediate tensor written at `def` and read at `uses`.
    pub fn new(name: impl Into<String>, size: usize, def: usize, uses: Vec<usize>) -> Self {
        Self {
            name: name.into(),
            size,
            def,
            uses,
            live_to_end: false,
            scratch: false,
            in_place_of: Vec::new(),
            slice_of: None,
            overlap_of: None,
        }
    }

    /// A graph output: written at `def`, live until the last step.
    pub fn output(name: impl Into<String>, size: usize, def: usize) -> Self {
        Self {
            live_to_end: true,
            ..Self::new(name, size, def, Vec::new())
        }
    }

    /// Kernel scratch space, live only while step `step` runs.
    pub fn scratch(name: impl Into<String>, size: usize, step: usize) -> Self {
        Self {
            scratch: true,
            ..Self::new(name, size, step, Vec::new())
        }
    }
}

/// Everything the planner needs: an execution order and the buffers over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanInput {
    /// Number of steps in the execution order.
    pub steps: usize,
    /// One name per step, for reports; may be empty.
    pub step_names: Vec<String>,
    pub buffers: Vec<BufferRequest>,
    /// Power of two, [`DEFAULT_ALIGNMENT`] unless the target needs more.
    pub alignment: usize,
    /// Names that are views of a buffer (reshapes: same bytes, no memory of their
    /// own), for reports only; planning ignores them.
    pub views: Vec<(String, BufferId)>,
}

impl PlanInput {
    /// An empty input over `steps` unnamed steps with the default alignment.
    pub fn new(steps: usize) -> Self {
        Self {
            steps,
            step_names: Vec::new(),
            buffers: Vec::new(),
            alignment: DEFAULT_ALIGNMENT,
            views: Vec::new(),
        }
    }

    /// Adds a buffer and returns its id (ids are positions, in push order).
    pub fn push(&mut self, buffer: BufferRequest) -> BufferId {
        // Inputs with that many buffers are rejected by `plan`, so the saturation
        // here can only affect an input that never plans.
        let id = BufferId(u32::try_from(self.buffers.len()).unwrap_or(u32::MAX));
        self.buffers.push(buffer);
        id
    }

    /// The name of step `step` for messages: its given name, or `step N`.
    pub fn step_name(&self, step: usize) -> String {
        match self.step_names.get(step) {
            Some(name) => name.clone(),
            None => format!("step {step}"),
        }
    }
}

/// An inclusive range of steps during which a buffer's bytes must be kept.
///
/// Inclusive on both ends because an output written at step `s` and an input
/// last read at step `s` are both in use while `s` runs; only a recorded in-place
/// alias lets the two share bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lifetime {
    pub first: usize,
    pub last: usize,
}

impl Lifetime {
    pub fn new(first: usize, last: usize) -> Self {
        Self { first, last }
    }

    /// No step belongs to both.
    pub fn is_disjoint(&self, other: &Lifetime) -> bool {
        self.last < other.first || other.last < self.first
    }

    /// Some step belongs to both: the two buffers conflict.
    pub fn overlaps(&self, other: &Lifetime) -> bool {
        !self.is_disjoint(other)
    }

    pub fn contains(&self, step: usize) -> bool {
        self.first <= step && step <= self.last
    }

    /// Number of steps, at least 1 (saturates for a range covering all of usize).
    pub fn len(&self) -> usize {
        self.last.saturating_sub(self.first).saturating_add(1)
    }

    /// Never true: a lifetime holds at least its defining step. Present for clippy's
    /// `len_without_is_empty` and for symmetry with ranges.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl fmt::Display for Lifetime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={}", self.first, self.last)
    }
}

/// The planner's result: one offset per buffer in a single arena.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPlan {
    pub alignment: usize,
    /// max(offset + aligned size) over all buffers; 0 when nothing needs memory.
    pub arena_bytes: usize,
    /// Per [`BufferId`]: byte offset, a multiple of `alignment`.
    pub offsets: Vec<usize>,
    /// Per [`BufferId`]: the inclusive step range the offset is reserved for.
    pub lifetimes: Vec<Lifetime>,
    /// Per [`BufferId`]: the size rounded up to `alignment` (what the arena reserves).
    pub aligned_sizes: Vec<usize>,
    /// Sum of aligned sizes: the arena with no reuse at all.
    pub naive_bytes: usize,
    /// max over steps of the aligned bytes live at that step.
    pub lower_bound_bytes: usize,
    /// The first step where `lower_bound_bytes` is reached (None when it is 0).
    pub peak_step: Option<usize>,
    /// Per [`BufferId`]: the buffer it is written over in place (same offset; that
    /// input dies at the step that writes this one), or None.
    pub alias_of: Vec<Option<BufferId>>,
    /// max over steps of the aligned bytes live at that step, a buffer and the one it
    /// is written over counting once, and a slice not at all (its parent counting from
    /// the slice's first step): no arena with these aliases and slices can be smaller.
    /// Equal to `lower_bound_bytes` without aliases.
    pub in_place_lower_bound_bytes: usize,
    /// Per [`BufferId`]: the buffer it is a slice of and the byte offset inside it
    /// (`offset = parent's offset + delta`): a Concat's input placed where the Concat
    /// would copy it, so the Concat does not; or None.
    pub slice_of: Vec<Option<(BufferId, usize)>>,
    /// Per [`BufferId`]: the input it overlaps and its offset minus that input's, in
    /// bytes (segment overlapping: the input dies at the step that writes this one,
    /// which writes no plane over an input plane it has not read); or None.
    pub overlap_of: Vec<Option<(BufferId, isize)>>,
    /// Name of the strategy that produced `offsets`.
    pub strategy: &'static str,
    /// Every strategy tried: with the in-place aliases (when there are any), then
    /// without, each in [`Strategy::ALL`] order.
    pub strategies: Vec<Tried>,
}

/// One strategy's result in [`MemoryPlan::strategies`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tried {
    pub strategy: &'static str,
    /// Whether it placed the buffers with their in-place aliases.
    pub in_place: bool,
    /// Whether it placed the buffers with their Concat slices too.
    pub slices: bool,
    /// Whether it placed the buffers with their segment overlaps too.
    pub overlaps: bool,
    pub arena_bytes: usize,
}

impl MemoryPlan {
    /// Offset of `id`, if it is a buffer of this plan.
    pub fn offset(&self, id: BufferId) -> Option<usize> {
        self.offsets.get(id.index()).copied()
    }

    /// The buffer `id` is written over in place, if any.
    pub fn alias(&self, id: BufferId) -> Option<BufferId> {
        self.alias_of.get(id.index()).copied().flatten()
    }

    /// Number of buffers written in place over another.
    pub fn in_place_count(&self) -> usize {
        self.alias_of.iter().flatten().count()
    }

    /// The buffer `id` is a slice of, and its byte offset inside it, if any.
    pub fn slice(&self, id: BufferId) -> Option<(BufferId, usize)> {
        self.slice_of.get(id.index()).copied().flatten()
    }

    /// Number of buffers placed as slices of a Concat's output.
    pub fn slice_count(&self) -> usize {
        self.slice_of.iter().flatten().count()
    }

    /// The input `id` overlaps and its byte distance from it, if any.
    pub fn overlap(&self, id: BufferId) -> Option<(BufferId, isize)> {
        self.overlap_of.get(id.index()).copied().flatten()
    }

    /// Number of outputs placed overlapping their input.
    pub fn overlap_count(&self) -> usize {
        self.overlap_of.iter().flatten().count()
    }

    /// `offset..offset + aligned size` of `id`, if it is a buffer of this plan.
    pub fn byte_range(&self, id: BufferId) -> Option<std::ops::Range<usize>> {
        let offset = self.offset(id)?;
        let size = *self.aligned_sizes.get(id.index())?;
        Some(offset..offset.checked_add(size)?)
    }
}

/// Errors of planning: bad input, arithmetic overflow, or a plan the validator rejects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("memory plan: alignment must be a power of two, got {alignment}")]
    BadAlignment { alignment: usize },
    #[error("memory plan: {names} step names were given for {steps} steps")]
    StepNames { steps: usize, names: usize },
    #[error("memory plan: {count} buffers is more than the {max} a BufferId can number")]
    TooManyBuffers { count: usize, max: usize },
    #[error(
        "memory plan: buffer `{buffer}` is written at step {def}, but there are only {steps} steps"
    )]
    DefOutOfRange {
        buffer: String,
        def: usize,
        steps: usize,
    },
    #[error(
        "memory plan: buffer `{buffer}` is read at step {step}, but there are only {steps} steps"
    )]
    UseOutOfRange {
        buffer: String,
        step: usize,
        steps: usize,
    },
    #[error(
        "memory plan: buffer `{buffer}` is read at step {step}, before step {def} that writes it"
    )]
    UseBeforeDef {
        buffer: String,
        step: usize,
        def: usize,
    },
    #[error(
        "memory plan: scratch buffer `{buffer}` lives only during step {def} but is read at step {step}"
    )]
    ScratchUsedLater {
        buffer: String,
        def: usize,
        step: usize,
    },
    #[error("memory plan: buffer `{buffer}` is marked both scratch and live-to-end")]
    ScratchLiveToEnd { buffer: String },
    #[error("memory plan: size arithmetic overflows usize: {what}")]
    Overflow { what: String },
    #[error("memory plan: {id} does not exist (the input has {count} buffers)")]
    UnknownBuffer { id: BufferId, count: usize },
    #[error("memory plan: no strategy was given")]
    NoStrategy,
    #[error("invalid memory plan: it has {found} {what} for {expected} buffers")]
    PlanShape {
        what: &'static str,
        expected: usize,
        found: usize,
    },
    #[error("invalid memory plan: its alignment {found} differs from the requested {expected}")]
    AlignmentMismatch { expected: usize, found: usize },
    #[error(
        "invalid memory plan: buffer `{buffer}` is given {what} {found}, but its request gives {expected}"
    )]
    Mismatch {
        buffer: String,
        what: &'static str,
        expected: String,
        found: String,
    },
    #[error(
        "invalid memory plan: buffer `{buffer}` at offset {offset} is not a multiple of the alignment {alignment}"
    )]
    Misaligned {
        buffer: String,
        offset: usize,
        alignment: usize,
    },
    #[error(
        "invalid memory plan: buffer `{buffer}` occupies bytes {offset}..{end}, past the arena's {arena_bytes} bytes"
    )]
    OutOfArena {
        buffer: String,
        offset: usize,
        end: usize,
        arena_bytes: usize,
    },
    #[error(
        "invalid memory plan: buffers `{a}` (steps {a_life}, bytes {a_offset}..{a_end}) and `{b}` (steps {b_life}, bytes {b_offset}..{b_end}) are live at the same time and share bytes"
    )]
    Overlap {
        a: String,
        a_life: Lifetime,
        a_offset: usize,
        a_end: usize,
        b: String,
        b_life: Lifetime,
        b_offset: usize,
        b_end: usize,
    },
    #[error("invalid memory plan: {what} is {claimed}, but the buffers give {actual}")]
    TotalMismatch {
        what: &'static str,
        claimed: usize,
        actual: usize,
    },
    #[error(
        "invalid memory plan: buffer `{buffer}` is written in place over `{input}`, which {reason}"
    )]
    BadAlias {
        buffer: String,
        input: String,
        reason: String,
    },
    #[error(
        "invalid memory plan: buffer `{buffer}` is placed as a slice of `{parent}`, but {reason}"
    )]
    BadSlice {
        buffer: String,
        parent: String,
        reason: String,
    },
    #[error(
        "invalid memory plan: buffer `{buffer}` is placed overlapping its input `{input}`, which {reason}"
    )]
    BadOverlap {
        buffer: String,
        input: String,
        reason: String,
    },
    #[error(
        "memory plan: strategy `{strategy}` produced an invalid plan (a planner bug): {source}"
    )]
    StrategyBug {
        strategy: &'static str,
        #[source]
        source: Box<PlanError>,
    },
}

/// Plans `input` with every strategy and keeps the smallest valid arena.
pub fn plan(input: &PlanInput) -> Result<MemoryPlan, PlanError> {
    plan_with(input, Strategy::ALL)
}

/// Plans `input` with the given strategies, in order: with the legal in-place aliases
/// and Concat slices, with the aliases only, then both again with the legal segment
/// overlaps, then without any alias; the smallest arena wins and ties go to the
/// earlier (so slices are kept when they cost nothing: the same arena, fewer copies;
/// and an overlap only where it makes the arena smaller). Every candidate goes through
/// the validator: one that fails is a planner bug and is returned as
/// [`PlanError::StrategyBug`].
pub fn plan_with(input: &PlanInput, strategies: &[Strategy]) -> Result<MemoryPlan, PlanError> {
    let live = liveness::analyze(input)?;
    let none = Aliases::none(live.len());
    let alias_of = alias::choose(input, &live);
    let overlap_of = overlap::choose(input, &live, &alias_of)?;
    let mut sets: Vec<Aliases> = Vec::new();
    let mut overlap_sets = vec![none.overlap_of.clone()];
    if overlap_of.iter().any(Option::is_some) {
        overlap_sets.push(overlap_of);
    }
    for overlap_of in overlap_sets {
        let slice_of = alias::choose_slices(input, &live, &alias_of, &overlap_of)?;
        for slice_of in [slice_of, none.slice_of.clone()] {
            let set = Aliases {
                alias_of: alias_of.clone(),
                slice_of,
                overlap_of: overlap_of.clone(),
            };
            if set != none && !sets.contains(&set) {
                sets.push(set);
            }
        }
    }
    let mut best: Option<MemoryPlan> = None;
    let mut tried = Vec::with_capacity((sets.len() + 1) * strategies.len());
    for set in sets {
        let blocks = alias::merge(input, &live, &set.alias_of, &set.slice_of, &set.overlap_of)?;
        let merged = blocks.liveness()?;
        let expand = |offsets: Vec<usize>| -> Vec<usize> {
            blocks
                .block_of
                .iter()
                .zip(&blocks.delta)
                .map(|(&b, &d)| offsets[b] + d)
                .collect()
        };
        let run = Run {
            live: &live,
            placed: &merged,
            set,
            expand: &expand,
        };
        run.strategies(input, strategies, &mut best, &mut tried)?;
    }
    let run = Run {
        live: &live,
        placed: &live,
        set: none,
        expand: &|offsets: Vec<usize>| offsets,
    };
    run.strategies(input, strategies, &mut best, &mut tried)?;
    let mut best = best.ok_or(PlanError::NoStrategy)?;
    best.strategies = tried;
    Ok(best)
}

/// One choice of aliases the strategies place with, per buffer.
#[derive(Clone, PartialEq, Eq)]
struct Aliases {
    alias_of: Vec<Option<BufferId>>,
    slice_of: Vec<Option<(BufferId, usize)>>,
    overlap_of: Vec<Option<(BufferId, isize)>>,
}

impl Aliases {
    fn none(n: usize) -> Self {
        Aliases {
            alias_of: vec![None; n],
            slice_of: vec![None; n],
            overlap_of: vec![None; n],
        }
    }
}

/// One way of placing the buffers: what the strategies place (`placed`: the buffers
/// themselves, or blocks of aliases and slices) and how their offsets become the
/// buffers'.
struct Run<'a> {
    live: &'a Liveness,
    placed: &'a Liveness,
    set: Aliases,
    expand: &'a dyn Fn(Vec<usize>) -> Vec<usize>,
}

impl Run<'_> {
    /// Runs every strategy, validates each plan, records it in `tried` and keeps the
    /// smallest in `best` (an earlier one on ties).
    fn strategies(
        &self,
        input: &PlanInput,
        strategies: &[Strategy],
        best: &mut Option<MemoryPlan>,
        tried: &mut Vec<Tried>,
    ) -> Result<(), PlanError> {
        let live = self.live;
        let in_place = self.set.alias_of.iter().any(Option::is_some);
        let slices = self.set.slice_of.iter().any(Option::is_some);
        let overlaps = self.set.overlap_of.iter().any(Option::is_some);
        let mut shared = strategy::Shared::new(self.placed);
        for &strategy in strategies {
            // Pool colouring places whole pools and cannot keep two blocks tied.
            if strategy == Strategy::Pools && self.placed.has_ties() {
                continue;
            }
            let offsets = (self.expand)(strategy.offsets_shared(&mut shared)?);
            let arena_bytes = arena_end(&offsets, &live.sizes)?;
            let candidate = MemoryPlan {
                alignment: live.alignment,
                arena_bytes,
                offsets,
                lifetimes: live.lifetimes.clone(),
                aligned_sizes: live.sizes.clone(),
                naive_bytes: live.naive_bytes,
                lower_bound_bytes: live.lower_bound_bytes,
                peak_step: live.peak_step,
                alias_of: self.set.alias_of.clone(),
                in_place_lower_bound_bytes: self.placed.lower_bound_bytes,
                slice_of: self.set.slice_of.clone(),
                overlap_of: self.set.overlap_of.clone(),
                strategy: strategy.name(),
                strategies: Vec::new(),
            };
            validate(input, &candidate).map_err(|source| PlanError::StrategyBug {
                strategy: strategy.name(),
                source: Box::new(source),
            })?;
            tried.push(Tried {
                strategy: strategy.name(),
                in_place,
                slices,
                overlaps,
                arena_bytes,
            });
            if best
                .as_ref()
                .is_none_or(|b| candidate.arena_bytes < b.arena_bytes)
            {
                *best = Some(candidate);
            }
        }
        Ok(())
    }
}

/// The largest `offset + size` over buffers that need memory (checked).
fn arena_end(offsets: &[usize], sizes: &[usize]) -> Result<usize, PlanError> {
    let mut arena = 0usize;
    for (&offset, &size) in offsets.iter().zip(sizes) {
        if size == 0 {
            continue;
        }
        let end = offset
            .checked_add(size)
            .ok_or_else(|| PlanError::Overflow {
                what: format!("buffer end {offset} + {size}"),
            })?;
        arena = arena.max(end);
    }
    Ok(arena)
}

#[cfg(test)]
mod tests {
    use super::testutil::seed_003_example;
    use super::*;

    const KB: usize = 1024;

    #[test]
    fn seed_003_example_plans_to_230_kb() {
        let input = seed_003_example();
        let plan = plan(&input).unwrap();
        assert_eq!(plan.naive_bytes, 330 * KB);
        assert_eq!(plan.lower_bound_bytes, 230 * KB);
        assert_eq!(plan.arena_bytes, 230 * KB);
        assert_eq!(plan.strategy, "greedy-by-size");
        let tried: Vec<_> = plan
            .strategies
            .iter()
            .map(|t| (t.strategy, t.in_place, t.arena_bytes))
            .collect();
        assert_eq!(
            tried,
            vec![
                ("greedy-by-size", false, 230 * KB),
                ("greedy-by-breadth", false, 230 * KB),
                ("pools", false, 230 * KB),
                ("local-search", false, 230 * KB)
            ]
        );
        assert_eq!(plan.alias_of, vec![None; 4]);
        assert_eq!(plan.in_place_lower_bound_bytes, 230 * KB);
        // T1 at 0, T2 stacked on T3 on T1, T4 reuses T1's bytes.
        assert_eq!(plan.offsets, vec![0, 180 * KB, 100 * KB, 0]);
        assert_eq!(plan.peak_step, Some(3));
    }

    #[test]
    fn empty_input_plans_to_an_empty_arena() {
        let plan = plan(&PlanInput::new(0)).unwrap();
        assert_eq!(plan.arena_bytes, 0);
        assert_eq!(plan.naive_bytes, 0);
        assert_eq!(plan.lower_bound_bytes, 0);
        assert_eq!(plan.peak_step, None);
        assert!(plan.offsets.is_empty());
    }

    #[test]
    fn zero_size_buffers_sit_at_zero_and_conflict_with_nothing() {
        let mut input = PlanInput::new(2);
        input.push(BufferRequest::new("a", 100, 0, vec![1]));
        input.push(BufferRequest::new("empty", 0, 0, vec![1]));
        input.push(BufferRequest::new("b", 100, 1, vec![]));
        let plan = plan(&input).unwrap();
        assert_eq!(plan.offsets, vec![0, 0, 256]);
        assert_eq!(plan.arena_bytes, 512);
        assert_eq!(plan.aligned_sizes, vec![256, 0, 256]);
    }

    #[test]
    fn output_read_and_written_at_the_same_step_conflict() {
        // x is last read at step 1, y is written at step 1: no in-place reuse.
        let mut input = PlanInput::new(2);
        input.push(BufferRequest::new("x", 256, 0, vec![1]));
        input.push(BufferRequest::output("y", 256, 1));
        let plan = plan(&input).unwrap();
        assert_eq!(plan.arena_bytes, 512);
        // ... whereas a buffer written after x's last read reuses it.
        let mut input = PlanInput::new(3);
        input.push(BufferRequest::new("x", 256, 0, vec![1]));
        input.push(BufferRequest::output("y", 256, 2));
        assert_eq!(super::plan(&input).unwrap().arena_bytes, 256);
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        let mut input = seed_003_example();
        input.alignment = 3;
        assert_eq!(plan(&input), Err(PlanError::BadAlignment { alignment: 3 }));
        input.alignment = 0;
        assert!(matches!(plan(&input), Err(PlanError::BadAlignment { .. })));

        let mut input = PlanInput::new(2);
        input.push(BufferRequest::new("late", 1, 2, vec![]));
        assert!(matches!(plan(&input), Err(PlanError::DefOutOfRange { .. })));

        let mut input = PlanInput::new(3);
        input.push(BufferRequest::new("early", 1, 2, vec![1]));
        let err = plan(&input).unwrap_err();
        assert_eq!(
            err.to_string(),
            "memory plan: buffer `early` is read at step 1, before step 2 that writes it"
        );

        let mut input = PlanInput::new(3);
        input.push(BufferRequest::new("far", 1, 0, vec![3]));
        assert!(matches!(plan(&input), Err(PlanError::UseOutOfRange { .. })));

        let mut input = PlanInput::new(3);
        input.push(BufferRequest {
            uses: vec![1],
            ..BufferRequest::scratch("tmp", 1, 0)
        });
        assert!(matches!(
            plan(&input),
            Err(PlanError::ScratchUsedLater { .. })
        ));

        let mut input = PlanInput::new(3);
        input.push(BufferRequest {
            live_to_end: true,
            ..BufferRequest::scratch("tmp", 1, 0)
        });
        assert!(matches!(
            plan(&input),
            Err(PlanError::ScratchLiveToEnd { .. })
        ));

        let mut input = PlanInput::new(1);
        input.push(BufferRequest::new("huge", usize::MAX - 3, 0, vec![]));
        assert!(matches!(plan(&input), Err(PlanError::Overflow { .. })));

        let mut input = PlanInput::new(1);
        input.push(BufferRequest::new("half", usize::MAX / 2, 0, vec![]));
        input.push(BufferRequest::new("half2", usize::MAX / 2, 0, vec![]));
        assert!(matches!(plan(&input), Err(PlanError::Overflow { .. })));

        let mut input = PlanInput::new(2);
        input.step_names = vec!["only one".into()];
        assert!(matches!(plan(&input), Err(PlanError::StepNames { .. })));

        assert_eq!(
            plan_with(&seed_003_example(), &[]),
            Err(PlanError::NoStrategy)
        );
    }

    #[test]
    fn a_huge_step_count_does_not_allocate_per_step() {
        let mut input = PlanInput::new(usize::MAX);
        input.push(BufferRequest::new("a", 10, 0, vec![usize::MAX - 1]));
        input.push(BufferRequest::output("b", 10, usize::MAX / 2));
        input.push(BufferRequest::scratch("c", 10, 5));
        let plan = plan(&input).unwrap();
        assert_eq!(plan.lower_bound_bytes, 512);
        assert_eq!(plan.arena_bytes, 512);
        assert_eq!(
            plan.lifetimes[1],
            Lifetime::new(usize::MAX / 2, usize::MAX - 1)
        );
    }

    #[test]
    fn lifetime_predicates() {
        let a = Lifetime::new(2, 4);
        assert!(a.overlaps(&Lifetime::new(4, 9)));
        assert!(a.overlaps(&Lifetime::new(0, 2)));
        assert!(a.overlaps(&Lifetime::new(3, 3)));
        assert!(a.is_disjoint(&Lifetime::new(5, 9)));
        assert!(a.is_disjoint(&Lifetime::new(0, 1)));
        assert_eq!(a.len(), 3);
        assert!(a.contains(4) && !a.contains(5));
        assert_eq!(a.to_string(), "2..=4");
        assert_eq!(Lifetime::new(0, usize::MAX).len(), usize::MAX);
    }

    /// A measurement, not a timed assertion. By hand, in release:
    /// `cargo test --release -p kiln-compiler --lib plan::tests::planning_time -- --ignored --nocapture`
    #[test]
    #[ignore = "a measurement, run by hand in release"]
    fn planning_time_of_network_like_inputs() {
        for n in [1_000, 10_000, 100_000] {
            let input = super::testutil::network_like(n, 42);
            let start = std::time::Instant::now();
            let plan = plan(&input).unwrap();
            let elapsed = start.elapsed();
            println!(
                "{n:>6} buffers: {:>7.1} ms, arena / lower bound {:.3}, by {}",
                elapsed.as_secs_f64() * 1e3,
                plan.arena_bytes as f64 / plan.lower_bound_bytes as f64,
                plan.strategy
            );
        }
    }

    #[test]
    fn byte_range_of_a_buffer() {
        let plan = plan(&seed_003_example()).unwrap();
        assert_eq!(plan.byte_range(BufferId(2)), Some(100 * KB..180 * KB));
        assert_eq!(plan.byte_range(BufferId(9)), None);
    }
}
