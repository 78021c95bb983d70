//! Max pooling 3×3 at stride 2 with AVX-512, for the zoo's unpadded floor-mode pools
//! over rows of at most 128 columns (SqueezeNet's 128×55² and 256×27², Inception
//! v1's 64×112²).
//!
//! Each output row is computed in registers from its three input rows: their
//! columns folded down in up to eight vectors of sixteen, then the even and the odd
//! columns taken apart by two-source permutes (`vpermt2ps`), and the window's third
//! column is the even columns shifted one lane (`valignd`). The general row path
//! (`pool::Pooling::reduce_rows`) folds down into a buffer, then across it with AVX2
//! shuffles of eight lanes: 128×55² took 0.062 ms there on one Zen 5 core.
//!
//! A NaN is left out of a window's maximum, as `f32::max` leaves it out, and a window
//! of NaNs only gives -∞, the maximum's identity (as the reference fold from -∞
//! does): each fold is `maxps(x, m)` from `m = -∞`, which gives `m` where `x` is NaN,
//! so that `m` never is.

use faer::traits::pulp::x86::V4;
use std::arch::x86_64::{__m512, __m512i};

use crate::params::{Pool2d, PoolKind};

const LANES: usize = 16;

/// The most vectors of input columns a row may have: 128 columns, whose 63 outputs
/// take four vectors.
const MAX_VECTORS: usize = 8;

/// Where this kernel takes the pool: AVX-512 present, a 3×3 max window at stride 2,
/// no padding or dilation, floor mode (the last window ends inside the row), and rows
/// of 3 to 128 columns.
pub(super) fn applies(p: &Pool2d) -> Option<V4> {
    let floor = |inp: usize, out: usize| inp >= 3 && out == (inp - 3) / 2 + 1;
    let fits = p.kind == PoolKind::Max
        && p.kernel == [3, 3]
        && p.stride == [2, 2]
        && p.dilation == [1, 1]
        && p.pads == [0; 4]
        && floor(p.h_in, p.h_out)
        && floor(p.w_in, p.w_out)
        && p.w_in <= MAX_VECTORS * LANES;
    if fits { V4::try_new() } else { None }
}

/// Pools whole planes `x` (`[h_in, w_in]` each) into `y` (`[h_out, w_out]` each), the
/// geometry [`applies`] accepted.
pub(super) fn planes(v4: V4, input: [usize; 2], output: [usize; 2], x: &[f32], y: &mut [f32]) {
    match input[1].div_ceil(LANES) {
        1 => rows::<1, 2, 4>(v4, input, output, x, y),
        2 => rows::<2, 2, 4>(v4, input, output, x, y),
        3 => rows::<3, 2, 4>(v4, input, output, x, y),
        4 => rows::<4, 2, 4>(v4, input, output, x, y),
        5 => rows::<5, 4, 8>(v4, input, output, x, y),
        6 => rows::<6, 4, 8>(v4, input, output, x, y),
        7 => rows::<7, 4, 8>(v4, input, output, x, y),
        _ => rows::<8, 4, 8>(v4, input, output, x, y),
    }
}

/// Lane `k` of the even columns of two vectors, and of the odd ones.
const EVEN: [i32; LANES] = lanes(0);
const ODD: [i32; LANES] = lanes(1);

const fn lanes(first: i32) -> [i32; LANES] {
    let mut lanes = [0; LANES];
    let mut k = 0;
    while k < LANES {
        lanes[k] = 2 * k as i32 + first;
        k += 1;
    }
    lanes
}

