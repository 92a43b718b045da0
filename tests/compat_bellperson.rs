//! Interop: `snarkpipe::compat` against bellperson itself. For the same circuit, parameters,
//! r and s the proofs must be byte-for-byte bellperson's and verify with bellperson's
//! verifier; each positive check has a negative twin (a changed public input must fail).
//! Witness values are fresh every run; the seed is printed so a failure can be replayed.

use bellperson::groth16::{
    create_proof_batch, generate_random_parameters, prepare_verifying_key, verify_proof, MappedParameters, Parameters,
};
use bellperson::{Circuit, ConstraintSystem, SynthesisError, Variable};
use blstrs::{Bls12, Scalar};
use ff::{Field, PrimeField};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use snarkpipe::circuit::{SatisfactionCheck, Witness};
use snarkpipe::{compat, Error};

mod common;
use common::{bytes, fresh_rng};

fn missing() -> SynthesisError {
    SynthesisError::AssignmentMissing
}

/// The typed failure a compat call carries inside its `SynthesisError`.
fn typed<T>(result: Result<T, SynthesisError>) -> Result<T, Error> {
    result.map_err(|err| match compat::snarkpipe_error(&err) {
        Some(typed) => typed.clone(),
        None => panic!("not one of snarkpipe's errors: {err:?}"),
    })
}

/// Public inputs only: x·y = z and (x + y)·ONE = w, with x, y, z, w all public; no aux.
#[derive(Clone)]
struct PublicOnly {
    x: Option<Scalar>,
    y: Option<Scalar>,
}

impl PublicOnly {
    fn public_inputs(&self) -> Vec<Scalar> {
        let (x, y) = (self.x.unwrap(), self.y.unwrap());
        vec![x, y, x * y, x + y]
    }
}

impl Circuit<Scalar> for PublicOnly {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc_input(|| "x", || self.x.ok_or_else(missing))?;
        let y = cs.alloc_input(|| "y", || self.y.ok_or_else(missing))?;
        let z = cs.alloc_input(|| "z", || self.x.zip(self.y).map(|(x, y)| x * y).ok_or_else(missing))?;
        let w = cs.alloc_input(|| "w", || self.x.zip(self.y).map(|(x, y)| x + y).ok_or_else(missing))?;
        cs.enforce(|| "x*y=z", |lc| lc + x, |lc| lc + y, |lc| lc + z);
        cs.enforce(|| "x+y=w", |lc| lc + x + y, |lc| lc + CS::one(), |lc| lc + w);
        Ok(())
    }
}

/// Bit-heavy: boolean aux bits (b·(1−b) = 0) packed into one public input, Filecoin-style.
/// `flip` makes the packing constraint wrong by one, for the unsatisfied-witness test.
#[derive(Clone)]
struct Bits {
    bits: Vec<Option<bool>>,
    flip: bool,
}

impl Bits {
    fn packed(&self) -> Scalar {
        self.bits.iter().rev().fold(Scalar::ZERO, |acc, bit| acc.double() + Scalar::from(bit.unwrap() as u64))
    }
}

impl Circuit<Scalar> for Bits {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let packed_value = self.bits.iter().all(Option::is_some).then(|| self.packed());
        let packed = cs.alloc_input(|| "packed", || packed_value.ok_or_else(missing))?;
        let mut sum = bellperson::LinearCombination::zero();
        let mut coeff = Scalar::ONE;
        for (i, bit) in self.bits.iter().enumerate() {
            let mut ns = cs.namespace(|| format!("bit {i}"));
            let b = ns.alloc(|| "b", || bit.map(|b| Scalar::from(b as u64)).ok_or_else(missing))?;
            ns.enforce(|| "boolean", |lc| lc + b, |lc| lc + CS::one() - b, |lc| lc);
            sum = sum + (coeff, b);
            coeff = coeff.double();
        }
        let offset = if self.flip { Scalar::ONE } else { Scalar::ZERO };
        cs.namespace(|| "pack").enforce(
            || "sum of bits",
            |_| sum,
            |lc| lc + CS::one(),
            |lc| lc + packed + (offset, CS::one()),
        );
        Ok(())
    }
}

