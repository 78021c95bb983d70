//! The strategies [`super::plan`] tries, and the work they share within one call.

use super::improve::{self, Start};
use super::interference::OverlapIndex;
use super::offsets::{breadth_order, place_in_order_with};
use super::{Liveness, PlanError, pools};

/// The placement strategies `plan` tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// TFLite-GPU greedy by size: largest first, best-fit gap among conflicting buffers.
    GreedyBySize,
    /// TFLite-GPU greedy by breadth: busiest steps first, their buffers by size.
    GreedyByBreadth,
    /// Seed 000: colour into pools (max member size), pools laid end to end.
    Pools,
    /// The better of the two greedy orders, improved by a bounded local search over
    /// the order around the buffers that reach the top of the arena.
    LocalSearch,
}

impl Strategy {
    /// Every strategy, in the order that breaks ties between equal arenas. The local
    /// search comes last: it never does worse than the greedy orders it starts
    /// from, and wins only where it does better.
    pub const ALL: &'static [Strategy] = &[
        Strategy::GreedyBySize,
        Strategy::GreedyByBreadth,
        Strategy::Pools,
        Strategy::LocalSearch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::GreedyBySize => "greedy-by-size",
            Strategy::GreedyByBreadth => "greedy-by-breadth",
            Strategy::Pools => "pools",
            Strategy::LocalSearch => "local-search",
        }
    }

    /// Offsets per buffer for this strategy (not yet validated).
    pub fn offsets(self, live: &Liveness) -> Result<Vec<usize>, PlanError> {
        self.offsets_shared(&mut Shared::new(live))
    }

    /// Like [`Strategy::offsets`], reusing what earlier strategies left in `shared`.
    pub(crate) fn offsets_shared(self, shared: &mut Shared<'_>) -> Result<Vec<usize>, PlanError> {
        let live = shared.live;
        match self {
            Strategy::GreedyBySize => {
                let order = live.by_size_desc();
                let offsets = place_in_order_with(live, shared.index(), &order)?;
                shared.by_size = Some(Start {
                    order,
                    offsets: Some(offsets.clone()),
                });
                Ok(offsets)
            }
            Strategy::GreedyByBreadth => {
                let order = breadth_order(live);
                let offsets = place_in_order_with(live, shared.index(), &order)?;
                shared.by_breadth = Some(Start {
                    order,
                    offsets: Some(offsets.clone()),
                });
                Ok(offsets)
            }
            Strategy::Pools => pools::plan_pools_with(live, shared.index()),
            Strategy::LocalSearch => {
                let unplaced = |order| Start {
                    order,
                    offsets: None,
                };
                let starts = vec![
                    shared
                        .by_size
                        .take()
                        .unwrap_or_else(|| unplaced(live.by_size_desc())),
                    shared
                        .by_breadth
                        .take()
                        .unwrap_or_else(|| unplaced(breadth_order(live))),
                ];
                improve::local_search_from(live, shared.index(), starts)
            }
        }
    }
}

/// What the strategies of one [`super::plan_with`] call share: the conflict index
/// (built once, copied empty to each strategy; building it costs more than copying
/// it) and the greedy orders with their placements, which the local search starts
/// from instead of computing them again. A greedy placement is by definition
/// [`place_in_order_with`] of its order, so handing it over is exact.
pub(crate) struct Shared<'a> {
    live: &'a Liveness,
    index: Option<OverlapIndex>,
    by_size: Option<Start>,
    by_breadth: Option<Start>,
}

impl<'a> Shared<'a> {
    pub(crate) fn new(live: &'a Liveness) -> Self {
        Self {
            live,
            index: None,
            by_size: None,
            by_breadth: None,
        }
    }

    /// An empty copy of the conflict index, built on first use.
    fn index(&mut self) -> OverlapIndex {
        let live = self.live;
        self.index
            .get_or_insert_with(|| OverlapIndex::new(live))
            .clone()
    }
}
