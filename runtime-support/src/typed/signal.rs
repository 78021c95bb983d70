//! Signal processing over the float element types: DFT, STFT, the Hann, Hamming and
//! Blackman windows and MelWeightMatrix. Arithmetic is `f64`; transforms are direct
//! (`O(n²)` sums with exact twiddle angles), which is fine for the lengths models use
//! at this size and needs no working memory.

use serde::Serialize;

use super::elem::Elem;
use crate::Error;

/// DFT along the middle axis of `x [outer, n, inner, c_in]` (`c_in` 1: real, 2:
/// complex interleaved), writing `[outer, out_len, inner, c_out]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Dft {
    pub outer: usize,
    /// Input length along the axis (zero-padded or truncated to what is used).
    pub n: usize,
    pub inner: usize,
    pub in_complex: bool,
    /// The transform length (ONNX `dft_length`).
    pub length: usize,
    pub inverse: bool,
    /// Forward: only the first `length / 2 + 1` bins. Inverse: the input holds those
    /// bins of a Hermitian spectrum and the output is real (`irfft`).
    pub onesided: bool,
}

impl Dft {
    /// Output length along the axis.
    pub const fn out_len(&self) -> usize {
        if self.onesided && !self.inverse {
            self.length / 2 + 1
        } else {
            self.length
        }
    }

    /// Output values per element (2: complex, 1: real for the inverse one-sided).
    pub const fn out_complex(&self) -> bool {
        !(self.onesided && self.inverse)
    }
}

/// `e^{sign·2πi·k/len}` with the angle reduced modulo `len` first.
#[inline]
fn twiddle(k: usize, len: usize, sign: f64) -> (f64, f64) {
    let a = sign * 2.0 * core::f64::consts::PI * ((k % len) as f64) / len as f64;
    (a.cos(), a.sin())
}

/// ONNX DFT (opset 17/20).
pub fn dft<T: Elem>(p: &Dft, x: &[T], out: &mut [T]) {
    let cin = if p.in_complex { 2 } else { 1 };
    let cout = if p.out_complex() { 2 } else { 1 };
    let (len, out_len) = (p.length, p.out_len());
    if len == 0 {
        return;
    }
    for o in 0..p.outer {
        for i in 0..p.inner {
            // Element `m` of this line (0 past the input).
            let at = |m: usize| -> (f64, f64) {
                if m >= p.n {
                    return (0.0, 0.0);
                }
                let base = ((o * p.n + m) * p.inner + i) * cin;
                let re = x[base].to_f64();
                let im = if p.in_complex {
                    x[base + 1].to_f64()
                } else {
                    0.0
                };
                (re, im)
            };
            for k in 0..out_len {
                let (mut re, mut im) = (0.0, 0.0);
                if p.inverse && p.onesided {
                    // irfft: the Hermitian extension of bins 0..=len/2.
                    let half = len / 2 + 1;
                    for m in 0..half {
                        let (xr, xi) = at(m);
                        let (c, s) = twiddle(k * m, len, 1.0);
                        let v = xr * c - xi * s;
                        if m == 0 {
                            re += xr;
                        } else if 2 * m == len {
                            re += xr * c;
                        } else {
                            re += 2.0 * v;
                        }
                    }
                } else {
                    let sign = if p.inverse { 1.0 } else { -1.0 };
                    for m in 0..len.min(p.n) {
                        let (xr, xi) = at(m);
                        let (c, s) = twiddle(k * m, len, sign);
                        re += xr * c - xi * s;
                        im += xr * s + xi * c;
                    }
                }
                if p.inverse {
                    re /= len as f64;
                    im /= len as f64;
                }
                let base = ((o * out_len + k) * p.inner + i) * cout;
                out[base] = T::from_f64(re);
                if cout == 2 {
                    out[base + 1] = T::from_f64(im);
                }
            }
        }
    }
}

/// STFT of `signal [batch, signal_len, c_in]` into `[batch, frames, bins, 2]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Stft {
    pub batch: usize,
    pub signal_len: usize,
    pub in_complex: bool,
    pub frames: usize,
    pub step: usize,
    pub frame_len: usize,
    /// `frame_len / 2 + 1` when one-sided, else `frame_len`.
    pub bins: usize,
}