/// Aux variables that never occur in B: y_i = 3·x_i + input, as (3·x_i + input)·ONE = y_i.
#[derive(Clone)]
struct NeverInB {
    input: Option<Scalar>,
    xs: Vec<Option<Scalar>>,
}

impl Circuit<Scalar> for NeverInB {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let input = cs.alloc_input(|| "input", || self.input.ok_or_else(missing))?;
        let three = Scalar::from(3u64);
        for (i, x_value) in self.xs.iter().enumerate() {
            let x = cs.alloc(|| format!("x {i}"), || x_value.ok_or_else(missing))?;
            let y_value = x_value.zip(self.input).map(|(x, input)| three * x + input);
            let y = cs.alloc(|| format!("y {i}"), || y_value.ok_or_else(missing))?;
            cs.enforce(|| format!("y {i}"), |lc| lc + (three, x) + input, |lc| lc + CS::one(), |lc| lc + y);
        }
        Ok(())
    }
}

/// A chain x_{j+1} = x_j·(x_j + input_j mod k) with `inputs` public inputs: exactly
/// `constraints` circuit constraints, so bellperson counts `constraints + inputs + 1`.
#[derive(Clone)]
struct Chain {
    start: Option<Scalar>,
    inputs: Vec<Option<Scalar>>,
    constraints: usize,
}

impl Chain {
    fn random(rng: &mut ChaCha20Rng, inputs: usize, constraints: usize) -> Chain {
        Chain {
            start: Some(Scalar::random(&mut *rng)),
            inputs: (0..inputs).map(|_| Some(Scalar::random(&mut *rng))).collect(),
            constraints,
        }
    }

    fn public_inputs(&self) -> Vec<Scalar> {
        self.inputs.iter().map(|x| x.unwrap()).collect()
    }
}

impl Circuit<Scalar> for Chain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut inputs: Vec<(Variable, Option<Scalar>)> = vec![(CS::one(), Some(Scalar::ONE))];
        for (k, value) in self.inputs.iter().enumerate() {
            inputs.push((cs.alloc_input(|| format!("input {k}"), || value.ok_or_else(missing))?, *value));
        }
        let mut x_value = self.start;
        let mut x = cs.alloc(|| "x 0", || x_value.ok_or_else(missing))?;
        for j in 0..self.constraints {
            let (input, input_value) = inputs[j % inputs.len()];
            let next_value = x_value.zip(input_value).map(|(x, i)| x * (x + i));
            let next = cs.alloc(|| format!("x {}", j + 1), || next_value.ok_or_else(missing))?;
            cs.enforce(|| format!("step {j}"), |lc| lc + x, |lc| lc + x + input, |lc| lc + next);
            (x, x_value) = (next, next_value);
        }
        Ok(())
    }
}

/// Proves with snarkpipe and with bellperson, and checks: equal bytes, bellperson verifies,
/// and (the negative twin) a changed public input does not verify.
fn assert_matches_bellperson<C: Circuit<Scalar> + Clone + Send>(
    circuit: C,
    params: &Parameters<Bls12>,
    public_inputs: &[Scalar],
    rng: &mut ChaCha20Rng,
) {
    let (r, s) = (Scalar::random(&mut *rng), Scalar::random(&mut *rng));
    let ours = compat::create_proof(circuit.clone(), params, r, s).expect("snarkpipe proves");
    let theirs = bellperson::groth16::create_proof(circuit, params, r, s).expect("bellperson proves");
    assert_eq!(bytes(&ours), bytes(&theirs), "proof bytes differ from bellperson's");

    let pvk = prepare_verifying_key(&params.vk);
    assert!(verify_proof(&pvk, &ours, public_inputs).unwrap(), "proof does not verify");
    assert!(snarkpipe::groth16::verify(&pvk, &ours, public_inputs).unwrap());

    let mut changed = public_inputs.to_vec();
    changed[0] += Scalar::ONE;
    assert!(!verify_proof(&pvk, &ours, &changed).unwrap(), "proof verifies with a changed public input");
}

