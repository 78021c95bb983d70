//! Elementwise kernels: unary maps, broadcasting binary ops, and the fused activation
//! and bias stage that producing kernels (convolution, Gemm) run on their output.
//!
//! Each op is written once, as a scalar closure; the `with_unary!`/`with_binary!`
//! macros pick the closure for the op outside the loop, so every loop is compiled per
//! op (and vectorised) instead of matching on the op per element.

use faer::traits::pulp::Simd;

use super::index::{Layout, contiguous_strides, extent};
use super::simd::{self, vectorize};
use crate::params::{Activation, Binary, Broadcast, Unary};
use crate::threads;

/// Expands `$body` with `$f` bound to the scalar function of the unary op `$op`.
macro_rules! with_unary {
    ($op:expr, |$f:ident| $body:expr) => {
        match $op {
            Unary::Relu => {
                let $f = |x: f32| x.max(0.0);
                $body
            }
            Unary::LeakyRelu { alpha } => {
                let $f = move |x: f32| if x < 0.0 { alpha * x } else { x };
                $body
            }
            Unary::Sigmoid => {
                let $f = simd::sigmoid;
                $body
            }
            Unary::Tanh => {
                let $f = simd::tanh;
                $body
            }
            Unary::Clip { min, max } => {
                let $f = move |x: f32| x.max(min).min(max);
                $body
            }
            Unary::Exp => {
                let $f = simd::exp;
                $body
            }
            Unary::Erf => {
                let $f = simd::erf;
                $body
            }
            Unary::Neg => {
                let $f = |x: f32| -x;
                $body
            }
            Unary::Abs => {
                let $f = f32::abs;
                $body
            }
            Unary::Sqrt => {
                let $f = f32::sqrt;
                $body
            }
            Unary::HardSigmoid { alpha, beta } => {
                // `clamp` keeps NaN, as the reference's `np.clip` does (`max` would not).
                let $f = move |x: f32| (alpha * x + beta).clamp(0.0, 1.0);
                $body
            }
            Unary::HardSwish => {
                // alpha = 1/6 as ONNX defines it (its function body is a HardSigmoid of
                // that alpha): a multiply, where dividing by 6 was a `vdivps` a vector
                // in every layer's output stage (a quarter of 16→32 at 112²).
                let $f = |x: f32| x * (x * (1.0 / 6.0) + 0.5).clamp(0.0, 1.0);
                $body
            }
            Unary::Swish { alpha } => {
                let $f = move |x: f32| x * simd::sigmoid(alpha * x);
                $body
            }
            Unary::Gelu { tanh: false } => {
                let $f = |x: f32| 0.5 * x * (1.0 + simd::erf(x * std::f32::consts::FRAC_1_SQRT_2));
                $body
            }
            Unary::Gelu { tanh: true } => {
                // √(2/π)
                const C: f32 = 0.797_884_6;
                let $f = |x: f32| 0.5 * x * (1.0 + simd::tanh(C * (x + 0.044715 * x * x * x)));
                $body
            }
        }
    };
}

/// Expands `$body` with `$f` bound to the scalar function of the binary op `$op`.
macro_rules! with_binary {
    ($op:expr, |$f:ident| $body:expr) => {
        match $op {
            Binary::Add => {
                let $f = |a: f32, b: f32| a + b;
                $body
            }
            Binary::Sub => {
                let $f = |a: f32, b: f32| a - b;
                $body
            }
            Binary::Mul => {
                let $f = |a: f32, b: f32| a * b;
                $body
            }
            Binary::Div => {
                let $f = |a: f32, b: f32| a / b;
                $body
            }
            Binary::Max => {
                let $f = f32::max;
                $body
            }
            Binary::Min => {
                let $f = f32::min;
                $body
            }
        }
    };
}

