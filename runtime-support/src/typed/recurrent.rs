//! Recurrent layers over the float element types: ONNX LSTM, GRU and RNN.
//!
//! Arithmetic is `f64` within a step, but for float32 the dot products with `W` and
//! `R` (nearly all the work) sum in `f32`, vectorised, as onnxruntime's do (an LSTM or
//! GRU computes `W·x` of up to 32 steps in one product: `x` does not depend on the
//! state, and a per-step product would read `W` once a step), and their default cells
//! run in `f32` over whole gate vectors. The recurrent state (`H`, and
//! `C` for LSTM) is kept in `T` between steps, in a caller-provided scratch slice
//! (nothing allocates): `Params::scratch_len()` elements, which the compiler plans in
//! the arena like any other tensor. The directions run one after the other and share
//! it.
//!
//! `sequence_lens` is not an input: every batch entry runs the whole `seq_len` steps
//! (all ONNX node tests use full lengths); the compiler must reject a `sequence_lens`
//! it cannot prove full.
//!
//! Layouts (ONNX `layout`): 0 is `X [seq, batch, input]`, `Y [seq, dirs, batch,
//! hidden]`, `Y_h`/`Y_c`/`initial_h`/`initial_c` `[dirs, batch, hidden]`; 1 is
//! `X [batch, seq, input]`, `Y [batch, seq, dirs, hidden]`, states `[batch, dirs,
//! hidden]`. Weights are always `W [dirs, gates·hidden, input]`, `R [dirs,
//! gates·hidden, hidden]`, `B [dirs, 2·gates·hidden]` (Wb then Rb).

use serde::Serialize;

use super::elem::{Elem, as_f32, as_f32_mut};
use std::ops::Range;

use crate::kernels::gemm::{self, Operand};
use crate::kernels::{simd, unary, unary_inplace};
use crate::params::Unary;

/// An activation function of the recurrent operators (ONNX `activations`, with
/// `activation_alpha`/`activation_beta` already resolved to their defaults by the
/// compiler).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum RnnActivation {
    Sigmoid,
    Tanh,
    Relu,
    /// `alpha · x + beta`.
    Affine {
        alpha: f32,
        beta: f32,
    },
    LeakyRelu {
        alpha: f32,
    },
    ThresholdedRelu {
        alpha: f32,
    },
    /// `alpha · tanh(beta · x)`.
    ScaledTanh {
        alpha: f32,
        beta: f32,
    },
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    Elu {
        alpha: f32,
    },
    Softsign,
    Softplus,
}

impl RnnActivation {
    fn apply(self, x: f64) -> f64 {
        use RnnActivation::*;
        match self {
            Sigmoid => {
                if x >= 0.0 {
                    1.0 / (1.0 + (-x).exp())
                } else {
                    let e = x.exp();
                    e / (1.0 + e)
                }
            }
            Tanh => x.tanh(),
            Relu => x.max(0.0),
            Affine { alpha, beta } => alpha as f64 * x + beta as f64,
            LeakyRelu { alpha } => {
                if x < 0.0 {
                    alpha as f64 * x
                } else {
                    x
                }
            }
            ThresholdedRelu { alpha } => {
                if x > alpha as f64 {
                    x
                } else {
                    0.0
                }
            }
            ScaledTanh { alpha, beta } => alpha as f64 * (beta as f64 * x).tanh(),
            HardSigmoid { alpha, beta } => (alpha as f64 * x + beta as f64).clamp(0.0, 1.0),
            Elu { alpha } => {
                if x >= 0.0 {
                    x
                } else {
                    alpha as f64 * x.exp_m1()
                }
            }
            Softsign => x / (1.0 + x.abs()),
            Softplus => {
                if x > 0.0 {
                    x + (-x).exp().ln_1p()
                } else {
                    x.exp().ln_1p()
                }
            }
        }
    }
}

/// ONNX `direction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RnnDirection {
    Forward,
    Reverse,
    Bidirectional,
}

impl RnnDirection {
    const fn count(self) -> usize {
        match self {
            RnnDirection::Bidirectional => 2,
            _ => 1,
        }
    }

