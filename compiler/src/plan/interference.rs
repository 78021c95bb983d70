//! Pass 2: which buffers conflict (their lifetimes intersect).
//!
//! Seed 000 builds an interference graph and asks `has_edge`. A matrix for 100k
//! buffers is 10¹⁰ bits, so none is ever built. The strategies ask one question,
//! "which of the buffers I have already placed conflict with this one?", and
//! [`OverlapIndex`] answers it: from the [`InterferenceGraph`] as adjacency lists
//! (built by a sweep line over sorted intervals, O(n log n + edges)) when the edge
//! count is modest, as in real models; from a segment tree over time, O(log n + k)
//! per query and O(n log n) memory, when lifetimes are so long and dense that
//! the edges would not fit.
//!
//! Time is compressed first ([`TimeAxis`]): only the steps where some lifetime
//! starts or ends matter for intersection, so cost never depends on `steps`.

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
/// stored range containing it once, in O(log n + k).
///
/// The ranges are known up front, so every node's room is counted once and all
/// lists live in one flat array: no allocation per node or per insert, and a
/// stab reads one small counter per level, which keeps it cache-friendly at
/// 100k buffers.
#[derive(Debug, Clone)]
pub struct SegmentLists {
    leaves: usize,
    nodes: Vec<Node>,
    slots: Vec<u32>,
}

/// One node's list: `slots[start..start + filled]`, with room for `room`.
/// Kept together so a stab touches one cache line per level.
#[derive(Debug, Clone, Copy, Default)]
struct Node {
    start: usize,
    room: u32,
    filled: u32,
}

impl Node {
    fn range(&self) -> std::ops::Range<usize> {
        self.start..self.start + self.filled as usize
    }
}

impl SegmentLists {
    /// Room for the given ranges over `leaves` ranks: `ranges[id]` is the
    /// `(lo, hi)` that `id` may later be inserted with, or None.
    pub fn new(leaves: usize, ranges: &[Option<(usize, usize)>]) -> Self {
        let mut nodes = vec![Node::default(); leaves.saturating_mul(2)];
        for &(lo, hi) in ranges.iter().flatten() {
            for_each_canonical(leaves, lo, hi, |v| {
                nodes[v].room = nodes[v].room.saturating_add(1);
            });
        }
        let mut total = 0usize;
        for node in &mut nodes {
            node.start = total;
            total += node.room as usize;
        }
        Self {
            leaves,
            nodes,
            slots: vec![0; total],
        }
    }

    /// Stores `id` for the ranks `lo..=hi`. Only ranges announced to
    /// [`SegmentLists::new`] have room; anything beyond it is ignored.
    pub fn insert(&mut self, lo: usize, hi: usize, id: u32) {
        let (nodes, slots) = (&mut self.nodes, &mut self.slots);
        for_each_canonical(self.leaves, lo, hi, |v| {
            let node = &mut nodes[v];
            if node.filled < node.room {
                slots[node.start + node.filled as usize] = id;
                node.filled += 1;
            }
        });
    }

    /// Forgets every stored id; the room announced to [`SegmentLists::new`] stays.
    pub fn clear(&mut self) {
        for node in &mut self.nodes {
            node.filled = 0;
        }
    }

    /// Appends the ids of every stored range containing rank `point`.
    pub fn stab(&self, point: usize, out: &mut Vec<u32>) {
        for v in path_to_root(self.leaves, point) {
            let node = self.nodes[v];
            if node.filled > 0 {
                out.extend_from_slice(&self.slots[node.range()]);
            }
        }
    }

    /// Like [`SegmentLists::stab`], and forgets what it returns: every list on the
    /// path holds ranges containing `point`, so emptying them loses nothing else.
    /// An id also stored in nodes off the path may be returned again by a later call.
    pub fn take_stab(&mut self, point: usize, out: &mut Vec<u32>) {
        for v in path_to_root(self.leaves, point) {
            let node = &mut self.nodes[v];
            out.extend_from_slice(&self.slots[node.range()]);
            node.filled = 0;
        }
    }
}

/// Calls `f` on the canonical nodes of `lo..=hi` (none if out of range).
fn for_each_canonical(leaves: usize, lo: usize, hi: usize, mut f: impl FnMut(usize)) {
    if lo > hi || hi >= leaves {
        return;
    }
    let (mut l, mut r) = (lo + leaves, hi + leaves + 1);
    while l < r {
        if l & 1 == 1 {
            f(l);
            l += 1;
        }
        if r & 1 == 1 {
            r -= 1;
            f(r);
        }
        l >>= 1;
        r >>= 1;
    }
}

