//! Synthetic circuits: satisfied witnesses, a domain of exactly `2^log_n`, keys that verify
//! (setup) or merely have the right shape (random), and the bit-heavy profile.

use std::time::Instant;

use ff::Field;
use snarkpipe::circuit::{SatisfactionCheck, Witness};
use snarkpipe::groth16::{prove, verify};
use snarkpipe::math::Domain;
use snarkpipe::synthetic::{KeyKind, SyntheticSpec, WitnessProfile, DEFAULT_NUM_INPUTS};
use snarkpipe::{Error, Scalar};

mod common;
use common::{fresh_rng, fresh_seed, spec};

fn satisfied(witness: &Witness) -> bool {
    witness.a.iter().zip(&witness.b).zip(&witness.c).all(|((a, b), c)| *a * b == *c)
}

fn assert_same_witness(fast: &Witness, synthesized: &Witness) {
    assert_eq!(fast.a, synthesized.a);
    assert_eq!(fast.b, synthesized.b);
    assert_eq!(fast.c, synthesized.c);
    assert_eq!(fast.input_assignment, synthesized.input_assignment);
    assert_eq!(fast.aux_assignment, synthesized.aux_assignment);
    assert_eq!(fast.a_aux_density, synthesized.a_aux_density);
    assert_eq!(fast.b_input_density, synthesized.b_input_density);
    assert_eq!(fast.b_aux_density, synthesized.b_aux_density);
}

#[test]
fn witness_satisfies_and_fast_path_equals_synthesis() {
    for profile in [WitnessProfile::Random, WitnessProfile::Bits] {
        // Odd and even constraint counts, fewer pairs than inputs, and the default inputs.
        for (log_n, num_inputs) in [(2, 0), (2, 1), (3, 5), (4, 8), (7, 8), (10, 8), (11, 3)] {
            let spec = SyntheticSpec { profile, keys: KeyKind::Random, ..spec(log_n, num_inputs, fresh_seed()) };
            let synthesized = Witness::synthesize(spec.circuit(1), SatisfactionCheck::On)
                .unwrap_or_else(|e| panic!("log_n {log_n}, {num_inputs} inputs: {e}"));
            let fast = spec.witness(1).unwrap();
            assert_same_witness(&fast, &synthesized);
            assert!(satisfied(&fast));
            assert_eq!(spec.shape().unwrap(), fast.shape());
        }
    }
}

#[test]
fn tampered_witness_is_not_satisfied() {
    // Negative twin of the satisfaction check.
    let spec = SyntheticSpec {
        profile: WitnessProfile::Random,
        keys: KeyKind::Random,
        ..spec(8, DEFAULT_NUM_INPUTS, fresh_seed())
    };
    let mut witness = spec.witness(0).unwrap();
    witness.c[10] += Scalar::ONE;
    assert!(!satisfied(&witness));
}

#[test]
fn partitions_share_structure_but_not_values() {
    let spec = SyntheticSpec {
        profile: WitnessProfile::Random,
        keys: KeyKind::Random,
        ..spec(9, DEFAULT_NUM_INPUTS, fresh_seed())
    };
    let (first, second) = (spec.witness(0).unwrap(), spec.witness(1).unwrap());
    assert_eq!(first.shape(), second.shape());
    assert_eq!(first.a_aux_density, second.a_aux_density);
    assert_ne!(first.aux_assignment, second.aux_assignment);
    assert_ne!(first.public_inputs(), second.public_inputs());
    // Same seed and index: the same witness.
    assert_eq!(spec.witness(0).unwrap().aux_assignment, first.aux_assignment);
}

#[test]
fn domain_is_exactly_two_to_the_log_n() {
    for log_n in [4u32, 5, 10, 14] {
        let spec = SyntheticSpec {
            profile: WitnessProfile::Random,
            keys: KeyKind::Random,
            ..spec(log_n, DEFAULT_NUM_INPUTS, fresh_seed())
        };
        let shape = spec.shape().unwrap();
        assert_eq!(shape.num_constraints, 1 << log_n);
        assert_eq!(spec.witness(0).unwrap().domain().unwrap().log_n(), log_n);
        // Negative twin: one more constraint would double the domain, so the fit is exact.
        assert_eq!(Domain::for_len(shape.num_constraints + 1).unwrap().log_n(), log_n + 1);
    }
}