    /// Whether direction `d` runs from the last step to the first.
    fn reversed(self, d: usize) -> bool {
        matches!(self, RnnDirection::Reverse) || d == 1
    }
}

/// The shape of one recurrent node, shared by the three operators.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    seq_len: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
    layout: u8,
}

impl Geometry {
    fn x_row(&self, t: usize, b: usize) -> usize {
        let r = if self.layout == 0 {
            t * self.batch + b
        } else {
            b * self.seq_len + t
        };
        r * self.input
    }

    fn y_row(&self, t: usize, d: usize, b: usize) -> usize {
        let r = if self.layout == 0 {
            (t * self.dirs + d) * self.batch + b
        } else {
            (b * self.seq_len + t) * self.dirs + d
        };
        r * self.hidden
    }

    fn state_row(&self, d: usize, b: usize) -> usize {
        let r = if self.layout == 0 {
            d * self.batch + b
        } else {
            b * self.dirs + d
        };
        r * self.hidden
    }

    fn state_len(&self) -> usize {
        self.dirs * self.batch * self.hidden
    }

    /// Checks the operands every operator has.
    fn check<T>(&self, what: &str, gates: usize, x: &[T], w: &[T], r: &[T], b: &[T]) {
        assert!(self.layout <= 1, "{what}: layout {}", self.layout);
        let (h, g) = (self.hidden, gates);
        assert_eq!(x.len(), self.seq_len * self.batch * self.input, "{what}: X");
        assert_eq!(w.len(), self.dirs * g * h * self.input, "{what}: W");
        assert_eq!(r.len(), self.dirs * g * h * h, "{what}: R");
        assert!(
            b.is_empty() || b.len() == self.dirs * 2 * g * h,
            "{what}: B"
        );
    }

    /// Checks an optional operand of the state's shape (empty: absent).
    fn check_state<T>(&self, what: &str, name: &str, v: &[T]) {
        assert!(
            v.is_empty() || v.len() == self.state_len(),
            "{what}: {name}"
        );
    }

    /// Runs direction `d` over the sequence. `cell([t, b], x_row, h_prev, h_new, c,
    /// tmp)` computes batch row `b` of step `t`: reads the previous hidden state `h_prev`
    /// (`hidden` elements), writes `h_new`, updates the row `c` of the cell state in
    /// place (LSTM; empty otherwise) and may use `tmp` (`hidden` elements when given).
    /// Writes `Y` after every step and the final `Y_h`, `Y_c` (each possibly empty).
    #[allow(clippy::too_many_arguments)]
    fn run<T: Elem>(
        &self,
        d: usize,
        reversed: bool,
        x: &[T],
        initial: [&[T]; 2],
        scratch: &mut [T],
        with_c: bool,
        with_tmp: bool,
        y: &mut [T],
        finals: [&mut [T]; 2],
        mut cell: impl FnMut([usize; 2], &[T], &[T], &mut [T], &mut [T], &mut [T]),
    ) {
        let n = self.batch * self.hidden;
        let (ha, rest) = scratch.split_at_mut(n);
        let (hb, rest) = rest.split_at_mut(n);
        let (c, rest) = rest.split_at_mut(if with_c { n } else { 0 });
        let tmp = &mut rest[..if with_tmp { n } else { 0 }];
        let mut bufs = [ha, hb];
        let h = self.hidden;
        // Initial states, zero when absent.
        for b in 0..self.batch {
            let at = self.state_row(d, b);
            fill_state(&mut bufs[0][b * h..][..h], initial[0], at);
            if with_c {
                fill_state(&mut c[b * h..][..h], initial[1], at);
            }
        }
        for s in 0..self.seq_len {
            let t = if reversed { self.seq_len - 1 - s } else { s };
            let [prev, next] = &mut bufs;
            for b in 0..self.batch {
                let xr = &x[self.x_row(t, b)..][..self.input];
                let cr = if with_c {
                    &mut c[b * h..][..h]
                } else {
                    &mut [][..]
                };
                let tr = if with_tmp {
                    &mut tmp[b * h..][..h]
                } else {
                    &mut [][..]
                };
                cell(
                    [t, b],
                    xr,
                    &prev[b * h..][..h],
                    &mut next[b * h..][..h],
                    cr,
                    tr,
                );
                if !y.is_empty() {
                    y[self.y_row(t, d, b)..][..h].copy_from_slice(&next[b * h..][..h]);
                }
            }
            bufs.swap(0, 1);
        }
        let [y_h, y_c] = finals;
        for b in 0..self.batch {
            let at = self.state_row(d, b);
            if !y_h.is_empty() {
                y_h[at..][..h].copy_from_slice(&bufs[0][b * h..][..h]);
            }
            if !y_c.is_empty() && with_c {
                y_c[at..][..h].copy_from_slice(&c[b * h..][..h]);
            }
        }
    }
}

