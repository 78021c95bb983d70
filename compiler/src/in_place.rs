//! Which steps may write their output over one of their inputs: the kernel-side half of
//! in-place aliasing. The planner decides the other half (the input must die at that
//! step and not be a graph output), so a step marked here is only a candidate.
//!
//! A kernel qualifies when it reads every input element before writing the output
//! element at the same position: elementwise kernels (unary ops, broadcasting binary
//! ops, per-channel affine, BatchNorm), Softmax, which reads a whole row before
//! writing any of it, and LRN with a window of at most
//! [`LRN_INPLACE_MAX_SIZE`] channels (its kernels keep the original values of the
//! channels they already overwrote but still need). A convolution with a fused
//! residual may write over the residual: its products accumulate onto it. The operand must be a planned buffer holding exactly the
//! output's elements in the output's layout (for a broadcasting op: the operand that is
//! not broadcast), and must not be read a second time by the same step (`x * x`), since
//! an in-place kernel reads it only through the output.
//!
//! Pooling qualifies for the weaker segment overlap: its output may start inside its
//! input, as far as the kernel's plane order allows.

use kiln_runtime::kernels::LRN_INPLACE_MAX_SIZE;
use kiln_runtime::params::Broadcast;

use crate::lower::{Buffer, Kernel, Operand, Program, Step};
use crate::plan::PlaneOrder;

/// Sets every step's [`Step::in_place`]: the operands it may overwrite, in order of
/// preference; and [`Step::overlap`]: how it walks operand 0 and its output plane by
/// plane, where its output may start inside that operand.
pub fn mark(program: &mut Program) {
    for step in &mut program.steps {
        step.in_place = candidates(step, &program.buffers);
        step.overlap = plane_order(step);
    }
}

/// MaxPool and AveragePool: the CPU kernel fills output plane `q` and accumulates it
/// from input plane `q`, plane after plane ([`kiln_runtime::kernels::pool2d_overlapping`]),
/// so output planes may land on input planes already read. (The CUDA kernel runs all
/// planes at once: the CUDA target clears this.)
fn plane_order(step: &Step) -> Option<PlaneOrder> {
    let Kernel::Pool2d(p) = &step.kernel else {
        return None;
    };
    matches!(step.inputs.first(), Some(Operand::Buffer(b)) if *b != step.output).then(|| {
        PlaneOrder {
            planes: p.n * p.c,
            in_plane: p.h_in * p.w_in * 4,
            out_plane: p.h_out * p.w_out * 4,
        }
    })
}

/// The operand positions `step` could write its output over.
fn candidates(step: &Step, buffers: &[Buffer]) -> Vec<usize> {
    let positions: &[usize] = match &step.kernel {
        Kernel::Unary(_) | Kernel::ChannelAffine(_) | Kernel::BatchNorm(_) | Kernel::Softmax(_) => {
            &[0]
        }
        Kernel::Lrn(p) if p.size <= LRN_INPLACE_MAX_SIZE => &[0],
        // Its residual (operand 2): the products accumulate onto it
        // (`conv2d_residual_inplace`, for the strategies every fused 1×1 layer takes).
        Kernel::ResidualConv2d(p) if !p.is_depthwise() && !p.direct_applies() => &[2],
        Kernel::Binary(..) => &[0, 1],
        _ => &[],
    };
    positions
        .iter()
        .copied()
        .filter(|&k| reusable(step, buffers, k))
        .collect()
}

/// Operand `k` of `step` is a buffer other than the output, of the output's length,
/// read once by the step, and (for a binary op) laid out as the output.
fn reusable(step: &Step, buffers: &[Buffer], k: usize) -> bool {
    let Some(&Operand::Buffer(b)) = step.inputs.get(k) else {
        return false;
    };
    let read_once = step
        .inputs
        .iter()
        .filter(|&&o| o == Operand::Buffer(b))
        .count()
        == 1;
    let same_len = buffers[b.index()].len == buffers[step.output.index()].len;
    let same_layout = match &step.kernel {
        Kernel::Binary(_, p) => dense(p, if k == 0 { &p.a_strides } else { &p.b_strides }),
        _ => true,
    };
    b != step.output && !buffers[b.index()].scratch && read_once && same_len && same_layout
}

/// `strides` are the output's own: contiguous over `p.shape`, no broadcast dim.
fn dense(p: &Broadcast, strides: &[usize]) -> bool {
    let mut expected = 1;
    for d in (0..p.rank).rev() {
        if p.shape[d] != 1 && strides[d] != expected {
            return false;
        }
        expected *= p.shape[d];
    }
    true
}

#[cfg(test)]
mod tests {
    use kiln_runtime::params;

    use super::*;
    use crate::lower::broadcast_params;
    use crate::plan::BufferId;

    fn buffer(len: usize) -> Buffer {
        Buffer {
            dtype: crate::tensor::DType::F32,
            elems: len,
            name: String::new(),
            len,
            scratch: false,
        }
    }

    fn step(kernel: Kernel, inputs: Vec<Operand>, output: u32) -> Step {
        Step {
            node: String::new(),
            op_type: "",
            kernel,
            inputs,
            output: BufferId(output),
            extra_outputs: Vec::new(),
            scratch: None,
            in_place: Vec::new(),
            overlap: None,
        }
    }

