//! Pass 1: lifetimes, aligned sizes and the liveness lower bound.
//!
//! Every later pass works on [`Liveness`] only, so input checking happens once,
//! here: after [`analyze`] every lifetime lies inside `0..steps` and every size
//! is aligned without overflow, as is their sum.

use super::{BufferId, Lifetime, PlanError, PlanInput};

/// What the strategies need to know about each buffer, plus the two totals
/// every plan is judged against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Liveness {
    pub steps: usize,
    pub alignment: usize,
    /// Per buffer: inclusive step range.
    pub lifetimes: Vec<Lifetime>,
    /// Per buffer: size rounded up to `alignment`; 0 means "needs no memory".
    pub sizes: Vec<usize>,
    /// Sum of `sizes`: the arena with no reuse.
    pub naive_bytes: usize,
    /// max over steps of the bytes live at that step: no arena without aliasing
    /// can be smaller.
    pub lower_bound_bytes: usize,
    /// First step where the lower bound is reached (None when it is 0).
    pub peak_step: Option<usize>,
    /// Per buffer: a buffer that must sit at a fixed distance from it (bytes, the
    /// other's offset minus this one's), both ways. Empty from [`analyze`]; the two
    /// parts of a block with a segment overlap are tied ([`super::alias::Blocks`]).
    pub tied: Vec<Option<(BufferId, isize)>>,
}

impl Liveness {
    pub fn len(&self) -> usize {
        self.sizes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty()
    }

    pub fn lifetime(&self, id: BufferId) -> Lifetime {
        self.lifetimes[id.index()]
    }

    /// The buffer `id` is tied to and its distance from `id`, if any.
    pub fn tie(&self, id: BufferId) -> Option<(BufferId, isize)> {
        self.tied.get(id.index()).copied().flatten()
    }

    /// Whether any buffers are tied (strategies that cannot keep ties skip such inputs).
    pub fn has_ties(&self) -> bool {
        self.tied.iter().any(Option::is_some)
    }

    pub fn size(&self, id: BufferId) -> usize {
        self.sizes[id.index()]
    }

    /// Buffers that need memory, largest first; ties by earlier first step, then
    /// by id, so the order (and every plan built from it) is deterministic.
    pub fn by_size_desc(&self) -> Vec<BufferId> {
        let mut ids: Vec<BufferId> = self.ids().filter(|&id| self.size(id) > 0).collect();
        ids.sort_unstable_by_key(|&id| self.size_order_key(id));
        ids
    }

    /// The sort key behind [`Liveness::by_size_desc`].
    pub fn size_order_key(&self, id: BufferId) -> (std::cmp::Reverse<usize>, usize, BufferId) {
        (
            std::cmp::Reverse(self.size(id)),
            self.lifetime(id).first,
            id,
        )
    }

    /// All buffer ids, in input order.
    pub fn ids(&self) -> impl Iterator<Item = BufferId> + '_ {
        // `analyze` rejects inputs with more than u32::MAX / 2 buffers.
        (0..self.len() as u32).map(BufferId)
    }
}

/// Checks `input` and computes lifetimes, aligned sizes and the lower bound.
pub fn analyze(input: &PlanInput) -> Result<Liveness, PlanError> {
    let alignment = input.alignment;
    if !alignment.is_power_of_two() {
        return Err(PlanError::BadAlignment { alignment });
    }
    if !input.step_names.is_empty() && input.step_names.len() != input.steps {
        return Err(PlanError::StepNames {
            steps: input.steps,
            names: input.step_names.len(),
        });
    }
    // Ids are u32, and the time axis holds up to two ranks per buffer, also as u32.
    let max = (u32::MAX / 2) as usize;
    if input.buffers.len() > max {
        return Err(PlanError::TooManyBuffers {
            count: input.buffers.len(),
            max,
        });
    }

    let mut lifetimes = Vec::with_capacity(input.buffers.len());
    let mut sizes = Vec::with_capacity(input.buffers.len());
    let mut naive_bytes = 0usize;
    for buffer in &input.buffers {
        lifetimes.push(lifetime_of(buffer, input.steps)?);
        let size = align_up(buffer.size, alignment).ok_or_else(|| PlanError::Overflow {
            what: format!(
                "size {} of buffer `{}` rounded up to {alignment}",
                buffer.size, buffer.name
            ),
        })?;
        naive_bytes = naive_bytes
            .checked_add(size)
            .ok_or_else(|| PlanError::Overflow {
                what: format!(
                    "total size of all buffers, at buffer `{}` ({size} bytes)",
                    buffer.name
                ),
            })?;
        sizes.push(size);
    }

    let (lower_bound_bytes, peak_step) = lower_bound(input.steps, &lifetimes, &sizes);
    Ok(Liveness {
        steps: input.steps,
        alignment,
        lifetimes,
        sizes,
        naive_bytes,
        lower_bound_bytes,
        peak_step,
        tied: vec![None; input.buffers.len()],
    })
}

