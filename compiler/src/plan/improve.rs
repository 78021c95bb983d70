//! Pass 3c: local search over placement order, run after the greedy strategies.
//!
//! A greedy strategy fixes one order and puts each buffer in its best-fit gap. When
//! the arena ends above the lower bound, some buffer at the top found no gap, usually
//! because a buffer placed before it took the hole it needed (AlexNet: a big
//! convolution scratch placed first pushes a small pooled tensor to the top). The
//! search perturbs the order, mostly around a buffer that reaches the top: moves it
//! earlier, moves a conflicting buffer placed before it to just after it, or swaps
//! the two; now and then it moves any buffer anywhere earlier. It re-places from the
//! first changed position with the same [`OffsetAllocator`] (the prefix's offsets
//! are replayed, not searched again), gives up on a try as soon as a buffer ends above
//! the current arena, and keeps every try whose arena is not larger: sideways moves
//! let it walk across the plateaus where many orders tie (on random 300-buffer
//! inputs it then reaches the bound in 14 cases of 40 instead of 9).
//!
//! Deterministic: moves are drawn from a fixed-seed xorshift. Bounded: a budget of
//! work units that gives graphs of a few hundred buffers thousands of tries and large
//! ones a couple of passes ([`work_budget`]); it stops as soon as the arena reaches
//! the lower bound, which is where most real models start.

use super::interference::OverlapIndex;
use super::offsets::{OffsetAllocator, breadth_order};
use super::{BufferId, Liveness, PlanError};

/// Work units a search may spend: [`MAX_WORK`] for graphs up to a few hundred
/// buffers, falling as 1/n beyond, but never less than [`MIN_PASSES`] passes.
///
/// A unit is about one placement among a few conflicts (tens to hundreds of ns):
/// a placement costs `1 + k / 16` for k conflicts, a try `n / 8` on top for its
/// O(n) bookkeeping.
pub fn work_budget(buffers: usize) -> usize {
    let n = buffers.max(1);
    (WORK_SCALE / n)
        .min(MAX_WORK)
        .max(n.saturating_mul(MIN_PASSES))
}

/// About 50 ms in release: nothing next to a compile, and enough for DenseNet-121
/// (which needs about 2k units) many times over.
pub const MAX_WORK: usize = 200_000;
/// Even at 100k buffers, a couple of passes' worth of tries.
pub const MIN_PASSES: usize = 2;
/// Makes the budget 20k units (a few tries) at 10k buffers, so that planning
/// them stays under 50 ms.
const WORK_SCALE: usize = 50_000_000;
const SEED: u64 = 0x853c_49e6_748f_ea9b;

/// A starting order for [`local_search_from`]: every buffer that needs memory, once
/// (unknown ids make the start ignored), with its offsets when they are already
/// known (they must be what placing `order` gives).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Start {
    pub order: Vec<BufferId>,
    pub offsets: Option<Vec<usize>>,
}

/// The better of the greedy-by-size and greedy-by-breadth orders, improved by
/// local search; offsets per buffer, zero-size ones at 0.
pub fn local_search(live: &Liveness) -> Result<Vec<usize>, PlanError> {
    let starts = [live.by_size_desc(), breadth_order(live)]
        .into_iter()
        .map(|order| Start {
            order,
            offsets: None,
        })
        .collect();
    local_search_from(live, OverlapIndex::new(live), starts)
}

/// Local search from the best of `starts` (the first on ties) over an index
/// already built for `live`, with the budget [`work_budget`] gives.
pub(crate) fn local_search_from(
    live: &Liveness,
    index: OverlapIndex,
    starts: Vec<Start>,
) -> Result<Vec<usize>, PlanError> {
    local_search_with_budget(live, index, starts, work_budget(live.len()))
}

/// [`local_search_from`] with an explicit budget in work units. Starts without
/// offsets are placed in full, outside the budget; with no usable start, the
/// search starts from greedy by size.
pub(crate) fn local_search_with_budget(
    live: &Liveness,
    index: OverlapIndex,
    starts: Vec<Start>,
    work: usize,
) -> Result<Vec<usize>, PlanError> {
    let mut search = Search::new(live, index);
    for start in starts {
        search.start(start)?;
    }
    if search.order.is_empty() {
        search.start(Start {
            order: live.by_size_desc(),
            offsets: None,
        })?;
    }
    search.work_left = work;
    let try_cost = (live.len() / 8).max(1);
    let mut rng = XorShift(SEED);
    while search.work_left > 0 && search.arena > live.lower_bound_bytes {
        search.work_left = search.work_left.saturating_sub(try_cost);
        if let Some((candidate, from)) = search.propose(&mut rng) {
            search.consider(candidate, from)?;
        }
    }
    Ok(search.offsets)
}

