//! Pipeline-level tests on the CPU backend: proofs equal the reference prover's, stages
//! overlap across partitions on the recorded timeline, the budget and the in-flight bound
//! hold, and cancellation, shutdown and async use release everything.

use std::collections::BTreeSet;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::BackendKind;
use snarkpipe::circuit::Witness;
use snarkpipe::groth16;
use snarkpipe::params::ProvingKey;
use snarkpipe::prover::{FaultInjection, ProofRequest, Prover, ProverConfig, Shutdown, StagingMode};
use snarkpipe::synthetic::{KeyKind, SyntheticSpec, WitnessProfile};
use snarkpipe::timeline::{Span, Timeline};
use snarkpipe::{Error, Stage};

mod common;
use common::{assert_nothing_held, bytes, fresh_rng, fresh_seed, partitions, spec, wait_until, After};

fn cpu_prover(workers: usize, in_flight: usize) -> Prover {
    Prover::new(ProverConfig {
        backend: BackendKind::Cpu,
        workers_per_device: workers,
        in_flight,
        memory_reserve_bytes: 0,
        ..ProverConfig::default()
    })
    .unwrap()
}

/// Two spans of different partitions in different stages on device streams that overlap.
fn overlapping_stage_pairs(timeline: &Timeline) -> BTreeSet<(Stage, Stage)> {
    let device: Vec<&Span> = timeline.spans.iter().filter(|s| s.track.is_device()).collect();
    let mut pairs = BTreeSet::new();
    for a in &device {
        for b in &device {
            if a.partition != b.partition && a.stage != b.stage && a.start_s < b.end_s && b.start_s < a.end_s {
                pairs.insert((a.stage, b.stage));
            }
        }
    }
    pairs
}

#[test]
fn streamed_proofs_equal_the_reference_and_verify() {
    let spec = spec(7, 4, fresh_seed());
    let key = spec.proving_key().unwrap();
    let witnesses = partitions(&spec, 6);
    let prover = cpu_prover(2, 4);
    let mut rng = fresh_rng();
    let request = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
    let (r, s) = (request.r.clone(), request.s.clone());
    let proofs = prover.prove(request).unwrap();
    let pvk = key.prepared_vk();
    for (i, proof) in proofs.iter().enumerate() {
        let reference = groth16::prove(&key, &witnesses[i], r[i], s[i]).unwrap();
        assert_eq!(bytes(proof), bytes(&reference), "partition {i} differs from the reference prover");
        assert!(groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap());
        // Negative twin: the proof must not verify for another partition's inputs.
        let mut wrong = witnesses[i].public_inputs().to_vec();
        wrong[0] += blstrs::Scalar::from(1u64);
        assert!(!groth16::verify(&pvk, proof, &wrong).unwrap());
    }
    assert_nothing_held(&prover, After::Shutdown);
}

#[test]
fn stages_overlap_across_partitions_with_two_workers() {
    let spec = spec(9, 4, fresh_seed());
    let key = spec.proving_key().unwrap();
    let prover = cpu_prover(2, 4);
    let mut rng = fresh_rng();
    prover.prove(ProofRequest::new(key, partitions(&spec, 8), &mut rng)).unwrap();
    let timeline = prover.timeline().snapshot();
    let pairs = overlapping_stage_pairs(&timeline);
    // Compute of one partition runs while another partition is staged or collected.
    assert!(
        pairs.iter().any(|(a, b)| matches!(a, Stage::Htod) && matches!(b, Stage::Ntt | Stage::Msm)),
        "no upload overlapped compute: {pairs:?}"
    );
    // Two workers: two partitions compute at the same time.
    let compute: Vec<&Span> =
        timeline.spans.iter().filter(|s| s.track.is_device() && matches!(s.stage, Stage::Ntt | Stage::Msm)).collect();
    let concurrent = compute.iter().any(|a| {
        compute
            .iter()
            .any(|b| a.partition != b.partition && a.track != b.track && a.start_s < b.end_s && b.start_s < a.end_s)
    });
    assert!(concurrent, "the two workers never computed at the same time");
    // Every stage actor and the budget appear on the timeline.
    let stages: BTreeSet<Stage> = timeline.spans.iter().map(|s| s.stage).collect();
    for stage in Stage::ALL {
        assert!(stages.contains(&stage), "no {stage} span");
    }
    assert_nothing_held(&prover, After::Shutdown);
}