/// The ops with a vector form in [`simd`] (see [`simd::VectorMap`]).
fn vector_map(op: Unary) -> Option<simd::VectorMap> {
    match op {
        Unary::Exp => Some(simd::VectorMap::Exp),
        Unary::Sigmoid => Some(simd::VectorMap::Sigmoid),
        Unary::Swish { alpha } => Some(simd::VectorMap::Swish { alpha }),
        _ => None,
    }
}

/// The unary op a fused activation applies, if any.
fn activation_op(a: Activation) -> Option<Unary> {
    match a {
        Activation::None => None,
        Activation::Relu => Some(Unary::Relu),
        Activation::LeakyRelu { alpha } => Some(Unary::LeakyRelu { alpha }),
        Activation::Clip { min, max } => Some(Unary::Clip { min, max }),
        Activation::Sigmoid => Some(Unary::Sigmoid),
        Activation::HardSigmoid { alpha, beta } => Some(Unary::HardSigmoid { alpha, beta }),
        Activation::HardSwish => Some(Unary::HardSwish),
        Activation::Swish { alpha } => Some(Unary::Swish { alpha }),
    }
}

/// A fused activation as vector operations, for kernels that finish their outputs in
/// registers (`depthwise`): the piecewise-linear ones. Each gives the bits of its
/// scalar form in `with_unary!`, NaN included (`max`/`min` put the constant first
/// where the scalar form keeps NaN, second where it drops it, as x86's `maxps`
/// returns its second operand on NaN).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum VectorActivation {
    Identity,
    Relu,
    LeakyRelu { alpha: f32 },
    Clip { min: f32, max: f32 },
    HardSigmoid { alpha: f32, beta: f32 },
    HardSwish,
}

impl VectorActivation {
    /// The vector form of `act`, if it has one.
    pub(crate) fn new(act: Activation) -> Option<Self> {
        Some(match act {
            Activation::None => Self::Identity,
            Activation::Relu => Self::Relu,
            Activation::LeakyRelu { alpha } => Self::LeakyRelu { alpha },
            Activation::Clip { min, max } => Self::Clip { min, max },
            Activation::HardSigmoid { alpha, beta } => Self::HardSigmoid { alpha, beta },
            Activation::HardSwish => Self::HardSwish,
            Activation::Sigmoid | Activation::Swish { .. } => return None,
        })
    }

    /// No closures inside: a closure does not inherit its caller's target features,
    /// and one the inliner leaves out of line calls each intrinsic it uses (in a
    /// build of one codegen unit, depthwise layers with HardSwish ran 5–8× slower).
    #[inline(always)]
    pub(crate) fn apply<S: Simd>(self, s: S, v: S::f32s) -> S::f32s {
        match self {
            Self::Identity => v,
            Self::Relu => s.max_f32s(v, s.splat_f32s(0.0)),
            Self::LeakyRelu { alpha } => s.select_f32s(
                s.less_than_f32s(v, s.splat_f32s(0.0)),
                s.mul_f32s(s.splat_f32s(alpha), v),
                v,
            ),
            Self::Clip { min, max } => {
                s.min_f32s(s.max_f32s(v, s.splat_f32s(min)), s.splat_f32s(max))
            }
            Self::HardSigmoid { alpha, beta } => unit(
                s,
                s.add_f32s(s.mul_f32s(s.splat_f32s(alpha), v), s.splat_f32s(beta)),
            ),
            Self::HardSwish => {
                let gate = s.add_f32s(s.mul_f32s(v, s.splat_f32s(1.0 / 6.0)), s.splat_f32s(0.5));
                s.mul_f32s(v, unit(s, gate))
            }
        }
    }