/// The nodes from leaf `point` up to the root (none if out of range).
fn path_to_root(leaves: usize, point: usize) -> impl Iterator<Item = usize> {
    let leaf = if point < leaves { point + leaves } else { 0 };
    std::iter::successors(Some(leaf).filter(|&v| v > 0), |&v| {
        Some(v >> 1).filter(|&v| v > 0)
    })
}

/// How many adjacency entries (two per conflicting pair) [`OverlapIndex::new`]
/// may precompute: `EDGE_BUDGET_PER_BUFFER · n + EDGE_BUDGET_BASE` u32s. Real
/// graphs have a few conflicts per buffer and stay far below it; long, dense
/// lifetimes (quadratic edge counts) fall back to the tree.
pub const EDGE_BUDGET_PER_BUFFER: usize = 32;
pub const EDGE_BUDGET_BASE: usize = 1 << 22;

#[cfg(test)]
thread_local! {
    /// Lets tests run every strategy on both representations.
    pub(crate) static TEST_EDGE_BUDGET: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// The placed buffers so far, answering "which of them conflict with this
/// buffer?" in O(log n + k) or better for k answers.
///
/// Two representations behind one interface, chosen by the size of the
/// interference graph (counted first, in O(n log n), without building it):
///
/// - [`InterferenceGraph`], when its edges fit the budget: a query reads one
///   contiguous row and filters it to the placed buffers. Few cache misses per
///   query, which matters because strategies visit buffers in size order, i.e.
///   at random places in time.
/// - a tree over time otherwise (memory O(n log n) whatever the edge count).
#[derive(Debug, Clone)]
pub struct OverlapIndex {
    inserted: Vec<bool>,
    conflicts: Conflicts,
}

#[derive(Debug, Clone)]
enum Conflicts {
    Graph(InterferenceGraph),
    Tree(TreeIndex),
}

impl OverlapIndex {
    /// An empty index over the buffers of `live`.
    pub fn new(live: &Liveness) -> Self {
        #[cfg(test)]
        if let Some(budget) = TEST_EDGE_BUDGET.get() {
            return Self::with_edge_budget(live, budget);
        }
        let budget = live
            .len()
            .saturating_mul(EDGE_BUDGET_PER_BUFFER)
            .saturating_add(EDGE_BUDGET_BASE);
        Self::with_edge_budget(live, budget)
    }

    /// Like [`OverlapIndex::new`], precomputing the graph only if it has at most
    /// `budget / 2` edges (0 forces the tree; usize::MAX forces the graph).
    pub fn with_edge_budget(live: &Liveness, budget: usize) -> Self {
        let entries = count_conflicts(live).saturating_mul(2);
        let conflicts = if entries <= budget {
            Conflicts::Graph(InterferenceGraph::build(live))
        } else {
            Conflicts::Tree(TreeIndex::new(live))
        };
        Self {
            inserted: vec![false; live.len()],
            conflicts,
        }
    }

    /// Whether the interference graph was precomputed.
    pub fn uses_graph(&self) -> bool {
        matches!(self.conflicts, Conflicts::Graph(_))
    }

    /// Adds `id`; zero-size buffers conflict with nothing and are never reported.
    pub fn insert(&mut self, id: BufferId) {
        let Some(slot) = self.inserted.get_mut(id.index()) else {
            return;
        };
        if *slot {
            return;
        }
        *slot = true;
        if let Conflicts::Tree(tree) = &mut self.conflicts {
            tree.insert(id);
        }
    }

    /// Removes every buffer, keeping the precomputed structure: a strategy that
    /// places the same buffers many times pays for the graph or tree once.
    pub fn clear(&mut self) {
        self.inserted.fill(false);
        if let Conflicts::Tree(tree) = &mut self.conflicts {
            tree.covering.clear();
        }
    }

    /// Appends to `out` every inserted buffer other than `id` whose lifetime
    /// intersects `id`'s (none for a zero-size `id`), in no particular order.
    pub fn overlapping(&mut self, id: BufferId, out: &mut Vec<BufferId>) {
        match &mut self.conflicts {
            Conflicts::Graph(graph) => {
                out.extend(graph.neighbours(id).filter(|n| self.inserted[n.index()]))
            }
            Conflicts::Tree(tree) => tree.overlapping(id, &self.inserted, out),
        }
    }
}

/// The interference graph of seed 000 as adjacency lists in one flat array
/// (CSR), built by a sweep line over lifetimes sorted by first step. Only
/// buffers that need memory have edges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterferenceGraph {
    /// Buffer `i`'s neighbours are `adjacency[row[i]..row[i + 1]]`.
    row: Vec<usize>,
    adjacency: Vec<u32>,
}