#[test]
fn one_partition_in_flight_means_no_overlap() {
    let spec = spec(7, 4, fresh_seed());
    let key = spec.proving_key().unwrap();
    let prover = cpu_prover(2, 1);
    let mut rng = fresh_rng();
    prover.prove(ProofRequest::new(key, partitions(&spec, 4), &mut rng)).unwrap();
    let timeline = prover.timeline().snapshot();
    // The negative twin of the overlap test: with an in-flight bound of 1, back-pressure
    // keeps every partition's lifetime apart.
    let lifetime = |p: usize| {
        let spans: Vec<_> = timeline.spans.iter().filter(|s| s.partition == p).collect();
        let start = spans.iter().map(|s| s.start_s).fold(f64::MAX, f64::min);
        let end = spans.iter().map(|s| s.end_s).fold(0.0, f64::max);
        (start, end)
    };
    for p in 0..3 {
        let (_, end) = lifetime(p);
        let (next_start, _) = lifetime(p + 1);
        assert!(end <= next_start + 1e-4, "partition {} started before {p} finished", p + 1);
    }
    assert!(overlapping_stage_pairs(&timeline).is_empty());
}

#[test]
fn bad_requests_get_typed_errors_before_any_work() {
    let spec = spec(6, 4, fresh_seed());
    let key = spec.proving_key().unwrap();
    let prover = cpu_prover(1, 2);
    let mut rng = fresh_rng();
    let empty = ProofRequest::new(key.clone(), vec![], &mut rng);
    assert!(matches!(prover.submit(empty), Err(Error::EmptyRequest)));
    let mut short = ProofRequest::new(key.clone(), partitions(&spec, 2), &mut rng);
    short.r.pop();
    assert!(matches!(prover.submit(short), Err(Error::RandomnessLength { .. })));
    let other = common::spec(7, 3, fresh_seed()).proving_key().unwrap();
    let mismatched = ProofRequest::new(other, partitions(&spec, 1), &mut rng);
    assert!(matches!(prover.submit(mismatched), Err(Error::ParamsMismatch { .. })));
    // The prover is unharmed: a good request still proves.
    assert_eq!(prover.prove(ProofRequest::new(key, partitions(&spec, 1), &mut rng)).unwrap().len(), 1);
}

#[test]
fn cancelling_releases_everything_and_the_prover_goes_on() {
    let spec = spec(9, 4, fresh_seed());
    let key = spec.proving_key().unwrap();
    let prover = cpu_prover(2, 2);
    let mut rng = fresh_rng();
    let handle = prover.submit(ProofRequest::new(key.clone(), partitions(&spec, 12), &mut rng)).unwrap();
    while handle.status().proved == 0 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    handle.cancel();
    let outcomes = handle.wait_each();
    let cancelled =
        outcomes.iter().filter(|o| matches!(o, Err(e) if matches!(e.root_cause(), Error::Cancelled))).count();
    assert!(cancelled > 0, "nothing was cancelled");
    // Every partition either proved or was cancelled: no other failure.
    for (i, outcome) in outcomes.iter().enumerate() {
        assert!(
            outcome.is_ok() || matches!(outcome, Err(e) if matches!(e.root_cause(), Error::Cancelled)),
            "partition {i}: {outcome:?}"
        );
    }
    assert!(handle.status().cancelled);
    assert_nothing_held(&prover, After::Requests);
    // Another request on the same prover proves as if nothing happened.
    let proofs = prover.prove(ProofRequest::new(key.clone(), partitions(&spec, 2), &mut rng)).unwrap();
    assert_eq!(proofs.len(), 2);
    assert_nothing_held(&prover, After::Shutdown);
}

