//! Property tests: `ParamsFile::open` never panics, whatever the bytes, and answers with a
//! typed error when it refuses them.

use std::io::Write;
use std::sync::OnceLock;

use bellperson::groth16::{generate_random_parameters, ParameterSource};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use proptest::prelude::*;
use snarkpipe::params::file::{ParamsFile, PointCheck};
use snarkpipe::Error;

mod common;
use common::fresh_rng;

const G1_LEN: usize = 96;
const G2_LEN: usize = 192;
const VK_FIXED_LEN: usize = 3 * G1_LEN + 3 * G2_LEN;

/// A chain of squarings with one public input: enough to give every section a few points.
struct Squares(usize);

impl Circuit<Scalar> for Squares {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let input = cs.alloc_input(|| "in", || Err(SynthesisError::AssignmentMissing))?;
        let mut prev = input;
        for i in 0..self.0 {
            let sq = cs.alloc(|| format!("sq{i}"), || Err(SynthesisError::AssignmentMissing))?;
            cs.enforce(|| format!("sq{i}"), |lc| lc + prev, |lc| lc + prev, |lc| lc + sq);
            prev = sq;
        }
        Ok(())
    }
}

/// One valid file's bytes, made once per run from a fresh seed.
fn valid_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let mut rng = fresh_rng();
        let params = generate_random_parameters::<Bls12, _, _>(Squares(4), &mut rng).expect("parameters");
        let mut bytes = Vec::new();
        params.write(&mut bytes).expect("write");
        bytes
    })
}

/// Offsets of the six length prefixes (ic, h, l, a, b_g1, b_g2) of the valid file.
fn prefix_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut at = VK_FIXED_LEN;
    let mut offsets = Vec::new();
    for point_len in [G1_LEN, G1_LEN, G1_LEN, G1_LEN, G1_LEN, G2_LEN] {
        offsets.push(at);
        let count = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += 4 + count * point_len;
    }
    assert_eq!(at, bytes.len());
    offsets
}

/// Opens the bytes in both modes; any answer but a typed one fails the property. When a file
/// opens, decoding it must not panic either.
fn open_both_modes(bytes: &[u8]) -> Result<Vec<bool>, TestCaseError> {
    let mut file = tempfile::NamedTempFile::new().expect("tempfile");
    file.write_all(bytes).expect("write");
    file.flush().expect("flush");
    let mut opened = Vec::new();
    for check in [PointCheck::Checked, PointCheck::Unchecked] {
        match ParamsFile::open(file.path(), check) {
            Ok(params) => {
                match params.proving_key() {
                    Ok(_) | Err(Error::InvalidPoint(_)) => {}
                    Err(other) => return Err(TestCaseError::fail(format!("decoding: {other:?}"))),
                }
                prop_assert!((&params).get_vk(0).is_ok());
                opened.push(true);
            }
            Err(Error::ParamsFile { .. } | Error::InvalidPoint(_)) => opened.push(false),
            Err(other) => return Err(TestCaseError::fail(format!("untyped refusal: {other:?}"))),
        }
    }
    Ok(opened)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        open_both_modes(&bytes)?;
    }

    #[test]
    fn arbitrary_bytes_after_a_valid_header_never_panic(
        tail in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        // Keeps the verifying key's fixed part so that the counts are what gets exercised.
        let mut bytes = valid_bytes()[..VK_FIXED_LEN].to_vec();
        bytes.extend_from_slice(&tail);
        open_both_modes(&bytes)?;
    }

    #[test]
    fn every_truncation_is_refused(cut in 0usize..1_000_000) {
        let valid = valid_bytes();
        let cut = cut % valid.len();
        let opened = open_both_modes(&valid[..cut])?;
        prop_assert_eq!(opened, vec![false, false]);
    }

    #[test]
    fn byte_flips_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..8),
    ) {
        let mut bytes = valid_bytes().to_vec();
        for (at, mask) in flips {
            let at = at.index(bytes.len());
            bytes[at] ^= mask;
        }
        open_both_modes(&bytes)?;
    }

    #[test]
    fn any_length_prefix_never_panics(section in 0usize..6, count in any::<u32>()) {
        let mut bytes = valid_bytes().to_vec();
        let at = prefix_offsets(&bytes)[section];
        let original = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
        bytes[at..at + 4].copy_from_slice(&count.to_be_bytes());
        let opened = open_both_modes(&bytes)?;
        // Only the true count keeps the layout consistent.
        if count != original {
            prop_assert_eq!(opened, vec![false, false]);
        }
    }
}

#[test]
fn the_valid_file_opens() {
    let opened = open_both_modes(valid_bytes()).expect("typed");
    assert_eq!(opened, vec![true, true]);
}
