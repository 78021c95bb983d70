//! Pass 3a: offset strategies from TFLite-GPU (Pisarchyk & Lee 2020, "Efficient
//! Memory Management for Deep Neural Net Inference").
//!
//! Both place one buffer at a time with the same rule ([`OffsetAllocator::place`]):
//! among the already placed buffers whose lifetimes intersect it, sorted by
//! offset, take the smallest gap that fits (best fit), else go on top of the
//! highest of them. They differ only in the order buffers arrive:
//!
//! - [`greedy_by_size`]: largest first. Big buffers are the hardest to fit, and
//!   small ones slot into the holes they leave.
//! - [`greedy_by_breadth`]: steps by how many bytes are live there, busiest first;
//!   each step's not yet placed buffers by size. The peak step is laid out
//!   tightly before anything can fragment it.
//!
//! Cost per buffer: O(log n + k log k), k = conflicting buffers already placed.

use super::interference::{OverlapIndex, SegmentLists, TimeAxis};
use super::{BufferId, Liveness, PlanError};

const UNPLACED: usize = usize::MAX;

/// Places buffers one at a time at best-fit offsets, never under a conflicting
/// buffer already placed.
#[derive(Debug, Clone)]
pub struct OffsetAllocator<'a> {
    live: &'a Liveness,
    index: OverlapIndex,
    /// Per buffer: its byte range `(offset, end)`, or `(UNPLACED, _)`. (No placed
    /// buffer can start at usize::MAX: zero-size ones sit at 0, others must end
    /// within usize.) Start and end side by side: a placement reads them for every
    /// conflicting buffer, at random places, so one cache miss instead of two.
    placed: Vec<(usize, usize)>,
    // Reused across calls to avoid an allocation per buffer.
    neighbours: Vec<BufferId>,
    spans: Vec<(usize, usize)>,
    /// Placed buffers the last placement stepped around (its cost, for budgets).
    conflicts: usize,
}

impl<'a> OffsetAllocator<'a> {
    pub fn new(live: &'a Liveness) -> Self {
        Self::with_index(live, OverlapIndex::new(live))
    }

    /// Over an index already built for `live` (emptied first), so that strategies
    /// planning the same buffers build it once.
    pub(crate) fn with_index(live: &'a Liveness, mut index: OverlapIndex) -> Self {
        index.clear();
        Self {
            live,
            index,
            placed: vec![(UNPLACED, UNPLACED); live.len()],
            neighbours: Vec::new(),
            spans: Vec::new(),
            conflicts: 0,
        }
    }

    /// Where `id` was placed, if it was.
    pub fn offset(&self, id: BufferId) -> Option<usize> {
        self.placed
            .get(id.index())
            .map(|&(o, _)| o)
            .filter(|&o| o != UNPLACED)
    }

    /// Places `id` (again: returns its offset if already placed). Zero-size buffers
    /// go to offset 0 and block nothing.
    pub fn place(&mut self, id: BufferId) -> Result<usize, PlanError> {
        self.conflicts = 0;
        let (slot, _) = *self
            .placed
            .get(id.index())
            .ok_or(PlanError::UnknownBuffer {
                id,
                count: self.placed.len(),
            })?;
        if slot != UNPLACED {
            return Ok(slot);
        }
        let size = self.live.size(id);
        if size == 0 {
            self.placed[id.index()] = (0, 0);
            return Ok(0);
        }
        if let Some((partner, distance)) = self.live.tie(id) {
            // Placed with its partner, so never alone; a restore may have placed
            // the partner first, then `id` goes where the tie says.
            if let Some(at) = self.offset(partner) {
                let at = at.checked_add_signed(-distance).unwrap_or(usize::MAX);
                self.restore(id, at);
                return Ok(at);
            }
            return self.place_tied(id, partner, distance);
        }

        self.neighbours.clear();
        self.index.overlapping(id, &mut self.neighbours);
        self.spans.clear();
        // Only placed buffers are in the index.
        let placed = &self.placed;
        self.spans
            .extend(self.neighbours.iter().map(|n| placed[n.index()]));
        self.spans.sort_unstable();
        self.conflicts = self.spans.len();

        // Walk the conflicting buffers bottom-up; `top` is the highest end so far,
        // so a start above it opens a free gap [top, start).
        let mut top = 0usize;
        let mut best: Option<(usize, usize)> = None; // (gap, offset)
        for &(start, end) in &self.spans {
            if start > top {
                let gap = start - top;
                if gap >= size && best.is_none_or(|(g, _)| gap < g) {
                    best = Some((gap, top));
                    if gap == size {
                        break;
                    }
                }
            }
            top = top.max(end);
        }
        let offset = best.map_or(top, |(_, offset)| offset);
        let Some(end) = offset.checked_add(size) else {
            return Err(PlanError::Overflow {
                what: format!("end of buffer {id} at offset {offset} with {size} bytes"),
            });
        };
        self.placed[id.index()] = (offset, end);
        self.index.insert(id);
        Ok(offset)
    }

