//! Pass 2: which buffers conflict (their lifetimes intersect).
//!
//! Seed 000 builds an interference graph and asks `has_edge`. With 100k buffers a
//! matrix is 10¹⁰ bits and even an edge list can be quadratic, so the strategies
//! never materialise the graph. They ask one question, "which of the buffers I
//! have already placed conflict with this one?", and [`OverlapIndex`] answers it
//! in O(log n + k) for k answers. [`for_each_conflict`] enumerates the whole graph
//! with a sweep line over sorted intervals, O(n log n + edges), for callers that do
//! want every edge (and as a test oracle).
//!
//! Time is compressed first ([`TimeAxis`]): only the steps where some lifetime
//! starts or ends matter for intersection, so cost never depends on `steps`.

use std::collections::BTreeSet;

use super::{BufferId, Lifetime, Liveness};

/// The sorted distinct endpoints of the lifetimes of buffers that need memory.
///
/// Mapping each endpoint to its rank preserves every `<=` between endpoints, so
/// two lifetimes intersect iff their compressed ranges do.
#[derive(Debug, Clone)]
pub struct TimeAxis {
    points: Vec<usize>,
}

impl TimeAxis {
    pub fn new(live: &Liveness) -> Self {
        let mut points: Vec<usize> = live
            .lifetimes
            .iter()
            .zip(&live.sizes)
            .filter(|(_, size)| **size > 0)
            .flat_map(|(l, _)| [l.first, l.last])
            .collect();
        points.sort_unstable();
        points.dedup();
        Self { points }
    }

    /// Number of distinct endpoints.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The step at rank `rank`.
    pub fn step(&self, rank: usize) -> Option<usize> {
        self.points.get(rank).copied()
    }

    /// Rank of `step` (exact for endpoints; for other steps, the rank of the next
    /// endpoint).
    pub fn rank(&self, step: usize) -> usize {
        self.points.partition_point(|&p| p < step)
    }

    /// `lifetime` in ranks.
    pub fn compress(&self, lifetime: Lifetime) -> (usize, usize) {
        (self.rank(lifetime.first), self.rank(lifetime.last))
    }
}

/// A segment tree over ranks whose nodes hold the ids of the ranges covering them.
///
/// A range `[lo, hi]` is stored in its O(log n) canonical nodes (the bottom-up
/// decomposition, valid for any leaf count), so each point of the range has
/// exactly one of them on its leaf-to-root path: stabbing a point lists every
/// range containing it once, in O(log n + k).
#[derive(Debug, Clone)]
pub struct SegmentLists {
    leaves: usize,
    nodes: Vec<Vec<u32>>,
}

impl SegmentLists {
    pub fn new(leaves: usize) -> Self {
        Self {
            leaves,
            nodes: vec![Vec::new(); leaves.saturating_mul(2)],
        }
    }

    /// Stores `id` for the ranks `lo..=hi` (ignored if out of range).
    pub fn insert(&mut self, lo: usize, hi: usize, id: u32) {
        if lo > hi || hi >= self.leaves {
            return;
        }
        let (mut l, mut r) = (lo + self.leaves, hi + self.leaves + 1);
        while l < r {
            if l & 1 == 1 {
                self.nodes[l].push(id);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                self.nodes[r].push(id);
            }
            l >>= 1;
            r >>= 1;
        }
    }

    /// Appends the ids of every range containing rank `point`.
    pub fn stab(&self, point: usize, out: &mut Vec<u32>) {
        if point >= self.leaves {
            return;
        }
        let mut node = point + self.leaves;
        while node >= 1 {
            out.extend_from_slice(&self.nodes[node]);
            node >>= 1;
        }
    }

    /// Like [`SegmentLists::stab`], and forgets what it returns: every list on the
    /// path holds ranges containing `point`, so emptying them loses nothing else.
    /// An id also stored in nodes off the path may be returned again by a later call.
    pub fn take_stab(&mut self, point: usize, out: &mut Vec<u32>) {
        if point >= self.leaves {
            return;
        }
        let mut node = point + self.leaves;
        while node >= 1 {
            out.append(&mut self.nodes[node]);
            node >>= 1;
        }
    }
}

/// The placed buffers so far, indexed by lifetime, answering "which of them
/// conflict with this buffer?".
///
/// A placed `J` intersects a query `I` iff `J` contains `I.first` or `J` starts
/// inside `(I.first, I.last]`: the first set is a stabbing query on
/// [`SegmentLists`], the second a range query on placed start ranks. The two sets
/// are disjoint, so no answer repeats.
#[derive(Debug, Clone)]
pub struct OverlapIndex {
    /// Per buffer: its lifetime in ranks.
    spans: Vec<(u32, u32)>,
    sizes: Vec<usize>,
    covering: SegmentLists,
    /// (start rank, id) of every inserted buffer.
    starts: BTreeSet<(u32, u32)>,
    inserted: Vec<bool>,
    stab_scratch: Vec<u32>,
}

impl OverlapIndex {
    /// An empty index over the buffers of `live`.
    pub fn new(live: &Liveness) -> Self {
        let axis = TimeAxis::new(live);
        // Ranks are < 2n, which `analyze`'s buffer limit keeps within u32.
        let spans = live
            .lifetimes
            .iter()
            .map(|&l| {
                let (lo, hi) = axis.compress(l);
                (to_u32(lo), to_u32(hi))
            })
            .collect();
        Self {
            spans,
            sizes: live.sizes.clone(),
            covering: SegmentLists::new(axis.len()),
            starts: BTreeSet::new(),
            inserted: vec![false; live.len()],
            stab_scratch: Vec::new(),
        }
    }