/// Dropping every handle of a request does not cancel it: the partitions run to the end, their
/// proofs are discarded, and everything they held is released. The negative twin: cancelling
/// before the drop stops them, so fewer partitions reach the verify stage.
#[test]
fn dropping_the_last_handle_lets_the_request_finish_and_releases_everything() {
    let spec = spec(8, 2, fresh_seed());
    let key = spec.proving_key().unwrap();
    let n = 8;
    for cancel_first in [false, true] {
        // Two in flight: at most two partitions are past the scheduler when a cancel comes.
        let prover = cpu_prover(2, 2);
        let mut rng = fresh_rng();
        let handle = prover.submit(ProofRequest::new(key.clone(), partitions(&spec, n), &mut rng)).unwrap();
        if cancel_first {
            handle.cancel();
        }
        drop(handle);
        // Nothing but its partitions holds the request now: the prover forgets it once the last
        // one has ended (with a handle held, it is forgotten once finished).
        let ended = || prover.held().unwrap().unfinished_requests == 0 && prover.in_flight() == 0;
        wait_until(std::time::Duration::from_secs(120), "the end of every partition", ended);
        // Each partition that ran to the end was verified once (no faults, so no retries).
        let verified = prover
            .timeline()
            .snapshot()
            .spans
            .iter()
            .filter(|s| s.stage == Stage::Verify && !s.track.is_device())
            .count();
        if cancel_first {
            assert!(verified < n, "cancelled and dropped, yet all {n} partitions were proved");
        } else {
            assert_eq!(verified, n, "dropped without a cancel: only {verified} of {n} partitions were proved");
        }
        assert_nothing_held(&prover, After::Shutdown);
    }
}

#[test]
fn shutdown_drains_or_cancels_what_is_in_flight() {
    let spec = spec(8, 4, fresh_seed());
    let key = spec.proving_key().unwrap();
    let mut rng = fresh_rng();

    let draining = cpu_prover(2, 2);
    let handle = draining.submit(ProofRequest::new(key.clone(), partitions(&spec, 4), &mut rng)).unwrap();
    draining.shutdown(Shutdown::Drain);
    assert_eq!(handle.wait().unwrap().len(), 4, "drain lost work");
    assert!(matches!(
        draining.submit(ProofRequest::new(key.clone(), partitions(&spec, 1), &mut rng)),
        Err(Error::ShutDown)
    ));

    let cancelling = cpu_prover(2, 2);
    let handle = cancelling.submit(ProofRequest::new(key.clone(), partitions(&spec, 8), &mut rng)).unwrap();
    cancelling.shutdown(Shutdown::Cancel);
    let outcomes = handle.wait_each();
    assert!(outcomes.iter().any(|o| o.is_err()), "cancel finished every partition anyway");
    assert_nothing_held(&cancelling, After::Shutdown);
}

#[test]
fn works_inside_a_tokio_runtime_with_async_waits() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let spec = spec(7, 4, fresh_seed());
        let key = spec.proving_key().unwrap();
        let prover = cpu_prover(2, 2);
        let mut rng = fresh_rng();
        let witnesses = partitions(&spec, 3);
        let handle = prover.submit(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
        let proofs = handle.wait_async().await.unwrap();
        let pvk = key.prepared_vk();
        for (proof, witness) in proofs.iter().zip(&witnesses) {
            assert!(groth16::verify(&pvk, proof, witness.public_inputs()).unwrap());
        }
        drop(prover); // shutting down inside the runtime must not panic
    });
}