    /// Places `id` and `partner` (at `distance` bytes from it) together, at the lowest
    /// offset where neither meets a conflicting buffer already placed (first fit: the
    /// pair's free offsets are what is left of the line after removing, per
    /// conflict, the offsets that would touch it). The partner is always placed with
    /// `id`, here or in [`OffsetAllocator::restore`].
    fn place_tied(
        &mut self,
        id: BufferId,
        partner: BufferId,
        distance: isize,
    ) -> Result<usize, PlanError> {
        let (size, partner_size) = (self.live.size(id), self.live.size(partner));
        let overflow = || PlanError::Overflow {
            what: format!("offset of buffer {id} tied to {partner}"),
        };
        // Forbidden offsets `o` of `id`, half-open, as i128 (no overflow for usize).
        let mut forbidden: Vec<(i128, i128)> = Vec::new();
        for (who, shift, len) in [(id, 0i128, size), (partner, distance as i128, partner_size)] {
            self.neighbours.clear();
            self.index.overlapping(who, &mut self.neighbours);
            for n in &self.neighbours {
                let (start, end) = self.placed[n.index()];
                if len > 0 && end > start {
                    // [o + shift, o + shift + len) meets [start, end).
                    forbidden.push((start as i128 - shift - len as i128 + 1, end as i128 - shift));
                }
            }
        }
        forbidden.sort_unstable();
        let forbidden_len = forbidden.len();
        let mut offset: i128 = (-(distance as i128)).max(0);
        for (start, end) in forbidden {
            if start > offset {
                break;
            }
            offset = offset.max(end);
        }
        let at = |o: i128, len: usize| -> Result<(usize, usize), PlanError> {
            let start = usize::try_from(o).map_err(|_| overflow())?;
            Ok((start, start.checked_add(len).ok_or_else(overflow)?))
        };
        self.placed[id.index()] = at(offset, size)?;
        self.placed[partner.index()] = at(offset + distance as i128, partner_size)?;
        self.index.insert(id);
        self.index.insert(partner);
        self.conflicts = forbidden_len;
        Ok(self.placed[id.index()].0)
    }

    /// Forgets every placement, keeping the conflict index's precomputed structure.
    pub fn reset(&mut self) {
        self.placed.fill((UNPLACED, UNPLACED));
        self.index.clear();
    }

    /// Puts `id` at `offset` without searching: for replaying a prefix of an order
    /// whose offsets are already known (the result is validated like any other).
    /// Ignored for unknown or already placed buffers.
    pub fn restore(&mut self, id: BufferId, offset: usize) {
        let size = self.live.sizes.get(id.index()).copied().unwrap_or(0);
        if let Some(slot) = self.placed.get_mut(id.index())
            && slot.0 == UNPLACED
        {
            *slot = if size == 0 {
                (0, 0)
            } else {
                (offset, offset.saturating_add(size))
            };
            self.index.insert(id);
            // A tied buffer comes with its partner (replayed offsets keep the tie).
            if let Some((partner, distance)) = self.live.tie(id)
                && let Some(at) = offset.checked_add_signed(distance)
            {
                self.restore(partner, at);
            }
        }
    }

    /// How many placed buffers the last [`OffsetAllocator::place`] had to step
    /// around: its cost is about k log k in this k.
    pub fn last_conflicts(&self) -> usize {
        self.conflicts
    }

