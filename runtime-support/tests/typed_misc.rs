//! Typed kernels of `typed::misc` and `typed::signal` against the ONNX reference
//! implementation (`onnx.reference.ops`, NumPy in float64): every expected literal
//! below was printed by the reference (`softmaxcrossentropy`,
//! `_compute_negative_log_likelihood_loss`, `np.einsum`, `np.linalg.det`, `_cfft`,
//! `_cifft`) or follows from the operator's definition by hand.

use kiln_runtime::Error;
use kiln_runtime::typed::params::*;
use kiln_runtime::typed::*;

fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "element {i}: {g} vs {w}"
        );
    }
}

const X: [f64; 6] = [0.5, -1.0, 2.0, 1.5, 0.25, -0.75];

fn loss_params(reduction: LossReduction, ignore: Option<i64>, softmax: bool) -> Loss {
    Loss {
        n: 2,
        c: 3,
        d: 1,
        reduction,
        has_ignore_index: ignore.is_some(),
        ignore_index: ignore.unwrap_or(0),
        softmax,
    }
}

#[test]
fn softmax_cross_entropy_mean_weighted_with_log_prob() {
    let p = loss_params(LossReduction::Mean, None, true);
    let (mut out, mut lp) = ([0.0f64], [0.0f64; 6]);
    loss_log_prob(&p, &X, &[2i64, 0], &[0.5, 1.0, 2.0], &mut out, &mut lp).unwrap();
    close(&out, &[0.25918355920717046], 1e-14);
    close(
        &lp,
        &[
            -1.7413112966571571,
            -3.241311296657157,
            -0.24131129665715703,
            -0.33067260940722415,
            -1.580672609407224,
            -2.580672609407224,
        ],
        1e-14,
    );
}

#[test]
fn softmax_cross_entropy_none_ignore_index() {
    let p = loss_params(LossReduction::None, Some(0), true);
    let mut out = [9.0f64; 2];
    loss(&p, &X, &[2i32, 0], &[], &mut out).unwrap();
    close(&out, &[0.24131129665715703, 0.0], 1e-14);
}

#[test]
fn nll_sum_weighted_and_out_of_range_target() {
    let p = loss_params(LossReduction::Sum, None, false);
    let mut out = [0.0f64];
    loss(&p, &X, &[2i64, 0], &[0.5, 1.0, 2.0], &mut out).unwrap();
    close(&out, &[-4.75], 1e-15);
    let e = loss(&p, &X, &[3i64, 0], &[], &mut out);
    assert!(matches!(
        e,
        Err(Error::IndexOutOfRange { index: 3, len: 3 })
    ));
}

/// `ij,jk->ik` and the diagonal `ii->i` as the compiler lowers them.
#[test]
fn einsum_matmul_and_diagonal() {
    let a = [1.0f64, 2.0, 3.0, 4.0];
    let b = [5.0f64, 6.0, 7.0, 8.0, 9.0, 10.0];
    let mut p = Einsum {
        n_labels: 3,
        n_out: 2,
        sizes: [1; EINSUM_LABELS],
        n_inputs: 2,
        strides: [[0; EINSUM_LABELS]; EINSUM_INPUTS],
    };
    // Labels i, k (output), j (summed).
    p.sizes[..3].copy_from_slice(&[2, 3, 2]);
    p.strides[0][..3].copy_from_slice(&[2, 0, 1]);
    p.strides[1][..3].copy_from_slice(&[0, 1, 3]);
    let mut out = [0.0f64; 6];
    einsum(&p, &[&a, &b], &mut out);
    close(&out, &[21.0, 24.0, 27.0, 47.0, 54.0, 61.0], 0.0);

    let mut d = Einsum {
        n_labels: 1,
        n_out: 1,
        sizes: [1; EINSUM_LABELS],
        n_inputs: 1,
        strides: [[0; EINSUM_LABELS]; EINSUM_INPUTS],
    };
    d.sizes[0] = 2;
    d.strides[0][0] = 3;
    let ai = [1i64, 2, 3, 4];
    let mut out = [0i64; 2];
    einsum(&d, &[&ai], &mut out);
    assert_eq!(out, [1, 4]);
}

#[test]
fn cumprod_exclusive_reverse() {
    let x = [1i32, 2, 3, 4];
    let p = CumSum {
        outer: 1,
        len: 4,
        inner: 1,
        exclusive: true,
        reverse: true,
    };
    let mut out = [0i32; 4];
    cumprod(&p, &x, &mut out);
    assert_eq!(out, [24, 12, 4, 1]);
    let p = CumSum {
        exclusive: false,
        reverse: false,
        ..p
    };
    cumprod(&p, &x, &mut out);
    assert_eq!(out, [1, 2, 6, 24]);
}

#[test]
fn bitcast_float_bits_and_invalid_bool() {
    let mut out = [0i32; 2];
    bitcast(&[1.0f32, -2.0], &mut out).unwrap();
    assert_eq!(out, [0x3f80_0000, 0xc000_0000u32 as i32]);
    let mut b = [Bool::default(); 2];
    assert!(bitcast(&[1u8, 0], &mut b).is_ok());
    assert!(bitcast(&[2u8, 0], &mut b).is_err());
}

