//! A prover that runs for months: no request waits for ever, and nothing is left held, when
//! the pipeline itself loses work.

use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::BackendKind;
use snarkpipe::circuit::Witness;
use snarkpipe::prover::{FaultInjection, ProofRequest, Prover, ProverConfig, Shutdown};
use snarkpipe::synthetic::SyntheticSpec;
use snarkpipe::{Error, Stage};

mod common;
use common::{fresh_seed, wait_each_within};

fn cpu_config(retries: usize) -> ProverConfig {
    ProverConfig {
        backend: BackendKind::Cpu,
        workers_per_device: 2,
        in_flight: 3,
        memory_reserve_bytes: 0,
        retries,
        ..ProverConfig::default()
    }
}

/// Every job reaching the actor of `stage` is dropped without an outcome, as a message sent to
/// a stopped actor is: each partition fails with a typed error naming that stage, within a
/// bound, and releases what it held. Before the jobs reported their own loss, the handle
/// waited for ever.
#[test]
fn a_job_dropped_without_an_outcome_fails_its_partition_instead_of_hanging() {
    let spec = SyntheticSpec { log_n: 6, seed: fresh_seed(), ..SyntheticSpec::default() };
    let key = spec.proving_key().unwrap();
    let witnesses: Vec<Arc<Witness>> = (0..3).map(|i| Arc::new(spec.witness(i).unwrap())).collect();
    for stage in [Stage::Admission, Stage::Htod, Stage::Msm, Stage::Assemble] {
        let injected = FaultInjection { lose_jobs_at: Some(stage), ..FaultInjection::default() };
        let prover = Prover::with_fault_injection(cpu_config(1), injected).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(fresh_seed());
        let handle = prover.submit(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
        let outcomes = wait_each_within(&handle, Duration::from_secs(60));
        for (i, outcome) in outcomes.iter().enumerate() {
            match outcome {
                Err(Error::Stage { partition, stage: at, cause }) => {
                    assert_eq!((*partition, *at), (i, stage), "{outcome:?}");
                    assert!(matches!(**cause, Error::Internal(_)), "{cause:?}");
                }
                other => panic!("partition {i}, jobs lost at {stage}: {other:?}"),
            }
        }
        // Two attempts each (one retry), both lost.
        assert_eq!(prover.faults().injected(), 6, "jobs lost at {stage}");
        let held = prover.held().unwrap();
        assert!(!held.leaked(), "jobs lost at {stage} left {held:?}");
        prover.shutdown(Shutdown::Drain);
        assert!(prover.held().unwrap().is_nothing(), "after shutdown: {:?}", prover.held());
    }
    // The negative twin: the same prover without the fault proves.
    let prover = Prover::new(cpu_config(1)).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(fresh_seed());
    let proofs = prover.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
    assert_eq!(proofs.len(), 3);
}

/// Two keys on a device that holds one of them beside a partition, their requests in flight
/// together: a partition of the second key, waiting for room that the first key holds, must get
/// it once the first key's partitions are done with it. When idle keys were evicted only
/// before a partition began to wait, the second request waited for ever, and the device with
/// it.
#[test]
fn a_key_waiting_for_room_held_by_an_idle_key_gets_it() {
    let (first, second) = (common::spec(7, 2, fresh_seed()), common::spec(7, 5, fresh_seed()));
    let (key_a, key_b) = (first.proving_key().unwrap(), second.proving_key().unwrap());
    let cpu = snarkpipe::backend::cpu::CpuDevice::new(0, 0);
    let plan = |spec: &SyntheticSpec| {
        snarkpipe::plan::partition_plan_bytes(&cpu, &spec.witness(0).unwrap().shape(), spec.log_n)
    };
    let one = key_a.device_bytes().max(key_b.device_bytes()) + plan(&first).max(plan(&second));
    // Room for one key and two partitions, never for both keys.
    let capacity = one + plan(&first).max(plan(&second));
    assert!(capacity < key_a.device_bytes() + key_b.device_bytes(), "the device must not hold both keys");
    let prover = Prover::new(ProverConfig { cpu_device_bytes: capacity, ..cpu_config(0) }).unwrap();
    for round in 0..3 {
        let mut rng = common::fresh_rng();
        let a = prover.submit(ProofRequest::new(key_a.clone(), common::partitions(&first, 6), &mut rng)).unwrap();
        let b = prover.submit(ProofRequest::new(key_b.clone(), common::partitions(&second, 6), &mut rng)).unwrap();
        for (name, handle) in [("first", &a), ("second", &b)] {
            let outcomes = wait_each_within(handle, Duration::from_secs(60));
            assert!(outcomes.iter().all(|o| o.is_ok()), "round {round}, {name} key: {outcomes:?}");
        }
    }
    let held = prover.held().unwrap();
    assert!(!held.leaked() && held.resident_keys == 1, "{held:?}");
}

/// A prover's memory does not grow with its age: its timeline keeps the latest spans only, and
/// it forgets the requests that finished.
#[test]
fn the_timeline_and_the_request_list_stay_bounded() {
    let spec = common::spec(5, 1, fresh_seed());
    let key = spec.proving_key().unwrap();
    let witnesses = common::partitions(&spec, 2);
    let prover = Prover::new(ProverConfig { timeline_spans: 64, ..cpu_config(0) }).unwrap();
    for _ in 0..40 {
        let mut rng = common::fresh_rng();
        prover.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
    }
    let spans = prover.timeline().snapshot().spans.len();
    assert_eq!(spans, 64, "the timeline holds its capacity, no more");
    assert!(prover.timeline().dropped_spans() > 0, "80 partitions record more than 64 spans");
    // What `held` counts (it prunes the list itself, so this says nothing of the pruning at
    // submit: the next test does).
    let held = prover.held().unwrap();
    assert_eq!(held.unfinished_requests, 0, "{held:?}");
    // The negative twin: a request still running is remembered.
    let mut rng = common::fresh_rng();
    let running = prover.submit(ProofRequest::new(key.clone(), common::partitions(&spec, 8), &mut rng)).unwrap();
    assert_eq!(prover.held().unwrap().unfinished_requests, 1);
    running.wait().unwrap();
    assert_eq!(prover.held().unwrap().unfinished_requests, 0);
}

/// Each submit forgets the requests that finished: with every handle still held (so nothing
/// is freed by a drop), the list the shutdown reads holds the last request only, not all of
/// them. Nothing here calls `held`, which prunes the list on its own and so would hide a
/// submit that no longer does.
#[test]
fn each_submit_forgets_the_finished_requests() {
    let spec = common::spec(4, 1, fresh_seed());
    let key = spec.proving_key().unwrap();
    let witnesses = common::partitions(&spec, 1);
    let prover = Prover::new(cpu_config(0)).unwrap();
    let mut handles = Vec::new();
    for _ in 0..20 {
        let handle =
            prover.submit(ProofRequest::new(key.clone(), witnesses.clone(), &mut common::fresh_rng())).unwrap();
        handle.wait().unwrap();
        handles.push(handle);
    }
    let report = prover.shutdown(Shutdown::Drain);
    assert_eq!((report.requests, report.proved), (1, 1), "finished requests piled up: {report:?}");
    // The negative twin: requests not finished when the next is submitted are all kept (16
    // partitions each pass through the actors in far longer than three submits take).
    let prover = Prover::new(cpu_config(0)).unwrap();
    let many = common::partitions(&spec, 16);
    let waiting: Vec<_> = (0..3)
        .map(|_| prover.submit(ProofRequest::new(key.clone(), many.clone(), &mut common::fresh_rng())).unwrap())
        .collect();
    let report = prover.shutdown(Shutdown::Drain);
    assert_eq!(report.requests, 3, "{report:?}");
    drop((handles, waiting));
}

/// A key whose delta is the point at infinity (subverted parameters) is refused at submit, with
/// no device work: it used to run every partition to assembly, fail there, and run again on
/// every retry.
#[test]
fn a_delta_at_infinity_is_refused_before_any_work() {
    use group::prime::PrimeCurveAffine;
    let spec = common::spec(6, 1, fresh_seed());
    let key = spec.proving_key().unwrap();
    let prover = Prover::new(cpu_config(2)).unwrap();
    for subvert in [0, 1] {
        let mut bad = (*key).clone();
        match subvert {
            0 => bad.vk.delta_g1 = blstrs::G1Affine::identity(),
            _ => bad.vk.delta_g2 = blstrs::G2Affine::identity(),
        }
        let mut rng = common::fresh_rng();
        let result = prover.submit(ProofRequest::new(Arc::new(bad), common::partitions(&spec, 2), &mut rng));
        assert!(matches!(result, Err(Error::UnexpectedIdentity)), "{:?}", result.map(|h| h.wait()));
    }
    assert!(prover.timeline().snapshot().spans.is_empty(), "device work ran for a refused key");
    // The negative twin: the key as it was proves.
    let mut rng = common::fresh_rng();
    assert_eq!(prover.prove(ProofRequest::new(key, common::partitions(&spec, 2), &mut rng)).unwrap().len(), 2);
}

/// A device that computes wrong results without reporting an error: its proofs fail
/// verification before they leave the prover, and its partitions are retried on the healthy
/// device, so every proof returned verifies. Before proofs were verified, the wrong ones were
/// returned as proofs.
#[test]
fn a_wrong_result_is_caught_before_it_leaves_and_proved_elsewhere() {
    let spec = common::spec(6, 2, fresh_seed());
    let key = spec.proving_key().unwrap();
    let witnesses = common::partitions(&spec, 8);
    let pvk = key.prepared_vk();
    let two_devices = ProverConfig { cpu_devices: 2, ..cpu_config(3) };
    let injected = FaultInjection { devices: Some(vec![1]), wrong_results: true, ..FaultInjection::default() };
    let prover = Prover::with_fault_injection(two_devices.clone(), injected.clone()).unwrap();
    let mut rng = common::fresh_rng();
    let proofs = prover.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
    for (i, proof) in proofs.iter().enumerate() {
        assert!(snarkpipe::groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap(), "partition {i}");
    }
    assert!(prover.faults().injected() > 0, "no partition ran on the faulty device: the test saw nothing");
    let caught = prover.timeline().snapshot().spans.iter().filter(|s| s.stage == Stage::Verify).count();
    assert!(caught > witnesses.len(), "the wrong proofs were verified and retried: {caught} verify spans");
    // The negative twin: without verification the faulty device's wrong proofs are returned.
    let unverified =
        Prover::with_fault_injection(ProverConfig { verify_proofs: false, ..two_devices }, injected).unwrap();
    let mut rng = common::fresh_rng();
    let proofs = unverified.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
    let wrong =
        proofs.iter().zip(&witnesses).filter(|(p, w)| !snarkpipe::groth16::verify(&pvk, p, w.public_inputs()).unwrap());
    assert!(wrong.count() > 0, "unverified, the faulty device's proofs must reach the caller wrong");
}