    /// Per buffer: its offset so far, or None while it is unplaced.
    pub fn offsets(&self) -> impl Iterator<Item = Option<usize>> + '_ {
        self.placed
            .iter()
            .map(|&(o, _)| (o != UNPLACED).then_some(o))
    }

    /// Places whatever is left (by size) and returns one offset per buffer.
    pub fn finish(mut self) -> Result<Vec<usize>, PlanError> {
        let live = self.live;
        let mut left: Vec<BufferId> = live
            .ids()
            .filter(|&id| live.size(id) > 0 && self.offset(id).is_none())
            .collect();
        left.sort_unstable_by_key(|&id| live.size_order_key(id));
        for id in left {
            self.place(id)?;
        }
        // Only zero-size buffers can be left: they sit at 0.
        Ok(self.offsets().map(|o| o.unwrap_or(0)).collect())
    }
}

/// Places the buffers in `order` one by one, then any left out, by size.
pub fn place_in_order(live: &Liveness, order: &[BufferId]) -> Result<Vec<usize>, PlanError> {
    place_in_order_with(live, OverlapIndex::new(live), order)
}

/// [`place_in_order`] over an index already built for `live`.
pub(crate) fn place_in_order_with(
    live: &Liveness,
    index: OverlapIndex,
    order: &[BufferId],
) -> Result<Vec<usize>, PlanError> {
    let mut alloc = OffsetAllocator::with_index(live, index);
    for &id in order {
        alloc.place(id)?;
    }
    alloc.finish()
}

/// Greedy by size: buffers largest first (ties: earlier first step, then id).
pub fn greedy_by_size(live: &Liveness) -> Result<Vec<usize>, PlanError> {
    place_in_order(live, &live.by_size_desc())
}

/// Greedy by breadth: the offsets of [`breadth_order`].
pub fn greedy_by_breadth(live: &Liveness) -> Result<Vec<usize>, PlanError> {
    place_in_order(live, &breadth_order(live))
}

