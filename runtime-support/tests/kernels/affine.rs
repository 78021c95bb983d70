use kiln_runtime::kernels::{channel_affine, channel_affine_inplace};
use kiln_runtime::params::ChannelAffine;

use crate::reference::{ACTIVATIONS, Rng, activation_ref, assert_bits_eq, assert_close};

#[test]
fn channel_affine_matches_definition_in_and_out_of_place() {
    for (n, c, inner) in [(1, 1, 1), (2, 3, 49), (1, 257, 5), (3, 2, 255), (1, 4, 0)] {
        for activation in ACTIVATIONS {
            let p = ChannelAffine {
                n,
                c,
                inner,
                activation,
            };
            let mut rng = Rng::new((n * c * inner) as u64);
            let x = rng.vec(n * c * inner);
            let (scale, shift) = (rng.vec(c), rng.vec(c));
            let mut y = vec![f32::NAN; x.len()];
            channel_affine(&p, &x, &scale, &shift, &mut y);
            let want: Vec<f32> = (0..x.len())
                .map(|i| {
                    let ch = i / inner % c;
                    activation_ref(activation, x[i] * scale[ch] + shift[ch])
                })
                .collect();
            assert_close(&y, &want, 1e-6, &format!("{p:?}"));
            let mut in_place = x.clone();
            channel_affine_inplace(&p, &scale, &shift, &mut in_place);
            assert_bits_eq(&in_place, &y, &format!("in place {p:?}"));
        }
    }
}

#[test]
#[should_panic(expected = "channel_affine: Y")]
fn channel_affine_inplace_rejects_wrong_length() {
    let p = ChannelAffine {
        n: 1,
        c: 2,
        inner: 3,
        activation: kiln_runtime::params::Activation::None,
    };
    channel_affine_inplace(&p, &[1.0; 2], &[0.0; 2], &mut [0.0; 5]);
}