    /// [`apply`](Self::apply) to each of `vs`, matched once for all of them: each arm
    /// applies a variant known there, whose own match folds away (a block of a
    /// product's accumulators, unrolled, would otherwise branch on every vector).
    #[inline(always)]
    pub(crate) fn apply_each<S: Simd>(self, s: S, vs: &mut [S::f32s]) {
        macro_rules! each {
            ($act:expr) => {{
                let act = $act;
                for v in vs {
                    *v = act.apply(s, *v);
                }
            }};
        }
        match self {
            Self::Identity => {}
            Self::Relu => each!(Self::Relu),
            Self::LeakyRelu { alpha } => each!(Self::LeakyRelu { alpha }),
            Self::Clip { min, max } => each!(Self::Clip { min, max }),
            Self::HardSigmoid { alpha, beta } => each!(Self::HardSigmoid { alpha, beta }),
            Self::HardSwish => each!(Self::HardSwish),
        }
    }
}

/// Every activation with a vector form ([`VectorActivation`]), Clip both as ReLU6 and
/// with a negative floor: the cases of the tests that check a vector form's bits.
#[cfg(test)]
pub(crate) const VECTOR_ACTIVATIONS: [Activation; 7] = [
    Activation::None,
    Activation::Relu,
    Activation::LeakyRelu { alpha: 0.1 },
    Activation::Clip { min: 0.0, max: 6.0 },
    Activation::Clip {
        min: -1.0,
        max: 0.5,
    },
    Activation::HardSigmoid {
        alpha: 0.2,
        beta: 0.5,
    },
    Activation::HardSwish,
];

/// `clamp(v, 0, 1)` keeping NaN, as `f32::clamp` does.
#[inline(always)]
fn unit<S: Simd>(s: S, v: S::f32s) -> S::f32s {
    s.min_f32s(s.splat_f32s(1.0), s.max_f32s(s.splat_f32s(0.0), v))
}

/// The output stage of a producing kernel: `y = act(y + bias)` in one pass, called
/// per output channel while the channel is still in cache.
#[inline(always)]
pub(crate) fn bias_activate(act: Activation, bias: f32, y: &mut [f32]) {
    match activation_op(act) {
        None if bias == 0.0 => {}
        Some(op) if let Some(f) = vector_map(op) => simd::map_vectors(f, bias, None, y),
        None => {
            for v in y {
                *v += bias;
            }
        }
        Some(op) => with_unary!(op, |f| {
            for v in y {
                *v = f(*v + bias);
            }
        }),
    }
}

/// [`bias_activate`] with a residual added first: `y = act(y + residual + bias)`, the
/// output stage of a convolution that absorbed the `Add` after it (ResNet's shortcut).
/// The row is in cache, so the two passes over it cost one read of `residual`.
#[inline(always)]
pub(crate) fn residual_bias_activate(act: Activation, bias: f32, residual: &[f32], y: &mut [f32]) {
    assert_eq!(residual.len(), y.len(), "residual: lengths");
    for (y, r) in y.iter_mut().zip(residual) {
        *y += r;
    }
    bias_activate(act, bias, y);
}

/// `y = act(y)`, for kernels whose output has no per-channel bias.
pub(crate) fn activate(act: Activation, y: &mut [f32]) {
    if act != Activation::None {
        vectorize!({ bias_activate(act, 0.0, y) });
    }
}

pub fn unary(op: Unary, x: &[f32], y: &mut [f32]) {
    assert_eq!(x.len(), y.len(), "unary: X and Y differ in length");
    map_unary(op, Some(x), y);
}

/// [`unary`] with the input in `y`, overwritten by the result.
pub fn unary_inplace(op: Unary, y: &mut [f32]) {
    map_unary(op, None, y);
}

/// `y = op(x)`; `x` is `None` when it is `y` itself. With worker threads, an op
/// evaluated by polynomials (exp, erf, tanh, and what is made of them) is shared in
/// one run a thread; the others are a load and a store an element, which a second
/// core (reading what the first one wrote) does not make faster.
fn map_unary(op: Unary, x: Option<&[f32]>, y: &mut [f32]) {
    let polynomial = matches!(
        op,
        Unary::Exp
            | Unary::Sigmoid
            | Unary::Tanh
            | Unary::Erf
            | Unary::Swish { .. }
            | Unary::Gelu { .. }
    );
    // An element weighed as 16 multiply-adds, as softmax's.
    let work = if polynomial { y.len() * 16 } else { 0 };
    let run = y.len().div_ceil(threads::current()).next_multiple_of(64);
    let runs = y.chunks_mut(run.max(1)).enumerate();
    threads::for_each(runs, work, |(i, y)| {
        let x = x.map(|x| &x[i * run..][..y.len()]);
        map_unary_run(op, x, y)
    });
}