#[test]
fn a_lying_budget_meets_a_real_out_of_memory_and_the_device_recovers() {
    let spec = spec(8, 4, fresh_seed());
    let key: Arc<ProvingKey> = spec.proving_key().unwrap();
    let witness = partitions(&spec, 1);
    // Size the device for the key and one partition; tell the budget it holds ten.
    let one =
        snarkpipe::plan::partition_plan_bytes(&snarkpipe::backend::cpu::CpuDevice::new(0, 0), &witness[0].shape(), 8);
    let device_bytes = key.device_bytes() + one + one / 2;
    let config = ProverConfig {
        backend: BackendKind::Cpu,
        cpu_device_bytes: device_bytes,
        workers_per_device: 2,
        in_flight: 4,
        memory_reserve_bytes: 0,
        retries: 0,
        ..ProverConfig::default()
    };
    let prover = Prover::with_fault_injection(config, FaultInjection::budget_of(device_bytes * 10)).unwrap();
    let mut rng = fresh_rng();
    let handle = prover.submit(ProofRequest::new(key.clone(), partitions(&spec, 8), &mut rng)).unwrap();
    let outcomes = handle.wait_each();
    // An out-of-memory the budget did not foresee is pressure: the partition backs off and
    // goes round again (without spending an attempt; retries are off), and proves.
    let requeued: usize = handle.requeues().iter().sum();
    assert!(requeued > 0, "the lie to the budget provoked no out-of-memory");
    for (i, outcome) in outcomes.iter().enumerate() {
        assert!(outcome.is_ok(), "partition {i}: {outcome:?}");
    }
    assert!(!prover.device_status()[0].quarantined, "out-of-memory quarantined the device");
    assert_nothing_held(&prover, After::Requests);
    // The device stays usable: one partition at a time proves.
    for _ in 0..2 {
        let proofs = prover.prove(ProofRequest::new(key.clone(), witness.clone(), &mut rng)).unwrap();
        assert!(groth16::verify(&key.prepared_vk(), &proofs[0], witness[0].public_inputs()).unwrap());
    }
    assert_nothing_held(&prover, After::Shutdown);
}

/// A CPU prover whose one modelled device holds `device_bytes`.
fn prover_with_device_bytes(device_bytes: u64) -> Prover {
    Prover::new(ProverConfig {
        backend: BackendKind::Cpu,
        cpu_device_bytes: device_bytes,
        workers_per_device: 2,
        in_flight: 3,
        memory_reserve_bytes: 0,
        retries: 0,
        ..ProverConfig::default()
    })
    .unwrap()
}

/// A 2^8 key, `n` of its partitions, and the device bytes one partition plans for.
fn key_partitions_and_plan(n: usize) -> (Arc<ProvingKey>, Vec<Arc<Witness>>, u64) {
    let spec = spec(8, 4, fresh_seed());
    let witnesses = partitions(&spec, n);
    let device = snarkpipe::backend::cpu::CpuDevice::new(0, 0);
    let plan = snarkpipe::plan::partition_plan_bytes(&device, &witnesses[0].shape(), 8);
    (spec.proving_key().unwrap(), witnesses, plan)
}

#[test]
fn a_key_too_large_for_the_device_streams_in_chunks_and_proves_the_same() {
    use snarkpipe::plan::key_chunk_bytes;
    let (key, witnesses, plan) = key_partitions_and_plan(3);
    // Room for one partition and two chunks of 100 G2 points: far less than the key needs.
    let chunk = 100;
    let device_bytes = plan + key_chunk_bytes(chunk);
    assert!(device_bytes < plan + key.device_bytes(), "the key would fit: the test proves nothing");

    let seed = fresh_seed();
    let streamed = prover_with_device_bytes(device_bytes);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let proofs = streamed.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
    let resident = cpu_prover(2, 3);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let reference = resident.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
    for ((proof, expected), witness) in proofs.iter().zip(&reference).zip(&witnesses) {
        assert_eq!(bytes(proof), bytes(expected), "a streamed key gave another proof");
        assert!(groth16::verify(&key.prepared_vk(), proof, witness.public_inputs()).unwrap());
    }
    assert!(resident.is_resident(&key, 0), "the roomy device should keep the key");
    // A key that does not fit is never wholly resident: the plan may keep a part of it.
    let held = streamed.device_status()[0].keys.clone();
    let (streamed_vectors, chunk) = match held.first() {
        Some(plan) => (plan.streamed.clone(), plan.chunk_points.expect("a partly resident key streams in chunks")),
        None => (vec!["h", "l", "a", "b_g1", "b_g2"], chunk),
    };
    assert!(!streamed_vectors.is_empty(), "a key that does not fit was made wholly resident: {held:?}");

    // Every streamed query went up in chunks on the key streams: ⌈len/chunk⌉ copies per MSM.
    let timeline = streamed.timeline().snapshot();
    let chunk_copies = timeline.spans.iter().filter(|s| s.args.contains_key("key_chunk")).count();
    let lengths = [("h", key.h.len()), ("l", key.l.len()), ("a", key.a.len()), ("b_g1", key.b_g1.len()), ("b_g2", key.b_g2.len())];
    let per_partition: usize = lengths
        .iter()
        .filter(|(name, _)| streamed_vectors.contains(name))
        .map(|&(_, len)| len.div_ceil(chunk).max(1))
        .sum();
    assert_eq!(chunk_copies, per_partition * witnesses.len());
    assert!(per_partition > streamed_vectors.len(), "each streamed query should need several chunks");
    assert_nothing_held(&streamed, After::Shutdown);
    assert_nothing_held(&resident, After::Shutdown);
}