#[test]
fn public_inputs_only() {
    let mut rng = fresh_rng();
    let circuit = PublicOnly { x: Some(Scalar::random(&mut rng)), y: Some(Scalar::random(&mut rng)) };
    let params = generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng).unwrap();
    assert!(params.l.is_empty(), "no aux variables");
    let inputs = circuit.public_inputs();
    assert_matches_bellperson(circuit, &params, &inputs, &mut rng);
}

/// Public inputs and no constraint of its own. bellperson adds one `input * 0 = 0` constraint
/// per input, ONE included, so such a circuit has constraints and bellperson proves it.
#[derive(Clone)]
struct InputsOnly(Vec<Scalar>);

impl Circuit<Scalar> for InputsOnly {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for (i, value) in self.0.iter().enumerate() {
            cs.alloc_input(|| format!("input {i}"), || Ok(*value))?;
        }
        Ok(())
    }
}

/// A circuit of public inputs only proves through snarkpipe's `Prover` as through bellperson:
/// the same bytes, accepted by bellperson's verifier, and (the negative twin) rejected for a
/// changed input. It used to be refused as an empty circuit.
#[test]
fn inputs_without_constraints_prove_as_bellperson_does() {
    use snarkpipe::backend::BackendKind;
    use snarkpipe::prover::{ProofRequest, Prover, ProverConfig};
    use std::sync::Arc;
    let mut rng = fresh_rng();
    let prover =
        Prover::new(ProverConfig { backend: BackendKind::Cpu, memory_reserve_bytes: 0, ..ProverConfig::default() })
            .unwrap();
    // One input (ONE's constraint and its own: a domain of two points), then a few more.
    for count in [1, rng.gen_range(2..8)] {
        let circuit = InputsOnly((0..count).map(|_| Scalar::random(&mut rng)).collect());
        let params = generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng).unwrap();
        let witness = Witness::synthesize(circuit.clone(), SatisfactionCheck::On)
            .unwrap_or_else(|e| panic!("{count} inputs and no constraint, which bellperson proves: {e}"));
        assert_eq!(witness.shape().num_constraints, count + 1, "one constraint per input, ONE included");
        let key = prover.key_for_source(&params, &witness.shape()).unwrap();
        let request = ProofRequest::new(key, vec![Arc::new(witness)], &mut rng);
        let (r, s) = (request.r[0], request.s[0]);
        let ours = prover.prove(request).unwrap().remove(0);
        let theirs = bellperson::groth16::create_proof(circuit.clone(), &params, r, s).expect("bellperson proves");
        assert_eq!(bytes(&ours), bytes(&theirs), "{count} inputs: proof bytes differ from bellperson's");

        let pvk = prepare_verifying_key(&params.vk);
        assert!(verify_proof(&pvk, &ours, &circuit.0).unwrap(), "{count} inputs: the proof does not verify");
        let mut wrong = circuit.0.clone();
        wrong[rng.gen_range(0..count)] += Scalar::ONE;
        assert!(!verify_proof(&pvk, &ours, &wrong).unwrap(), "{count} inputs: verifies with a changed input");

        // The drop-in call proves it too.
        let inputs = circuit.0.clone();
        assert_matches_bellperson(circuit, &params, &inputs, &mut rng);
    }
}

#[test]
fn bit_heavy_witness() {
    let mut rng = fresh_rng();
    // 250 bits fit below the field modulus, so the packing is exact.
    let circuit = Bits { bits: (0..250).map(|_| Some(rng.gen())).collect(), flip: false };
    let params = generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng).unwrap();
    let inputs = vec![circuit.packed()];
    assert_matches_bellperson(circuit, &params, &inputs, &mut rng);
}

#[test]
fn aux_variables_that_never_occur_in_b() {
    let mut rng = fresh_rng();
    let input = Scalar::random(&mut rng);
    let circuit = NeverInB { input: Some(input), xs: (0..40).map(|_| Some(Scalar::random(&mut rng))).collect() };
    let witness = Witness::synthesize(circuit.clone(), SatisfactionCheck::On).unwrap();
    assert_eq!(witness.shape().b_aux_total, 0, "no aux variable occurs in B");
    assert_eq!(witness.shape().a_aux_total, 40, "only the x's occur in A");
    let params = generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng).unwrap();
    assert_matches_bellperson(circuit, &params, &[input], &mut rng);
}