/// The order of greedy by breadth: steps by live bytes descending (ties: earlier
/// step), and at each step its buffers not yet listed, by size. Zero-size buffers
/// are left out.
///
/// Only steps where some lifetime starts or ends are visited: between two such
/// steps the live set is a subset of the one at the earlier endpoint, so the
/// result is the same as visiting every step.
pub fn breadth_order(live: &Liveness) -> Vec<BufferId> {
    let axis = TimeAxis::new(live);
    let ranks = axis.len();
    let spans: Vec<Option<(usize, usize)>> = live
        .ids()
        .map(|id| (live.size(id) > 0).then(|| axis.compress(live.lifetime(id))))
        .collect();
    let mut born = vec![0usize; ranks];
    let mut dies = vec![0usize; ranks];
    let mut unplaced = SegmentLists::new(ranks, &spans);
    for (id, span) in live.ids().zip(&spans) {
        let Some((lo, hi)) = *span else { continue };
        if let (Some(b), Some(d)) = (born.get_mut(lo), dies.get_mut(hi)) {
            // Partial sums of sizes never exceed their checked total.
            *b = b.saturating_add(live.size(id));
            *d = d.saturating_add(live.size(id));
            unplaced.insert(lo, hi, id.0);
        }
    }
    let mut breadth = Vec::with_capacity(ranks);
    let mut bytes = 0usize;
    for (&b, &d) in born.iter().zip(&dies) {
        bytes = bytes.saturating_add(b);
        breadth.push(bytes);
        bytes = bytes.saturating_sub(d);
    }
    let mut order: Vec<usize> = (0..ranks).collect();
    order.sort_unstable_by_key(|&r| (std::cmp::Reverse(breadth[r]), r));

    let mut listed = vec![false; live.len()];
    let mut out = Vec::with_capacity(live.len());
    let mut here: Vec<u32> = Vec::new();
    for rank in order {
        here.clear();
        unplaced.take_stab(rank, &mut here);
        let from = out.len();
        for id in here.iter().map(|&i| BufferId(i)) {
            if !std::mem::replace(&mut listed[id.index()], true) {
                out.push(id);
            }
        }
        out[from..].sort_unstable_by_key(|&id| live.size_order_key(id));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{brute_is_valid, seed_003_example};
    use super::super::{BufferRequest, PlanInput, analyze};
    use super::*;

    const KB: usize = 1024;

    #[test]
    fn seed_003_by_size_and_by_breadth() {
        let live = analyze(&seed_003_example()).unwrap();
        assert_eq!(
            greedy_by_size(&live).unwrap(),
            vec![0, 180 * KB, 100 * KB, 0]
        );
        assert_eq!(
            greedy_by_breadth(&live).unwrap(),
            vec![0, 180 * KB, 100 * KB, 0]
        );
    }

    #[test]
    fn best_fit_takes_the_smallest_gap_that_fits() {
        // Four long-lived walls with holes of 512 (low) and 256 (high) between
        // them, made by short buffers that die before the probe arrives.
        let mut input = PlanInput::new(3);
        input.push(BufferRequest::new("wall0", 1024, 0, vec![2])); // 0..1024
        input.push(BufferRequest::new("hole512", 512, 0, vec![0])); // 1024..1536
        input.push(BufferRequest::new("wall1", 512, 0, vec![2])); // 1536..2048
        input.push(BufferRequest::new("hole256", 256, 0, vec![0])); // 2048..2304
        input.push(BufferRequest::new("wall2", 256, 0, vec![2])); // 2304..2560
        input.push(BufferRequest::new("probe", 256, 1, vec![2]));
        let live = analyze(&input).unwrap();
        let mut alloc = OffsetAllocator::new(&live);
        for (id, want) in [(0, 0), (1, 1024), (2, 1536), (3, 2048), (4, 2304)] {
            assert_eq!(alloc.place(BufferId(id)).unwrap(), want);
        }
        // Both holes fit the probe; the 256-byte one is the best fit.
        assert_eq!(alloc.place(BufferId(5)).unwrap(), 2048);
        // Placing again is a no-op.
        assert_eq!(alloc.place(BufferId(5)).unwrap(), 2048);
        assert!(matches!(
            alloc.place(BufferId(99)),
            Err(PlanError::UnknownBuffer { .. })
        ));
        let offsets = alloc.finish().unwrap();
        assert!(brute_is_valid(&input, &offsets));
    }

    #[test]
    fn with_no_gap_it_goes_on_top_of_the_highest_conflict() {
        let mut input = PlanInput::new(2);
        input.push(BufferRequest::new("low", 256, 0, vec![1]));
        input.push(BufferRequest::new("high", 256, 0, vec![1]));
        input.push(BufferRequest::new("late", 256, 1, vec![]));
        input.alignment = 256;
        let live = analyze(&input).unwrap();
        assert_eq!(greedy_by_size(&live).unwrap(), vec![0, 256, 512]);
    }

    #[test]
    fn breadth_can_beat_size() {
        // `late` is the largest, so by size it goes in first, at 0, and pushes
        // `x` (which meets it at step 2) above it. By breadth, the peak step 0
        // (x + y + z = 1000 bytes) is laid out first and reaches the lower bound.
        let mut input = PlanInput::new(4);
        input.alignment = 1;
        input.push(BufferRequest::new("x", 400, 0, vec![2]));
        input.push(BufferRequest::new("y", 300, 0, vec![1]));
        input.push(BufferRequest::new("z", 300, 0, vec![]));
        input.push(BufferRequest::new("late", 500, 2, vec![3]));
        let live = analyze(&input).unwrap();
        assert_eq!(live.lower_bound_bytes, 1000);
        let by_size = greedy_by_size(&live).unwrap();
        let by_breadth = greedy_by_breadth(&live).unwrap();
        assert_eq!(by_size, vec![500, 0, 900, 0]);
        assert_eq!(by_breadth, vec![0, 400, 700, 400]);
        assert!(brute_is_valid(&input, &by_size));
        assert!(brute_is_valid(&input, &by_breadth));
        let plan = crate::plan::plan(&input).unwrap();
        assert_eq!(plan.strategy, "greedy-by-breadth");
        assert_eq!(plan.arena_bytes, 1000);
        let first = plan.strategies[0];
        assert_eq!(
            (first.strategy, first.arena_bytes),
            ("greedy-by-size", 1200)
        );
    }
}