/// [`map_unary`] on one thread.
fn map_unary_run(op: Unary, x: Option<&[f32]>, y: &mut [f32]) {
    if let Some(f) = vector_map(op) {
        return simd::map_vectors(f, 0.0, x, y);
    }
    vectorize!({
        with_unary!(op, |f| map_row(
            y,
            Row::source(x),
            Row::Splat(0.0),
            |x, _| f(x)
        ))
    });
}

pub fn binary(op: Binary, p: &Broadcast, a: &[f32], b: &[f32], y: &mut [f32]) {
    with_binary!(op, |f| broadcast(p, Some(a), Some(b), y, f))
}

/// `y = op(y, b)`: the output is the left operand, so `p.a_strides` must describe `y`
/// itself (contiguous).
pub fn binary_inplace(op: Binary, p: &Broadcast, y: &mut [f32], b: &[f32]) {
    with_binary!(op, |f| broadcast(p, None, Some(b), y, f))
}

/// `y = op(a, y)`: the output is the right operand, so `p.b_strides` must describe `y`
/// itself (contiguous). For `Sub` and `Div` this is not [`binary_inplace`] swapped.
pub fn binary_inplace_b(op: Binary, p: &Broadcast, a: &[f32], y: &mut [f32]) {
    with_binary!(op, |f| broadcast(p, Some(a), None, y, f))
}

/// `y = f(a, b)` under `p`'s broadcast; an operand is `None` when it is `y` itself
/// (in place), and then its strides must be `y`'s.
///
/// The shape is simplified first, so a same-shape op becomes one contiguous run, a
/// scalar operand a stride-0 run, and a per-channel operand one splat per row; the
/// remaining outer dimensions are walked with an odometer.
#[inline(always)]
fn broadcast<'a>(
    p: &Broadcast,
    a: Option<&'a [f32]>,
    b: Option<&'a [f32]>,
    y: &mut [f32],
    f: impl Fn(f32, f32) -> f32 + Copy,
) {
    assert!(
        p.rank <= crate::params::MAX_RANK,
        "broadcast: rank {}",
        p.rank
    );
    let shape = &p.shape[..p.rank];
    let len: usize = shape.iter().product();
    assert_eq!(y.len(), len, "broadcast: Y does not match the shape");
    if len == 0 {
        return;
    }
    let (a_strides, b_strides) = (&p.a_strides[..p.rank], &p.b_strides[..p.rank]);
    let y_strides = contiguous_strides(shape);
    for (name, x, strides) in [("A", a, a_strides), ("B", b, b_strides)] {
        match x {
            Some(x) => assert_eq!(x.len(), extent(shape, strides), "broadcast: {name}"),
            None => assert_eq!(
                strides,
                &y_strides[..p.rank],
                "broadcast: {name} is the output, so it must be contiguous"
            ),
        }
    }
    let l = Layout::new(shape, [a_strides, b_strides, &y_strides[..p.rank]]);
    let outer = l.rank.saturating_sub(1);
    let n = if l.rank == 0 { 1 } else { l.shape[outer] };
    let [sa, sb, _] = l.strides.map(|s| if l.rank == 0 { 0 } else { s[outer] });
    vectorize!({
        l.for_each(
            outer,
            #[inline(always)]
            |[oa, ob, oy]| {
                let (ra, rb) = (Row::run(a, oa, sa, n), Row::run(b, ob, sb, n));
                map_row(&mut y[oy..oy + n], ra, rb, f)
            },
        )
    });
}