#[test]
fn a_device_without_room_for_even_the_smallest_key_chunk_refuses_at_admission() {
    use snarkpipe::plan::{key_chunk_bytes, MIN_KEY_CHUNK_POINTS};
    let (key, witnesses, plan) = key_partitions_and_plan(2);
    let needed = plan + key_chunk_bytes(MIN_KEY_CHUNK_POINTS);
    let prover = prover_with_device_bytes(needed - 1);
    let mut rng = fresh_rng();
    let err = prover.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap_err();
    match err.root_cause() {
        Error::PlanExceedsDevice { needed_bytes, capacity_bytes, .. } => {
            assert_eq!((*needed_bytes, *capacity_bytes), (needed, needed - 1))
        }
        other => panic!("expected PlanExceedsDevice, got {other}"),
    }
    // The twin with exactly that room proves, streaming the smallest chunks.
    let roomy_enough = prover_with_device_bytes(needed);
    let proofs = roomy_enough.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
    assert!(groth16::verify(&key.prepared_vk(), &proofs[1], witnesses[1].public_inputs()).unwrap());
    assert_nothing_held(&prover, After::Shutdown);
    assert_nothing_held(&roomy_enough, After::Shutdown);
}

#[test]
fn faults_while_a_key_streams_stay_inside_their_partitions_and_release_everything() {
    use snarkpipe::plan::key_chunk_bytes;
    let (key, witnesses, plan) = key_partitions_and_plan(16);
    let pvk = key.prepared_vk();
    // A streamed partition passes about 100 fault sites (every chunk's copy, launch and
    // completion), four times a resident one's, so at this rate about a third of the partitions
    // fail. (At 0.3 about two thirds did, and some seeds failed all 16: fault seed
    // 272197812608407455 fails each partition with a fault of its own.) A run where none or all
    // failed shows nothing about the others, so it is repeated with a fresh seed.
    for attempt in 0..5 {
        let seed = fresh_seed();
        let config = ProverConfig {
            backend: BackendKind::Cpu,
            cpu_device_bytes: plan + key_chunk_bytes(100),
            workers_per_device: 2,
            in_flight: 3,
            memory_reserve_bytes: 0,
            retries: 0,
            ..ProverConfig::default()
        };
        let prover = Prover::with_fault_injection(config, FaultInjection::at_rate(0.1, seed)).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let request = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
        let outcomes = prover.submit(request).unwrap().wait_each();
        let (mut proved, mut failed) = (0, 0);
        for (i, outcome) in outcomes.iter().enumerate() {
            match outcome {
                Ok(proof) => {
                    assert!(groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap(), "partition {i}");
                    proved += 1;
                }
                Err(err) => {
                    assert!(err.is_injected(), "partition {i} failed without an injected fault: {err}");
                    failed += 1;
                }
            }
        }
        let held = prover.device_status()[0].keys.clone();
        assert!(held.iter().all(|k| !k.streamed.is_empty()), "the key was made wholly resident: {held:?}");
        let injected = prover.faults().injected_by_site();
        assert_nothing_held(&prover, After::Shutdown);
        if failed == 0 || proved == 0 {
            eprintln!("attempt {attempt}: {failed} of {} partitions failed ({injected:?}); again", outcomes.len());
            continue;
        }
        assert!(prover.faults().injected() > 0);
        return;
    }
    panic!("in 5 runs, faults hit either none or all of the streamed key's partitions");
}

