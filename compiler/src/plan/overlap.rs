//! Pass 1c: segment overlapping (vMCU, MLSys 2024). A pooling step reads its input one
//! channel plane after another and writes each output plane only while it reads the
//! matching input plane, so its output may start inside the input it consumes: an
//! output plane may land on input planes already read. That is the only way below the
//! liveness bound where a big tensor feeds a smaller one (a stem convolution into its
//! max pool), since an in-place alias needs equal sizes.
//!
//! [`choose`] keeps each legal candidate where it does not raise the lower bound
//! (the merged block holds the input's bytes until the output dies); the output is
//! then placed [`PlaneOrder::closest_delta`] bytes from its input. Legality, checked
//! again by the validator from the definitions and the kernel's plane order:
//!
//! - the input is a plain buffer (not scratch, not a graph output), written before the
//!   output's step and last read at it, written over by no other buffer;
//! - the output is not scratch and not itself written in place over a buffer;
//! - both split into the order's planes, and at the chosen distance no output plane
//!   lands on an input plane not yet read.

use super::Liveness;
use super::{BufferId, PlanError, PlanInput, alias, analyze};

/// How a kernel walks its input and output: `planes` planes in order, reading input
/// plane `q` (`in_plane` bytes) while it writes output plane `q` (`out_plane` bytes),
/// never an earlier or later plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaneOrder {
    pub planes: usize,
    pub in_plane: usize,
    pub out_plane: usize,
}

impl PlaneOrder {
    /// The largest distance (output offset minus input offset, in bytes), a multiple of
    /// `alignment`, at which every output plane `q` ends before input plane `q` starts:
    /// `d + (q + 1) * out <= q * in` for every `q`, tightest at the first plane when
    /// planes shrink and at the last when they grow.
    pub fn closest_delta(&self, alignment: usize) -> isize {
        let (p, i, o) = (
            self.planes as isize,
            self.in_plane as isize,
            self.out_plane as isize,
        );
        let d = -o - (p - 1).max(0) * (o - i).max(0);
        d.div_euclid(alignment as isize) * alignment as isize
    }

    /// Whether the output at `delta` bytes from the input is safe, plane by plane, by
    /// the runtime's own check of the kernel contract (the validator's proof).
    pub fn is_safe(&self, delta: isize) -> bool {
        // Shift both so that the lower one starts at 0.
        let (x_at, y_at) = if delta < 0 {
            (delta.unsigned_abs(), 0)
        } else {
            (0, delta as usize)
        };
        kiln_runtime::arena::planes_in_order_are_safe(
            x_at,
            y_at,
            self.in_plane,
            self.out_plane,
            self.planes,
        )
    }
}

/// Per buffer, the input it overlaps and the distance in bytes, on top of the in-place
/// aliases `alias_of`: every legal candidate that does not raise the lower bound of
/// those kept before it, in buffer id order.
pub fn choose(
    input: &PlanInput,
    live: &Liveness,
    alias_of: &[Option<BufferId>],
) -> Result<Vec<Option<(BufferId, isize)>>, PlanError> {
    let n = input.buffers.len();
    let mut taken = vec![false; n];
    for x in alias_of.iter().flatten() {
        if let Some(t) = taken.get_mut(x.index()) {
            *t = true;
        }
    }
    let no_slices = vec![None; n];
    let mut overlap_of = vec![None; n];
    let bound_of = |overlap_of: &[Option<(BufferId, isize)>]| -> Result<usize, PlanError> {
        let blocks = alias::merge(input, live, alias_of, &no_slices, overlap_of)?;
        Ok(analyze(&blocks.input)?.lower_bound_bytes)
    };
    let mut bound = live.lower_bound_bytes;
    if alias_of.iter().any(Option::is_some) {
        bound = bound_of(&overlap_of)?;
    }
    // A chain of aliases holds at most one overlap (its block is cut in two once,
    // `alias::merge`): per chain, by its first buffer, whether it has one.
    let mut chain_overlaps = vec![false; n];
    for (y, out) in input.buffers.iter().enumerate() {
        let Some((x, order)) = out.overlap_of else {
            continue;
        };
        let Some(inp) = input.buffers.get(x.index()) else {
            continue;
        };
        let life = live.lifetimes[x.index()];
        let legal = x.index() != y
            && !taken[x.index()]
            && !chain_overlaps[chain_start(x.index(), alias_of, &overlap_of)]
            && !out.scratch
            && !inp.scratch
            && !inp.live_to_end
            && alias_of.get(y).copied().flatten().is_none()
            && life.first < out.def
            && life.last == out.def
            && order.planes.checked_mul(order.in_plane) == Some(inp.size)
            && order.planes.checked_mul(order.out_plane) == Some(out.size);
        if !legal {
            continue;
        }
        let delta = order.closest_delta(input.alignment);
        let mut tried = overlap_of.clone();
        tried[y] = Some((x, delta));
        let with = bound_of(&tried)?;
        if with <= bound {
            (overlap_of, bound) = (tried, with);
            taken[x.index()] = true;
            chain_overlaps[chain_start(y, alias_of, &overlap_of)] = true;
        }
    }
    Ok(overlap_of)
}

