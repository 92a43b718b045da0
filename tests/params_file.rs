//! Reads real bellperson parameters back through `ParamsFile`, then feeds it hostile files:
//! every one must give a typed error, never a panic.

use std::io::Write;

use bellperson::groth16::{
    create_random_proof, generate_random_parameters, prepare_verifying_key, verify_proof, ParameterSource, Parameters,
};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Fp, G1Affine, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use rand::RngCore;
use rand_chacha::ChaCha20Rng;
use snarkpipe::params::file::{ParamsFile, PointCheck};
use snarkpipe::Error;

mod common;
use common::fresh_rng;

const G1_LEN: usize = 96;
const G2_LEN: usize = 192;
const VK_FIXED_LEN: usize = 3 * G1_LEN + 3 * G2_LEN;

/// Proves knowledge of x with x^3 + x + 5 = out, one multiplication per constraint, plus a few
/// chained squarings so that every section has several points.
#[derive(Clone)]
struct Cubic {
    x: Option<Scalar>,
}

impl Circuit<Scalar> for Cubic {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x_val = self.x;
        let x = cs.alloc(|| "x", || x_val.ok_or(SynthesisError::AssignmentMissing))?;
        let x2_val = x_val.map(|x| x.square());
        let x2 = cs.alloc(|| "x2", || x2_val.ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(|| "x*x", |lc| lc + x, |lc| lc + x, |lc| lc + x2);
        let x3_val = x2_val.zip(x_val).map(|(a, b)| a * b);
        let x3 = cs.alloc(|| "x3", || x3_val.ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(|| "x2*x", |lc| lc + x2, |lc| lc + x, |lc| lc + x3);
        let out_val = x3_val.zip(x_val).map(|(a, b)| a + b + Scalar::from(5u64));
        let out = cs.alloc_input(|| "out", || out_val.ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(|| "out", |lc| lc + x3 + x + (Scalar::from(5u64), CS::one()), |lc| lc + CS::one(), |lc| lc + out);
        let mut prev = (x3, x3_val);
        for i in 0..5 {
            let sq_val = prev.1.map(|v| v.square());
            let sq = cs.alloc(|| format!("sq{i}"), || sq_val.ok_or(SynthesisError::AssignmentMissing))?;
            cs.enforce(|| format!("sq{i}"), |lc| lc + prev.0, |lc| lc + prev.0, |lc| lc + sq);
            prev = (sq, sq_val);
        }
        Ok(())
    }
}

fn parameters(rng: &mut ChaCha20Rng) -> Parameters<Bls12> {
    generate_random_parameters::<Bls12, _, _>(Cubic { x: None }, rng).expect("parameters")
}

fn params_bytes(params: &Parameters<Bls12>) -> Vec<u8> {
    let mut bytes = Vec::new();
    params.write(&mut bytes).expect("write");
    bytes
}

fn write_temp(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("tempfile");
    file.write_all(bytes).expect("write");
    file.flush().expect("flush");
    file
}

fn open_bytes(bytes: &[u8], check: PointCheck) -> snarkpipe::Result<ParamsFile> {
    let file = write_temp(bytes);
    ParamsFile::open(file.path(), check)
}

/// Byte offsets of the sections in a file written by bellperson: (count prefix offset, count).
struct Offsets {
    h: usize,
    l: usize,
    a: usize,
    b_g2: usize,
}

fn offsets(params: &Parameters<Bls12>) -> Offsets {
    let h = VK_FIXED_LEN + 4 + params.vk.ic.len() * G1_LEN;
    let l = h + 4 + params.h.len() * G1_LEN;
    let a = l + 4 + params.l.len() * G1_LEN;
    let b_g1 = a + 4 + params.a.len() * G1_LEN;
    let b_g2 = b_g1 + 4 + params.b_g1.len() * G1_LEN;
    Offsets { h, l, a, b_g2 }
}

fn expect_file_error(result: snarkpipe::Result<ParamsFile>, what: &str) -> String {
    match result {
        Err(Error::ParamsFile { reason, .. }) => reason,
        Err(other) => panic!("{what}: expected Error::ParamsFile, got {other:?}"),
        Ok(_) => panic!("{what}: expected Error::ParamsFile, the file opened"),
    }
}

fn expect_invalid_point(result: snarkpipe::Result<ParamsFile>, what: &str) -> String {
    match result {
        Err(Error::InvalidPoint(reason)) => reason,
        Err(other) => panic!("{what}: expected Error::InvalidPoint, got {other:?}"),
        Ok(_) => panic!("{what}: expected Error::InvalidPoint, the file opened"),
    }
}

fn assert_matches_params(file: &ParamsFile, params: &Parameters<Bls12>) {
    assert!(file.verifying_key() == &params.vk, "verifying key differs");
    let counts = file.counts();
    assert_eq!(
        (counts.ic, counts.h, counts.l, counts.a, counts.b_g1, counts.b_g2),
        (params.vk.ic.len(), params.h.len(), params.l.len(), params.a.len(), params.b_g1.len(), params.b_g2.len())
    );
    let pk = file.proving_key().expect("proving key");
    assert!(pk.vk == params.vk);
    assert_eq!(pk.h, params.h);
    assert_eq!(pk.l, params.l);
    assert_eq!(pk.a, params.a);
    assert_eq!(pk.b_g1, params.b_g1);
    assert_eq!(pk.b_g2, params.b_g2);
}

#[test]
fn reads_back_what_bellperson_writes_in_both_modes() {
    let mut rng = fresh_rng();
    let params = parameters(&mut rng);
    assert!(!params.h.is_empty() && !params.l.is_empty() && !params.a.is_empty() && !params.b_g2.is_empty());
    let file = write_temp(&params_bytes(&params));

    for check in [PointCheck::Checked, PointCheck::Unchecked] {
        let read = ParamsFile::open(file.path(), check).expect("open");
        assert_eq!(read.point_check(), check);
        assert_matches_params(&read, &params);
        // The key is decoded once and shared.
        assert!(std::sync::Arc::ptr_eq(&read.proving_key().unwrap(), &read.proving_key().unwrap()));
    }
}

#[test]
fn agrees_with_bellpersons_mapped_parameters_point_for_point() {
    let mut rng = fresh_rng();
    let params = parameters(&mut rng);
    let file = write_temp(&params_bytes(&params));
    let mapped = Parameters::<Bls12>::build_mapped_parameters(file.path().to_path_buf(), true).expect("mapped");
    let ours = ParamsFile::open(file.path(), PointCheck::Checked).expect("open");

    let (m, o) = (&mapped, &ours);
    assert!(m.get_vk(0).unwrap() == o.get_vk(0).unwrap());
    assert_eq!(m.get_h(0).unwrap().0, o.get_h(0).unwrap().0);
    assert_eq!(m.get_l(0).unwrap().0, o.get_l(0).unwrap().0);
    let inputs = params.vk.ic.len();
    let (ma, oa) = (m.get_a(inputs, 0).unwrap(), o.get_a(inputs, 0).unwrap());
    assert_eq!((ma.0 .0, ma.0 .1, ma.1 .1), (oa.0 .0, oa.0 .1, oa.1 .1));
    let (mb, ob) = (m.get_b_g1(inputs, 0).unwrap(), o.get_b_g1(inputs, 0).unwrap());
    assert_eq!((mb.0 .0, mb.1 .1), (ob.0 .0, ob.1 .1));
    let (mb2, ob2) = (m.get_b_g2(inputs, 0).unwrap(), o.get_b_g2(inputs, 0).unwrap());
    assert_eq!((mb2.0 .0, mb2.1 .1), (ob2.0 .0, ob2.1 .1));
}

#[test]
fn proves_through_the_parameter_source_and_the_proof_verifies() {
    let mut rng = fresh_rng();
    let params = parameters(&mut rng);
    let file = write_temp(&params_bytes(&params));
    let ours = ParamsFile::open(file.path(), PointCheck::Checked).expect("open");

    let x = Scalar::random(&mut rng);
    let out = x.square() * x + x + Scalar::from(5u64);
    let proof = create_random_proof(Cubic { x: Some(x) }, &ours, &mut rng).expect("prove");
    let pvk = prepare_verifying_key(ours.verifying_key());
    assert!(verify_proof(&pvk, &proof, &[out]).expect("verify"));
    // Negative twin: the same proof does not verify for another output.
    assert!(!verify_proof(&pvk, &proof, &[out + Scalar::ONE]).expect("verify"));
}

#[test]
fn an_empty_file_is_not_a_params_file() {
    let reason = expect_file_error(open_bytes(&[], PointCheck::Checked), "empty");
    assert!(reason.contains("empty"), "{reason}");
}

#[test]
fn a_missing_file_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let result = ParamsFile::open(dir.path().join("absent.params"), PointCheck::Checked);
    assert!(matches!(result, Err(Error::Io { .. })), "{result:?}");
}

#[test]
fn truncation_anywhere_is_a_typed_error() {
    let mut rng = fresh_rng();
    let params = parameters(&mut rng);
    let bytes = params_bytes(&params);
    let at = offsets(&params);
    let cuts = [
        1,
        G1_LEN / 2,               // inside alpha_g1
        G1_LEN + 10,              // inside the verifying key's fixed part
        VK_FIXED_LEN + 2,         // inside ic's length prefix
        VK_FIXED_LEN + 4 + 50,    // inside ic's first point
        at.h + 2,                 // inside h's length prefix
        at.l + 4 + G1_LEN + 17,   // mid-point in l
        at.a + 4,                 // right after a's length prefix
        at.b_g2 + 4 + G2_LEN / 2, // mid-point in b_g2
        bytes.len() - 1,          // one byte short
    ];
    for cut in cuts {
        for check in [PointCheck::Checked, PointCheck::Unchecked] {
            let reason = expect_file_error(open_bytes(&bytes[..cut], check), &format!("cut at {cut}"));
            assert!(reason.contains("truncated") || reason.contains("not a .params file"), "cut at {cut}: {reason}");
        }
    }
    // The reason names the section and the sizes.
    let reason = expect_file_error(open_bytes(&bytes[..at.l + 4 + G1_LEN + 17], PointCheck::Checked), "l");
    let expected = format!(
        "section l declares {} points ({} bytes) but only {} bytes remain",
        params.l.len(),
        params.l.len() * G1_LEN,
        G1_LEN + 17
    );
    assert!(reason.contains(&expected), "{reason}");
}

#[test]
fn trailing_bytes_are_refused() {
    let mut rng = fresh_rng();
    let mut bytes = params_bytes(&parameters(&mut rng));
    bytes.push(0);
    let reason = expect_file_error(open_bytes(&bytes, PointCheck::Unchecked), "trailing");
    assert!(reason.contains("1 bytes of trailing data"), "{reason}");
}

#[test]
fn a_length_prefix_of_u32_max_is_refused_without_allocating() {
    let mut rng = fresh_rng();
    let params = parameters(&mut rng);
    let at = offsets(&params);
    for prefix in [VK_FIXED_LEN, at.h, at.b_g2] {
        let mut bytes = params_bytes(&params);
        bytes[prefix..prefix + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        for check in [PointCheck::Checked, PointCheck::Unchecked] {
            let reason = expect_file_error(open_bytes(&bytes, check), "u32::MAX");
            assert!(reason.contains("declares 4294967295 points"), "{reason}");
        }
    }
}

#[test]
fn random_bytes_are_not_a_params_file() {
    let mut rng = fresh_rng();
    for len in [1, 7, 95, 96, 97, 500, VK_FIXED_LEN, VK_FIXED_LEN + 4, 5000, 100_000] {
        let mut bytes = vec![0u8; len];
        rng.fill_bytes(&mut bytes);
        for check in [PointCheck::Checked, PointCheck::Unchecked] {
            match open_bytes(&bytes, check) {
                Err(Error::ParamsFile { .. } | Error::InvalidPoint(_)) => {}
                other => panic!("{len} random bytes: {other:?}"),
            }
        }
    }
}

#[test]
fn a_point_off_the_curve_is_refused_when_checked_and_opens_unchecked() {
    let mut rng = fresh_rng();
    let params = parameters(&mut rng);
    let at = offsets(&params);
    let index = params.a.len() - 1;
    let mut bytes = params_bytes(&params);
    // Flip the low byte of the point's y coordinate.
    let y_last = at.a + 4 + index * G1_LEN + G1_LEN - 1;
    bytes[y_last] ^= 0x01;

    let reason = expect_invalid_point(open_bytes(&bytes, PointCheck::Checked), "off curve");
    assert_eq!(reason, format!("section a, point {index}: not on the curve"));

    // Negative twin, the documented trade-off: unchecked, the layout is fine and the file
    // opens; the bad point is only noticed when it is decoded.
    let unchecked = open_bytes(&bytes, PointCheck::Unchecked).expect("unchecked open");
    assert!(matches!(unchecked.proving_key(), Err(Error::InvalidPoint(_))));
    assert!((&unchecked).get_a(1, 0).is_err());
}

/// A point on y^2 = x^3 + 4 that is not in G1: the curve's order is a huge multiple of G1's,
/// so the first x that gives a square is, in practice, never in the subgroup.
fn point_outside_g1() -> [u8; G1_LEN] {
    for x in 1u64.. {
        let x = Fp::from(x);
        let rhs = x.square() * x + Fp::from(4u64);
        if let Some(y) = Option::<Fp>::from(rhs.sqrt()) {
            let mut bytes = [0u8; G1_LEN];
            bytes[..48].copy_from_slice(&x.to_bytes_be());
            bytes[48..].copy_from_slice(&y.to_bytes_be());
            let point = Option::<G1Affine>::from(G1Affine::from_uncompressed_unchecked(&bytes)).expect("on curve");
            assert!(!bool::from(point.is_torsion_free()));
            return bytes;
        }
    }
    unreachable!()
}

#[test]
fn a_point_outside_the_subgroup_is_refused_when_checked() {
    let mut rng = fresh_rng();
    let params = parameters(&mut rng);
    let at = offsets(&params);
    let mut bytes = params_bytes(&params);
    let start = at.l + 4 + G1_LEN; // l's second point
    bytes[start..start + G1_LEN].copy_from_slice(&point_outside_g1());

    let reason = expect_invalid_point(open_bytes(&bytes, PointCheck::Checked), "outside G1");
    assert_eq!(reason, "section l, point 1: on the curve but not in the prime-order subgroup");
    // Unchecked, nothing looks at the subgroup: the point decodes.
    let unchecked = open_bytes(&bytes, PointCheck::Unchecked).expect("unchecked open");
    assert_eq!(unchecked.proving_key().expect("decodes").l[1].to_uncompressed(), point_outside_g1());
}

#[test]
fn the_point_at_infinity_is_refused_where_bellperson_forbids_it() {
    let mut rng = fresh_rng();
    let params = parameters(&mut rng);
    let at = offsets(&params);
    let mut bytes = params_bytes(&params);
    let start = at.h + 4;
    bytes[start..start + G1_LEN].copy_from_slice(&G1Affine::identity().to_uncompressed());
    let reason = expect_invalid_point(open_bytes(&bytes, PointCheck::Checked), "identity");
    assert!(reason.starts_with("section h, point 0: the point at infinity"), "{reason}");
}

#[test]
fn a_bad_verifying_key_is_refused_in_both_modes() {
    let mut rng = fresh_rng();
    let params = parameters(&mut rng);
    let mut bytes = params_bytes(&params);
    // beta_g1's last byte.
    bytes[2 * G1_LEN - 1] ^= 0x01;
    for check in [PointCheck::Checked, PointCheck::Unchecked] {
        let reason = expect_invalid_point(open_bytes(&bytes, check), "vk");
        assert_eq!(reason, "verifying key, beta_g1: not on the curve");
    }
}

/// A file truncated or rewritten after it was opened (a `.params` file replaced under a
/// running node) gives a typed error when the key is read, not a SIGBUS: the file is read by
/// position, never mapped. On a memory-mapped file the truncation killed the process.
#[test]
fn a_file_truncated_while_open_is_a_typed_error_not_a_crash() {
    let mut rng = fresh_rng();
    let params = parameters(&mut rng);
    let bytes = params_bytes(&params);
    let temp = write_temp(&bytes);
    let file = ParamsFile::open(temp.path(), PointCheck::Unchecked).expect("opens");
    // Cut the file to its verifying key: every section's points are gone.
    std::fs::OpenOptions::new().write(true).open(temp.path()).unwrap().set_len(VK_FIXED_LEN as u64).unwrap();
    match file.proving_key() {
        Err(Error::ParamsFile { reason, .. }) => {
            assert!(reason.contains("truncated or rewritten while in use"), "{reason}")
        }
        other => panic!("a truncated file gave {other:?}"),
    }
    // The negative twin: an untouched file opened the same way decodes.
    let intact = write_temp(&bytes);
    assert_matches_params(&ParamsFile::open(intact.path(), PointCheck::Unchecked).unwrap(), &params);
}