#[test]
fn reverse_sequence_time_major() {
    // x [time 3, batch 2], lens [2, 3].
    let x = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
    let mut shape = [1; RANK];
    shape[..2].copy_from_slice(&[3, 2]);
    let p = ReverseSequence {
        rank: 2,
        shape,
        batch_axis: 1,
        time_axis: 0,
    };
    let mut out = [0.0f32; 6];
    reverse_sequence(&p, &x, &[2i64, 3], &mut out).unwrap();
    assert_eq!(out, [2.0, 5.0, 0.0, 3.0, 4.0, 1.0]);
    assert!(reverse_sequence(&p, &x, &[4i64, 3], &mut out).is_err());
}

#[test]
fn det_with_pivoting() {
    let x = [
        2.0f64, 1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 1.0, 4.0, //
        0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0,
    ];
    let p = Det { batch: 2, n: 3 };
    let mut out = [0.0f64; 2];
    let mut scratch = vec![0.0; p.scratch_len()];
    det(&p, &x, &mut out, &mut scratch);
    close(&out, &[17.999999999999996, -1.0], 1e-14);
}

#[test]
fn tensor_scatter_circular_wraps() {
    // Cache [batch 1, max_seq 3, inner 1], update of 2 written at index 2.
    let p = TensorScatter {
        batch: 1,
        mid: 1,
        max_seq: 3,
        seq: 2,
        inner: 1,
        circular: true,
    };
    let mut out = [0.0f32; 3];
    tensor_scatter(&p, &[1.0, 2.0, 3.0], &[8.0, 9.0], &[2i64], &mut out).unwrap();
    assert_eq!(out, [9.0, 2.0, 8.0]);
    let linear = TensorScatter {
        circular: false,
        ..p
    };
    assert!(tensor_scatter(&linear, &[1.0, 2.0, 3.0], &[8.0, 9.0], &[2i64], &mut out).is_err());
}

#[test]
fn swiglu_alpha() {
    let mut out = [0.0f64; 2];
    swiglu(&SwiGlu { alpha: 0.5 }, &[2.0, -1.0], &[3.0, 4.0], &mut out);
    let s = |x: f64| 1.0 / (1.0 + (-x).exp());
    close(&out, &[2.0 * s(1.0) * 3.0, -s(-0.5) * 4.0], 1e-15);
}

const SIGNAL: [f64; 5] = [1.0, 2.0, 0.5, -1.0, 3.0];

#[test]
fn dft_rfft_padded_and_irfft() {
    let p = Dft {
        outer: 1,
        n: 5,
        inner: 1,
        in_complex: false,
        length: 6,
        inverse: false,
        onesided: true,
    };
    let mut out = [0.0f64; 8];
    dft(&p, &SIGNAL, &mut out);
    close(
        &out,
        &[
            5.5,
            0.0,
            1.25,
            0.4330127018922193,
            -2.75,
            -3.8971143170299736,
            3.5,
            0.0,
        ],
        1e-14,
    );
    // The one-sided spectrum of length 5 back to the signal.
    let spec = [
        5.5,
        0.0,
        2.949593469062211,
        0.06937863785644383,
        -3.199593469062211,
        2.0143700267352034,
    ];
    let inv = Dft {
        outer: 1,
        n: 3,
        inner: 1,
        in_complex: true,
        length: 5,
        inverse: true,
        onesided: true,
    };
    let mut back = [0.0f64; 5];
    dft(&inv, &spec, &mut back);
    close(&back, &SIGNAL, 1e-14);
}

#[test]
fn stft_frames_equal_dft_of_windowed_slices() {
    // Frames of 2 samples, 1 apart, with window [1, 0.5]: bin 0 is x0 + x1/2, bin 1
    // (onesided, the last) is x0 - x1/2.
    let p = Stft {
        batch: 1,
        signal_len: 5,
        in_complex: false,
        frames: 4,
        step: 1,
        frame_len: 2,
        bins: 2,
    };
    let mut out = [0.0f64; 16];
    stft(&p, &SIGNAL, &[1.0, 0.5], &mut out);
    let mut want = Vec::new();
    for f in 0..4 {
        let (a, b) = (SIGNAL[f], SIGNAL[f + 1] * 0.5);
        want.extend([a + b, 0.0, a - b, 0.0]);
    }
    close(&out, &want, 1e-15);
}

#[test]
fn windows_periodic_and_symmetric() {
    let mut out = [0.0f64; 4];
    window(
        &Window {
            kind: WindowKind::Hann,
            size: 4,
            periodic: true,
        },
        &mut out,
    );
    close(&out, &[0.0, 0.5, 1.0, 0.5], 1e-15);
    let mut out = [0.0f64; 3];
    window(
        &Window {
            kind: WindowKind::Blackman,
            size: 3,
            periodic: false,
        },
        &mut out,
    );
    close(&out, &[0.0, 1.0, 0.0], 1e-15);
}

#[test]
fn mel_weight_matrix_peaks_are_one() {
    let p = MelWeightMatrix {
        num_mel_bins: 8,
        dft_length: 16,
        sample_rate: 8192,
        lower_edge_hertz: 0.0,
        upper_edge_hertz: 4096.0,
        f32_math: true,
    };
    let mut out = [0.0f32; 9 * 8];
    mel_weight_matrix(&p, &mut out).unwrap();
    for i in 0..8 {
        let peak = (0..9).map(|j| out[j * 8 + i]).fold(0.0f32, f32::max);
        assert_eq!(peak, 1.0, "filter {i}");
    }
}