#[test]
fn densities_are_non_trivial() {
    let spec = SyntheticSpec {
        profile: WitnessProfile::Random,
        keys: KeyKind::Random,
        ..spec(8, DEFAULT_NUM_INPUTS, fresh_seed())
    };
    let shape = spec.shape().unwrap();
    assert!(0 < shape.a_aux_total && shape.a_aux_total < shape.num_aux);
    assert!(0 < shape.b_aux_total && shape.b_aux_total < shape.num_aux);
    assert!(0 < shape.b_input_total && shape.b_input_total < shape.num_inputs, "{shape:?}");
}

#[test]
fn too_many_inputs_for_the_domain_is_an_error() {
    let tiny = SyntheticSpec { log_n: 3, num_inputs: 7, ..SyntheticSpec::default() };
    assert!(matches!(tiny.witness(0), Err(Error::Config(_))));
    assert!(matches!(tiny.proving_key(), Err(Error::Config(_))));
    // One input fewer leaves room for exactly one constraint.
    let fits = SyntheticSpec { num_inputs: 6, ..tiny };
    assert_eq!(fits.witness(0).unwrap().shape().num_constraints, 8);
}

#[test]
fn setup_keys_verify() {
    for (log_n, profile) in [(8, WitnessProfile::Random), (10, WitnessProfile::Bits), (12, WitnessProfile::Random)] {
        let spec = SyntheticSpec { profile, ..spec(log_n, DEFAULT_NUM_INPUTS, fresh_seed()) };
        assert!(spec.verifies());
        let key = spec.proving_key().unwrap();
        let pvk = key.prepared_vk();
        let mut rng = fresh_rng();
        for index in 0..2 {
            let witness = spec.witness(index).unwrap();
            let proof = prove(&key, &witness, Scalar::random(&mut rng), Scalar::random(&mut rng)).unwrap();
            assert!(verify(&pvk, &proof, witness.public_inputs()).unwrap(), "log_n {log_n}, partition {index}");
            // Negative twin: another partition's inputs do not verify this proof.
            let other = spec.witness(index + 1).unwrap();
            assert!(!verify(&pvk, &proof, other.public_inputs()).unwrap());
        }
    }
}

#[test]
fn random_keys_have_the_right_shape_and_do_not_verify() {
    let spec = SyntheticSpec {
        profile: WitnessProfile::Random,
        keys: KeyKind::Random,
        ..spec(12, DEFAULT_NUM_INPUTS, fresh_seed())
    };
    assert!(!spec.verifies());
    let started = Instant::now();
    let key = spec.proving_key().unwrap();
    eprintln!("random key 2^12: {:?}", started.elapsed());
    let witness = spec.witness(0).unwrap();
    key.check_shape(&witness.shape()).unwrap();
    assert_eq!(key.h.len(), (1 << 12) - 1);
    let expected_bytes = 96 * (key.h.len() + key.l.len() + key.a.len() + key.b_g1.len()) + 192 * key.b_g2.len();
    assert_eq!(key.device_bytes(), expected_bytes as u64);
    let proof = prove(&key, &witness, Scalar::ONE, Scalar::ONE).unwrap();
    assert!(!verify(&key.prepared_vk(), &proof, witness.public_inputs()).unwrap());
    // The negative twin of the shape check: another size's witness does not fit this key.
    let other = SyntheticSpec { log_n: 11, ..spec }.witness(0).unwrap();
    assert!(matches!(key.check_shape(&other.shape()), Err(Error::ParamsMismatch { .. })));
}