#[test]
fn sizes_on_both_sides_of_a_power_of_two() {
    let mut rng = fresh_rng();
    let inputs = 2;
    for k in [5u32, 7] {
        for total in [(1usize << k) - 1, 1 << k, (1 << k) + 1] {
            // bellperson counts the circuit's constraints plus one per input, ONE included.
            let circuit = Chain::random(&mut rng, inputs, total - inputs - 1);
            let witness = Witness::synthesize(circuit.clone(), SatisfactionCheck::On).unwrap();
            assert_eq!(witness.shape().num_constraints, total);
            let expected_log_n = if total > 1 << k { k + 1 } else { k };
            assert_eq!(witness.domain().unwrap().log_n(), expected_log_n, "total {total}");

            let params = generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng).unwrap();
            assert_eq!(params.h.len(), (1 << expected_log_n) - 1);
            let public = circuit.public_inputs();
            assert_matches_bellperson(circuit, &params, &public, &mut rng);
        }
    }
}

#[test]
fn batch_with_distinct_randomness() {
    let mut rng = fresh_rng();
    let circuits: Vec<Chain> = (0..3).map(|_| Chain::random(&mut rng, 3, 60)).collect();
    let params = generate_random_parameters::<Bls12, _, _>(circuits[0].clone(), &mut rng).unwrap();
    let r: Vec<Scalar> = (0..3).map(|_| Scalar::random(&mut rng)).collect();
    let s: Vec<Scalar> = (0..3).map(|_| Scalar::random(&mut rng)).collect();

    let ours = compat::create_proof_batch(circuits.clone(), &params, r.clone(), s.clone()).unwrap();
    let theirs = create_proof_batch(circuits.clone(), &params, r, s).unwrap();
    assert_eq!(ours.len(), 3);
    let pvk = prepare_verifying_key(&params.vk);
    for ((ours, theirs), circuit) in ours.iter().zip(&theirs).zip(&circuits) {
        assert_eq!(bytes(ours), bytes(theirs));
        assert!(verify_proof(&pvk, ours, &circuit.public_inputs()).unwrap());
    }
    // Negative twin: proof 0 does not verify for circuit 1's inputs.
    assert!(!verify_proof(&pvk, &ours[0], &circuits[1].public_inputs()).unwrap());

    // The random variants draw r's then s's like bellperson: equal seeds give equal proofs.
    let seed: u64 = rng.gen();
    let ours =
        compat::create_random_proof_batch(circuits.clone(), &params, &mut ChaCha20Rng::seed_from_u64(seed)).unwrap();
    let theirs = bellperson::groth16::create_random_proof_batch(
        circuits.clone(),
        &params,
        &mut ChaCha20Rng::seed_from_u64(seed),
    )
    .unwrap();
    let ours: Vec<_> = ours.iter().map(bytes).collect();
    let theirs: Vec<_> = theirs.iter().map(bytes).collect();
    assert_eq!(ours, theirs);

    let one = circuits[0].clone();
    let ours = compat::create_random_proof(one.clone(), &params, &mut ChaCha20Rng::seed_from_u64(seed)).unwrap();
    let theirs = bellperson::groth16::create_random_proof(one, &params, &mut ChaCha20Rng::seed_from_u64(seed)).unwrap();
    assert_eq!(bytes(&ours), bytes(&theirs));
}

