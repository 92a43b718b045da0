//! Hostile proof requests (issue 5): parameters of another circuit, witnesses of the wrong
//! length, empty requests, partitions larger than the device, cancellation mid-flight and bad
//! input to the compat calls. Each gets a typed error and no panic, and a good request running
//! at the same time on the same prover proves and verifies as if nothing happened.

use std::collections::BTreeSet;
use std::sync::{Arc, Once};
use std::time::Duration;

use bellperson::groth16::Parameters;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::BackendKind;
use snarkpipe::circuit::{Density, Witness};
use snarkpipe::compat;
use snarkpipe::groth16::{self, setup::ToxicWaste};
use snarkpipe::params::ProvingKey;
use snarkpipe::prover::{ProofHandle, ProofRequest, Prover, ProverConfig};
use snarkpipe::synthetic::SyntheticSpec;
use snarkpipe::{Error, Stage};

mod common;
use common::{assert_nothing_held, bytes, fresh_rng, fresh_seed, partitions, spec, wait_each_within, After};

fn cpu_prover() -> Prover {
    Prover::new(ProverConfig {
        backend: BackendKind::Cpu,
        workers_per_device: 2,
        in_flight: 2,
        memory_reserve_bytes: 0,
        ..ProverConfig::default()
    })
    .unwrap()
}

/// A good request running beside the hostile ones.
struct Bystander {
    key: Arc<ProvingKey>,
    witnesses: Vec<Arc<Witness>>,
    r: Vec<Scalar>,
    s: Vec<Scalar>,
    handle: ProofHandle,
}

impl Bystander {
    fn submit(prover: &Prover, log_n: u32, count: usize) -> Bystander {
        let spec = spec(log_n, 3, fresh_seed());
        let key = spec.proving_key().unwrap();
        let witnesses = partitions(&spec, count);
        let mut rng = fresh_rng();
        let request = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
        let (r, s) = (request.r.clone(), request.s.clone());
        let handle = prover.submit(request).unwrap();
        Bystander { key, witnesses, r, s, handle }
    }

    /// Every proof of the good request is the reference's and verifies (with negative twins).
    fn proves_unharmed(self) {
        let outcomes = wait_each_within(&self.handle, Duration::from_secs(300));
        let pvk = self.key.prepared_vk();
        for (i, outcome) in outcomes.iter().enumerate() {
            let proof = outcome.as_ref().unwrap_or_else(|e| panic!("the good request was harmed: partition {i}: {e}"));
            let reference = groth16::prove(&self.key, &self.witnesses[i], self.r[i], self.s[i]).unwrap();
            assert_eq!(bytes(proof), bytes(&reference), "partition {i} of the good request differs from the reference");
            assert!(groth16::verify(&pvk, proof, self.witnesses[i].public_inputs()).unwrap());
            let mut wrong = self.witnesses[i].public_inputs().to_vec();
            wrong[0] += Scalar::ONE;
            assert!(!groth16::verify(&pvk, proof, &wrong).unwrap());
        }
    }
}

fn request(key: &Arc<ProvingKey>, witnesses: Vec<Arc<Witness>>) -> ProofRequest {
    let mut rng = fresh_rng();
    ProofRequest::new(key.clone(), witnesses, &mut rng)
}

#[test]
fn parameters_of_another_circuit_are_refused_at_submit() {
    let prover = cpu_prover();
    let good = Bystander::submit(&prover, 8, 4);
    let ours = spec(6, 3, fresh_seed());
    let key = ours.proving_key().unwrap();
    let witnesses = partitions(&ours, 2);
    for other in [spec(6, 5, fresh_seed()), spec(7, 3, fresh_seed()), spec(5, 1, fresh_seed())] {
        let other_key = other.proving_key().unwrap();
        match prover.submit(request(&other_key, witnesses.clone())) {
            Err(Error::ParamsMismatch { what, in_params, in_circuit }) => {
                assert_ne!(in_params, in_circuit, "{what}");
                eprintln!("refused: {what}: {in_params} vs {in_circuit}");
            }
            Err(other) => panic!("expected ParamsMismatch, got {other:?}"),
            Ok(_) => panic!(
                "parameters of another circuit (2^{} with {} inputs) were accepted",
                other.log_n, other.num_inputs
            ),
        }
        // One bad partition among good ones refuses the whole request, before any work.
        let mut mixed = witnesses.clone();
        mixed.push(partitions(&other, 1).remove(0));
        assert!(matches!(prover.submit(request(&key, mixed)), Err(Error::ParamsMismatch { .. })));
    }
    // The twin: the circuit's own key proves.
    let mut rng = fresh_rng();
    let proofs = prover.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
    for (proof, witness) in proofs.iter().zip(&witnesses) {
        assert!(groth16::verify(&key.prepared_vk(), proof, witness.public_inputs()).unwrap());
    }
    good.proves_unharmed();
    assert_nothing_held(&prover, After::Shutdown);
}

