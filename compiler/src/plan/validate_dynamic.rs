//! Pass 4 for dynamic shapes: a checker for a [`DynamicPlan`] against its input.
//!
//! Every point of the ranges cannot be tried, so the checker does two things. It
//! checks the premises of the planner's argument for all points at once,
//! symbolically: every reserved size is monotone, an alias's size equals its
//! target's, a slice's offset is a multiple of the alignment. And at sampled points
//! ([`sample_points`]: the corners of the ranges and seeded random values) it
//! evaluates the plan as generated code would and hands it to the static validator
//! ([`validate()`]), which recomputes lifetimes and sizes from the point's input and
//! sweeps for overlaps; there the arena must not exceed the plan's maximum, and
//! every requested size must fit what the arena holds for it.

use super::dynamic::{DynamicInput, DynamicOffset, DynamicPlan, DynamicPlanError, Values};
use super::validate;
use crate::dim::SymbolRange;

/// Points drawn at random by [`sample_points`], beside the corners.
pub const RANDOM_POINTS: usize = 16;

/// Up to this many symbols, [`sample_points`] tries every corner of the ranges.
pub const ALL_CORNERS_UP_TO: usize = 4;

/// Checks `plan` for `input`: the premises for every point, then the plan at each of
/// [`sample_points`].
pub fn validate_dynamic(input: &DynamicInput, plan: &DynamicPlan) -> Result<(), DynamicPlanError> {
    let n = input.input.buffers.len();
    if plan.buffers.len() != n || input.sizes.len() != n {
        return Err(DynamicPlanError::Shape {
            what: "planned buffers and sizes",
            expected: n,
            found: plan.buffers.len().min(input.sizes.len()),
        });
    }
    for (i, b) in plan.buffers.iter().enumerate() {
        let reason = if b.requested != input.sizes[i] {
            Some("is planned for another size than its request's")
        } else if !b.size.is_monotone() {
            Some("has a reserved size that is not monotone")
        } else {
            match &b.offset {
                DynamicOffset::Alias(x)
                    if plan.buffers.get(x.index()).map(|t| &t.requested) != Some(&b.requested) =>
                {
                    Some("is written in place over a buffer of another size")
                }
                DynamicOffset::Slice(_, delta) if !delta.is_multiple_of(plan.alignment as u64) => {
                    Some("is a slice at an offset not always aligned")
                }
                _ => None,
            }
        };
        if let Some(reason) = reason {
            return Err(DynamicPlanError::Malformed {
                buffer: b.name.clone(),
                reason,
            });
        }
    }
    if plan.arena_bytes_max > plan.at_max.arena_bytes {
        return Err(DynamicPlanError::Bound {
            at: "the largest point".into(),
            reason: format!(
                "the arena needs {} bytes, more than the static plan's {}",
                plan.arena_bytes_max, plan.at_max.arena_bytes
            ),
        });
    }
    for point in sample_points(&plan.symbols) {
        let values = Values(
            plan.symbols
                .iter()
                .zip(point)
                .map(|(r, v)| (r.name.clone(), v))
                .collect(),
        );
        check_point(input, plan, &values)?;
    }
    Ok(())
}

/// The plan at one point: valid there by the static validator, within its maximum
/// arena, and every requested size inside what the arena holds for it.
fn check_point(
    input: &DynamicInput,
    plan: &DynamicPlan,
    values: &Values,
) -> Result<(), DynamicPlanError> {
    let (point, memory) = plan.at(input, &|s| values.get(s))?;
    let at = values.to_string();
    validate(&point, &memory).map_err(|source| DynamicPlanError::Invalid {
        at: at.clone(),
        source: Box::new(source),
    })?;
    if memory.arena_bytes > plan.arena_bytes_max {
        return Err(DynamicPlanError::Bound {
            at,
            reason: format!(
                "the arena needs {} bytes, more than its maximum {}",
                memory.arena_bytes, plan.arena_bytes_max
            ),
        });
    }
    for (size, request) in input.sizes.iter().zip(&point.buffers) {
        let buffer = request.name.clone();
        let value = size
            .eval(&|s| values.get(s))
            .ok_or_else(|| DynamicPlanError::Overflow {
                buffer: buffer.clone(),
                what: "size",
                expr: size.to_string(),
                at: at.clone(),
            })?;
        let fits = match usize::try_from(value) {
            Err(_) => {
                return Err(DynamicPlanError::Negative {
                    buffer,
                    what: "size",
                    expr: size.to_string(),
                    value,
                    at,
                });
            }
            Ok(bytes) => bytes <= request.size,
        };
        if !fits {
            return Err(DynamicPlanError::Bound {
                at,
                reason: format!(
                    "buffer `{buffer}` needs {value} bytes ({size}), but the arena holds {} for it",
                    request.size
                ),
            });
        }
    }
    Ok(())
}