#[test]
fn the_in_priority_calls_prove_what_bellperson_proves() {
    let mut rng = fresh_rng();
    let circuits: Vec<Chain> = (0..2).map(|_| Chain::random(&mut rng, 2, 50)).collect();
    let params = generate_random_parameters::<Bls12, _, _>(circuits[0].clone(), &mut rng).unwrap();
    let pvk = prepare_verifying_key(&params.vk);
    let one = circuits[0].clone();
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));

    let ours = compat::create_proof_in_priority(one.clone(), &params, r, s).unwrap();
    let theirs = bellperson::groth16::create_proof_in_priority(one.clone(), &params, r, s).unwrap();
    assert_eq!(bytes(&ours), bytes(&theirs));
    assert!(verify_proof(&pvk, &ours, &one.public_inputs()).unwrap());

    let (rs, ss): (Vec<Scalar>, Vec<Scalar>) =
        (0..2).map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng))).unzip();
    let ours = compat::create_proof_batch_in_priority(circuits.clone(), &params, rs.clone(), ss.clone()).unwrap();
    let theirs = bellperson::groth16::create_proof_batch_in_priority(circuits.clone(), &params, rs, ss).unwrap();
    assert_eq!(ours.iter().map(bytes).collect::<Vec<_>>(), theirs.iter().map(bytes).collect::<Vec<_>>());
    for (proof, circuit) in ours.iter().zip(&circuits) {
        assert!(verify_proof(&pvk, proof, &circuit.public_inputs()).unwrap());
    }
    // The negative twin: each proof belongs to its own circuit's inputs.
    assert!(!verify_proof(&pvk, &ours[1], &circuits[0].public_inputs()).unwrap());

    // The random forms draw every r, then every s, as bellperson does.
    let seed: u64 = rng.gen();
    let ours =
        compat::create_random_proof_in_priority(one.clone(), &params, &mut ChaCha20Rng::seed_from_u64(seed)).unwrap();
    let theirs =
        bellperson::groth16::create_random_proof_in_priority(one, &params, &mut ChaCha20Rng::seed_from_u64(seed))
            .unwrap();
    assert_eq!(bytes(&ours), bytes(&theirs));
    let ours =
        compat::create_random_proof_batch_in_priority(circuits.clone(), &params, &mut ChaCha20Rng::seed_from_u64(seed))
            .unwrap();
    let theirs = bellperson::groth16::create_random_proof_batch_in_priority(
        circuits.clone(),
        &params,
        &mut ChaCha20Rng::seed_from_u64(seed),
    )
    .unwrap();
    assert_eq!(ours.iter().map(bytes).collect::<Vec<_>>(), theirs.iter().map(bytes).collect::<Vec<_>>());
    // Another seed, other proofs.
    let other =
        compat::create_random_proof_batch_in_priority(circuits, &params, &mut ChaCha20Rng::seed_from_u64(seed ^ 1))
            .unwrap();
    assert_ne!(bytes(&other[0]), bytes(&ours[0]));
}

#[test]
fn a_failure_s_whole_message_survives_inside_the_synthesis_error() {
    let mut rng = fresh_rng();
    let small = Chain::random(&mut rng, 2, 20);
    let params = generate_random_parameters::<Bls12, _, _>(Chain::random(&mut rng, 2, 21), &mut rng).unwrap();
    let err = compat::create_proof(small.clone(), &params, Scalar::ONE, Scalar::ONE).unwrap_err();
    let SynthesisError::IoError(io) = &err else { panic!("expected an I/O error, got {err:?}") };
    assert_eq!(io.kind(), std::io::ErrorKind::Other);
    let typed = compat::snarkpipe_error(&err).expect("the typed error is inside");
    assert!(matches!(typed, Error::ParamsMismatch { .. }), "{typed:?}");
    // The whole message: the I/O error's is the typed error's, and bellperson's wraps it.
    let message = typed.to_string();
    assert!(message.starts_with("parameters do not match the circuit: ") && message.contains("the circuit needs"));
    assert_eq!(io.to_string(), message);
    assert!(err.to_string().contains(&message), "{err}");
    // The twin: an error that is not snarkpipe's has no typed error inside.
    assert!(compat::snarkpipe_error(&SynthesisError::AssignmentMissing).is_none());
    let foreign = SynthesisError::IoError(std::io::Error::other("elsewhere"));
    assert!(compat::snarkpipe_error(&foreign).is_none());
}

#[test]
fn memory_mapped_parameters() {
    let mut rng = fresh_rng();
    let circuit = Chain::random(&mut rng, 2, 100);
    let params = generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng).unwrap();
    let file = tempfile::NamedTempFile::new().unwrap();
    params.write(std::io::BufWriter::new(file.as_file())).unwrap();
    let mapped: MappedParameters<Bls12> = Parameters::build_mapped_parameters(file.path().to_path_buf(), true).unwrap();

    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let ours = compat::create_proof(circuit.clone(), &mapped, r, s).unwrap();
    let theirs = bellperson::groth16::create_proof(circuit.clone(), &params, r, s).unwrap();
    assert_eq!(bytes(&ours), bytes(&theirs));
    let pvk = prepare_verifying_key(&params.vk);
    let public = circuit.public_inputs();
    assert!(verify_proof(&pvk, &ours, &public).unwrap());
    let mut changed = public.clone();
    changed[1] += Scalar::ONE;
    assert!(!verify_proof(&pvk, &ours, &changed).unwrap());
}