/// Ways to damage a real witness so its lengths no longer fit the key or each other.
fn damaged_witnesses(witness: &Witness) -> Vec<(&'static str, Witness)> {
    let damage = |f: &dyn Fn(&mut Witness)| {
        let mut w = witness.clone();
        f(&mut w);
        w
    };
    let half = witness.a.len() / 2;
    vec![
        (
            "aux_assignment short by one",
            damage(&|w| {
                w.aux_assignment.pop();
            }),
        ),
        ("aux_assignment empty", damage(&|w| w.aux_assignment.clear())),
        (
            "input_assignment short by one",
            damage(&|w| {
                w.input_assignment.pop();
            }),
        ),
        ("input_assignment with one extra", damage(&|w| w.input_assignment.push(Scalar::ONE))),
        (
            "a, b and c cut to half the domain",
            damage(&|w| {
                w.a.truncate(half);
                w.b.truncate(half);
                w.c.truncate(half);
            }),
        ),
        (
            "a, b and c past the domain",
            damage(&|w| {
                let n = w.a.len().next_power_of_two() + 1;
                w.a.resize(n, Scalar::ZERO);
                w.b.resize(n, Scalar::ZERO);
                w.c.resize(n, Scalar::ZERO);
            }),
        ),
        (
            "a, b and c empty",
            damage(&|w| {
                w.a.clear();
                w.b.clear();
                w.c.clear();
            }),
        ),
        (
            "only a short by one",
            damage(&|w| {
                w.a.pop();
            }),
        ),
        ("only b cut to half", damage(&|w| w.b.truncate(half))),
        ("only c empty", damage(&|w| w.c.clear())),
        (
            "aux density longer than the aux assignment",
            damage(&|w| {
                let mut bits = w.b_aux_density.bits().to_vec();
                bits.push(true);
                w.b_aux_density = Density::from_bits(bits);
            }),
        ),
        (
            "aux density shorter than the aux assignment",
            damage(&|w| {
                let mut bits = w.a_aux_density.bits().to_vec();
                bits.truncate(bits.len() / 2);
                w.a_aux_density = Density::from_bits(bits);
            }),
        ),
    ]
}

#[test]
fn witnesses_of_the_wrong_length_are_refused_at_submit() {
    let prover = cpu_prover();
    let good = Bystander::submit(&prover, 8, 4);
    let ours = spec(6, 3, fresh_seed());
    let key = ours.proving_key().unwrap();
    let witness = ours.witness(0).unwrap();
    let mut accepted = Vec::new();
    for (what, damaged) in damaged_witnesses(&witness) {
        let damaged = Arc::new(damaged);
        // Alone, and as the second partition of an otherwise good request.
        for partitions in [vec![damaged.clone()], vec![Arc::new(witness.clone()), damaged.clone()]] {
            match prover.submit(request(&key, partitions)) {
                Err(err) => eprintln!("{what}: refused: {err}"),
                Ok(handle) => {
                    // Accepted: see what the pipeline makes of it, then report it below.
                    let outcomes = wait_each_within(&handle, Duration::from_secs(120));
                    let shown: Vec<String> = outcomes
                        .iter()
                        .map(|o| match o {
                            Ok(proof) => format!(
                                "a proof that {}",
                                if groth16::verify(&key.prepared_vk(), proof, damaged.public_inputs()).unwrap_or(false)
                                {
                                    "verifies"
                                } else {
                                    "does not verify"
                                }
                            ),
                            Err(err) => format!("mid-proof error: {err}"),
                        })
                        .collect();
                    accepted.push(format!("{what}: accepted by submit, then {shown:?}"));
                }
            }
        }
    }
    // The twin: the undamaged witness proves and verifies.
    let proofs = prover.prove(request(&key, vec![Arc::new(witness.clone())])).unwrap();
    assert!(groth16::verify(&key.prepared_vk(), &proofs[0], witness.public_inputs()).unwrap());
    good.proves_unharmed();
    assert_nothing_held(&prover, After::Shutdown);
    assert!(accepted.is_empty(), "witnesses of the wrong length passed Prover::submit:\n{}", accepted.join("\n"));
}