/// [`planes`] with rows of at most `NV` vectors, outputs in `NO` vectors from `2·NO`
/// (`VI`) of input columns: arrays no larger than a row needs, which stay in
/// registers (at eight and four for every row, 55 columns took 0.037 ms, not 0.029).
#[allow(clippy::needless_range_loop)] // constant indices into the column maxima
fn rows<const NV: usize, const NO: usize, const VI: usize>(
    v4: V4,
    [h_in, w_in]: [usize; 2],
    [h_out, w_out]: [usize; 2],
    x: &[f32],
    y: &mut [f32],
) {
    v4.vectorize(
        #[inline(always)]
        || {
            let f = v4.avx512f;
            let (even, odd) = (bytemuck::cast(EVEN), bytemuck::cast(ODD));
            let (plane_in, plane_out) = (h_in * w_in, h_out * w_out);
            for (q, x) in x.chunks_exact(plane_in).enumerate() {
                for oh in 0..h_out {
                    // Column maxima of the window's rows; lanes past the row hold the
                    // next row's (or -∞) and reach no output.
                    let first = 2 * oh * w_in;
                    let mut down = [f._mm512_set1_ps(f32::NEG_INFINITY); VI];
                    let end = first + 2 * w_in + NV * LANES;
                    if let Some(rows) = x.get(first..end) {
                        for n in 0..NV {
                            for r in 0..3 {
                                let run = &rows[r * w_in + n * LANES..][..LANES];
                                let run: [f32; LANES] = run.try_into().expect("lanes");
                                down[n] = max(v4, bytemuck::cast(run), down[n]);
                            }
                        }
                    } else {
                        // The plane's last rows, whose vectors would run past `x`.
                        for n in 0..NV {
                            for r in 0..3 {
                                let at = first + r * w_in + n * LANES;
                                down[n] = max(v4, load(x, at), down[n]);
                            }
                        }
                    }
                    // Output `j` reads columns `2j`, `2j + 1` and `2j + 2`: the even
                    // columns, the odd ones, and the even ones one lane on.
                    // Output vector `k` reads input vectors `2k`, `2k + 1` and the
                    // first lane of `2k + 2`.
                    let mut even_odd = [[down[0]; 2]; NO];
                    for k in 0..NO {
                        even_odd[k] = split(v4, down[2 * k], down[2 * k + 1], even, odd);
                    }
                    let mut out = [down[0]; NO];
                    for k in 0..NO {
                        let [e, o] = even_odd[k];
                        let next = if k + 1 < NO { even_odd[k + 1][0] } else { e };
                        // No NaN is left to leave out.
                        out[k] = max(v4, max(v4, e, o), next_lane(v4, e, next));
                    }
                    store(&mut y[q * plane_out + oh * w_out..], out, w_out);
                }
            }
        },
    );
}

/// `maxps`: `b` where either is NaN.
#[inline(always)]
fn max(v4: V4, a: __m512, b: __m512) -> __m512 {
    v4.avx512f._mm512_max_ps(a, b)
}

/// The even and the odd lanes of `lo` then `hi`.
#[inline(always)]
fn split(v4: V4, lo: __m512, hi: __m512, even: __m512i, odd: __m512i) -> [__m512; 2] {
    let f = v4.avx512f;
    [
        f._mm512_permutex2var_ps(lo, even, hi),
        f._mm512_permutex2var_ps(lo, odd, hi),
    ]
}

/// Lanes 1 to 15 of `lo`, then lane 0 of `hi`.
#[inline(always)]
fn next_lane(v4: V4, lo: __m512, hi: __m512) -> __m512 {
    let f = v4.avx512f;
    let (lo, hi) = (f._mm512_castps_si512(lo), f._mm512_castps_si512(hi));
    f._mm512_castsi512_ps(f._mm512_alignr_epi32::<1>(hi, lo))
}

/// Sixteen floats of `x` from `at` on, those past its end as -∞.
#[inline(always)]
fn load(x: &[f32], at: usize) -> __m512 {
    match x.get(at..at + LANES) {
        Some(run) => bytemuck::cast::<[f32; LANES], __m512>(run.try_into().expect("lanes")),
        None => {
            let mut run = [f32::NEG_INFINITY; LANES];
            for (r, &v) in run.iter_mut().zip(x.get(at..).unwrap_or_default()) {
                *r = v;
            }
            bytemuck::cast(run)
        }
    }
}

/// Writes the first `len` lanes of `out` to `y` (this call's output from the row
/// on): whole vectors where `y` has room for them (the lanes past `len` land on rows
/// written later), else lane by lane.
#[inline(always)]
fn store<const NO: usize>(y: &mut [f32], out: [__m512; NO], len: usize) {
    let lanes: [[f32; LANES]; NO] = out.map(bytemuck::cast);
    let whole = len.div_ceil(LANES) * LANES;
    if y.len() >= whole {
        for (to, lanes) in y[..whole].chunks_exact_mut(LANES).zip(&lanes) {
            let to: &mut [f32; LANES] = to.try_into().expect("sixteen lanes");
            *to = *lanes;
        }
        return;
    }
    for (j, to) in y[..len].iter_mut().enumerate() {
        *to = lanes[j / LANES][j % LANES];
    }
}