    /// Adds `id`; zero-size buffers conflict with nothing and are not stored.
    pub fn insert(&mut self, id: BufferId) {
        let i = id.index();
        let (Some(&(lo, hi)), Some(&size)) = (self.spans.get(i), self.sizes.get(i)) else {
            return;
        };
        if size == 0 || self.inserted[i] {
            return;
        }
        self.inserted[i] = true;
        self.covering.insert(lo as usize, hi as usize, id.0);
        self.starts.insert((lo, id.0));
    }

    /// Appends to `out` every inserted buffer other than `id` whose lifetime
    /// intersects `id`'s (none for a zero-size `id`), in no particular order.
    pub fn overlapping(&mut self, id: BufferId, out: &mut Vec<BufferId>) {
        let i = id.index();
        let (Some(&(lo, hi)), Some(&size)) = (self.spans.get(i), self.sizes.get(i)) else {
            return;
        };
        if size == 0 {
            return;
        }
        self.stab_scratch.clear();
        self.covering.stab(lo as usize, &mut self.stab_scratch);
        out.extend(
            self.stab_scratch
                .iter()
                .filter(|&&j| j != id.0)
                .map(|&j| BufferId(j)),
        );
        if lo < hi {
            out.extend(
                self.starts
                    .range((lo + 1, 0)..=(hi, u32::MAX))
                    .filter(|&&(_, j)| j != id.0)
                    .map(|&(_, j)| BufferId(j)),
            );
        }
    }
}

fn to_u32(rank: usize) -> u32 {
    u32::try_from(rank).unwrap_or(u32::MAX)
}

/// Calls `f(a, b)` once for every conflicting pair (a < b by id) of buffers that
/// need memory: a sweep line over lifetimes sorted by first step, keeping the
/// buffers still live. O(n log n + edges).
pub fn for_each_conflict(live: &Liveness, mut f: impl FnMut(BufferId, BufferId)) {
    let mut order: Vec<BufferId> = live.ids().filter(|&id| live.size(id) > 0).collect();
    order.sort_unstable_by_key(|&id| (live.lifetime(id).first, id));
    let mut active: Vec<BufferId> = Vec::new();
    for id in order {
        let first = live.lifetime(id).first;
        active.retain(|&other| live.lifetime(other).last >= first);
        for &other in &active {
            f(other.min(id), other.max(id));
        }
        active.push(id);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::seed_003_example;
    use super::super::{BufferRequest, PlanInput, analyze};
    use super::*;

    #[test]
    fn seed_003_conflicts() {
        let live = analyze(&seed_003_example()).unwrap();
        let mut edges = Vec::new();
        for_each_conflict(&live, |a, b| edges.push((a.0, b.0)));
        edges.sort_unstable();
        // T1-T2, T1-T3, T2-T3, T2-T4 (T2 lives to step 11, T4 starts at 10).
        assert_eq!(edges, vec![(0, 1), (0, 2), (1, 2), (1, 3)]);
    }

    #[test]
    fn segment_lists_stab_each_range_once() {
        for leaves in 1..20 {
            let mut tree = SegmentLists::new(leaves);
            let mut ranges = Vec::new();
            for lo in 0..leaves {
                for hi in lo..leaves {
                    let id = ranges.len() as u32;
                    ranges.push((lo, hi));
                    tree.insert(lo, hi, id);
                }
            }
            for p in 0..leaves {
                let mut got = Vec::new();
                tree.stab(p, &mut got);
                got.sort_unstable();
                let want: Vec<u32> = (0..ranges.len() as u32)
                    .filter(|&i| ranges[i as usize].0 <= p && p <= ranges[i as usize].1)
                    .collect();
                assert_eq!(got, want, "leaves {leaves}, point {p}");
            }
            // Out-of-range requests are ignored, not panics.
            tree.insert(0, leaves, 0);
            tree.stab(leaves, &mut Vec::new());
        }
    }

    #[test]
    fn overlap_index_matches_pairwise_check() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % m as u64) as usize
        };
        for _ in 0..200 {
            let steps = 1 + next(30);
            let mut input = PlanInput::new(steps);
            for i in 0..next(30) {
                let def = next(steps);
                let last = def + next(steps - def);
                input.push(BufferRequest::new(format!("b{i}"), next(3) * 100, def, vec![last]));
            }
            let live = analyze(&input).unwrap();
            let mut index = OverlapIndex::new(&live);
            let ids: Vec<BufferId> = live.ids().collect();
            for (n, &id) in ids.iter().enumerate() {
                let mut got = Vec::new();
                index.overlapping(id, &mut got);
                got.sort_unstable();
                let want: Vec<BufferId> = ids[..n]
                    .iter()
                    .copied()
                    .filter(|&o| {
                        live.size(o) > 0
                            && live.size(id) > 0
                            && live.lifetime(o).overlaps(&live.lifetime(id))
                    })
                    .collect();
                assert_eq!(got, want);
                index.insert(id);
            }
            let mut edges = 0;
            for_each_conflict(&live, |a, b| {
                assert!(a < b);
                assert!(live.lifetime(a).overlaps(&live.lifetime(b)));
                edges += 1;
            });
            let brute = ids
                .iter()
                .flat_map(|&a| ids.iter().map(move |&b| (a, b)))
                .filter(|&(a, b)| {
                    a < b
                        && live.size(a) > 0
                        && live.size(b) > 0
                        && live.lifetime(a).overlaps(&live.lifetime(b))
                })
                .count();
            assert_eq!(edges, brute);
        }
    }
}