/// A hand-built witness of the circuit that has only ONE: its a, b and c hold ONE's
/// `input * 0 = 0` constraint alone, a domain of one point.
fn one_point_witness() -> Witness {
    Witness {
        a: vec![Scalar::ONE],
        b: vec![Scalar::ZERO],
        c: vec![Scalar::ZERO],
        input_assignment: vec![Scalar::ONE],
        aux_assignment: Vec::new(),
        a_aux_density: Density::default(),
        b_input_density: Density::from_bits(vec![false]),
        b_aux_density: Density::default(),
    }
}

/// Hand-built witnesses whose domain has fewer than two points (a, b and c of length 1 or 0)
/// are refused at submit with a typed error that says what is
/// wrong and what to do. Refused at submit, they never reach a device: no stage runs, so no
/// device records a failure (a device that fails three partitions in a row is avoided) and the
/// good requests that follow prove on every device. The key is bellperson's own for the circuit
/// a one-point witness comes from, so no shape check stops them. On the CPU backend a one-point
/// witness used to be accepted and proved; on a GPU its NTT fails with a device error
/// (`log n = 0`), which counts against the device and is retried on every other.
#[test]
fn a_witness_of_fewer_than_two_points_is_refused_at_submit_and_never_reaches_a_device() {
    let prover = Prover::new(ProverConfig {
        backend: BackendKind::Cpu,
        cpu_devices: 2,
        workers_per_device: 2,
        in_flight: 2,
        memory_reserve_bytes: 0,
        retries: 2,
        ..ProverConfig::default()
    })
    .unwrap();
    let mut rng = fresh_rng();
    let params = bellperson::groth16::generate_random_parameters::<Bls12, _, _>(Empty, &mut rng).unwrap();
    let key = ProvingKey::from_parameters(&params);
    assert!(params.h.is_empty(), "bellperson's key for a domain of one point has no h query");
    let zero_points = Witness { a: vec![], b: vec![], c: vec![], ..one_point_witness() };
    let cases = [("one point", one_point_witness()), ("no point", zero_points)];
    let mut wrong = Vec::new();
    for (what, witness) in cases {
        let witness = Arc::new(witness);
        // More times than the failures in a row that make a device avoided.
        for _ in 0..4 {
            match prover.submit(request(&key, vec![witness.clone()])) {
                Err(err @ (Error::EmptyCircuit | Error::MalformedWitness(_))) => {
                    let message = err.to_string();
                    if !message.contains("constraint") {
                        wrong.push(format!("{what}: the message does not say what is wrong: {message}"));
                    }
                    if !(message.contains("add a constraint") || message.contains("Witness::synthesize")) {
                        wrong.push(format!("{what}: the message does not say what to do: {message}"));
                    }
                }
                Err(other) => wrong.push(format!("{what}: expected EmptyCircuit or MalformedWitness, got {other:?}")),
                Ok(handle) => {
                    let outcomes = wait_each_within(&handle, Duration::from_secs(60));
                    let shown: Vec<String> = outcomes
                        .iter()
                        .map(|o| o.as_ref().map(|_| "a proof".into()).unwrap_or_else(|e| e.to_string()))
                        .collect();
                    wrong.push(format!("{what}: accepted by submit, then {shown:?}"));
                }
            }
        }
    }
    let ran: BTreeSet<_> = prover.timeline().snapshot().spans.iter().map(|s| (s.stage, s.track.device())).collect();
    assert!(wrong.is_empty() && ran.is_empty(), "{}\nstages run: {ran:?}", wrong.join("\n"));
    // The twin: good requests prove on each device in turn.
    let ours = spec(6, 2, fresh_seed());
    let good_key = ours.proving_key().unwrap();
    for device in [0, 1] {
        let witnesses = partitions(&ours, 2);
        let handle = prover
            .submit(ProofRequest { devices: Some(vec![device]), ..request(&good_key, witnesses.clone()) })
            .unwrap();
        let outcomes = wait_each_within(&handle, Duration::from_secs(120));
        for (outcome, witness) in outcomes.iter().zip(&witnesses) {
            let proof = outcome.as_ref().unwrap_or_else(|e| panic!("device {device}: {e}"));
            assert!(groth16::verify(&good_key.prepared_vk(), proof, witness.public_inputs()).unwrap());
        }
    }
    let devices: BTreeSet<_> = prover.timeline().snapshot().spans.iter().filter_map(|s| s.track.device()).collect();
    assert_eq!(devices, [0, 1].into_iter().collect(), "the good requests ran on {devices:?}");
    assert_nothing_held(&prover, After::Shutdown);
}