/// The points a plan is checked at, as values in the order of `symbols`: every
/// corner (each symbol at its min or its largest value) for up to
/// [`ALL_CORNERS_UP_TO`] symbols, else the two extreme corners and each symbol
/// flipped alone from them; then [`RANDOM_POINTS`] points on the ranges' steps
/// drawn from a fixed seed. Without duplicates, deterministic.
pub fn sample_points(symbols: &[SymbolRange]) -> Vec<Vec<i64>> {
    let low: Vec<i64> = symbols.iter().map(|r| as_i64(r.min)).collect();
    let high: Vec<i64> = symbols.iter().map(|r| as_i64(r.largest())).collect();
    let mut points: Vec<Vec<i64>> = Vec::new();
    let mut add = |p: Vec<i64>| {
        if !points.contains(&p) {
            points.push(p);
        }
    };
    let k = symbols.len();
    if k <= ALL_CORNERS_UP_TO {
        for mask in 0..1u32 << k {
            add((0..k)
                .map(|j| if mask >> j & 1 == 1 { high[j] } else { low[j] })
                .collect());
        }
    } else {
        add(low.clone());
        add(high.clone());
        for j in 0..k {
            for (base, flip) in [(&low, &high), (&high, &low)] {
                let mut p = base.clone();
                p[j] = flip[j];
                add(p);
            }
        }
    }
    let mut state = 0x6b69_6c6e_u64; // "kiln"
    for _ in 0..RANDOM_POINTS {
        let p = symbols
            .iter()
            .map(|r| {
                let step = r.step.max(1);
                let count = (r.largest() - r.min) / step + 1;
                as_i64(r.min + step * (splitmix64(&mut state) % count))
            })
            .collect();
        add(p);
    }
    points
}

/// Range values fit i64 (the planner rejects others); saturate rather than wrap.
fn as_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corners_then_random_points_on_the_steps() {
        let w = SymbolRange {
            step: 8,
            ..SymbolRange::new("W", 32, 100)
        };
        let h = SymbolRange::new("H", 1, 3);
        let points = sample_points(&[h.clone(), w.clone()]);
        assert_eq!(
            &points[..4],
            &[vec![1, 32], vec![3, 32], vec![1, 96], vec![3, 96]]
        );
        assert!(points.len() > 4 && points.len() <= 4 + RANDOM_POINTS);
        for p in &points {
            assert!(h.admits(p[0] as u64) && w.admits(p[1] as u64), "{p:?}");
        }
        assert_eq!(points, sample_points(&[h, w]), "deterministic");
        // No symbols: one point.
        assert_eq!(sample_points(&[]), vec![Vec::<i64>::new()]);
        // Many symbols: the extreme corners and one flip at a time.
        let many: Vec<SymbolRange> = (0..6)
            .map(|i| SymbolRange::new(&format!("S{i}"), 1, 2))
            .collect();
        let points = sample_points(&many);
        assert_eq!(points[0], vec![1; 6]);
        assert_eq!(points[1], vec![2; 6]);
        assert_eq!(points[2], vec![2, 1, 1, 1, 1, 1]);
        assert_eq!(points[3], vec![1, 2, 2, 2, 2, 2]);
        // A range of one value: every point is the same.
        let one = SymbolRange::new("N", 7, 7);
        assert_eq!(sample_points(&[one]), vec![vec![7]]);
    }
}