/// Copies one row of an optional initial state (zeros when `init` is empty).
fn fill_state<T: Elem>(dst: &mut [T], init: &[T], at: usize) {
    if init.is_empty() {
        dst.fill(T::zero());
    } else {
        dst.copy_from_slice(&init[at..][..dst.len()]);
    }
}

/// `Σ a[k] · b[k]`, the recurrent kernels' inner loop: float32 through the vectorised
/// f32 kernel; other types in `f64`, over eight independent partial sums (a single
/// running sum waits on each add's latency).
#[inline]
fn dot<T: Elem>(a: &[T], b: &[T]) -> f64 {
    if let (Some(a), Some(b)) = (as_f32(a), as_f32(b)) {
        return f64::from(simd::dot(a, b));
    }
    const LANES: usize = 8;
    let mut acc = [0.0f64; LANES];
    let (a8, b8) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f64 = a8
        .remainder()
        .iter()
        .zip(b8.remainder())
        .map(|(a, b)| a.to_f64() * b.to_f64())
        .sum();
    for (x, y) in a8.zip(b8) {
        for k in 0..LANES {
            acc[k] += x[k].to_f64() * y[k].to_f64();
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// One LSTM cell step in float32 with the default activations, no clip and no
/// peephole, over whole gate vectors (vectorised σ and tanh): `gates` holds
/// `W·x + R·h` for `i, o, f, c` and becomes the activated gates; `b` is `Wb, Rb`
/// (empty: none); `c` is updated in place and `h` written.
fn cell_f32(gates: &mut [f32], b: &[f32], c: &mut [f32], h: &mut [f32], input_forget: bool) {
    let n = c.len();
    if !b.is_empty() {
        let (wb, rb) = b.split_at(4 * n);
        for ((g, wb), rb) in gates.iter_mut().zip(wb).zip(rb) {
            *g += wb + rb;
        }
    }
    let (i, rest) = gates.split_at_mut(n);
    let (o, rest) = rest.split_at_mut(n);
    let (f, ct) = rest.split_at_mut(n);
    unary_inplace(Unary::Sigmoid, i);
    unary_inplace(Unary::Sigmoid, o);
    if input_forget {
        for (f, i) in f.iter_mut().zip(&*i) {
            *f = 1.0 - i;
        }
    } else {
        unary_inplace(Unary::Sigmoid, f);
    }
    unary_inplace(Unary::Tanh, ct);
    for (((c, f), i), ct) in c.iter_mut().zip(&*f).zip(&*i).zip(&*ct) {
        *c = f * *c + i * ct;
    }
    unary(Unary::Tanh, c, h);
    for (h, o) in h.iter_mut().zip(&*o) {
        *h *= o;
    }
}

/// One GRU cell step in float32 with the default activations and no clip, over whole
/// gate vectors (vectorised σ and tanh): `gates` holds `W·x` for `z, r, h` and is
/// overwritten; `r` is the direction's `R` (`3·hidden × hidden`), `b` its `Wb, Rb`
/// (empty: none), `h` the previous state, `rh` room for `R·h`, `rs` for `r ⊙ h`.
#[allow(clippy::too_many_arguments)]
fn gru_cell_f32(
    gates: &mut [f32],
    r: &[f32],
    b: &[f32],
    h: &[f32],
    rh: &mut [f32],
    rs: &mut [f32],
    out: &mut [f32],
    linear_before_reset: bool,
) {
    let n = h.len();
    let bias = |at: usize| if b.is_empty() { 0.0 } else { b[at] };
    let (r_zr, r_h) = r.split_at(2 * n * n);
    let (rh_zr, rh_h) = rh.split_at_mut(2 * n);
    gemm::matvec(r_zr, h, rh_zr, false);
    let (zr, candidate) = gates.split_at_mut(2 * n);
    for (j, (g, rh)) in zr.iter_mut().zip(&*rh_zr).enumerate() {
        *g += rh + bias(j) + bias(3 * n + j);
    }
    unary_inplace(Unary::Sigmoid, zr);
    let (z, reset) = zr.split_at(n);
    if linear_before_reset {
        gemm::matvec(r_h, h, rh_h, false);
        for (j, g) in candidate.iter_mut().enumerate() {
            *g += bias(2 * n + j) + reset[j] * (rh_h[j] + bias(5 * n + j));
        }
    } else {
        for ((rs, reset), h) in rs.iter_mut().zip(reset).zip(h) {
            *rs = reset * h;
        }
        gemm::matvec(r_h, rs, rh_h, false);
        for (j, g) in candidate.iter_mut().enumerate() {
            *g += rh_h[j] + bias(5 * n + j) + bias(2 * n + j);
        }
    }
    unary_inplace(Unary::Tanh, candidate);
    for (j, out) in out.iter_mut().enumerate() {
        *out = (1.0 - z[j]) * candidate[j] + z[j] * h[j];
    }
}

/// `x` clipped to `[-clip, clip]` when `clip` is given.
#[inline]
fn clip(x: f64, clip: Option<f64>) -> f64 {
    match clip {
        Some(c) => x.clamp(-c, c),
        None => x,
    }
}

/// ONNX LSTM (opset 7/14).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Lstm {
    pub seq_len: usize,
    pub batch: usize,
    pub input_size: usize,
    pub hidden: usize,
    pub direction: RnnDirection,
    pub layout: u8,
    /// `f, g, h` per direction (forward first); default `Sigmoid, Tanh, Tanh`.
    pub activations: [RnnActivation; 6],
    pub has_clip: bool,
    pub clip: f32,
    /// Couples the input and forget gates: `f = 1 - i`.
    pub input_forget: bool,
}

/// Steps of an LSTM or GRU whose input products float32 computes in one product (the
/// scratch holds their gates).
const STEPS_AT_ONCE: usize = 32;

/// The steps whose input products the scratch holds at once.
const fn steps_at_once(seq_len: usize) -> usize {
    if seq_len < STEPS_AT_ONCE {
        seq_len
    } else {
        STEPS_AT_ONCE
    }
}

impl Lstm {
    /// Elements of `T` the `scratch` argument of [`lstm`] holds: the states, and the
    /// four gates of every batch row over `STEPS_AT_ONCE` steps (float32 computes
    /// `W·x` for those steps in one product, reading `W` once instead of once a step,
    /// then adds `R·h` a step at a time).
    pub const fn scratch_len(&self) -> usize {
        let steps = steps_at_once(self.seq_len);
        3 * self.batch * self.hidden + steps * self.batch * 4 * self.hidden
    }

    fn geometry(&self) -> Geometry {
        Geometry {
            seq_len: self.seq_len,
            batch: self.batch,
            input: self.input_size,
            hidden: self.hidden,
            dirs: self.direction.count(),
            layout: self.layout,
        }
    }
}

/// ONNX LSTM, gates in ONNX order `i, o, f, c`:
/// `i = f(Xi + Hi + bi + Pi ⊙ C₋)`, `f = f(Xf + Hf + bf + Pf ⊙ C₋)` (or `1 - i` with
/// `input_forget`), `c̃ = g(Xc + Hc + bc)`, `C = f ⊙ C₋ + i ⊙ c̃`,
/// `o = f(Xo + Ho + bo + Po ⊙ C)`, `H = o ⊙ h(C)`; `clip` bounds every activation's
/// input. `b` (`[dirs, 8·hidden]`), `initial_h`, `initial_c`, `peephole`
/// (`[dirs, 3·hidden]`, order `i, o, f`) may be empty (zeros); so may the outputs
/// `y`, `y_h`, `y_c` (not requested).
#[allow(clippy::too_many_arguments)]
pub fn lstm<T: Elem>(
    p: &Lstm,
    x: &[T],
    w: &[T],
    r: &[T],
    b: &[T],
    initial_h: &[T],
    initial_c: &[T],
    peephole: &[T],
    y: &mut [T],
    y_h: &mut [T],
    y_c: &mut [T],
    scratch: &mut [T],
) {
    let g = p.geometry();
    let (h, input) = (p.hidden, p.input_size);
    g.check("lstm", 4, x, w, r, b);
    g.check_state("lstm", "initial_h", initial_h);
    g.check_state("lstm", "initial_c", initial_c);
    g.check_state("lstm", "Y_h", y_h);
    g.check_state("lstm", "Y_c", y_c);
    assert!(
        peephole.is_empty() || peephole.len() == g.dirs * 3 * h,
        "lstm: P"
    );
    assert!(
        y.is_empty() || y.len() == p.seq_len * g.state_len(),
        "lstm: Y"
    );
    // A build over declared ranges lends the scratch its largest size: use a prefix.
    assert!(scratch.len() >= p.scratch_len(), "lstm: scratch");
    let (scratch, gates) = scratch[..p.scratch_len()].split_at_mut(3 * g.batch * h);
    let steps_at_once = gates.len() / (g.batch * 4 * h).max(1);
    let limit = p.has_clip.then_some(p.clip as f64);
    for d in 0..g.dirs {
        let w = &w[d * 4 * h * input..][..4 * h * input];
        let r = &r[d * 4 * h * h..][..4 * h * h];
        let b = if b.is_empty() {
            b
        } else {
            &b[d * 8 * h..][..8 * h]
        };
        let pp = if peephole.is_empty() {
            peephole
        } else {
            &peephole[d * 3 * h..][..3 * h]
        };
        let [fa, ga, ha] = [0, 1, 2].map(|k| p.activations[3 * d + k]);
        // The usual cell (σ, tanh, tanh; no clip, no peephole) in f32: `cell_f32`.
        let default_cell = (fa, ga, ha)
            == (
                RnnActivation::Sigmoid,
                RnnActivation::Tanh,
                RnnActivation::Tanh,
            )
            && limit.is_none()
            && pp.is_empty();
        // Pre-activation of gate `k` (0 i, 1 o, 2 f, 3 c) for hidden unit `j`: float32
        // has `W·x + R·h` of every gate in `gates` already, other types sum here.
        let pre = |k: usize, j: usize, xr: &[T], hr: &[T], gates: &[T]| {
            let row = k * h + j;
            let mut v = if gates.is_empty() {
                dot(xr, &w[row * input..][..input]) + dot(hr, &r[row * h..][..h])
            } else {
                gates[row].to_f64()
            };
            if !b.is_empty() {
                v += b[row].to_f64() + b[4 * h + row].to_f64();
            }
            v
        };
        let peep = |k: usize, j: usize| {
            if pp.is_empty() {
                0.0
            } else {
                pp[k * h + j].to_f64()
            }
        };
        let mut held = HeldInputs::new(steps_at_once);
        g.run(
            d,
            p.direction.reversed(d),
            x,
            [initial_h, initial_c],
            scratch,
            true,
            false,
            y,
            [&mut *y_h, &mut *y_c],
            |[t, bi], xr, hr, out, c, _| {
                let f32s = (as_f32(x), as_f32(w), as_f32(r), as_f32_mut(&mut *gates));
                let gates: &[T] = match f32s {
                    (Some(x), Some(w), Some(r), Some(gates32)) => {
                        let gates32 = held.row(&g, x, w, gates32, [t, bi], 4 * h);
                        gemm::matvec(r, bytemuck::cast_slice(hr), gates32, true);
                        if default_cell {
                            let (c, out) = (as_f32_mut(c), as_f32_mut(out));
                            let (Some(c), Some(out)) = (c, out) else {
                                unreachable!("T is f32")
                            };
                            return cell_f32(
                                gates32,
                                as_f32(b).unwrap_or(&[]),
                                c,
                                out,
                                p.input_forget,
                            );
                        }
                        bytemuck::cast_slice::<f32, T>(gates32)
                    }
                    _ => &[],
                };
                for j in 0..h {
                    let c0 = c[j].to_f64();
                    let i = fa.apply(clip(pre(0, j, xr, hr, gates) + peep(0, j) * c0, limit));
                    let f = if p.input_forget {
                        1.0 - i
                    } else {
                        fa.apply(clip(pre(2, j, xr, hr, gates) + peep(2, j) * c0, limit))
                    };
                    let ct = ga.apply(clip(pre(3, j, xr, hr, gates), limit));
                    let c1 = f * c0 + i * ct;
                    let o = fa.apply(clip(pre(1, j, xr, hr, gates) + peep(1, j) * c1, limit));
                    c[j] = T::from_f64(c1);
                    out[j] = T::from_f64(o * ha.apply(c1));
                }
            },
        );
    }
}

/// The input products (`W·x`) a float32 LSTM or GRU holds in its scratch: those of
/// `steps_at_once` steps, made when a step outside them is asked for.
struct HeldInputs {
    steps_at_once: usize,
    /// The chunk of `steps_at_once` steps held.
    chunk: Option<usize>,
}

impl HeldInputs {
    fn new(steps_at_once: usize) -> Self {
        HeldInputs {
            steps_at_once,
            chunk: None,
        }
    }

    /// The products (`len`: every gate's) of batch row `b` at step `t`, within `held`
    /// (`[step][batch][len]`), made for the chunk holding `t` first if not yet.
    fn row<'a>(
        &mut self,
        g: &Geometry,
        x: &[f32],
        w: &[f32],
        held: &'a mut [f32],
        [t, b]: [usize; 2],
        len: usize,
    ) -> &'a mut [f32] {
        let at_once = self.steps_at_once;
        let chunk = t / at_once;
        if self.chunk != Some(chunk) {
            let steps = chunk * at_once..((chunk + 1) * at_once).min(g.seq_len);
            input_products(g, x, w, steps, held);
            self.chunk = Some(chunk);
        }
        &mut held[(t % at_once * g.batch + b) * len..][..len]
    }
}