#[test]
fn parameters_of_another_circuit_are_refused_by_create_proof() {
    let mut rng = fresh_rng();
    let small = Chain::random(&mut rng, 2, 20);
    let other = Chain::random(&mut rng, 2, 21);
    let params = generate_random_parameters::<Bls12, _, _>(other, &mut rng).unwrap();
    let result = typed(compat::create_proof(small.clone(), &params, Scalar::ONE, Scalar::ONE));
    assert!(matches!(result, Err(Error::ParamsMismatch { .. })), "{result:?}");

    // Another number of public inputs: the verifying key's ic is the first mismatch.
    let more_inputs = generate_random_parameters::<Bls12, _, _>(Chain::random(&mut rng, 3, 20), &mut rng).unwrap();
    match typed(compat::create_proof(small.clone(), &more_inputs, Scalar::ONE, Scalar::ONE)) {
        Err(Error::ParamsMismatch { what, in_params, in_circuit }) => {
            assert!(what.starts_with("vk.ic"), "{what}");
            assert_eq!((in_params, in_circuit), (4, 3));
        }
        other => panic!("expected ParamsMismatch, got {other:?}"),
    }

    // The twin: the circuit's own parameters work.
    let own = generate_random_parameters::<Bls12, _, _>(small.clone(), &mut rng).unwrap();
    assert!(compat::create_proof(small, &own, Scalar::ONE, Scalar::ONE).is_ok());
}

#[test]
fn randomness_of_the_wrong_length_is_refused_by_create_proof_batch() {
    let mut rng = fresh_rng();
    let circuits: Vec<Chain> = (0..2).map(|_| Chain::random(&mut rng, 1, 10)).collect();
    let params = generate_random_parameters::<Bls12, _, _>(circuits[0].clone(), &mut rng).unwrap();
    let one = vec![Scalar::ONE];
    let two = vec![Scalar::ONE; 2];
    for (r, s) in [(one.clone(), two.clone()), (two.clone(), one.clone()), (one.clone(), one.clone())] {
        let result = typed(compat::create_proof_batch(circuits.clone(), &params, r.clone(), s.clone()));
        assert!(
            matches!(result, Err(Error::RandomnessLength { circuits: 2, r: rl, s: sl }) if rl == r.len() && sl == s.len())
        );
    }
    assert!(compat::create_proof_batch(circuits, &params, two.clone(), two).is_ok());
}

#[test]
fn unsatisfied_witness_names_the_first_failing_constraint() {
    let mut rng = fresh_rng();
    let bits: Vec<Option<bool>> = (0..30).map(|_| Some(rng.gen())).collect();
    let broken = Bits { bits: bits.clone(), flip: true };
    match Witness::synthesize(broken, SatisfactionCheck::On) {
        // 30 boolean constraints come first, then the packing one.
        Err(Error::Unsatisfied { index, name }) => {
            assert_eq!(index, 30);
            assert_eq!(name.as_deref(), Some("pack/sum of bits"));
        }
        other => panic!("expected Unsatisfied, got {other:?}"),
    }
    // A non-boolean "bit" fails its own, earlier constraint first.
    struct NotABit;
    impl Circuit<Scalar> for NotABit {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let b = cs.namespace(|| "bit 0").alloc(|| "b", || Ok(Scalar::from(2u64)))?;
            cs.namespace(|| "bit 0").enforce(|| "boolean", |lc| lc + b, |lc| lc + CS::one() - b, |lc| lc);
            cs.enforce(|| "later", |lc| lc, |lc| lc, |lc| lc + CS::one());
            Ok(())
        }
    }
    match Witness::synthesize(NotABit, SatisfactionCheck::On) {
        Err(Error::Unsatisfied { index: 0, name }) => {
            assert_eq!(name.as_deref(), Some("bit 0/boolean"))
        }
        other => panic!("expected Unsatisfied at 0, got {other:?}"),
    }
    // The twin: the same bits, packed correctly, pass the check.
    assert!(Witness::synthesize(Bits { bits, flip: false }, SatisfactionCheck::On).is_ok());
}