    const B0: Operand = Operand::Buffer(BufferId(0));
    const B1: Operand = Operand::Buffer(BufferId(1));

    #[test]
    fn elementwise_and_row_wise_steps_are_candidates() {
        let buffers = vec![buffer(12), buffer(12), buffer(12)];
        let relu = step(Kernel::Unary(params::Unary::Relu), vec![B0], 2);
        assert_eq!(candidates(&relu, &buffers), vec![0]);
        let softmax = params::Softmax {
            outer: 3,
            len: 4,
            inner: 1,
            log: false,
        };
        assert_eq!(
            candidates(&step(Kernel::Softmax(softmax), vec![B0], 2), &buffers),
            vec![0]
        );
        let lrn = |size| {
            let p = params::Lrn {
                n: 1,
                c: 3,
                inner: 4,
                size,
                alpha: 1e-4,
                beta: 0.75,
                bias: 1.0,
            };
            candidates(&step(Kernel::Lrn(p), vec![B0], 2), &buffers)
        };
        assert_eq!(lrn(5), vec![0]);
        assert_eq!(lrn(LRN_INPLACE_MAX_SIZE), vec![0]);
        // A window wider than the in-place kernels' ring stays out of place.
        assert!(lrn(LRN_INPLACE_MAX_SIZE + 1).is_empty());
        let add = broadcast_params(&[3, 4], &[3, 4], &[3, 4]).unwrap();
        let sum = step(Kernel::Binary(params::Binary::Add, add), vec![B0, B1], 2);
        assert_eq!(candidates(&sum, &buffers), vec![0, 1]);
        // A fused residual (operand 2) of a 1×1 convolution; the direct kernel's
        // strategy cannot accumulate onto it.
        let conv = |kernel: [usize; 2]| params::Conv2d {
            n: 1,
            c_in: 3,
            h_in: 2,
            w_in: 2,
            c_out: 3,
            h_out: 2,
            w_out: 2,
            kernel,
            stride: [1, 1],
            dilation: [1, 1],
            pads: if kernel == [3, 3] { [1; 4] } else { [0; 4] },
            group: 1,
            activation: params::Activation::None,
        };
        let weights = Operand::Weight { offset: 0, len: 9 };
        let fused = |p| step(Kernel::ResidualConv2d(p), vec![B0, weights, B1], 2);
        let buffers_12 = vec![buffer(12), buffer(12), buffer(12)];
        assert_eq!(candidates(&fused(conv([1, 1])), &buffers_12), vec![2]);
        assert!(conv([3, 3]).direct_applies());
        assert!(candidates(&fused(conv([3, 3])), &buffers_12).is_empty());
        // Not elementwise.
        assert!(candidates(&step(Kernel::Copy, vec![B0], 2), &buffers).is_empty());
        let t = params::Transpose {
            rank: 2,
            in_shape: [3, 4, 1, 1, 1, 1],
            perm: [1, 0, 2, 3, 4, 5],
        };
        assert!(candidates(&step(Kernel::Transpose(t), vec![B0], 2), &buffers).is_empty());
    }

    #[test]
    fn broadcast_operands_weights_and_twice_read_buffers_are_not() {
        let buffers = vec![buffer(12), buffer(4), buffer(12)];
        // b is broadcast along rows: only a qualifies.
        let p = broadcast_params(&[3, 4], &[3, 4], &[4]).unwrap();
        let add = step(Kernel::Binary(params::Binary::Sub, p), vec![B0, B1], 2);
        assert_eq!(candidates(&add, &buffers), vec![0]);
        // ... and on the other side only b.
        let p = broadcast_params(&[3, 4], &[4], &[3, 4]).unwrap();
        let sub = step(Kernel::Binary(params::Binary::Sub, p), vec![B1, B0], 2);
        assert_eq!(candidates(&sub, &buffers), vec![1]);
        // x * x reads x twice.
        let p = broadcast_params(&[3, 4], &[3, 4], &[3, 4]).unwrap();
        let square = step(Kernel::Binary(params::Binary::Mul, p), vec![B0, B0], 2);
        assert!(candidates(&square, &buffers).is_empty());
        // Weights and graph inputs are never overwritten.
        let weight = Operand::Weight { offset: 0, len: 12 };
        let relu = step(Kernel::Unary(params::Unary::Relu), vec![weight], 2);
        assert!(candidates(&relu, &buffers).is_empty());
        let relu = step(
            Kernel::Unary(params::Unary::Relu),
            vec![Operand::Input(0)],
            2,
        );
        assert!(candidates(&relu, &buffers).is_empty());
        // A transposed read has the output's length but not its layout.
        let p = params::Broadcast {
            rank: 2,
            shape: [3, 4, 1, 1, 1, 1],
            a_strides: [1, 3, 0, 0, 0, 0],
            b_strides: [4, 1, 0, 0, 0, 0],
        };
        let add = step(Kernel::Binary(params::Binary::Add, p), vec![B0, B0], 2);
        assert!(candidates(&add, &buffers).is_empty());
        let mut other = buffers.clone();
        other[1] = buffer(12);
        let add = step(Kernel::Binary(params::Binary::Add, p), vec![B0, B1], 2);
        assert_eq!(candidates(&add, &other), vec![1]);
    }
}