/// Where one input run of an elementwise loop reads from, relative to the output run.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Row<'a> {
    /// As many contiguous elements as the output run.
    Dense(&'a [f32]),
    /// One value for every element (stride 0).
    Splat(f32),
    /// Elements `stride` apart, from the start of the slice.
    Strided(&'a [f32], usize),
    /// The output element itself (in-place ops).
    Out,
}

impl<'a> Row<'a> {
    /// The whole input of an elementwise kernel: `x`, or the output itself (`None`,
    /// in place). Cut it into runs with [`Row::sub`].
    #[inline(always)]
    pub fn source(x: Option<&'a [f32]>) -> Self {
        x.map_or(Row::Out, Row::Dense)
    }

    /// The run of `n` elements starting at `data[0]`, `stride` apart, in its cheapest form.
    #[inline(always)]
    pub fn strided(data: &'a [f32], stride: usize, n: usize) -> Self {
        match stride {
            0 => Row::Splat(data[0]),
            1 => Row::Dense(&data[..n]),
            s => Row::Strided(&data[..(n - 1) * s + 1], s),
        }
    }

    /// The run of `n` elements of `x` from `offset`, `stride` apart; the output's own
    /// run when `x` is `None` (in place).
    #[inline(always)]
    pub fn run(x: Option<&'a [f32]>, offset: usize, stride: usize, n: usize) -> Self {
        match x {
            Some(x) => Row::strided(&x[offset..], stride, n),
            None => Row::Out,
        }
    }

    /// Elements `start .. start + len` of the run.
    #[inline(always)]
    pub fn sub(self, start: usize, len: usize) -> Self {
        match self {
            Row::Dense(s) => Row::Dense(&s[start..start + len]),
            Row::Strided(s, st) => Row::Strided(&s[start * st..(start + len - 1) * st + 1], st),
            other => other,
        }
    }
}

/// `dst[i] = src[i * stride]`; `src` holds exactly the elements up to the last one read.
#[inline(always)]
pub(crate) fn gather(dst: &mut [f32], src: &[f32], stride: usize) {
    if stride == 2 {
        // A constant stride: pairs vectorise as shuffles. The last element read has
        // no partner.
        for (d, pair) in dst.iter_mut().zip(src.chunks_exact(2)) {
            *d = pair[0];
        }
        if let (Some(d), Some(&v)) = (dst.last_mut(), src.last()) {
            *d = v;
        }
    } else {
        for (d, chunk) in dst.iter_mut().zip(src.chunks(stride)) {
            *d = chunk[0];
        }
    }
}

/// Elements gathered at once from a strided input into a stack buffer.
const GATHER: usize = 64;

/// `y[i] = f(a[i], b[i])` over one run, for every combination of row forms.
///
/// Strided inputs are first gathered, [`GATHER`] elements at a time, into a buffer on
/// the stack, so the loop that applies `f` only ever reads dense or splat runs.
#[inline(always)]
pub(crate) fn map_row(y: &mut [f32], a: Row<'_>, b: Row<'_>, f: impl Fn(f32, f32) -> f32) {
    let n = y.len();
    for r in [a, b] {
        if let Row::Dense(s) = r {
            assert_eq!(s.len(), n, "map_row: run lengths differ");
        }
    }
    let strided = |r: Row<'_>| matches!(r, Row::Strided(..));
    if !strided(a) && !strided(b) {
        return map_dense(y, a, b, f);
    }
    let (mut buf_a, mut buf_b) = ([0.0f32; GATHER], [0.0f32; GATHER]);
    for start in (0..n).step_by(GATHER) {
        let len = GATHER.min(n - start);
        let a = densify(a.sub(start, len), &mut buf_a[..len]);
        let b = densify(b.sub(start, len), &mut buf_b[..len]);
        map_dense(&mut y[start..start + len], a, b, &f);
    }
}

/// A strided run gathered into `buf` (as long as the run); other forms unchanged.
#[inline(always)]
fn densify<'a>(r: Row<'a>, buf: &'a mut [f32]) -> Row<'a> {
    match r {
        Row::Strided(s, st) => {
            gather(buf, s, st);
            Row::Dense(buf)
        }
        other => other,
    }
}

/// The per-element read of one [`Row`] form, monomorphised so that the loop over a
/// run has no branches and no bounds checks, and vectorises.
trait Fetch: Copy {
    fn get(self, i: usize, out: f32) -> f32;
}

#[derive(Clone, Copy)]
struct Dense<'a>(&'a [f32]);
#[derive(Clone, Copy)]
struct Splat(f32);
#[derive(Clone, Copy)]
struct Out;