/// `size` rounded up to the power of two `alignment`, or None on overflow.
pub fn align_up(size: usize, alignment: usize) -> Option<usize> {
    let mask = alignment.checked_sub(1)?;
    Some(size.checked_add(mask)? & !mask)
}

/// `[def, max(uses ∪ {def})]`, extended to the last step for outputs, `[def, def]`
/// for scratch.
fn lifetime_of(buffer: &super::BufferRequest, steps: usize) -> Result<Lifetime, PlanError> {
    let def = buffer.def;
    if def >= steps {
        return Err(PlanError::DefOutOfRange {
            buffer: buffer.name.clone(),
            def,
            steps,
        });
    }
    let mut last = def;
    for &step in &buffer.uses {
        if step >= steps {
            return Err(PlanError::UseOutOfRange {
                buffer: buffer.name.clone(),
                step,
                steps,
            });
        }
        if step < def {
            return Err(PlanError::UseBeforeDef {
                buffer: buffer.name.clone(),
                step,
                def,
            });
        }
        if buffer.scratch && step != def {
            return Err(PlanError::ScratchUsedLater {
                buffer: buffer.name.clone(),
                def,
                step,
            });
        }
        last = last.max(step);
    }
    if buffer.live_to_end {
        if buffer.scratch {
            return Err(PlanError::ScratchLiveToEnd {
                buffer: buffer.name.clone(),
            });
        }
        // def < steps, so steps >= 1.
        last = steps - 1;
    }
    Ok(Lifetime::new(def, last))
}

/// Beyond this many steps per buffer, a per-step array would be mostly empty:
/// switch to sorting the buffers' endpoints instead.
const DENSE_STEPS_PER_BUFFER: usize = 4;

/// (max over steps of live bytes, first step reaching it).
///
/// A difference array over steps, O(n + steps), when steps are not far more
/// numerous than buffers; otherwise a sweep over sorted endpoints, O(n log n), so
/// that a huge `steps` never turns into a huge allocation. Sizes must already have
/// a checked sum, so no partial sum can overflow.
pub(crate) fn lower_bound(
    steps: usize,
    lifetimes: &[Lifetime],
    sizes: &[usize],
) -> (usize, Option<usize>) {
    let dense_limit = lifetimes
        .len()
        .saturating_add(1)
        .saturating_mul(DENSE_STEPS_PER_BUFFER);
    if steps <= dense_limit {
        lower_bound_dense(steps, lifetimes, sizes)
    } else {
        lower_bound_sparse(lifetimes, sizes)
    }
}

pub(crate) fn lower_bound_dense(
    steps: usize,
    lifetimes: &[Lifetime],
    sizes: &[usize],
) -> (usize, Option<usize>) {
    // born[s]: bytes whose lifetime starts at s; dies[s]: bytes whose lifetime ends at s.
    let mut born = vec![0usize; steps];
    let mut dies = vec![0usize; steps];
    for (life, &size) in lifetimes.iter().zip(sizes) {
        if size == 0 {
            continue;
        }
        if let (Some(b), Some(d)) = (born.get_mut(life.first), dies.get_mut(life.last)) {
            *b = b.saturating_add(size);
            *d = d.saturating_add(size);
        }
    }
    let (mut live, mut best, mut peak) = (0usize, 0usize, None);
    for (step, (&b, &d)) in born.iter().zip(&dies).enumerate() {
        live = live.saturating_add(b);
        if live > best {
            best = live;
            peak = Some(step);
        }
        live = live.saturating_sub(d);
    }
    (best, peak)
}

