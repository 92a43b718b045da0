//! The GPU's fixed-base multiplication (used to make large test keys) against blstrs and the
//! CPU setup, on fresh random inputs plus the edge scalars. Without a GPU every test says why
//! it skipped and passes; the table-size check needs no GPU.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::{Field, PrimeField};
use group::{prime::PrimeCurveAffine, Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use snarkpipe::backend::cuda::{fixed_base_g1, fixed_base_g2};
use snarkpipe::groth16::setup::{setup_on, SetupEngine, ToxicWaste};
use snarkpipe::synthetic::{KeyKind, SyntheticSpec, WitnessProfile};
use snarkpipe::Error;

mod common;
use common::have_gpu;

fn rng() -> ChaCha8Rng {
    let seed = rand::random();
    println!("seed {seed}");
    ChaCha8Rng::seed_from_u64(seed)
}

/// `b·2^(8w)·G` at index `w·255 + b − 1`, built the slow obvious way.
fn table<G: Group + Curve>() -> Vec<G::AffineRepr> {
    let mut out = Vec::with_capacity(32 * 255);
    let mut window_base = G::generator();
    for _ in 0..32 {
        let mut multiple = window_base;
        for _ in 0..255 {
            out.push(multiple.to_affine());
            multiple += window_base;
        }
        window_base = multiple;
    }
    out
}

/// Fresh random scalars plus 0, 1, r − 1, single set bytes, and all-ones bytes.
fn scalars(rng: &mut ChaCha8Rng, random: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::from(255), Scalar::from(256)];
    for byte in [1usize, 7, 15, 30, 31] {
        let mut repr = [0u8; 32];
        repr[byte] = if byte == 31 { 0x3f } else { 0xff };
        out.push(Scalar::from_repr_vartime(repr).expect("below the modulus"));
    }
    out.extend((0..random).map(|_| Scalar::random(&mut *rng)));
    out
}

#[test]
fn gpu_fixed_base_matches_blstrs_on_g1_and_g2() {
    if !have_gpu() {
        return;
    }
    let mut rng = rng();
    // More than one kernel chunk's worth on G1 is too slow to check on the host; 3000 random
    // scalars cover every byte value in every window many times over.
    let s = scalars(&mut rng, 3000);
    let g1 = fixed_base_g1(&table::<G1Projective>(), &s).expect("G1 on the GPU");
    for (scalar, point) in s.iter().zip(&g1) {
        assert_eq!(*point, (G1Projective::generator() * scalar).to_affine(), "G1 for scalar {scalar:?}");
    }
    assert!(bool::from(g1[0].is_identity()), "0·G must be the identity");
    assert_eq!(g1[2], (-G1Projective::generator()).to_affine(), "(r−1)·G must be −G");

    let s = scalars(&mut rng, 300);
    let g2 = fixed_base_g2(&table::<G2Projective>(), &s).expect("G2 on the GPU");
    for (scalar, point) in s.iter().zip(&g2) {
        assert_eq!(*point, (G2Projective::generator() * scalar).to_affine(), "G2 for scalar {scalar:?}");
    }
    // The negative twin: a point off by one generator is told apart.
    assert_ne!(g2[1], (G2Projective::generator().double()).to_affine());
}

#[test]
fn gpu_setup_equals_cpu_setup() {
    if !have_gpu() {
        return;
    }
    let mut rng = rng();
    let spec =
        SyntheticSpec { log_n: 9, num_inputs: 3, profile: WitnessProfile::Random, keys: KeyKind::Setup, seed: 3 };
    let mut secret = || Scalar::random(&mut rng);
    let waste = ToxicWaste { alpha: secret(), beta: secret(), gamma: secret(), delta: secret(), tau: secret() };
    let cpu = setup_on(spec.circuit(0), &waste, SetupEngine::Cpu).unwrap();
    let gpu = setup_on(spec.circuit(0), &waste, SetupEngine::Gpu).unwrap();
    assert_eq!(cpu.h, gpu.h);
    assert_eq!(cpu.l, gpu.l);
    assert_eq!(cpu.a, gpu.a);
    assert_eq!(cpu.b_g1, gpu.b_g1);
    assert_eq!(cpu.b_g2, gpu.b_g2);
    assert_eq!(cpu.vk.ic, gpu.vk.ic);
}

#[test]
fn a_table_of_the_wrong_size_is_refused() {
    let short_g1 = vec![G1Affine::generator(); 100];
    let short_g2 = vec![G2Affine::generator(); 32 * 255 + 1];
    // Refused before any GPU is touched, so this runs everywhere.
    assert!(matches!(fixed_base_g1(&short_g1, &[Scalar::ONE]), Err(Error::Config(_))));
    assert!(matches!(fixed_base_g2(&short_g2, &[Scalar::ONE]), Err(Error::Config(_))));
}