#[test]
fn both_stagings_prove_what_the_reference_proves_with_one_witness_on_two_devices_at_once() {
    let spec = spec(7, 4, fresh_seed());
    let key = spec.proving_key().unwrap();
    let (shared, other) = (Arc::new(spec.witness(0).unwrap()), Arc::new(spec.witness(1).unwrap()));
    for staging in [StagingMode::InPlace, StagingMode::Copy] {
        let prover = Prover::new(ProverConfig {
            backend: BackendKind::Cpu,
            cpu_devices: 2,
            workers_per_device: 2,
            in_flight: 3,
            memory_reserve_bytes: 0,
            staging,
            ..ProverConfig::default()
        })
        .unwrap();
        // The same witness in flight on both devices: in place, its vectors are page-locked
        // once for the process and unlocked only after the last partition using them.
        let witnesses =
            vec![shared.clone(), shared.clone(), other.clone(), shared.clone(), shared.clone(), other.clone()];
        let mut rng = fresh_rng();
        let request = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
        let (r, s) = (request.r.clone(), request.s.clone());
        let proofs = prover.prove(request).unwrap();
        for (i, proof) in proofs.iter().enumerate() {
            let reference = groth16::prove(&key, &witnesses[i], r[i], s[i]).unwrap();
            assert_eq!(bytes(proof), bytes(&reference), "{staging:?}: partition {i} differs from the reference");
            // The negative twin: the other witness with the same r and s proves something else.
            let twin = if Arc::ptr_eq(&witnesses[i], &shared) { &other } else { &shared };
            assert_ne!(bytes(proof), bytes(&groth16::prove(&key, twin, r[i], s[i]).unwrap()));
        }
        let on_devices: BTreeSet<usize> =
            prover.timeline().snapshot().spans.iter().filter_map(|s| s.track.device()).collect();
        assert_eq!(on_devices.len(), 2, "{staging:?}: both devices should have proved");
        assert_nothing_held(&prover, After::Shutdown);
    }
}

#[test]
fn a_device_exactly_as_large_as_the_plans_proves_every_partition_in_flight() {
    // The kernels allocate their scratch as they run, inside what the plan reserves for it: a
    // device with room for the key and three plans, no more, proves three partitions at once.
    // Were the scratch also allocated up front, the third partition's kernels would run the
    // device out of memory.
    let (key, witnesses, plan) = key_partitions_and_plan(6);
    let prover = prover_with_device_bytes(key.device_bytes() + 3 * plan);
    let mut rng = fresh_rng();
    let request = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
    let (r, s) = (request.r.clone(), request.s.clone());
    let proofs = prover.prove(request).expect("every partition fits its plan");
    for (i, proof) in proofs.iter().enumerate() {
        assert_eq!(bytes(proof), bytes(&groth16::prove(&key, &witnesses[i], r[i], s[i]).unwrap()));
    }
    let peak = prover.budget_reports().unwrap()[0].peak_bytes;
    assert_eq!(peak, key.device_bytes() + 3 * plan, "three partitions were never in flight at once");
    assert_nothing_held(&prover, After::Shutdown);
    // The negative twin: one byte less, and only two partitions fit beside the key at once.
    let smaller = prover_with_device_bytes(key.device_bytes() + 3 * plan - 1);
    let request = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
    smaller.prove(request).expect("two at a time still proves");
    assert!(smaller.budget_reports().unwrap()[0].peak_bytes < key.device_bytes() + 3 * plan);
}

