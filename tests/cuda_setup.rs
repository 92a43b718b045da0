//! Fixed-base multiplication through the `Device` seam (the setup's bulk work, used to make
//! large test keys) against blstrs and the CPU setup, on fresh random inputs plus the edge
//! scalars. The CPU device's runs everywhere; the GPU's say why they skip without a GPU.

use blstrs::{G1Projective, G2Projective, Scalar};
use ff::{Field, PrimeField};
use group::{prime::PrimeCurveAffine, Curve, Group};
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::cpu::CpuDevice;
use snarkpipe::backend::{open_devices, BackendKind, CpuModel, Device, DeviceSelection};
use snarkpipe::groth16::setup::{setup_on, ToxicWaste};
use snarkpipe::math::FixedBase;
use snarkpipe::synthetic::{SyntheticSpec, WitnessProfile};

mod common;
use common::{fresh_rng, have_gpu, spec};

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
fn scalars(rng: &mut ChaCha20Rng, random: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::from(255), Scalar::from(256)];
    for byte in [1usize, 7, 15, 30, 31] {
        let mut repr = [0u8; 32];
        repr[byte] = if byte == 31 { 0x3f } else { 0xff };
        out.push(Scalar::from_repr_vartime(repr).expect("below the modulus"));
    }
    out.extend((0..random).map(|_| Scalar::random(&mut *rng)));
    out
}

/// GPU 0 as a pipeline device.
fn gpu() -> std::sync::Arc<dyn Device> {
    let cpu = CpuModel { devices: 0, device_bytes: 0 };
    open_devices(BackendKind::Cuda, &DeviceSelection::Only(vec![0]), cpu).expect("GPU 0").1.remove(0)
}

#[test]
fn the_table_has_the_layout_the_kernel_reads() {
    assert_eq!(FixedBase::new(G1Projective::generator()).table(), &table::<G1Projective>()[..]);
    assert_eq!(FixedBase::new(G2Projective::generator()).table(), &table::<G2Projective>()[..]);
    // The negative twin: another base's table differs.
    assert_ne!(FixedBase::new(G1Projective::generator().double()).table(), &table::<G1Projective>()[..]);
}

#[test]
fn cpu_fixed_base_matches_blstrs_on_g1_and_g2() {
    fixed_base_matches_blstrs(&CpuDevice::new(0, 0), 300);
}

#[test]
fn gpu_fixed_base_matches_blstrs_on_g1_and_g2() {
    if !have_gpu() {
        return;
    }
    // More than one kernel chunk's worth on G1 is too slow to check on the host; 3000 random
    // scalars cover every byte value in every window many times over.
    fixed_base_matches_blstrs(gpu().as_ref(), 3000);
}

fn fixed_base_matches_blstrs(device: &dyn Device, random: usize) {
    let mut rng = fresh_rng();
    let s = scalars(&mut rng, random);
    let g1 = device.fixed_base_g1(&FixedBase::new(G1Projective::generator()), &s).expect("G1");
    for (scalar, point) in s.iter().zip(&g1) {
        assert_eq!(*point, (G1Projective::generator() * scalar).to_affine(), "G1 for scalar {scalar:?}");
    }
    assert!(bool::from(g1[0].is_identity()), "0·G must be the identity");
    assert_eq!(g1[2], (-G1Projective::generator()).to_affine(), "(r−1)·G must be −G");

    let s = scalars(&mut rng, 300);
    let g2 = device.fixed_base_g2(&FixedBase::new(G2Projective::generator()), &s).expect("G2");
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
    let mut rng = fresh_rng();
    let spec = SyntheticSpec { profile: WitnessProfile::Random, ..spec(9, 3, 3) };
    let mut secret = || Scalar::random(&mut rng);
    let waste = ToxicWaste { alpha: secret(), beta: secret(), gamma: secret(), delta: secret(), tau: secret() };
    let cpu = setup_on(spec.circuit(0), &waste, None).unwrap();
    let gpu = setup_on(spec.circuit(0), &waste, Some(gpu().as_ref())).unwrap();
    assert_eq!(cpu.h, gpu.h);
    assert_eq!(cpu.l, gpu.l);
    assert_eq!(cpu.a, gpu.a);
    assert_eq!(cpu.b_g1, gpu.b_g1);
    assert_eq!(cpu.b_g2, gpu.b_g2);
    assert_eq!(cpu.vk.ic, gpu.vk.ic);
}