#[test]
fn a_request_with_zero_partitions_is_refused() {
    let prover = cpu_prover();
    let good = Bystander::submit(&prover, 8, 4);
    let key = spec(5, 2, fresh_seed()).proving_key().unwrap();
    assert!(matches!(prover.submit(request(&key, vec![])), Err(Error::EmptyRequest)));
    // Zero partitions with stray randomness is still an empty request, not a length error.
    let stray = ProofRequest { r: vec![Scalar::ONE], s: vec![Scalar::ONE], ..request(&key, vec![]) };
    let result = prover.submit(stray);
    assert!(matches!(result, Err(Error::EmptyRequest)), "{:?}", result.err());
    good.proves_unharmed();
    assert_nothing_held(&prover, After::Shutdown);
}

#[test]
fn randomness_of_the_wrong_length_is_refused_at_submit() {
    let prover = cpu_prover();
    let good = Bystander::submit(&prover, 8, 4);
    let ours = spec(5, 2, fresh_seed());
    let key = ours.proving_key().unwrap();
    for (r, s) in [(1, 2), (2, 1), (3, 3), (0, 2), (2, 0)] {
        let mut bad = request(&key, partitions(&ours, 2));
        bad.r.resize(r, Scalar::ONE);
        bad.s.resize(s, Scalar::ONE);
        match prover.submit(bad) {
            Err(Error::RandomnessLength { circuits: 2, r: rl, s: sl }) => assert_eq!((rl, sl), (r, s)),
            other => panic!("r {r}, s {s}: expected RandomnessLength, got {:?}", other.err()),
        }
    }
    good.proves_unharmed();
    assert_nothing_held(&prover, After::Shutdown);
}