#[test]
fn only_the_oldest_partition_in_flight_is_marked_urgent_and_the_marks_follow_admission() {
    let spec = spec(8, 4, fresh_seed());
    let key = spec.proving_key().unwrap();
    let prover = cpu_prover(2, 3);
    let mut rng = fresh_rng();
    prover.prove(ProofRequest::new(key, partitions(&spec, 6), &mut rng)).unwrap();
    let timeline = prover.timeline().snapshot();
    let device: Vec<&Span> = timeline.spans.iter().filter(|s| s.track.is_device()).collect();
    let oldest = |s: &Span| s.args.get("oldest") == Some(&serde_json::Value::Bool(true));
    let (marked, unmarked): (Vec<&Span>, Vec<&Span>) = device.iter().partition(|s| oldest(s));
    assert!(!marked.is_empty(), "no work ran as the oldest partition's");
    // The negative twin: younger partitions' work (uploads while the oldest computes) is not.
    assert!(!unmarked.is_empty(), "every piece of work was marked: the mark says nothing");
    // One partition at a time is the oldest: marked spans of different partitions never overlap.
    for a in &marked {
        for b in &marked {
            let apart = a.end_s <= b.start_s + 1e-4 || b.end_s <= a.start_s + 1e-4;
            assert!(
                a.partition == b.partition || apart,
                "partitions {} and {} both oldest at once",
                a.partition,
                b.partition
            );
        }
    }
    // The first partition admitted is the oldest for its whole stay: all its device work is marked,
    // and the marks pass to the others in the order they were admitted.
    let mut admitted: Vec<&Span> = timeline.spans.iter().filter(|s| s.stage == Stage::Admission).collect();
    admitted.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    let first = admitted[0].partition;
    assert!(device.iter().filter(|s| s.partition == first).all(|s| oldest(s)), "partition {first} lost its mark");
    let mut by_first_mark: Vec<(f64, usize)> = Vec::new();
    for s in &marked {
        match by_first_mark.iter_mut().find(|(_, p)| *p == s.partition) {
            Some(entry) => entry.0 = entry.0.min(s.start_s),
            None => by_first_mark.push((s.start_s, s.partition)),
        }
    }
    by_first_mark.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mark_order: Vec<usize> = by_first_mark.iter().map(|&(_, p)| p).collect();
    let admission_order: Vec<usize> = admitted.iter().map(|s| s.partition).filter(|p| mark_order.contains(p)).collect();
    assert_eq!(mark_order, admission_order, "the mark skipped ahead of an older partition");
    assert_nothing_held(&prover, After::Shutdown);
}