#[test]
fn bits_profile_is_about_ninety_percent_bits() {
    let share_of_bits = |profile| {
        let witness = SyntheticSpec { profile, keys: KeyKind::Random, ..spec(12, DEFAULT_NUM_INPUTS, fresh_seed()) }
            .witness(0)
            .unwrap();
        let bits = witness.aux_assignment.iter().filter(|v| **v == Scalar::ZERO || **v == Scalar::ONE).count();
        bits as f64 / witness.aux_assignment.len() as f64
    };
    let bits = share_of_bits(WitnessProfile::Bits);
    assert!((0.86..=0.94).contains(&bits), "bits profile: {bits:.3} of aux values are 0 or 1");
    // Negative twin: the random profile has essentially none.
    let random = share_of_bits(WitnessProfile::Random);
    assert!(random < 0.01, "random profile: {random:.3} of aux values are 0 or 1");
}

#[test]
fn setup_at_2_16_is_well_under_a_minute() {
    let spec = spec(16, DEFAULT_NUM_INPUTS, fresh_seed());
    let started = Instant::now();
    let key = spec.proving_key().unwrap();
    let setup = started.elapsed();
    eprintln!("setup 2^16: {setup:?} ({key:?})");
    let witness = spec.witness(0).unwrap();
    let started = Instant::now();
    let proof = prove(&key, &witness, Scalar::ONE, Scalar::from(2u64)).unwrap();
    eprintln!("prove 2^16: {:?}", started.elapsed());
    assert!(verify(&key.prepared_vk(), &proof, witness.public_inputs()).unwrap());
    // Generous for a loaded 2-core CI machine; typically far less.
    assert!(setup.as_secs() < 60, "setup took {setup:?}");
}

/// The setup's parameters for the synthetic circuits equal bellperson's `generate_parameters`
/// for the same secrets.
#[test]
fn setup_of_synthetic_circuits_equals_bellperson_generate_parameters() {
    use blstrs::{Bls12, G1Projective, G2Projective};
    use group::Group;
    use rand::SeedableRng;
    use snarkpipe::groth16::setup::{setup, ToxicWaste};

    let bellperson_setup = |circuit, w: &ToxicWaste| {
        bellperson::groth16::generate_parameters::<Bls12, _>(
            circuit,
            G1Projective::generator(),
            G2Projective::generator(),
            w.alpha,
            w.beta,
            w.gamma,
            w.delta,
            w.tau,
        )
        .unwrap()
    };
    let seed = fresh_seed();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let mut secret = || Scalar::random(&mut rng);
    for (log_n, num_inputs) in [(2, 1), (5, 0), (6, 8), (7, 3)] {
        let spec = SyntheticSpec { profile: WitnessProfile::Random, ..spec(log_n, num_inputs, seed) };
        let waste = ToxicWaste { alpha: secret(), beta: secret(), gamma: secret(), delta: secret(), tau: secret() };
        let ours = setup(spec.circuit(0), &waste).unwrap();
        assert!(ours == bellperson_setup(spec.circuit(0), &waste), "log_n {log_n}, {num_inputs} inputs");
        // Negative twin: another tau gives other parameters.
        let other = ToxicWaste { tau: waste.tau + Scalar::ONE, ..waste };
        assert!(setup(spec.circuit(0), &other).unwrap() != bellperson_setup(spec.circuit(0), &waste));
    }
}

/// The public inputs drawn alone are the witness's, for every index and shape (the bench
/// verifies circuits' proofs with them without making their witnesses); another partition's
/// differ.
#[test]
fn public_inputs_alone_are_the_witness_inputs() {
    use rand::Rng;
    let mut rng = fresh_rng();
    for (log_n, num_inputs) in [(3, 1), (6, 4), (8, 9)] {
        let spec = SyntheticSpec { keys: KeyKind::Random, ..spec(log_n, num_inputs, fresh_seed()) };
        let index = rng.gen_range(0..10_000);
        let inputs = spec.public_inputs(index).unwrap();
        assert_eq!(inputs, spec.witness(index).unwrap().public_inputs(), "2^{log_n}, partition {index}");
        assert_eq!(inputs.len(), num_inputs);
        assert_ne!(inputs, spec.public_inputs(index + 1).unwrap(), "partition {} has the same inputs", index + 1);
    }
}