impl InterferenceGraph {
    /// O(n log n + edges) time and O(n + edges) memory: mind the edge count
    /// ([`count_conflicts`]) before building it for long, dense lifetimes.
    pub fn build(live: &Liveness) -> Self {
        let order = by_first(live);
        let mut row = vec![0usize; live.len() + 1];
        sweep(&order, |a, b| {
            row[a.index() + 1] += 1;
            row[b.index() + 1] += 1;
        });
        for i in 1..row.len() {
            row[i] += row[i - 1];
        }
        let mut next = row.clone();
        let mut adjacency = vec![0u32; row[live.len()]];
        sweep(&order, |a, b| {
            adjacency[next[a.index()]] = b.0;
            next[a.index()] += 1;
            adjacency[next[b.index()]] = a.0;
            next[b.index()] += 1;
        });
        Self { row, adjacency }
    }

    /// The buffers that conflict with `id` (none for an unknown id).
    pub fn neighbours(&self, id: BufferId) -> impl Iterator<Item = BufferId> + '_ {
        let i = id.index();
        let range = match (self.row.get(i), self.row.get(i + 1)) {
            (Some(&from), Some(&to)) => from..to,
            _ => 0..0,
        };
        self.adjacency[range].iter().map(|&j| BufferId(j))
    }

    /// Number of conflicting pairs.
    pub fn edge_count(&self) -> usize {
        self.adjacency.len() / 2
    }
}

/// Number of conflicting pairs, without enumerating them: in order of first
/// step, buffer `i` conflicts with every earlier one except those that died
/// before it started. O(n log n).
pub fn count_conflicts(live: &Liveness) -> usize {
    let planned = || live.ids().filter(|&id| live.size(id) > 0);
    let mut firsts: Vec<usize> = planned().map(|id| live.lifetime(id).first).collect();
    let mut lasts: Vec<usize> = planned().map(|id| live.lifetime(id).last).collect();
    firsts.sort_unstable();
    lasts.sort_unstable();
    firsts
        .iter()
        .enumerate()
        .map(|(before, &first)| before - lasts.partition_point(|&last| last < first))
        .sum()
}

/// The tree-based index: a placed `J` intersects a query `I` iff `J` contains
/// `I.first` or `J` starts inside `(I.first, I.last]`. The first set is a stabbing
/// query on [`SegmentLists`], the second a contiguous slice of the buffers sorted
/// by start, filtered to the placed ones. The two sets are disjoint, so no answer
/// repeats. Every buffer the slice visits starts inside `I` and so conflicts with
/// it, and every rank it spans is an endpoint of one that does: the scan costs no
/// more than the conflicts themselves.
#[derive(Debug, Clone)]
struct TreeIndex {
    /// Per buffer: its lifetime in ranks, None for zero-size buffers.
    spans: Vec<Option<(usize, usize)>>,
    covering: SegmentLists,
    /// Buffers that need memory, sorted by (start rank, id).
    by_start: Vec<u32>,
    /// Per rank `r` (and one past the last): the first index in `by_start` whose
    /// start rank is at least `r`.
    rank_begin: Vec<usize>,
    stab_scratch: Vec<u32>,
}

impl TreeIndex {
    fn new(live: &Liveness) -> Self {
        let axis = TimeAxis::new(live);
        let ranks = axis.len();
        let spans: Vec<Option<(usize, usize)>> = live
            .lifetimes
            .iter()
            .zip(&live.sizes)
            .map(|(&l, &size)| (size > 0).then(|| axis.compress(l)))
            .collect();
        // Counting sort by start rank; ids ascend within a rank.
        let mut rank_begin = vec![0usize; ranks + 1];
        for &(lo, _) in spans.iter().flatten() {
            rank_begin[lo + 1] += 1;
        }
        for r in 1..rank_begin.len() {
            rank_begin[r] += rank_begin[r - 1];
        }
        let mut next = rank_begin.clone();
        let mut by_start = vec![0u32; rank_begin[ranks]];
        for (id, span) in live.ids().zip(&spans) {
            if let Some((lo, _)) = *span {
                by_start[next[lo]] = id.0;
                next[lo] += 1;
            }
        }
        Self {
            covering: SegmentLists::new(ranks, &spans),
            spans,
            by_start,
            rank_begin,
            stab_scratch: Vec::new(),
        }
    }

