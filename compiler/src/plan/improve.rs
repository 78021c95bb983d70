//! Pass 3c: local search over placement order, run after the greedy strategies.
//!
//! A greedy strategy fixes one order and puts each buffer in its best-fit gap. When
//! the arena ends above the lower bound, some buffer at the top found no gap, usually
//! because a buffer placed before it took the hole it needed (AlexNet: a big
//! convolution scratch placed first pushes a small pooled tensor to the top). The
//! search perturbs the order around the buffers that reach the top: it moves one of
//! them earlier, moves a conflicting buffer placed before it to just after it, or
//! swaps the two; re-places from the first changed position with the same
//! [`OffsetAllocator`] (the prefix's offsets are replayed, not searched again); and
//! keeps the change when the arena shrinks, or stays equal while the buffers sit
//! lower in total, which lets it cross the plateaus where many orders tie.
//!
//! Deterministic: moves are drawn from a fixed-seed xorshift. Bounded: a budget of
//! placements that gives small graphs thousands of tries and large ones a few passes
//! ([`work_budget`]); it stops as soon as the arena reaches the lower bound.

use super::offsets::{OffsetAllocator, breadth_order};
use super::{BufferId, Liveness, PlanError};

/// Placements a search may make in all: about 10⁶ for graphs of a few hundred
/// buffers, falling as 1/n so that 10k buffers cost a few passes over the order,
/// never less than [`MIN_PASSES`] passes.
pub fn work_budget(buffers: usize) -> usize {
    let n = buffers.max(1);
    (WORK_SCALE / n)
        .min(MAX_WORK)
        .max(n.saturating_mul(MIN_PASSES))
}

const WORK_SCALE: usize = 300_000_000;
const MAX_WORK: usize = 1_000_000;
const MIN_PASSES: usize = 2;
const SEED: u64 = 0x853c_49e6_748f_ea9b;

/// The best order found from greedy by size and greedy by breadth, improved by local
/// search; offsets per buffer, zero-size ones at 0.
pub fn local_search(live: &Liveness) -> Result<Vec<usize>, PlanError> {
    local_search_with_budget(live, work_budget(live.len()))
}

/// [`local_search`] with an explicit number of placements (the two starting orders
/// are placed in full whatever the budget).
pub fn local_search_with_budget(live: &Liveness, work: usize) -> Result<Vec<usize>, PlanError> {
    let mut search = Search::new(live, work);
    search.start(live.by_size_desc())?;
    search.start(breadth_order(live))?;
    let mut rng = XorShift(SEED);
    while search.work_left > 0 && search.score.arena > live.lower_bound_bytes {
        // Every try costs at least one unit, so the loop ends even if no move exists.
        search.work_left -= 1;
        if let Some((candidate, from)) = search.propose(&mut rng) {
            search.consider(candidate, from)?;
        }
    }
    eprintln!("DEBUG n={} work used {} of {}", live.len(), work_budget(live.len()) - search.work_left, work_budget(live.len()));
    Ok(search.offsets)
}

/// What a candidate order is judged by, lexicographically: the arena, then the
/// sum of every buffer's end (lower means packed lower, a step towards a smaller top).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Score {
    arena: usize,
    ends: u128,
}

const UNSCORED: Score = Score {
    arena: usize::MAX,
    ends: u128::MAX,
};

struct Search<'a> {
    live: &'a Liveness,
    alloc: OffsetAllocator<'a>,
    /// The accepted order (buffers that need memory only) and its offsets.
    order: Vec<BufferId>,
    offsets: Vec<usize>,
    /// Per buffer: its position in `order` (unused for zero-size buffers).
    pos: Vec<usize>,
    score: Score,
    work_left: usize,
}

impl<'a> Search<'a> {
    fn new(live: &'a Liveness, work: usize) -> Self {
        Self {
            live,
            alloc: OffsetAllocator::new(live),
            order: Vec::new(),
            offsets: vec![0; live.len()],
            pos: vec![0; live.len()],
            score: UNSCORED,
            work_left: work,
        }
    }

    /// Places a starting order in full and keeps it if it beats the current one.
    fn start(&mut self, order: Vec<BufferId>) -> Result<(), PlanError> {
        let saved = std::mem::replace(&mut self.work_left, usize::MAX);
        let result = self.consider(order, 0);
        self.work_left = saved.saturating_sub(self.order.len());
        result
    }

    /// Places `candidate` (equal to the accepted order before position `from`) and
    /// accepts it if its score is lower.
    fn consider(&mut self, candidate: Vec<BufferId>, from: usize) -> Result<(), PlanError> {
        let from = if self.order.is_empty() { 0 } else { from };
        let Some(score) = self.place(&candidate, from)? else {
            return Ok(());
        };
        if score >= self.score {
            return Ok(());
        }
        for (o, placed) in self.offsets.iter_mut().zip(self.alloc.offsets()) {
            *o = placed.unwrap_or(0);
        }
        for (i, &id) in candidate.iter().enumerate().skip(from) {
            self.pos[id.index()] = i;
        }
        self.order = candidate;
        self.score = score;
        Ok(())
    }