pub(crate) fn lower_bound_sparse(
    lifetimes: &[Lifetime],
    sizes: &[usize],
) -> (usize, Option<usize>) {
    let planned = || lifetimes.iter().zip(sizes).filter(|(_, s)| **s > 0);
    let mut starts: Vec<(usize, usize)> = planned().map(|(l, &s)| (l.first, s)).collect();
    let mut ends: Vec<(usize, usize)> = planned().map(|(l, &s)| (l.last, s)).collect();
    starts.sort_unstable();
    ends.sort_unstable();
    // Live bytes only grow where a lifetime starts, so the maximum is reached at a start.
    let (mut live, mut best, mut peak) = (0usize, 0usize, None);
    let (mut i, mut j) = (0, 0);
    while let Some(&(step, _)) = starts.get(i) {
        while let Some(&(_, size)) = ends.get(j).filter(|(last, _)| *last < step) {
            live = live.saturating_sub(size);
            j += 1;
        }
        while let Some(&(_, size)) = starts.get(i).filter(|(first, _)| *first == step) {
            live = live.saturating_add(size);
            i += 1;
        }
        if live > best {
            best = live;
            peak = Some(step);
        }
    }
    (best, peak)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{brute_lower_bound, seed_003_example};
    use super::super::{BufferRequest, PlanInput};
    use super::*;

    #[test]
    fn lifetimes_follow_the_rules() {
        let mut input = PlanInput::new(10);
        input.push(BufferRequest::new("plain", 1, 2, vec![5, 3]));
        input.push(BufferRequest::new("unread", 1, 4, vec![]));
        input.push(BufferRequest::output("out", 1, 6));
        input.push(BufferRequest::scratch("tmp", 1, 7));
        input.push(BufferRequest {
            uses: vec![7, 7],
            ..BufferRequest::scratch("tmp_read_at_def", 1, 7)
        });
        input.push(BufferRequest {
            live_to_end: true,
            ..BufferRequest::new("read_and_output", 1, 1, vec![3])
        });
        let live = analyze(&input).unwrap();
        assert_eq!(
            live.lifetimes,
            vec![
                Lifetime::new(2, 5),
                Lifetime::new(4, 4),
                Lifetime::new(6, 9),
                Lifetime::new(7, 7),
                Lifetime::new(7, 7),
                Lifetime::new(1, 9),
            ]
        );
        assert_eq!(live.sizes, vec![256; 6]);
    }

    #[test]
    fn seed_003_totals() {
        let live = analyze(&seed_003_example()).unwrap();
        assert_eq!(live.naive_bytes, 330 * 1024);
        assert_eq!(live.lower_bound_bytes, 230 * 1024);
        assert_eq!(live.peak_step, Some(3));
    }

    #[test]
    fn align_up_rounds_and_detects_overflow() {
        assert_eq!(align_up(0, 256), Some(0));
        assert_eq!(align_up(1, 256), Some(256));
        assert_eq!(align_up(256, 256), Some(256));
        assert_eq!(align_up(257, 256), Some(512));
        assert_eq!(align_up(7, 1), Some(7));
        assert_eq!(align_up(usize::MAX, 1), Some(usize::MAX));
        assert_eq!(align_up(usize::MAX - 254, 256), None);
        assert_eq!(align_up(usize::MAX - 255, 256), Some(usize::MAX - 255));
    }

    #[test]
    fn dense_and_sparse_lower_bounds_agree_with_brute_force() {
        // A small deterministic pseudo-random family; proptests cover more.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % m as u64) as usize
        };
        for _ in 0..300 {
            let steps = 1 + next(20);
            let mut input = PlanInput::new(steps);
            input.alignment = 1 << next(9);
            for i in 0..next(25) {
                let def = next(steps);
                let last = def + next(steps - def);
                let mut b = BufferRequest::new(format!("b{i}"), next(2000), def, vec![last]);
                b.live_to_end = next(8) == 0;
                input.push(b);
            }
            let live = analyze(&input).unwrap();
            let dense = lower_bound_dense(steps, &live.lifetimes, &live.sizes);
            let sparse = lower_bound_sparse(&live.lifetimes, &live.sizes);
            assert_eq!(dense, sparse);
            assert_eq!(dense.0, brute_lower_bound(&input));
            assert_eq!(live.lower_bound_bytes, dense.0);
        }
    }
}