struct Search<'a> {
    live: &'a Liveness,
    alloc: OffsetAllocator<'a>,
    /// The accepted order (buffers that need memory only), its offsets and arena.
    order: Vec<BufferId>,
    offsets: Vec<usize>,
    arena: usize,
    /// Per buffer: its position in `order` (unused for zero-size buffers).
    pos: Vec<usize>,
    work_left: usize,
}

impl<'a> Search<'a> {
    fn new(live: &'a Liveness, index: OverlapIndex) -> Self {
        Self {
            live,
            alloc: OffsetAllocator::with_index(live, index),
            order: Vec::new(),
            offsets: vec![0; live.len()],
            arena: usize::MAX,
            pos: vec![0; live.len()],
            work_left: usize::MAX,
        }
    }

    /// Takes `start` if its arena is smaller than the accepted one (so ties go to
    /// the first start): measured from its offsets when given, else placed.
    fn start(&mut self, start: Start) -> Result<(), PlanError> {
        if start
            .order
            .iter()
            .any(|id| id.index() >= self.offsets.len())
        {
            return Ok(());
        }
        let (arena, offsets) = match start.offsets.filter(|o| o.len() == self.offsets.len()) {
            Some(offsets) => {
                let end = |&id: &BufferId| offsets[id.index()].saturating_add(self.live.size(id));
                (start.order.iter().map(end).max().unwrap_or(0), offsets)
            }
            None => match self.place(&start.order, 0)? {
                Some(arena) => (arena, self.placed()),
                None => return Ok(()),
            },
        };
        if arena < self.arena {
            self.accept(start.order, 0, arena, offsets);
        }
        Ok(())
    }

    /// Places `candidate` (equal to the accepted order before position `from`) and
    /// accepts it unless its arena is larger.
    fn consider(&mut self, candidate: Vec<BufferId>, from: usize) -> Result<(), PlanError> {
        if let Some(arena) = self.place(&candidate, from)? {
            let placed = self.placed();
            self.accept(candidate, from, arena, placed);
        }
        Ok(())
    }

    /// The allocator's offsets after a placement, zero-size buffers at 0.
    fn placed(&self) -> Vec<usize> {
        self.alloc.offsets().map(|o| o.unwrap_or(0)).collect()
    }

    fn accept(&mut self, order: Vec<BufferId>, from: usize, arena: usize, offsets: Vec<usize>) {
        for (i, &id) in order.iter().enumerate().skip(from) {
            self.pos[id.index()] = i;
        }
        self.order = order;
        self.offsets = offsets;
        self.arena = arena;
    }

    /// Replays `candidate[..from]` at the accepted offsets and places the rest; the
    /// arena, or None once a buffer ends above the accepted arena or the budget
    /// runs out.
    fn place(&mut self, candidate: &[BufferId], from: usize) -> Result<Option<usize>, PlanError> {
        self.alloc.reset();
        let mut arena = 0usize;
        for &id in candidate.get(..from).unwrap_or(&[]) {
            let offset = self.offsets[id.index()];
            self.alloc.restore(id, offset);
            // Accepted offsets were checked when they were placed.
            arena = arena.max(offset.saturating_add(self.live.size(id)));
        }
        for &id in candidate.get(from..).unwrap_or(&[]) {
            if self.work_left == 0 {
                return Ok(None);
            }
            let end = self.alloc.place(id)?.saturating_add(self.live.size(id));
            let cost = 1 + self.alloc.last_conflicts() / 16;
            self.work_left = self.work_left.saturating_sub(cost);
            if end > self.arena {
                return Ok(None);
            }
            arena = arena.max(end);
        }
        Ok(Some(arena))
    }

    /// A perturbed order and its first changed position; None when the drawn
    /// move does not apply.
    fn propose(&self, rng: &mut XorShift) -> Option<(Vec<BufferId>, usize)> {
        let live = self.live;
        let end = |id: BufferId| self.offsets[id.index()].saturating_add(live.size(id));
        let top: Vec<BufferId> = self
            .order
            .iter()
            .copied()
            .filter(|&id| end(id) == self.arena)
            .collect();
        let c = *top.get(rng.below(top.len()))?;
        let p = self.pos[c.index()];
        let life = live.lifetime(c);
        let earlier: Vec<usize> = (0..p)
            .filter(|&i| live.lifetime(self.order[i]).overlaps(&life))
            .collect();
        let mut candidate = self.order.clone();
        let from = match rng.below(5) {
            // The top buffer to a random earlier position.
            0 if p > 0 => {
                let q = rng.below(p);
                candidate.get_mut(q..=p)?.rotate_right(1);
                q
            }
            // The top buffer to just before a conflicting buffer placed earlier.
            1 => {
                let e = *earlier.get(rng.below(earlier.len()))?;
                candidate.get_mut(e..=p)?.rotate_right(1);
                e
            }
            // A conflicting buffer placed earlier to just after the top buffer.
            2 => {
                let e = *earlier.get(rng.below(earlier.len()))?;
                candidate.get_mut(e..=p)?.rotate_left(1);
                e
            }
            // Swap the two.
            3 => {
                let e = *earlier.get(rng.below(earlier.len()))?;
                candidate.swap(e, p);
                e
            }
            // Any buffer to any earlier position: a kick out of local optima.
            4 => {
                let (a, b) = (rng.below(candidate.len()), rng.below(candidate.len()));
                let (a, b) = (a.min(b), a.max(b));
                if a == b {
                    return None;
                }
                candidate.get_mut(a..=b)?.rotate_right(1);
                a
            }
            _ => return None,
        };
        Some((candidate, from))
    }
}