/// `W·x` of every batch row at `steps`, into `gates` (`[step - steps.start][batch]
/// [gates·hidden]`): one product per batch row over the steps (its rows of `X` are
/// evenly spaced in either layout).
fn input_products(g: &Geometry, x: &[f32], w: &[f32], steps: Range<usize>, gates: &mut [f32]) {
    let (rows, cols) = (steps.len(), w.len() / g.input.max(1));
    if rows == 0 || g.input == 0 {
        return gates.fill(0.0);
    }
    // Distance between the rows of consecutive steps of one batch row.
    let x_step = if g.layout == 0 {
        g.batch * g.input
    } else {
        g.input
    };
    for b in 0..g.batch {
        let xs = Operand::rows(&x[g.x_row(steps.start, b)..], x_step);
        let wt = Operand {
            data: w,
            ld: g.input,
            trans: true,
        };
        let out = &mut gates[b * cols..];
        gemm::sgemm(rows, cols, g.input, 1.0, xs, wt, out, g.batch * cols, false);
    }
}

/// ONNX GRU (opset 7/14).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Gru {
    pub seq_len: usize,
    pub batch: usize,
    pub input_size: usize,
    pub hidden: usize,
    pub direction: RnnDirection,
    pub layout: u8,
    /// `f, g` per direction (forward first); default `Sigmoid, Tanh`.
    pub activations: [RnnActivation; 4],
    pub has_clip: bool,
    pub clip: f32,
    pub linear_before_reset: bool,
}