#[test]
fn a_partition_larger_than_the_device_fails_at_admission() {
    let ours = spec(8, 3, fresh_seed());
    let key = ours.proving_key().unwrap();
    // A device one byte short of a partition's plan, even without the key.
    let shape = ours.witness(0).unwrap().shape();
    let plan = snarkpipe::plan::partition_plan_bytes(&snarkpipe::backend::cpu::CpuDevice::new(0, 0), &shape, 8);
    let device_bytes = plan - 1;
    let tiny = Prover::new(ProverConfig {
        backend: BackendKind::Cpu,
        cpu_device_bytes: device_bytes,
        memory_reserve_bytes: 0,
        ..ProverConfig::default()
    })
    .unwrap();
    let roomy = cpu_prover();
    let good = Bystander::submit(&roomy, 8, 4);
    let handle = tiny.submit(request(&key, partitions(&ours, 3))).expect("the size is judged at admission");
    let outcomes = wait_each_within(&handle, Duration::from_secs(60));
    for (i, outcome) in outcomes.iter().enumerate() {
        let err = outcome.as_ref().expect_err("a partition larger than the device proved");
        match err {
            Error::Stage { partition, stage: Stage::Admission, cause } => {
                assert_eq!(*partition, i);
                match cause.as_ref() {
                    Error::PlanExceedsDevice { needed_bytes, capacity_bytes, .. } => {
                        assert!(
                            needed_bytes > capacity_bytes && *capacity_bytes <= device_bytes && *needed_bytes >= plan
                        )
                    }
                    other => panic!("expected PlanExceedsDevice, got {other:?}"),
                }
            }
            other => panic!("expected a failure at admission (stage budget), got {other:?}"),
        }
    }
    // What `prove` (submit, then wait) returns: the same refusal.
    let err = handle.wait().unwrap_err();
    assert!(matches!(err.root_cause(), Error::PlanExceedsDevice { .. }), "expected PlanExceedsDevice, got {err}");
    // Refused at admission, not mid-proof: no partition reached any stage after it (the
    // synthesis stage before it passes a witness through).
    let timeline = tiny.timeline().snapshot();
    let place = |stage: Stage| Stage::ALL.iter().position(|s| *s == stage);
    let later: Vec<_> =
        timeline.spans.iter().filter(|s| place(s.stage) > place(Stage::Admission)).map(|s| s.stage).collect();
    assert!(later.is_empty(), "refused partitions ran stages {later:?}");
    assert_nothing_held(&tiny, After::Shutdown);
    good.proves_unharmed();
    // The twin: the same partitions prove on a device with room.
    let proofs = roomy.prove(request(&key, partitions(&ours, 3))).unwrap();
    assert_eq!(proofs.len(), 3);
    assert_nothing_held(&roomy, After::Shutdown);
}

#[test]
fn cancelling_mid_flight_releases_everything_it_held() {
    let prover = cpu_prover();
    let ours = spec(9, 3, fresh_seed());
    let key = ours.proving_key().unwrap();
    let witnesses = partitions(&ours, 10);
    let mut rng = fresh_rng();
    let request_ = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
    let (r, s) = (request_.r.clone(), request_.s.clone());
    let doomed = prover.submit(request_).unwrap();
    let good = Bystander::submit(&prover, 7, 3);
    // Mid-flight: some partitions in the pipeline, none finished yet if we are quick.
    let started = std::time::Instant::now();
    while prover.in_flight() == 0 && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    doomed.cancel();
    let outcomes = wait_each_within(&doomed, Duration::from_secs(120));
    let cancelled =
        outcomes.iter().filter(|o| matches!(o, Err(e) if matches!(e.root_cause(), Error::Cancelled))).count();
    eprintln!("{cancelled} of {} partitions cancelled", outcomes.len());
    assert!(cancelled > 0, "nothing was cancelled");
    assert!(doomed.status().cancelled && doomed.status().finished);
    // Whatever finished before the cancel is a good proof; everything else is Cancelled.
    let pvk = key.prepared_vk();
    for (i, outcome) in outcomes.iter().enumerate() {
        match outcome {
            Ok(proof) => {
                assert_eq!(bytes(proof), bytes(&groth16::prove(&key, &witnesses[i], r[i], s[i]).unwrap()));
                assert!(groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap());
            }
            Err(err) => assert!(matches!(err.root_cause(), Error::Cancelled), "partition {i}: {err}"),
        }
    }
    good.proves_unharmed();
    // Everything the cancelled request held is back: the budget holds the resident keys only.
    let started = std::time::Instant::now();
    while prover.in_flight() > 0 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(prover.in_flight(), 0, "in-flight tokens were not returned");
    assert_nothing_held(&prover, After::Requests);
    // A later request proves.
    let later = partitions(&ours, 2);
    let proofs = prover.prove(ProofRequest::new(key.clone(), later.clone(), &mut rng)).unwrap();
    for (proof, witness) in proofs.iter().zip(&later) {
        assert!(groth16::verify(&pvk, proof, witness.public_inputs()).unwrap());
    }
    assert_nothing_held(&prover, After::Shutdown);
}

