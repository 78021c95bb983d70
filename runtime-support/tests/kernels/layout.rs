use kiln_runtime::kernels::{concat, copy, transpose};
use kiln_runtime::params::{Concat, MAX_RANK, Transpose};

use crate::reference::Rng;

#[test]
fn concat_interleaves_chunks() {
    let mut rng = Rng::new(1);
    for outer in [1, 3] {
        let inputs: Vec<Vec<f32>> = [2, 0, 5, 1].iter().map(|&c| rng.vec(c * outer)).collect();
        let refs: Vec<&[f32]> = inputs.iter().map(|v| &v[..]).collect();
        let mut y = vec![f32::NAN; inputs.iter().map(Vec::len).sum()];
        concat(&Concat { outer }, &refs, &mut y);
        let mut want = Vec::new();
        for o in 0..outer {
            for x in &inputs {
                let chunk = x.len() / outer;
                want.extend_from_slice(&x[o * chunk..(o + 1) * chunk]);
            }
        }
        assert_eq!(y, want, "outer {outer}");
    }
}

fn transpose_ref(shape: &[usize], perm: &[usize], x: &[f32]) -> Vec<f32> {
    let rank = shape.len();
    let out_shape: Vec<usize> = perm.iter().map(|&a| shape[a]).collect();
    let mut in_strides = vec![1; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        in_strides[d] = in_strides[d + 1] * shape[d + 1];
    }
    let len: usize = shape.iter().product();
    (0..len)
        .map(|flat| {
            let (mut rem, mut src) = (flat, 0);
            for d in (0..rank).rev() {
                let i = rem % out_shape[d];
                rem /= out_shape[d];
                src += i * in_strides[perm[d]];
            }
            x[src]
        })
        .collect()
}

fn check_transpose(shape: &[usize], perm: &[usize], seed: u64) {
    let len: usize = shape.iter().product();
    let x = Rng::new(seed).vec(len);
    let mut p = Transpose {
        rank: shape.len(),
        in_shape: [1; MAX_RANK],
        perm: [0; MAX_RANK],
    };
    p.in_shape[..shape.len()].copy_from_slice(shape);
    p.perm[..perm.len()].copy_from_slice(perm);
    let mut y = vec![f32::NAN; len];
    transpose(&p, &x, &mut y);
    assert_eq!(y, transpose_ref(shape, perm, &x), "{shape:?} {perm:?}");
}

#[test]
fn transpose_fixed_cases() {
    check_transpose(&[], &[], 1);
    check_transpose(&[7], &[0], 2);
    check_transpose(&[257, 255], &[1, 0], 3);
    check_transpose(&[1, 64, 7, 9], &[0, 2, 3, 1], 4); // NCHW -> NHWC
    check_transpose(&[1, 7, 9, 64], &[0, 3, 1, 2], 5); // NHWC -> NCHW
    check_transpose(&[2, 3, 4], &[0, 1, 2], 6); // identity
    check_transpose(&[33, 1, 40], &[2, 1, 0], 7);
}

#[test]
fn transpose_random_permutations_up_to_rank_6() {
    let mut rng = Rng::new(42);
    for case in 0..300 {
        let rank = 1 + rng.below(MAX_RANK);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(5)).collect();
        let mut perm: Vec<usize> = (0..rank).collect();
        for i in (1..rank).rev() {
            perm.swap(i, rng.below(i + 1));
        }
        check_transpose(&shape, &perm, case);
    }
}

#[test]
fn copy_copies() {
    let x = Rng::new(3).vec(257);
    let mut y = vec![0.0; 257];
    copy(&x, &mut y);
    assert_eq!(x, y);
}