impl Gru {
    /// Elements of `T` the `scratch` argument of [`gru`] holds: the states and the
    /// reset gate, the three gates' `W·x` of every batch row over `STEPS_AT_ONCE`
    /// steps, and one row's `R·h` (float32, as for [`lstm`]).
    pub const fn scratch_len(&self) -> usize {
        let steps = steps_at_once(self.seq_len);
        3 * self.batch * self.hidden + (steps * self.batch + 1) * 3 * self.hidden
    }

    fn geometry(&self) -> Geometry {
        Geometry {
            seq_len: self.seq_len,
            batch: self.batch,
            input: self.input_size,
            hidden: self.hidden,
            dirs: self.direction.count(),
            layout: self.layout,
        }
    }
}

/// ONNX GRU, gates in ONNX order `z, r, h`: `z = f(Xz + Hz + bz)`,
/// `r = f(Xr + Hr + br)`, `h̃ = g(Xh + (r ⊙ H₋)·Rhᵀ + Rbh + Wbh)` (or, with
/// `linear_before_reset`, `g(Xh + Wbh + r ⊙ (H₋·Rhᵀ + Rbh))`), `H = (1 - z) ⊙ h̃ +
/// z ⊙ H₋`; `clip` bounds every activation's input. `b` (`[dirs, 6·hidden]`) and
/// `initial_h` may be empty (zeros); so may `y` and `y_h` (not requested).
#[allow(clippy::too_many_arguments)]
pub fn gru<T: Elem>(
    p: &Gru,
    x: &[T],
    w: &[T],
    r: &[T],
    b: &[T],
    initial_h: &[T],
    y: &mut [T],
    y_h: &mut [T],
    scratch: &mut [T],
) {
    let g = p.geometry();
    let (h, input) = (p.hidden, p.input_size);
    g.check("gru", 3, x, w, r, b);
    g.check_state("gru", "initial_h", initial_h);
    g.check_state("gru", "Y_h", y_h);
    assert!(
        y.is_empty() || y.len() == p.seq_len * g.state_len(),
        "gru: Y"
    );
    // A build over declared ranges lends the scratch its largest size: use a prefix.
    assert!(scratch.len() >= p.scratch_len(), "gru: scratch");
    let (scratch, rest) = scratch[..p.scratch_len()].split_at_mut(3 * g.batch * h);
    let (gates, recurrent) = rest.split_at_mut(rest.len() - 3 * h);
    let steps_at_once = gates.len() / (g.batch * 3 * h).max(1);
    let limit = p.has_clip.then_some(p.clip as f64);
    for d in 0..g.dirs {
        let w = &w[d * 3 * h * input..][..3 * h * input];
        let r = &r[d * 3 * h * h..][..3 * h * h];
        let b = if b.is_empty() {
            b
        } else {
            &b[d * 6 * h..][..6 * h]
        };
        let [fa, ga] = [0, 1].map(|k| p.activations[2 * d + k]);
        // The usual cell (σ, tanh; no clip) in f32: `gru_cell_f32`.
        let default_cell =
            (fa, ga) == (RnnActivation::Sigmoid, RnnActivation::Tanh) && limit.is_none();
        let mut held = HeldInputs::new(steps_at_once);
        let xw = |k: usize, j: usize, xr: &[T]| dot(xr, &w[(k * h + j) * input..][..input]);
        let rr = |k: usize, j: usize| &r[(k * h + j) * h..][..h];
        // Input-side and recurrent-side biases of gate `k`.
        let bias = |k: usize, j: usize| {
            if b.is_empty() {
                (0.0, 0.0)
            } else {
                (b[k * h + j].to_f64(), b[(3 + k) * h + j].to_f64())
            }
        };
        g.run(
            d,
            p.direction.reversed(d),
            x,
            [initial_h, &[]],
            scratch,
            false,
            true,
            y,
            [&mut *y_h, &mut []],
            |[t, bi], xr, hr, out, _, rs| {
                let f32s = (
                    as_f32(x),
                    as_f32(w),
                    as_f32(r),
                    as_f32_mut(&mut *gates),
                    as_f32_mut(&mut *recurrent),
                );
                if let (Some(x), Some(w), Some(r), Some(gates32), Some(rh)) = f32s
                    && default_cell
                {
                    let gates = held.row(&g, x, w, gates32, [t, bi], 3 * h);
                    let (Some(hr), Some(rs), Some(out)) =
                        (as_f32(hr), as_f32_mut(rs), as_f32_mut(out))
                    else {
                        unreachable!("T is f32")
                    };
                    let b = as_f32(b).unwrap_or(&[]);
                    return gru_cell_f32(gates, r, b, hr, rh, rs, out, p.linear_before_reset);
                }
                // The reset gate of every unit first: the default candidate reads
                // `r ⊙ H₋` whole. Kept in `T` (like the state) between the passes.
                for (j, rs) in rs.iter_mut().enumerate() {
                    let (wb, rb) = bias(1, j);
                    let v = xw(1, j, xr) + dot(hr, rr(1, j)) + wb + rb;
                    *rs = T::from_f64(fa.apply(clip(v, limit)));
                }
                for j in 0..h {
                    let (wbz, rbz) = bias(0, j);
                    let z = fa.apply(clip(xw(0, j, xr) + dot(hr, rr(0, j)) + wbz + rbz, limit));
                    let (wbh, rbh) = bias(2, j);
                    let v = if p.linear_before_reset {
                        xw(2, j, xr) + wbh + rs[j].to_f64() * (dot(hr, rr(2, j)) + rbh)
                    } else {
                        let rh: f64 = rr(2, j)
                            .iter()
                            .zip(hr.iter().zip(rs.iter()))
                            .map(|(w, (h, r))| w.to_f64() * h.to_f64() * r.to_f64())
                            .sum();
                        xw(2, j, xr) + rh + rbh + wbh
                    };
                    let ht = ga.apply(clip(v, limit));
                    out[j] = T::from_f64((1.0 - z) * ht + z * hr[j].to_f64());
                }
            },
        );
    }
}