/// A circuit that enforces nothing.
#[derive(Clone)]
struct Empty;

impl Circuit<Scalar> for Empty {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, _: &mut CS) -> Result<(), SynthesisError> {
        Ok(())
    }
}

/// The typed failure a compat call carries inside its `SynthesisError`.
fn typed<T>(result: Result<T, SynthesisError>) -> Result<T, Error> {
    result.map_err(|err| match compat::snarkpipe_error(&err) {
        Some(typed) => typed.clone(),
        None => panic!("not one of snarkpipe's errors: {err:?}"),
    })
}

fn parameters(spec: &SyntheticSpec) -> Parameters<Bls12> {
    let mut rng = ChaCha20Rng::seed_from_u64(spec.seed);
    let mut secret = || Scalar::random(&mut rng);
    let waste = ToxicWaste { alpha: secret(), beta: secret(), gamma: secret(), delta: secret(), tau: secret() };
    groth16::setup::setup(spec.circuit(0), &waste).unwrap()
}

#[test]
fn compat_calls_refuse_bad_input_and_the_shared_prover_goes_on() {
    static CPU: Once = Once::new();
    CPU.call_once(|| std::env::set_var("SNARKPIPE_BACKEND", "cpu"));
    let shared = compat::default_prover().unwrap();
    let good = Bystander::submit(shared, 8, 3);

    let ours = spec(6, 3, fresh_seed());
    let params = parameters(&ours);
    let circuits = vec![ours.circuit(0), ours.circuit(1)];
    let one = vec![Scalar::ONE];
    let two = vec![Scalar::ONE, Scalar::ONE];
    for (r, s) in [(&one, &two), (&two, &one), (&vec![], &vec![]), (&vec![Scalar::ONE; 3], &two)] {
        match typed(compat::create_proof_batch(circuits.clone(), &params, r.clone(), s.clone())) {
            Err(Error::RandomnessLength { circuits: 2, r: rl, s: sl }) => assert_eq!((rl, sl), (r.len(), s.len())),
            other => panic!("expected RandomnessLength, got {:?}", other.err()),
        }
    }
    let result = typed(compat::create_proof(Empty, &params, Scalar::ONE, Scalar::ONE));
    assert!(matches!(result, Err(Error::EmptyCircuit)), "{:?}", result.err());
    let result = typed(compat::create_proof_batch(vec![Empty, Empty], &params, two.clone(), two.clone()));
    assert!(matches!(result, Err(Error::EmptyCircuit)), "{:?}", result.err());
    let mut rng = fresh_rng();
    let result = typed(compat::create_random_proof(Empty, &params, &mut rng));
    assert!(matches!(result, Err(Error::EmptyCircuit)), "{:?}", result.err());
    let result = typed(compat::create_proof_batch(Vec::<Empty>::new(), &params, vec![], vec![]));
    assert!(matches!(result, Err(Error::EmptyRequest)), "{:?}", result.err());
    // Parameters of another circuit.
    let other = parameters(&spec(6, 5, fresh_seed()));
    let result = typed(compat::create_proof(ours.circuit(0), &other, Scalar::ONE, Scalar::ONE));
    assert!(matches!(result, Err(Error::ParamsMismatch { .. })), "{:?}", result.err());

    // The twin: good input through the same calls proves, equal to the reference, and
    // bellperson's verifier accepts it.
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let proof = compat::create_proof(ours.circuit(1), &params, r, s).unwrap();
    let witness = ours.witness(1).unwrap();
    let key = ProvingKey::from_parameters(&params);
    assert_eq!(bytes(&proof), bytes(&groth16::prove(&key, &witness, r, s).unwrap()));
    let pvk = bellperson::groth16::prepare_verifying_key(&params.vk);
    assert!(bellperson::groth16::verify_proof(&pvk, &proof, witness.public_inputs()).unwrap());
    let mut wrong = witness.public_inputs().to_vec();
    wrong[1] += Scalar::ONE;
    assert!(!bellperson::groth16::verify_proof(&pvk, &proof, &wrong).unwrap());

    good.proves_unharmed();
    assert_nothing_held(shared, After::Requests);
}
