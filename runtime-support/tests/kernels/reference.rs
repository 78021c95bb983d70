//! Test helpers: deterministic random data, naive reference maths, and comparisons.

use kiln_runtime::params::{Activation, Unary};

/// A small deterministic generator (xorshift64*), so the tests need no dependency and
/// every failure reproduces.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[-1, 1)`.
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.uniform()).collect()
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Asserts `|got - want| <= tol * max(1, |want|)` elementwise (NaN must match NaN).
#[track_caller]
pub fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w.is_nan() && g.is_nan() || g == w {
            continue;
        }
        let err = (g - w).abs();
        assert!(
            err <= tol * w.abs().max(1.0),
            "{what}: element {i}: got {g}, want {w} (error {err}, tolerance {tol} relative)"
        );
    }
}

/// A unary op in double precision, straight from its definition.
pub fn unary_ref(op: Unary, x: f32) -> f32 {
    let x = x as f64;
    let y = match op {
        Unary::Relu => x.max(0.0),
        Unary::LeakyRelu { alpha } => {
            if x < 0.0 {
                alpha as f64 * x
            } else {
                x
            }
        }
        Unary::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Unary::Tanh => x.tanh(),
        Unary::Clip { min, max } => x.max(min as f64).min(max as f64),
        Unary::Exp => x.exp(),
        Unary::Neg => -x,
        Unary::Abs => x.abs(),
        Unary::Sqrt => x.sqrt(),
        Unary::Erf => kiln_runtime::typed::elem::erf(x),
        // ONNX: max(0, min(1, alpha·x + beta)); HardSwish is x · HardSigmoid(1/6, 1/2).
        Unary::HardSigmoid { alpha, beta } => (alpha as f64 * x + beta as f64).clamp(0.0, 1.0),
        Unary::HardSwish => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
        Unary::Swish { alpha } => x / (1.0 + (-(alpha as f64) * x).exp()),
        Unary::Gelu { tanh: false } => {
            0.5 * x * (1.0 + kiln_runtime::typed::elem::erf(x * std::f64::consts::FRAC_1_SQRT_2))
        }
        Unary::Gelu { tanh: true } => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
        }
    };
    y as f32
}

pub fn activation_ref(a: Activation, x: f32) -> f32 {
    match a {
        Activation::None => x,
        Activation::Relu => unary_ref(Unary::Relu, x),
        Activation::LeakyRelu { alpha } => unary_ref(Unary::LeakyRelu { alpha }, x),
        Activation::Clip { min, max } => unary_ref(Unary::Clip { min, max }, x),
        Activation::Sigmoid => unary_ref(Unary::Sigmoid, x),
        Activation::HardSigmoid { alpha, beta } => unary_ref(Unary::HardSigmoid { alpha, beta }, x),
        Activation::HardSwish => unary_ref(Unary::HardSwish, x),
        Activation::Swish { alpha } => unary_ref(Unary::Swish { alpha }, x),
    }
}

/// Every fused activation, for tests that sweep them.
pub const ACTIVATIONS: [Activation; 9] = [
    Activation::None,
    Activation::Relu,
    Activation::LeakyRelu { alpha: 0.1 },
    Activation::Clip {
        min: -0.5,
        max: 0.75,
    },
    Activation::Sigmoid,
    Activation::HardSigmoid {
        alpha: 0.2,
        beta: 0.5,
    },
    Activation::HardSwish,
    Activation::Swish { alpha: 1.0 },
    Activation::Swish { alpha: 1.702 },
];

/// Bit-for-bit equality (NaNs included): in-place kernels run the out-of-place
/// kernels' arithmetic.
pub fn assert_bits_eq(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "{what}: element {i}: {g} vs {w}");
    }
}