#[test]
fn missing_assignment_is_an_error() {
    let mut rng = fresh_rng();
    let complete = Chain::random(&mut rng, 1, 10);
    let params = generate_random_parameters::<Bls12, _, _>(complete.clone(), &mut rng).unwrap();
    let incomplete = Chain { start: None, ..complete.clone() };
    let result = typed(compat::create_proof(incomplete, &params, Scalar::ONE, Scalar::ONE));
    assert!(matches!(result, Err(Error::MissingAssignment)), "{result:?}");
    assert!(compat::create_proof(complete, &params, Scalar::ONE, Scalar::ONE).is_ok());
}

/// A circuit of ONE alone is refused (bellperson proves it, but its proof attests nothing and its
/// domain has one point; see `Error::EmptyCircuit`), and so is an empty batch.
#[test]
fn empty_circuit_is_an_error() {
    struct Empty;
    impl Circuit<Scalar> for Empty {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, _: &mut CS) -> Result<(), SynthesisError> {
            Ok(())
        }
    }
    let mut rng = fresh_rng();
    let params = generate_random_parameters::<Bls12, _, _>(Chain::random(&mut rng, 0, 3), &mut rng).unwrap();
    let result = typed(compat::create_proof(Empty, &params, Scalar::ONE, Scalar::ONE));
    assert!(matches!(result, Err(Error::EmptyCircuit)), "{result:?}");
    let result = typed(compat::create_proof_batch(Vec::<Chain>::new(), &params, vec![], vec![]));
    assert!(matches!(result, Err(Error::EmptyRequest)), "{result:?}");
}

#[test]
fn subverted_delta_is_refused() {
    use group::prime::PrimeCurveAffine;
    let mut rng = fresh_rng();
    let circuit = Chain::random(&mut rng, 1, 10);
    let mut params = generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng).unwrap();
    params.vk.delta_g1 = blstrs::G1Affine::identity();
    let result = typed(compat::create_proof(circuit, &params, Scalar::ONE, Scalar::ONE));
    // Refused at submit, before any device work.
    assert!(matches!(result.as_ref().map_err(Error::root_cause), Err(Error::UnexpectedIdentity)), "{result:?}");
}

#[test]
fn scalar_field_constants_match_bellperson_domain() {
    // The quotient's coset generator and 2-adicity are bellperson's (a sanity anchor for the
    // byte-equality tests above).
    assert_eq!(snarkpipe::math::Domain::coset_generator(), Scalar::MULTIPLICATIVE_GENERATOR);
    assert_eq!(Scalar::S, 32);
}

#[test]
fn the_typed_core_proves_what_bellperson_proves_and_says_where_the_time_went() {
    use snarkpipe::prover::{Priority, Prover, ProverConfig};
    let mut rng = fresh_rng();
    let circuits: Vec<Chain> = (0..2).map(|_| Chain::random(&mut rng, 2, 60)).collect();
    let params = generate_random_parameters::<Bls12, _, _>(circuits[0].clone(), &mut rng).unwrap();
    let prover =
        Prover::new(ProverConfig { backend: snarkpipe::backend::BackendKind::Cpu, ..ProverConfig::default() }).unwrap();
    let r: Vec<Scalar> = (0..2).map(|_| Scalar::random(&mut rng)).collect();
    let s: Vec<Scalar> = (0..2).map(|_| Scalar::random(&mut rng)).collect();
    let theirs: Vec<_> =
        create_proof_batch(circuits.clone(), &params, r.clone(), s.clone()).unwrap().iter().map(bytes).collect();

    let (ours, timings) =
        compat::prove_batch_from_source(&prover, &params, circuits.clone(), r.clone(), s.clone(), Priority::High)
            .unwrap();
    assert_eq!(ours.iter().map(bytes).collect::<Vec<_>>(), theirs);
    assert!(timings.synthesis > std::time::Duration::ZERO && timings.proving > std::time::Duration::ZERO);
    let queue = timings.queue.expect("the wait before a device is known");
    assert!(queue <= timings.proving, "{timings:?}");

    // With the cached key passed in, the same proofs and no key time.
    let shape = Witness::synthesize(circuits[0].clone(), SatisfactionCheck::Off).unwrap().shape();
    let key = prover.key_for_source(&params, &shape).unwrap();
    let (again, timings) = compat::prove_batch(&prover, key, circuits.clone(), r.clone(), s, Priority::Normal).unwrap();
    assert_eq!(again.iter().map(bytes).collect::<Vec<_>>(), theirs);
    assert_eq!(timings.key, std::time::Duration::ZERO);
    assert_eq!(prover.key_cache_status().entries.len(), 1);

    // The twin: its failures are typed.
    let key = prover.key_for_source(&params, &shape).unwrap();
    let wrong = compat::prove_batch(&prover, key, circuits, r, vec![Scalar::ONE], Priority::Normal);
    assert!(matches!(wrong, Err(Error::RandomnessLength { circuits: 2, r: 2, s: 1 })), "{:?}", wrong.err());
}