    fn insert(&mut self, id: BufferId) {
        if let Some(&Some((lo, hi))) = self.spans.get(id.index()) {
            self.covering.insert(lo, hi, id.0);
        }
    }

    fn overlapping(&mut self, id: BufferId, inserted: &[bool], out: &mut Vec<BufferId>) {
        let Some(&Some((lo, hi))) = self.spans.get(id.index()) else {
            return;
        };
        self.stab_scratch.clear();
        self.covering.stab(lo, &mut self.stab_scratch);
        out.extend(
            self.stab_scratch
                .iter()
                .filter(|&&j| j != id.0)
                .map(|&j| BufferId(j)),
        );
        let starting_inside = &self.by_start[self.rank_begin[lo + 1]..self.rank_begin[hi + 1]];
        out.extend(
            starting_inside
                .iter()
                .filter(|&&j| j != id.0 && inserted[j as usize])
                .map(|&j| BufferId(j)),
        );
    }
}

/// Calls `f(a, b)` once for every conflicting pair (a < b by id) of buffers that
/// need memory: a sweep line over lifetimes sorted by first step, keeping the
/// buffers still live. O(n log n + edges).
pub fn for_each_conflict(live: &Liveness, f: impl FnMut(BufferId, BufferId)) {
    sweep(&by_first(live), f);
}

/// (first, last, id) of the buffers that need memory, by first step then id.
fn by_first(live: &Liveness) -> Vec<(usize, usize, u32)> {
    let mut order: Vec<(usize, usize, u32)> = live
        .ids()
        .filter(|&id| live.size(id) > 0)
        .map(|id| (live.lifetime(id).first, live.lifetime(id).last, id.0))
        .collect();
    order.sort_unstable();
    order
}

/// The sweep behind [`for_each_conflict`], over [`by_first`]'s order. Lifetimes
/// are copied into the active list so the inner loop touches no other memory.
fn sweep(order: &[(usize, usize, u32)], mut f: impl FnMut(BufferId, BufferId)) {
    let mut active: Vec<(usize, u32)> = Vec::new(); // (last, id)
    for &(first, last, id) in order {
        active.retain(|&(other_last, _)| other_last >= first);
        for &(_, other) in &active {
            f(BufferId(other.min(id)), BufferId(other.max(id)));
        }
        active.push((last, id));
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
            let mut ranges = Vec::new();
            for lo in 0..leaves {
                for hi in lo..leaves {
                    ranges.push((lo, hi));
                }
            }
            let announced: Vec<_> = ranges.iter().copied().map(Some).collect();
            let mut tree = SegmentLists::new(leaves, &announced);
            for (id, &(lo, hi)) in ranges.iter().enumerate() {
                tree.insert(lo, hi, id as u32);
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
            // Out-of-range or unannounced requests are ignored, not panics.
            tree.insert(0, leaves, 0);
            tree.insert(0, 0, 0);
            tree.stab(leaves, &mut Vec::new());
            let mut again = Vec::new();
            tree.stab(0, &mut again);
            assert_eq!(again.len(), leaves);
            // take_stab empties the path.
            let mut taken = Vec::new();
            tree.take_stab(0, &mut taken);
            assert_eq!(taken.len(), leaves);
            taken.clear();
            tree.take_stab(0, &mut taken);
            assert!(taken.is_empty());
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
                input.push(BufferRequest::new(
                    format!("b{i}"),
                    next(3) * 100,
                    def,
                    vec![last],
                ));
            }
            let live = analyze(&input).unwrap();
            let ids: Vec<BufferId> = live.ids().collect();
            let mut graph = OverlapIndex::with_edge_budget(&live, usize::MAX);
            let mut tree = OverlapIndex::with_edge_budget(&live, 0);
            assert!(graph.uses_graph());
            assert!(!tree.uses_graph() || count_conflicts(&live) == 0);
            for index in [&mut graph, &mut tree] {
                check_index(&live, &ids, index);
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
            assert_eq!(count_conflicts(&live), brute);
            assert_eq!(InterferenceGraph::build(&live).edge_count(), brute);
        }
    }

    /// Inserts `ids` in order, checking each query against a pairwise scan.
    fn check_index(live: &Liveness, ids: &[BufferId], index: &mut OverlapIndex) {
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
            index.insert(id); // twice is harmless
        }
        index.insert(BufferId(u32::MAX)); // unknown ids are ignored
        index.overlapping(BufferId(u32::MAX), &mut Vec::new());
    }
}