impl Fetch for Dense<'_> {
    #[inline(always)]
    fn get(self, i: usize, _: f32) -> f32 {
        self.0[i]
    }
}
impl Fetch for Splat {
    #[inline(always)]
    fn get(self, _: usize, _: f32) -> f32 {
        self.0
    }
}
impl Fetch for Out {
    #[inline(always)]
    fn get(self, _: usize, out: f32) -> f32 {
        out
    }
}

/// Expands `$body` with `$g` bound to the [`Fetch`] form of `$row` for a run of `$n`.
/// A dense slice is cut to exactly `$n` here, next to the loop, so that the compiler
/// sees its length equal the output's and drops the bounds checks.
macro_rules! with_fetch {
    ($row:expr, $n:expr, |$g:ident| $body:expr) => {
        match $row {
            Row::Dense(s) => {
                let $g = Dense(&s[..$n]);
                $body
            }
            Row::Splat(v) => {
                let $g = Splat(v);
                $body
            }
            Row::Out => {
                let $g = Out;
                $body
            }
            Row::Strided(..) => unreachable!("strided runs are gathered first"),
        }
    };
}

/// [`map_row`] once no input is strided.
#[inline(always)]
fn map_dense(y: &mut [f32], a: Row<'_>, b: Row<'_>, f: impl Fn(f32, f32) -> f32) {
    let n = y.len();
    with_fetch!(a, n, |ga| with_fetch!(b, n, |gb| {
        let y = &mut y[..n];
        for (i, v) in y.iter_mut().enumerate() {
            *v = f(ga.get(i, *v), gb.get(i, *v));
        }
    }))
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use faer::traits::pulp::x86::V3;

    use super::*;

    /// Each vector activation against its scalar form on the values where the forms
    /// could part: NaN, infinities, signed zeros, and either side of each kink.
    #[test]
    fn vector_activations_match_the_scalar_forms() {
        let Some(v3) = V3::try_new() else {
            return;
        };
        let values = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            -7.0,
            -3.0,
            -2.999,
            -0.4,
            1e-8,
            0.4,
            2.999,
            3.0,
            5.5,
            6.0,
            7.25,
            1e30,
        ];
        for act in VECTOR_ACTIVATIONS {
            let mut want = values;
            bias_activate(act, 0.0, &mut want);
            let vector = VectorActivation::new(act).unwrap();
            let got: Vec<f32> = values
                .chunks(8)
                .flat_map(|chunk| {
                    let mut lanes = [0.0; 8];
                    lanes[..chunk.len()].copy_from_slice(chunk);
                    let v = vector.apply(v3, bytemuck::cast(lanes));
                    let lanes: [f32; 8] = bytemuck::cast(v);
                    lanes[..chunk.len()].to_vec()
                })
                .collect();
            for ((&x, &want), got) in values.iter().zip(&want).zip(got) {
                assert!(
                    got == want || (got.is_nan() && want.is_nan()),
                    "{act:?}({x}): vector {got}, scalar {want}"
                );
            }
        }
        assert_eq!(VectorActivation::new(Activation::Sigmoid), None);
    }
}
