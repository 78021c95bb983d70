//! Depthwise convolution (one input and one output channel per group): direct, in
//! explicit SIMD along the output row.
//!
//! Each input plane is first copied into the scratch with its padding written out as
//! zeros and its columns split by phase modulo the horizontal stride
//! ([`Conv2d::depthwise_rows`]). After that, tap `(ki, kj)` of the outputs
//! `ow .. ow + lanes` of row `oh` reads one contiguous, in-bounds run: padded row
//! `oh·sh + ki·dh`, phase `kj·dw % sw`, from position `ow + kj·dw / sw`. No output has
//! an edge case, and stride 2 needs no gather.
//!
//! Outputs are then computed in tiles of `R` rows × `V` vectors, eight accumulators
//! at once (FMA latency is four cycles on two pipes, so one chain per tap would leave
//! the units idle): `4 × 2` on wide maps, `2 × 4` on rows one or two vectors wide (a
//! 14×14 late stage) and `1 × 8` on narrower ones. Each accumulator starts at the
//! channel's bias; the fused activation runs over the finished plane.

use faer::traits::pulp::{self, Simd, WithSimd};

use super::elementwise::bias_activate;
use crate::params::{Conv2d, DEPTHWISE_MAX_LANES};
use crate::threads;

/// Depthwise `conv2d`: the caller has checked the lengths and the scratch.
pub(super) fn depthwise(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    let taps = p.kernel[0] * p.kernel[1];
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    let macs = y.len() * taps;
    let planes = x.chunks_exact(plane_in).zip(y.chunks_exact_mut(plane_out));
    // Planes are independent: with worker threads, each thread takes whole planes,
    // copying them into its own scratch.
    threads::for_each_with_scratch(
        planes.enumerate(),
        macs,
        scratch,
        |(i, (x, out)), scratch| {
            let c = i % p.c_out;
            pulp::Arch::new().dispatch(Plane {
                p,
                x,
                w: &w[c * taps..][..taps],
                bias: bias.map_or(0.0, |b| b[c]),
                out,
                rows: scratch,
            });
        },
    );
}

/// One channel: its input plane, weights and bias, its output plane, and the scratch.
struct Plane<'a> {
    p: &'a Conv2d,
    x: &'a [f32],
    w: &'a [f32],
    bias: f32,
    out: &'a mut [f32],
    rows: &'a mut [f32],
}

impl WithSimd for Plane<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let Plane {
            p,
            x,
            w,
            bias,
            out,
            rows,
        } = self;
        copy_rows(p, x, rows);
        let t = Taps::new(p, w, bias, rows);
        // Two vectors a tile where they fit in DEPTHWISE_MAX_LANES, so that blocks of
        // columns tile the padded rows exactly.
        if 2 * S::F32_LANES <= DEPTHWISE_MAX_LANES && p.w_out > S::F32_LANES {
            bands::<S, 4, 2>(s, &t, out);
        } else {
            bands::<S, 8, 1>(s, &t, out);
        }
        bias_activate(p.activation, 0.0, out);
    }
}

/// Writes plane `x` into `rows` as [`Conv2d::depthwise_rows`] lays it out.
#[inline(always)]
fn copy_rows(p: &Conv2d, x: &[f32], rows: &mut [f32]) {
    let [top, left, _, _] = p.pads;
    let [count, phases, len] = p.depthwise_rows();
    let rows = rows[..count * phases * len].chunks_exact_mut(phases * len);
    for (r, padded) in rows.enumerate() {
        let Some(ih) = r.checked_sub(top).filter(|&ih| ih < p.h_in) else {
            padded.fill(0.0);
            continue;
        };
        let src = &x[ih * p.w_in..][..p.w_in];
        if phases == 1 {
            padded[..left].fill(0.0);
            padded[left..left + p.w_in].copy_from_slice(src);
            padded[left + p.w_in..].fill(0.0);
            continue;
        }
        padded.fill(0.0);
        if phases == 2 {
            // Input column i is padded column left + i: even inputs go to phase
            // left % 2 from position left / 2, odd ones to the other phase from
            // (left + 1) / 2, in one pass LLVM vectorises as a deinterleave.
            let (first, second) = padded.split_at_mut(len);
            let (even, odd) = if left % 2 == 0 {
                (first, second)
            } else {
                (second, first)
            };
            let (pairs, last) = src.as_chunks::<2>();
            let even = &mut even[left / 2..][..pairs.len() + last.len()];
            let odd = &mut odd[left.div_ceil(2)..][..pairs.len()];
            for ((pair, e), o) in pairs.iter().zip(even.iter_mut()).zip(odd) {
                *e = pair[0];
                *o = pair[1];
            }
            if let [v] = last {
                even[pairs.len()] = *v;
            }
            continue;
        }
        for (q, phase) in padded.chunks_exact_mut(len).enumerate() {
            // Position j of phase q is padded column j·phases + q, input column
            // j·phases + q − left: inside the input from j = ⌈(left − q) / phases⌉.
            let first = left.saturating_sub(q).div_ceil(phases);
            let col = first * phases + q - left;
            let inside = phase[first..].iter_mut();
            for (v, from) in inside.zip(src[col.min(p.w_in)..].chunks(phases)) {
                *v = from[0];
            }
        }
    }
}