/// xorshift64: tiny, seedable, and the same on every platform.
struct XorShift(u64);

impl XorShift {
    /// A number in `0..n`, or 0 when `n` is 0 (callers index with `get`).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::super::offsets::{greedy_by_breadth, greedy_by_size};
    use super::super::testutil::{alexnet, brute_is_valid, network_like, seed_003_example};
    use super::super::{BufferRequest, PlanInput, analyze};
    use super::*;

    fn arena(live: &Liveness, offsets: &[usize]) -> usize {
        live.ids()
            .map(|id| offsets[id.index()] + live.size(id))
            .max()
            .unwrap_or(0)
    }

    fn unplaced_starts(live: &Liveness) -> Vec<Start> {
        [live.by_size_desc(), breadth_order(live)]
            .into_iter()
            .map(|order| Start {
                order,
                offsets: None,
            })
            .collect()
    }

    #[test]
    fn alexnet_reaches_the_lower_bound_where_greedy_does_not() {
        let input = alexnet();
        let live = analyze(&input).unwrap();
        let greedy = arena(&live, &greedy_by_size(&live).unwrap());
        assert_eq!(greedy, arena(&live, &greedy_by_breadth(&live).unwrap()));
        assert!(greedy > live.lower_bound_bytes * 111 / 100);
        let offsets = local_search(&live).unwrap();
        assert!(brute_is_valid(&input, &offsets));
        assert_eq!(arena(&live, &offsets), live.lower_bound_bytes);
    }

    #[test]
    fn a_zero_budget_keeps_the_better_start_and_ties_go_to_the_first() {
        for input in [alexnet(), seed_003_example(), network_like(300, 7)] {
            let live = analyze(&input).unwrap();
            let (by_size, by_breadth) = (
                greedy_by_size(&live).unwrap(),
                greedy_by_breadth(&live).unwrap(),
            );
            let want = if arena(&live, &by_breadth) < arena(&live, &by_size) {
                by_breadth
            } else {
                by_size
            };
            let index = OverlapIndex::new(&live);
            let got = local_search_with_budget(&live, index, unplaced_starts(&live), 0);
            assert_eq!(got.unwrap(), want);
        }
    }

    #[test]
    fn known_start_offsets_change_nothing() {
        for input in [alexnet(), network_like(500, 3)] {
            let live = analyze(&input).unwrap();
            let mut known = unplaced_starts(&live);
            known[0].offsets = Some(greedy_by_size(&live).unwrap());
            known[1].offsets = Some(greedy_by_breadth(&live).unwrap());
            let index = OverlapIndex::new(&live);
            let from_known = local_search_from(&live, index, known).unwrap();
            assert_eq!(from_known, local_search(&live).unwrap());
            // Offsets of the wrong length are ignored, not trusted.
            let mut wrong = unplaced_starts(&live);
            wrong[0].offsets = Some(vec![0]);
            let index = OverlapIndex::new(&live);
            assert_eq!(local_search_from(&live, index, wrong).unwrap(), from_known);
        }
    }

    #[test]
    fn empty_zero_size_and_startless_inputs() {
        let live = analyze(&PlanInput::new(0)).unwrap();
        assert!(local_search(&live).unwrap().is_empty());
        let mut input = PlanInput::new(2);
        input.push(BufferRequest::new("empty", 0, 0, vec![1]));
        input.push(BufferRequest::new("a", 10, 0, vec![1]));
        let live = analyze(&input).unwrap();
        assert_eq!(local_search(&live).unwrap(), vec![0, 0]);
        let index = OverlapIndex::new(&live);
        let none = local_search_with_budget(&live, index, Vec::new(), 1000).unwrap();
        assert_eq!(none, vec![0, 0]);
        let unknown = Start {
            order: vec![BufferId(7)],
            offsets: None,
        };
        let index = OverlapIndex::new(&live);
        let ignored = local_search_with_budget(&live, index, vec![unknown], 1000).unwrap();
        assert_eq!(ignored, vec![0, 0]);
    }

    #[test]
    fn the_budget_shrinks_per_buffer_but_allows_two_passes() {
        assert_eq!(work_budget(0), MAX_WORK);
        assert_eq!(work_budget(200), MAX_WORK);
        assert!(work_budget(10_000) < MAX_WORK);
        assert_eq!(work_budget(100_000), 100_000 * MIN_PASSES);
        assert_eq!(work_budget(usize::MAX), usize::MAX);
    }
}