    /// Replays `candidate[..from]` at the accepted offsets and places the rest; None
    /// once the arena passes the accepted one or the budget runs out.
    fn place(&mut self, candidate: &[BufferId], from: usize) -> Result<Option<Score>, PlanError> {
        self.alloc.reset();
        let (mut arena, mut ends) = (0usize, 0u128);
        let prefix = candidate.get(..from).unwrap_or(&[]);
        for &id in prefix {
            let offset = self.offsets[id.index()];
            self.alloc.restore(id, offset);
            // Accepted offsets were checked when they were placed.
            let end = offset.saturating_add(self.live.size(id));
            arena = arena.max(end);
            ends += end as u128;
        }
        for &id in candidate.get(from..).unwrap_or(&[]) {
            if self.work_left == 0 {
                return Ok(None);
            }
            self.work_left -= 1;
            let offset = self.alloc.place(id)?;
            let end = offset.saturating_add(self.live.size(id));
            if end > self.score.arena {
                return Ok(None);
            }
            arena = arena.max(end);
            ends += end as u128;
        }
        Ok(Some(Score { arena, ends }))
    }

    /// A perturbed order and its first changed position, around a buffer that
    /// reaches the top of the arena; None when the drawn move changes nothing.
    fn propose(&self, rng: &mut XorShift) -> Option<(Vec<BufferId>, usize)> {
        let live = self.live;
        let top: Vec<BufferId> = self
            .order
            .iter()
            .copied()
            .filter(|&id| self.offsets[id.index()].saturating_add(live.size(id)) == self.score.arena)
            .collect();
        let c = *top.get(rng.below(top.len()))?;
        let p = self.pos[c.index()];
        let life = live.lifetime(c);
        let earlier: Vec<usize> = (0..p)
            .filter(|&i| live.lifetime(self.order[i]).overlaps(&life))
            .collect();
        let mut candidate = self.order.clone();
        let from = match rng.below(4) {
            // c to a random earlier position.
            0 if p > 0 => {
                let q = rng.below(p);
                candidate.get_mut(q..=p)?.rotate_right(1);
                q
            }
            // c to just before a conflicting buffer placed earlier.
            1 => {
                let e = *earlier.get(rng.below(earlier.len()))?;
                candidate.get_mut(e..=p)?.rotate_right(1);
                e
            }
            // A conflicting buffer placed earlier to just after c.
            2 => {
                let e = *earlier.get(rng.below(earlier.len()))?;
                candidate.get_mut(e..=p)?.rotate_left(1);
                e
            }
            // Swap c with a conflicting buffer placed earlier.
            3 => {
                let e = *earlier.get(rng.below(earlier.len()))?;
                candidate.swap(e, p);
                e
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
mod timing_tmp {
    use super::super::testutil::network_like;
    use super::super::*;
    use std::time::Instant;
    #[test]
    #[ignore]
    fn breakdown() {
        for n in [10_000, 100_000] {
            let input = network_like(n, 42);
            let t = Instant::now();
            let live = analyze(&input).unwrap();
            let t_live = t.elapsed();
            let t = Instant::now();
            let c = interference::count_conflicts(&live);
            let t_count = t.elapsed();
            let t = Instant::now();
            let idx = interference::OverlapIndex::new(&live);
            let t_index = t.elapsed();
            let t = Instant::now();
            let order = live.by_size_desc();
            let t_sort = t.elapsed();
            let t = Instant::now();
            let gbs = offsets::place_in_order(&live, &order).unwrap();
            let t_gbs = t.elapsed();
            let t = Instant::now();
            let bo = offsets::breadth_order(&live);
            let t_bo = t.elapsed();
            let t = Instant::now();
            let _ = offsets::place_in_order(&live, &bo).unwrap();
            let t_gbb = t.elapsed();
            let t = Instant::now();
            let _ = pools::plan_pools(&live).unwrap();
            let t_pools = t.elapsed();
            let t = Instant::now();
            let _ = super::local_search(&live).unwrap();
            let t_ls = t.elapsed();
            let p = plan_with(&input, &[Strategy::GreedyBySize]).unwrap();
            let t = Instant::now();
            validate(&input, &p).unwrap();
            let t_val = t.elapsed();
            println!("n={n} edges={c} graph={} live {t_live:?} count {t_count:?} index {t_index:?} sort {t_sort:?} gbs {t_gbs:?} border {t_bo:?} gbb {t_gbb:?} pools {t_pools:?} ls {t_ls:?} validate {t_val:?}", idx.uses_graph());
            let _ = gbs;
        }
    }
}