/// One caller's code, written against bellperson's eight proving calls for Bls12, compiled
/// twice: once with bellperson's `use` line and once with snarkpipe's. That it compiles with
/// both is the check that the signatures are bellperson's; running both compares the bytes.
macro_rules! a_caller_of_all_eight_calls {
    ($module:ident, $($path:tt)+) => {
        mod $module {
            use bellperson::groth16::{Parameters, Proof};
            use bellperson::{Circuit, SynthesisError};
            use blstrs::{Bls12, Scalar};
            use rand_chacha::ChaCha20Rng;
            use $($path)+::{
                create_proof, create_proof_batch, create_proof_batch_in_priority, create_proof_in_priority,
                create_random_proof, create_random_proof_batch, create_random_proof_batch_in_priority,
                create_random_proof_in_priority,
            };

            pub fn prove_every_way<C: Circuit<Scalar> + Send + Clone>(
                circuit: C,
                params: &Parameters<Bls12>,
                r: Scalar,
                s: Scalar,
                rng: &mut ChaCha20Rng,
            ) -> Result<Vec<Proof<Bls12>>, SynthesisError> {
                let mut proofs = vec![
                    create_proof(circuit.clone(), params, r, s)?,
                    create_random_proof(circuit.clone(), params, rng)?,
                    create_proof_in_priority(circuit.clone(), params, r, s)?,
                    create_random_proof_in_priority(circuit.clone(), params, rng)?,
                ];
                proofs.extend(create_proof_batch(vec![circuit.clone()], params, vec![r], vec![s])?);
                proofs.extend(create_random_proof_batch(vec![circuit.clone()], params, rng)?);
                proofs.extend(create_proof_batch_in_priority(vec![circuit.clone()], params, vec![r], vec![s])?);
                proofs.extend(create_random_proof_batch_in_priority(vec![circuit], params, rng)?);
                Ok(proofs)
            }
        }
    };
}

a_caller_of_all_eight_calls!(with_bellperson, bellperson::groth16);
a_caller_of_all_eight_calls!(with_snarkpipe, snarkpipe::compat);

#[test]
fn a_caller_of_bellperson_s_eight_calls_compiles_and_proves_the_same_with_compat() {
    let mut rng = fresh_rng();
    let circuit = Chain::random(&mut rng, 1, 30);
    let params = generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng).unwrap();
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let seed: u64 = rng.gen();
    let theirs =
        with_bellperson::prove_every_way(circuit.clone(), &params, r, s, &mut ChaCha20Rng::seed_from_u64(seed));
    let ours = with_snarkpipe::prove_every_way(circuit, &params, r, s, &mut ChaCha20Rng::seed_from_u64(seed));
    let (theirs, ours) = (theirs.unwrap(), ours.unwrap());
    assert_eq!(ours.len(), 8);
    assert_eq!(ours.iter().map(bytes).collect::<Vec<_>>(), theirs.iter().map(bytes).collect::<Vec<_>>());
}