/// ONNX RNN (opset 7/14).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rnn {
    pub seq_len: usize,
    pub batch: usize,
    pub input_size: usize,
    pub hidden: usize,
    pub direction: RnnDirection,
    pub layout: u8,
    /// `f` per direction (forward first); default `Tanh`.
    pub activations: [RnnActivation; 2],
    pub has_clip: bool,
    pub clip: f32,
}

impl Rnn {
    /// Elements of `T` the `scratch` argument of [`rnn`] holds.
    pub const fn scratch_len(&self) -> usize {
        2 * self.batch * self.hidden
    }

    fn geometry(&self) -> Geometry {
        Geometry {
            seq_len: self.seq_len,
            batch: self.batch,
            input: self.input_size,
            hidden: self.hidden,
            dirs: self.direction.count(),
            layout: self.layout,
        }
    }
}

/// ONNX RNN: `H = f(X·Wᵀ + H₋·Rᵀ + Wb + Rb)`; `clip` bounds the activation's input.
/// `b` (`[dirs, 2·hidden]`) and `initial_h` may be empty (zeros); so may `y` and `y_h`.
#[allow(clippy::too_many_arguments)]
pub fn rnn<T: Elem>(
    p: &Rnn,
    x: &[T],
    w: &[T],
    r: &[T],
    b: &[T],
    initial_h: &[T],
    y: &mut [T],
    y_h: &mut [T],
    scratch: &mut [T],
) {
    let g = p.geometry();
    let (h, input) = (p.hidden, p.input_size);
    g.check("rnn", 1, x, w, r, b);
    g.check_state("rnn", "initial_h", initial_h);
    g.check_state("rnn", "Y_h", y_h);
    assert!(
        y.is_empty() || y.len() == p.seq_len * g.state_len(),
        "rnn: Y"
    );
    // A build over declared ranges lends the scratch its largest size: use a prefix.
    assert!(scratch.len() >= p.scratch_len(), "rnn: scratch");
    let scratch = &mut scratch[..p.scratch_len()];
    let limit = p.has_clip.then_some(p.clip as f64);
    for d in 0..g.dirs {
        let w = &w[d * h * input..][..h * input];
        let r = &r[d * h * h..][..h * h];
        let b = if b.is_empty() {
            b
        } else {
            &b[d * 2 * h..][..2 * h]
        };
        let fa = p.activations[d];
        g.run(
            d,
            p.direction.reversed(d),
            x,
            [initial_h, &[]],
            scratch,
            false,
            false,
            y,
            [&mut *y_h, &mut []],
            |_, xr, hr, out, _, _| {
                for (j, out) in out.iter_mut().enumerate() {
                    let mut v = dot(xr, &w[j * input..][..input]) + dot(hr, &r[j * h..][..h]);
                    if !b.is_empty() {
                        v += b[j].to_f64() + b[h + j].to_f64();
                    }
                    *out = T::from_f64(fa.apply(clip(v, limit)));
                }
            },
        );
    }
}