/// What a tile reads: the copied rows and the geometry of the taps in them.
struct Taps<'a> {
    p: &'a Conv2d,
    w: &'a [f32],
    bias: f32,
    rows: &'a [f32],
    /// Elements from one padded row to the next (all its phases).
    row_len: usize,
    /// Elements from one phase row to the next.
    phase_len: usize,
    /// One kernel column (the dilation) further on: phases and positions to step by.
    col_step: [usize; 2],
}

impl<'a> Taps<'a> {
    fn new(p: &'a Conv2d, w: &'a [f32], bias: f32, rows: &'a [f32]) -> Self {
        let [_, phases, len] = p.depthwise_rows();
        Taps {
            p,
            w,
            bias,
            rows,
            row_len: phases * len,
            phase_len: len,
            col_step: [p.dilation[1] % phases, p.dilation[1] / phases],
        }
    }
}

/// The plane in bands of `R` rows (then 4, 2, 1 for the last rows), each band in
/// tiles of `V` vectors.
#[inline(always)]
fn bands<S: Simd, const R: usize, const V: usize>(s: S, t: &Taps<'_>, out: &mut [f32]) {
    let h_out = t.p.h_out;
    let mut oh = 0;
    while oh + R <= h_out {
        band::<S, R, V>(s, t, oh, out);
        oh += R;
    }
    if R > 4 && oh + 4 <= h_out {
        band::<S, 4, V>(s, t, oh, out);
        oh += 4;
    }
    if R > 2 && oh + 2 <= h_out {
        band::<S, 2, V>(s, t, oh, out);
        oh += 2;
    }
    if oh < h_out {
        band::<S, 1, V>(s, t, oh, out);
    }
}

/// Output rows `oh .. oh + R`, in tiles of `V` vectors across, the last one masked.
#[inline(always)]
fn band<S: Simd, const R: usize, const V: usize>(s: S, t: &Taps<'_>, oh: usize, out: &mut [f32]) {
    let p = t.p;
    let lanes = S::F32_LANES;
    let (kh, kw) = (p.kernel[0], p.kernel[1]);
    let row_step = p.stride[0] * t.row_len;
    // Every run a tile reads lies in the rows up to its last tap row's, within
    // `phase_len` of a phase row's start (Conv2d::depthwise_rows sizes it so for tiles
    // at multiples of V·lanes, which divides DEPTHWISE_MAX_LANES): checked here once
    // per band, so the loads below need no bounds checks of their own.
    assert!(
        DEPTHWISE_MAX_LANES.is_multiple_of(V * lanes)
            && ((oh + R - 1) * p.stride[0] + (kh - 1) * p.dilation[0] + 1) * t.row_len
                <= t.rows.len(),
        "depthwise: a band reads past the copied rows"
    );
    let mut ow = 0;
    while ow < p.w_out {
        let mut acc = [[s.splat_f32s(t.bias); V]; R];
        for ki in 0..kh {
            let first_row = (oh * p.stride[0] + ki * p.dilation[0]) * t.row_len + ow;
            // Kernel column kj·d reads phase (kj·d) % stride from position
            // (kj·d) / stride: stepped along without dividing.
            let ([phase_step, pos_step], phases) = (t.col_step, p.stride[1]);
            let (mut phase, mut pos) = (0, 0);
            for kj in 0..kw {
                let weight = s.splat_f32s(t.w[ki * kw + kj]);
                let at = first_row + phase * t.phase_len + pos;
                phase += phase_step;
                pos += pos_step;
                if phase >= phases {
                    phase -= phases;
                    pos += 1;
                }
                for (r, acc) in acc.iter_mut().enumerate() {
                    let start = at + r * row_step;
                    debug_assert!(start + V * lanes <= t.rows.len());
                    // SAFETY: `start` is in row (oh + r)·sh + ki·dh, below the last row
                    // the assertion above checked, at `ow + phase·phase_len + pos`
                    // with `pos ≤ (kw − 1)·dw / sw`; `depthwise_rows` makes
                    // `phase_len ≥ ⌈w_out / 16⌉·16 + pos`, and `ow + V·lanes` is at
                    // most `⌈w_out / 16⌉·16`, so the run ends inside its phase row.
                    let run = unsafe { t.rows.get_unchecked(start..start + V * lanes) };
                    for (v, acc) in acc.iter_mut().enumerate() {
                        let x = load::<S>(&run[v * lanes..][..lanes]);
                        *acc = s.mul_add_e_f32s(weight, x, *acc);
                    }
                }
            }
        }
        let width = (p.w_out - ow).min(V * lanes);
        for (r, acc) in acc.iter().enumerate() {
            let dst = &mut out[(oh + r) * p.w_out + ow..][..width];
            for (v, &acc) in acc.iter().enumerate() {
                let start = (v * lanes).min(width);
                let dst = &mut dst[start..(start + lanes).min(width)];
                if dst.len() == lanes {
                    store::<S>(dst, acc);
                } else {
                    s.partial_store_f32s(dst, acc);
                }
            }
        }
        ow += V * lanes;
    }
}

/// One vector from exactly `S::F32_LANES` floats (an unaligned load).
#[inline(always)]
fn load<S: Simd>(from: &[f32]) -> S::f32s {
    bytemuck::cast_slice::<f32, S::f32s>(from)[0]
}

/// Writes one vector to exactly `S::F32_LANES` floats.
#[inline(always)]
fn store<S: Simd>(to: &mut [f32], v: S::f32s) {
    bytemuck::cast_slice_mut::<f32, S::f32s>(to)[0] = v;
}
