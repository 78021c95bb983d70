//! Pass 3b: seed 000's greedy colouring into pools.
//!
//! Buffers largest first; each joins the first pool none of whose members it
//! conflicts with, else opens a new pool; a pool is as large as its largest
//! member. Pools are then laid end to end. It is coarser than the offset
//! strategies (a pool's bytes are reserved for its largest member all the time),
//! so it rarely wins, but it is the seed's planner and a useful yardstick.

use super::interference::OverlapIndex;
use super::{BufferId, Liveness, PlanError};

/// A colouring: the pool of each buffer and the size of each pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pools {
    /// Per buffer: its pool, None for zero-size buffers (they need no pool).
    pub pool_of: Vec<Option<usize>>,
    /// Per pool: max aligned size of its members.
    pub sizes: Vec<usize>,
}

/// Colours the buffers of `live` into pools, greedily, largest first.
///
/// The pools a buffer may not join are exactly those of the already coloured
/// buffers it conflicts with, found with an [`OverlapIndex`]: O(log n + k) per
/// buffer instead of asking every member of every pool.
pub fn colour(live: &Liveness) -> Pools {
    colour_with(live, OverlapIndex::new(live))
}

/// [`colour`] over an index already built for `live` (emptied first).
pub(crate) fn colour_with(live: &Liveness, mut index: OverlapIndex) -> Pools {
    index.clear();
    let mut pool_of: Vec<Option<usize>> = vec![None; live.len()];
    let mut sizes: Vec<usize> = Vec::new();
    // blocked[p] == k + 1 marks pool p as taken by a conflict of the k-th buffer.
    let mut blocked: Vec<usize> = Vec::new();
    let mut neighbours: Vec<BufferId> = Vec::new();
    for (k, id) in live.by_size_desc().into_iter().enumerate() {
        let mark = k + 1;
        neighbours.clear();
        index.overlapping(id, &mut neighbours);
        for n in &neighbours {
            if let Some(p) = pool_of[n.index()] {
                blocked[p] = mark;
            }
        }
        // At most |neighbours| pools are blocked, so this scan is O(k) too.
        let pool = match blocked.iter().position(|&b| b != mark) {
            Some(p) => p,
            None => {
                sizes.push(0);
                blocked.push(0);
                sizes.len() - 1
            }
        };
        sizes[pool] = sizes[pool].max(live.size(id));
        pool_of[id.index()] = Some(pool);
        index.insert(id);
    }
    Pools { pool_of, sizes }
}

/// Offsets from [`colour`]: each pool starts where the previous one ends, in
/// pool order; every member of a pool sits at the pool's start.
pub fn plan_pools(live: &Liveness) -> Result<Vec<usize>, PlanError> {
    lay_out(colour(live))
}

/// [`plan_pools`] over an index already built for `live`.
pub(crate) fn plan_pools_with(
    live: &Liveness,
    index: OverlapIndex,
) -> Result<Vec<usize>, PlanError> {
    lay_out(colour_with(live, index))
}

fn lay_out(pools: Pools) -> Result<Vec<usize>, PlanError> {
    let mut starts = Vec::with_capacity(pools.sizes.len());
    let mut end = 0usize;
    for &size in &pools.sizes {
        starts.push(end);
        end = end.checked_add(size).ok_or_else(|| PlanError::Overflow {
            what: format!("pools laid end to end, past {end} bytes"),
        })?;
    }
    Ok(pools
        .pool_of
        .iter()
        .map(|pool| pool.and_then(|p| starts.get(p).copied()).unwrap_or(0))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{brute_is_valid, seed_003_example};
    use super::super::{BufferRequest, PlanInput, analyze};
    use super::*;

    const KB: usize = 1024;

    #[test]
    fn seed_003_colours_into_three_pools() {
        let live = analyze(&seed_003_example()).unwrap();
        let pools = colour(&live);
        // T1 and T4 (100 KB each, disjoint) share pool 0; T3 pool 1; T2 pool 2.
        assert_eq!(pools.pool_of, vec![Some(0), Some(2), Some(1), Some(0)]);
        assert_eq!(pools.sizes, vec![100 * KB, 80 * KB, 50 * KB]);
        assert_eq!(plan_pools(&live).unwrap(), vec![0, 180 * KB, 100 * KB, 0]);
    }

    #[test]
    fn a_pool_keeps_its_largest_members_size() {
        // A chain of short-lived buffers: one pool would do for any two disjoint
        // ones, so three alternating pools are never needed.
        let mut input = PlanInput::new(6);
        input.alignment = 1;
        for (i, size) in [500, 100, 400, 100, 300].into_iter().enumerate() {
            input.push(BufferRequest::new(format!("t{i}"), size, i, vec![i + 1]));
        }
        let live = analyze(&input).unwrap();
        let pools = colour(&live);
        assert_eq!(
            pools.pool_of,
            vec![Some(0), Some(1), Some(0), Some(1), Some(0)]
        );
        assert_eq!(pools.sizes, vec![500, 100]);
        let offsets = plan_pools(&live).unwrap();
        assert_eq!(offsets, vec![0, 500, 0, 500, 0]);
        assert!(brute_is_valid(&input, &offsets));
    }

    #[test]
    fn zero_size_buffers_get_no_pool() {
        let mut input = PlanInput::new(1);
        input.push(BufferRequest::new("empty", 0, 0, vec![]));
        input.push(BufferRequest::new("a", 1, 0, vec![]));
        let live = analyze(&input).unwrap();
        let pools = colour(&live);
        assert_eq!(pools.pool_of, vec![None, Some(0)]);
        assert_eq!(plan_pools(&live).unwrap(), vec![0, 0]);
    }
}