/// Two workers, two partitions in flight: an older partition with long MSMs and a younger,
/// tiny one on the other worker. The younger one's results must come back, and its proof be
/// assembled (which returns its memory to the budget), while the older one's MSMs still run. (With one device-to-host copy
/// stream for every worker, its copy queued behind the older partition's wait for its MSMs:
/// the two finished together, and the next admission waited for both, leaving the GPU idle.)
#[test]
fn a_younger_partition_s_results_do_not_wait_for_an_older_partition_s_msms() {
    let slow_spec =
        SyntheticSpec { profile: WitnessProfile::Random, keys: KeyKind::Random, ..spec(14, 4, fresh_seed()) };
    let fast_spec = spec(4, 4, fresh_seed());
    let (slow_key, fast_key) = (slow_spec.proving_key().unwrap(), fast_spec.proving_key().unwrap());
    let (slow_witness, fast_witness) = (partitions(&slow_spec, 1), partitions(&fast_spec, 1));
    for attempt in 0..3 {
        // The large partition's random key cannot verify its proof.
        let config = ProverConfig {
            backend: BackendKind::Cpu,
            workers_per_device: 2,
            in_flight: 2,
            memory_reserve_bytes: 0,
            verify_proofs: false,
            ..ProverConfig::default()
        };
        let prover = Prover::new(config).unwrap();
        let mut rng = fresh_rng();
        let slow = prover.submit(ProofRequest::new(slow_key.clone(), slow_witness.clone(), &mut rng)).unwrap();
        // The younger partition comes once the older one's results copy is queued (the dtoh
        // actor's span), as on a GPU, where every stage queues its work at once.
        let queued = std::time::Instant::now();
        while !prover.timeline().snapshot().spans.iter().any(|s| s.stage == Stage::Dtoh && !s.track.is_device()) {
            assert!(queued.elapsed().as_secs() < 60, "the older partition's results copy was never queued");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let fast = prover.submit(ProofRequest::new(fast_key.clone(), fast_witness.clone(), &mut rng)).unwrap();
        let fast_proof = fast.wait().unwrap();
        slow.wait().unwrap();
        assert!(groth16::verify(&fast_key.prepared_vk(), &fast_proof[0], fast_witness[0].public_inputs()).unwrap());
        let timeline = prover.timeline().snapshot();
        let end_of = |stage: Stage, log_n: u32, device: bool| {
            let partitions: BTreeSet<usize> = timeline
                .spans
                .iter()
                .filter(|s| s.stage == Stage::Admission && s.args.get("log_n") == Some(&log_n.into()))
                .map(|s| s.partition)
                .collect();
            timeline
                .spans
                .iter()
                .filter(|s| s.stage == stage && s.track.is_device() == device && partitions.contains(&s.partition))
                .map(|s| s.end_s)
                .fold(f64::NAN, f64::max)
        };
        let slow_msms_end = end_of(Stage::Msm, 14, true);
        let fast_done = end_of(Stage::Assemble, 4, false);
        eprintln!("attempt {attempt}: the small partition assembled at {fast_done:.3} s, the large one's MSMs ended at {slow_msms_end:.3} s");
        assert!(fast_done.is_finite() && slow_msms_end.is_finite(), "spans missing from the timeline");
        if fast_done < slow_msms_end {
            assert_nothing_held(&prover, After::Shutdown);
            return;
        }
    }
    panic!("the younger partition finished only after the older one's MSMs, three times");
}

#[test]
fn a_resident_key_nobody_holds_is_released_and_one_still_held_stays() {
    // A resident key holds its ProvingKey (and its page-locked vectors) strongly, so that the
    // memory it pins is always live; it must still go once nobody outside the devices holds it.
    let prover =
        Prover::new(ProverConfig { backend: BackendKind::Cpu, cpu_devices: 2, ..ProverConfig::default() }).unwrap();
    let mut rng = fresh_rng();
    let (dropped_spec, kept_spec) = (spec(6, 4, fresh_seed()), spec(6, 4, fresh_seed()));
    let dropped = dropped_spec.proving_key().unwrap();
    let kept = kept_spec.proving_key().unwrap();
    // On both devices, so that the count of holders covers more than one resident entry.
    prover.preload(&dropped, None).unwrap();
    prover.prove(ProofRequest::new(dropped.clone(), partitions(&dropped_spec, 2), &mut rng)).unwrap();
    assert!(prover.is_resident(&dropped, 0) && prover.is_resident(&dropped, 1));
    let gone = Arc::downgrade(&dropped);
    drop(dropped);
    assert!(gone.upgrade().is_some(), "the devices let go of a resident key before it was evicted");

    // Every submit releases unheld keys; the last partition's bookkeeping may still hold the
    // request (and its key) for a moment after the caller is woken, so wait for it.
    prover.prove(ProofRequest::new(kept.clone(), partitions(&kept_spec, 2), &mut rng)).unwrap();
    let started = std::time::Instant::now();
    while gone.upgrade().is_some() && started.elapsed() < std::time::Duration::from_secs(10) {
        prover.release_unheld_keys();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(gone.upgrade().is_none(), "a key nobody holds stayed resident");
    // The twin: the key its caller still holds stays resident.
    assert!(prover.is_resident(&kept, 0) || prover.is_resident(&kept, 1));
    assert_eq!(prover.release_unheld_keys(), 0);
    assert_nothing_held(&prover, After::Shutdown);
}

#[test]
fn the_leak_check_sees_a_range_still_page_locked_after_shutdown() {
    // The negative twin of every `assert_nothing_held`: host memory page-locked through the
    // prover and held past its shutdown fails the check; once let go, the same check passes.
    let prover = cpu_prover(1, 1);
    let lease = prover.pin_registry().pin_owned(Arc::new(vec![0u8; 1 << 16])).unwrap();
    let check = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert_nothing_held(&prover, After::Shutdown);
    }));
    assert!(check.is_err(), "64 KiB still page-locked after shutdown went unseen: {:?}", prover.held());
    drop(lease);
    assert_nothing_held(&prover, After::Shutdown);
}