/// ONNX STFT: the DFT of each frame of `frame_len` samples, `step` apart, times
/// `window` (`[frame_len]`; empty: all ones).
pub fn stft<T: Elem>(p: &Stft, x: &[T], window: &[T], out: &mut [T]) {
    let cin = if p.in_complex { 2 } else { 1 };
    let len = p.frame_len;
    if len == 0 {
        return;
    }
    for b in 0..p.batch {
        for f in 0..p.frames {
            let start = f * p.step;
            for k in 0..p.bins {
                let (mut re, mut im) = (0.0, 0.0);
                for m in 0..len {
                    let t = start + m;
                    if t >= p.signal_len {
                        break;
                    }
                    let w = if window.is_empty() {
                        1.0
                    } else {
                        window[m].to_f64()
                    };
                    let base = (b * p.signal_len + t) * cin;
                    let xr = x[base].to_f64() * w;
                    let xi = if p.in_complex {
                        x[base + 1].to_f64() * w
                    } else {
                        0.0
                    };
                    let (c, s) = twiddle(k * m, len, -1.0);
                    re += xr * c - xi * s;
                    im += xr * s + xi * c;
                }
                let base = ((b * p.frames + f) * p.bins + k) * 2;
                out[base] = T::from_f64(re);
                out[base + 1] = T::from_f64(im);
            }
        }
    }
}

/// Which window function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum WindowKind {
    Hann,
    Hamming,
    Blackman,
}

/// A window of `size` samples; periodic windows divide by `size`, symmetric ones by
/// `size - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    pub kind: WindowKind,
    pub size: usize,
    pub periodic: bool,
}

/// ONNX HannWindow / HammingWindow / BlackmanWindow.
pub fn window<T: Elem>(p: &Window, out: &mut [T]) {
    let n = if p.periodic {
        p.size as f64
    } else {
        p.size as f64 - 1.0
    };
    let pi = core::f64::consts::PI;
    for (i, o) in out.iter_mut().enumerate().take(p.size) {
        let x = i as f64;
        let v = match p.kind {
            WindowKind::Hann => (x * pi / n).sin().powi(2),
            WindowKind::Hamming => {
                let alpha = 25.0 / 46.0;
                alpha - (x * pi * 2.0 / n).cos() * (1.0 - alpha)
            }
            WindowKind::Blackman => {
                0.42 - 0.5 * (x * pi * 2.0 / n).cos() + 0.08 * (x * pi * 4.0 / n).cos()
            }
        };
        *o = T::from_f64(v);
    }
}

/// MelWeightMatrix `[dft_length / 2 + 1, num_mel_bins]`. The edge frequencies are in
/// the precision of their input type (`f32_math`: float32, else float64), as the
/// reference computes them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MelWeightMatrix {
    pub num_mel_bins: usize,
    pub dft_length: usize,
    pub sample_rate: i64,
    pub lower_edge_hertz: f64,
    pub upper_edge_hertz: f64,
    pub f32_math: bool,
}

/// ONNX MelWeightMatrix: triangular filters with peak 1 between mel-spaced bins. A
/// filter edge past the spectrogram's bins is an error.
pub fn mel_weight_matrix<T: Elem>(p: &MelWeightMatrix, out: &mut [T]) -> Result<(), Error> {
    let r = |v: f64| if p.f32_math { v as f32 as f64 } else { v };
    let bins = p.dft_length / 2 + 1;
    let mels = p.num_mel_bins;
    let ln10 = 10f64.ln();
    // The input precision up to `2595 · log1p(f / 700)`, then float64 (NumPy's
    // promotion with `np.log(10)` and the integer bins).
    let mel = |f: f64| r(2595.0 * r(r(f / 700.0).ln_1p())) / ln10;
    let (low, high) = (mel(p.lower_edge_hertz), mel(p.upper_edge_hertz));
    let step = (high - low) / (mels + 2) as f64;
    let sr = p.sample_rate as f64;
    let freq = |i: usize| -> i64 {
        let m = i as f64 * step + low;
        let hz = 700.0 * (m / 2595.0 * ln10).exp_m1();
        ((p.dft_length as f64 + 1.0) * hz / sr).floor() as i64
    };
    out.iter_mut().for_each(|o| *o = T::zero());
    let mut set = |j: i64, i: usize, v: f64| -> Result<(), Error> {
        if j < 0 || j >= bins as i64 {
            return Err(Error::IndexOutOfRange {
                index: j,
                len: bins,
            });
        }
        out[j as usize * mels + i] = T::from_f64(v);
        Ok(())
    };
    for i in 0..mels {
        let (lo, c, hi) = (freq(i), freq(i + 1), freq(i + 2));
        let up = c - lo;
        if up == 0 {
            set(c, i, 1.0)?;
        } else {
            for j in lo..=c {
                set(j, i, (j - lo) as f64 / up as f64)?;
            }
        }
        let down = hi - c;
        if down > 0 {
            for j in c..hi {
                set(j, i, (hi - j) as f64 / down as f64)?;
            }
        }
    }
    Ok(())
}