/// The first buffer of `i`'s chain of in-place aliases and overlaps (links point to
/// earlier-written buffers; at most `n` are followed, so a malformed cycle ends).
fn chain_start(
    mut i: usize,
    alias_of: &[Option<BufferId>],
    overlap_of: &[Option<(BufferId, isize)>],
) -> usize {
    for _ in 0..alias_of.len().max(overlap_of.len()) {
        let alias = alias_of.get(i).copied().flatten();
        let overlap = overlap_of.get(i).copied().flatten().map(|(x, _)| x);
        match alias.or(overlap) {
            Some(x) if x.index() < alias_of.len().max(overlap_of.len()) => i = x.index(),
            _ => break,
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::super::{BufferRequest, Lifetime};
    use super::*;

    /// The tightest distance is safe, and one alignment step closer is not (unless the
    /// output could start after the whole input, which it never does here).
    #[test]
    fn closest_delta_is_safe_and_tight() {
        for planes in 1..6 {
            for in_plane in [4, 64, 100, 256, 1000] {
                for out_plane in [4, 36, 64, 100, 256, 1200] {
                    for alignment in [4, 64, 256] {
                        let o = PlaneOrder {
                            planes,
                            in_plane,
                            out_plane,
                        };
                        let d = o.closest_delta(alignment);
                        assert!(o.is_safe(d), "{o:?} at {d}");
                        assert_eq!(d % alignment as isize, 0);
                        let closer = d + alignment as isize;
                        if closer + (out_plane as isize) <= 0 || planes == 1 {
                            continue;
                        }
                        assert!(!o.is_safe(closer), "{o:?}: {closer} is safe too");
                    }
                }
            }
        }
    }

    use super::super::testutil::pool_example as stem;

    #[test]
    fn an_overlap_is_kept_where_it_lowers_the_bound() {
        let input = stem(512, 4096);
        let live = analyze(&input).unwrap();
        let none = vec![None; 4];
        let overlap_of = choose(&input, &live, &none).unwrap();
        assert_eq!(overlap_of[2], Some((BufferId(1), -256)));
        // One block cut in two: the pool's bytes (block 1) over the block's life, and
        // the conv's other bytes (block 3), tied 1024 above, until the pool's step.
        let blocks = alias::merge(&input, &live, &none, &[], &overlap_of).unwrap();
        assert_eq!(blocks.block_of, vec![0, 1, 1, 2]);
        assert_eq!(blocks.delta, vec![0, 256, 0, 0]);
        assert_eq!(blocks.ties, vec![(1, 3, 1024)]);
        let merged = blocks.liveness().unwrap();
        assert_eq!(merged.sizes, vec![512, 1024, 4096, 3328]);
        assert_eq!(merged.lifetimes[1], Lifetime::new(1, 3));
        assert_eq!(merged.lifetimes[3], Lifetime::new(1, 2));
        assert_eq!(merged.tie(BufferId(3)), Some((BufferId(1), -1024)));
        // 4352 at the conv and the pool, then 1024 + 4096 (the pool beside `other`),
        // instead of 4096 + 1024 at the pool.
        assert_eq!(merged.lower_bound_bytes, 5120);
        assert_eq!(live.lower_bound_bytes, 5120);
        let input = stem(512, 512);
        let live = analyze(&input).unwrap();
        let blocks = alias::merge(
            &input,
            &live,
            &none,
            &[],
            &choose(&input, &live, &none).unwrap(),
        );
        assert_eq!(
            blocks.unwrap().liveness().unwrap().lower_bound_bytes,
            4096 + 256 + 512
        );
    }

    #[test]
    fn an_overlap_that_raises_the_bound_or_is_illegal_is_dropped() {
        let none = vec![None; 4];
        let chosen = |input: &PlanInput| {
            let live = analyze(input).unwrap();
            choose(input, &live, &none).unwrap()[2]
        };
        // The peak is the image beside the conv, which the overlap's block widens by
        // the 256 bytes the pool starts below it.
        assert_eq!(chosen(&stem(8192, 512)), None);
        // The conv is read again later, is a graph output, or is scratch.
        let mut input = stem(512, 512);
        input.buffers[1].uses.push(3);
        assert_eq!(chosen(&input), None);
        let mut input = stem(512, 512);
        input.buffers[1].live_to_end = true;
        assert_eq!(chosen(&input), None);
        let mut input = stem(512, 512);
        input.buffers[1].scratch = true;
        input.buffers[1].uses.clear();
        assert_eq!(chosen(&input), None);
        // The planes do not match the sizes.
        let mut input = stem(512, 512);
        input.buffers[2].size = 1000;
        assert_eq!(chosen(&input), None);
    }

    /// A pool over a pool: only the first overlap of a chain is kept (its block is cut
    /// once).
    #[test]
    fn a_chain_keeps_one_overlap() {
        let mut input = stem(512, 512);
        let order = PlaneOrder {
            planes: 4,
            in_plane: 256,
            out_plane: 64,
        };
        input.buffers[3] = BufferRequest {
            overlap_of: Some((BufferId(2), order)),
            ..BufferRequest::new("pool2", 256, 3, vec![4])
        };
        let live = analyze(&input).unwrap();
        let overlap_of = choose(&input, &live, &[None; 4]).unwrap();
        assert_eq!(overlap_of[2].map(|o| o.0), Some(BufferId(1)));
        assert_eq!(overlap_of[3], None);
    }
}
