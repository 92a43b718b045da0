//! Devices that break and come back, and a prover that stops within a bound: a sticky error
//! and a hung kernel are recovered from, a quarantined device is probed back into service,
//! another process's memory is pressure and not failure, faults are drawn from the seed, and
//! shutdown neither hangs nor strands a request. All on the CPU model's faulty devices; the
//! sticky error on a GPU is `tests/cuda_sticky.rs`'s.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use snarkpipe::backend::BackendKind;
use snarkpipe::circuit::Witness;
use snarkpipe::params::ProvingKey;
use snarkpipe::prover::{
    DeviceHealth, FaultInjection, FaultScope, FaultSite, ProofHandle, ProofRequest, Prover, ProverConfig, Shutdown,
};
use snarkpipe::synthetic::SyntheticSpec;
use snarkpipe::{Error, Stage};

mod common;
use common::{assert_nothing_held, fresh_rng, fresh_seed, wait_each_within, After};

fn cpu_config(retries: usize) -> ProverConfig {
    ProverConfig {
        backend: BackendKind::Cpu,
        workers_per_device: 2,
        in_flight: 3,
        memory_reserve_bytes: 0,
        retries,
        stage_timeout: Some(Duration::from_secs(2)),
        ..ProverConfig::default()
    }
}

fn armed(site: FaultSite, times: usize) -> FaultInjection {
    FaultInjection { armed: vec![(site, times)], ..FaultInjection::default() }
}

/// Every outcome is a proof that verifies against `key` for its witness.
fn assert_all_verify(
    key: &ProvingKey,
    witnesses: &[Arc<Witness>],
    outcomes: &[snarkpipe::Result<bellperson::groth16::Proof<blstrs::Bls12>>],
) {
    let pvk = key.prepared_vk();
    for (i, (outcome, witness)) in outcomes.iter().zip(witnesses).enumerate() {
        let proof = outcome.as_ref().unwrap_or_else(|err| panic!("partition {i} failed: {err}"));
        assert!(
            snarkpipe::groth16::verify(&pvk, proof, witness.public_inputs()).unwrap(),
            "partition {i} does not verify"
        );
    }
}

fn submit(prover: &Prover, key: &Arc<ProvingKey>, witnesses: &[Arc<Witness>]) -> ProofHandle {
    prover.submit(ProofRequest::new(key.clone(), witnesses.to_vec(), &mut fresh_rng())).unwrap()
}

fn setup(log_n: u32, partitions: usize) -> (SyntheticSpec, Arc<ProvingKey>, Vec<Arc<Witness>>) {
    let spec = common::spec(log_n, 2, fresh_seed());
    let key = spec.proving_key().unwrap();
    let witnesses = common::partitions(&spec, partitions);
    (spec, key, witnesses)
}

/// A kernel traps and leaves the device's context unusable: the device is drained, recovered,
/// its key uploaded again, and every partition proves, those in flight with it included.
/// Before recovery existed, every later partition on the device failed: the cascade.
#[test]
fn a_sticky_error_is_recovered_from_and_later_partitions_prove() {
    let (_, key, witnesses) = setup(6, 9);
    let prover = Prover::with_fault_injection(cpu_config(2), armed(FaultSite::Sticky, 1)).unwrap();
    let outcomes = wait_each_within(&submit(&prover, &key, &witnesses), Duration::from_secs(60));
    assert_all_verify(&key, &witnesses, &outcomes);
    assert_eq!(prover.faults().injected_by_site().get("Sticky"), Some(&1), "the sticky fault never hit");
    let status = &prover.device_status()[0];
    assert_eq!((status.recoveries, &status.health), (1, &DeviceHealth::Healthy), "{status:?}");
    // Later requests prove on the recovered device, with the key uploaded again.
    let outcomes = wait_each_within(&submit(&prover, &key, &witnesses), Duration::from_secs(60));
    assert_all_verify(&key, &witnesses, &outcomes);
    assert!(prover.is_resident(&key, 0));
    assert!(prover.needs_restart().is_empty(), "a recovered device needs no restart");
    assert_nothing_held(&prover, After::Requests);
}

/// A sticky error that outlives the context, as a real one does on CUDA (the driver keeps it
/// until the process exits): the device goes out of service and the prover says a restart is
/// needed and why; the partitions it broke prove on the other device; a request that may use
/// only the broken device fails at once with a typed error instead of waiting for it.
#[test]
fn a_sticky_error_that_outlives_the_process_moves_work_away_and_asks_for_a_restart() {
    let (_, key, witnesses) = setup(6, 8);
    let config = ProverConfig { cpu_devices: 2, ..cpu_config(2) };
    let injected = FaultInjection { devices: Some(vec![0]), sticky_needs_restart: true, ..armed(FaultSite::Sticky, 1) };
    let prover = Prover::with_fault_injection(config, injected).unwrap();
    let outcomes = wait_each_within(&submit(&prover, &key, &witnesses), Duration::from_secs(60));
    assert_eq!(prover.faults().injected_by_site().get("Sticky"), Some(&1), "the sticky fault never hit");
    assert_all_verify(&key, &witnesses, &outcomes);
    // The monitor gives up on device 0 once its partitions have drained.
    common::wait_until(Duration::from_secs(20), "device 0 going out of service", || !prover.needs_restart().is_empty());
    let restart = prover.needs_restart();
    assert_eq!(restart.iter().map(|(device, _)| *device).collect::<Vec<_>>(), vec![0], "{restart:?}");
    assert!(restart[0].1.contains("restart the process"), "{restart:?}");
    assert!(matches!(prover.device_status()[1].health, DeviceHealth::Healthy));
    let only_broken = ProofRequest {
        devices: Some(vec![0]),
        ..ProofRequest::new(key.clone(), witnesses[..1].to_vec(), &mut fresh_rng())
    };
    // Bounded: waiting for a device that will not come back would fail here.
    let outcome = wait_each_within(&prover.submit(only_broken).unwrap(), Duration::from_secs(10)).remove(0);
    match outcome {
        Err(err) => assert!(matches!(err.root_cause(), Error::DeviceBroken { device: 0, .. }), "{err}"),
        Ok(_) => panic!("a device out of service proved"),
    }
    // Later requests go on proving on the other device.
    let outcomes = wait_each_within(&submit(&prover, &key, &witnesses), Duration::from_secs(60));
    assert_all_verify(&key, &witnesses, &outcomes);
    assert_nothing_held(&prover, After::Requests);
}

/// A kernel that never completes: the stage watchdog fails its partition with a typed timeout
/// within the bound, the device is recovered (ending the hung kernel), and the partition is
/// proved on the retry. Before the watchdog, the handle waited for ever, and so did shutdown.
#[test]
fn a_hung_kernel_is_caught_by_the_watchdog_and_the_device_recovers() {
    let (_, key, witnesses) = setup(6, 4);
    let started = Instant::now();
    let prover = Prover::with_fault_injection(cpu_config(2), armed(FaultSite::Hang, 1)).unwrap();
    let outcomes = wait_each_within(&submit(&prover, &key, &witnesses), Duration::from_secs(60));
    assert_all_verify(&key, &witnesses, &outcomes);
    assert_eq!(prover.faults().injected_by_site().get("Hang"), Some(&1));
    assert_eq!(prover.device_status()[0].recoveries, 1);
    assert!(started.elapsed() < Duration::from_secs(30), "the watchdog took {:?}", started.elapsed());
    // The negative twin: without retries the hung partition fails with the typed timeout,
    // naming its own partition, and the others prove.
    let prover = Prover::with_fault_injection(cpu_config(0), armed(FaultSite::Hang, 1)).unwrap();
    let handle = submit(&prover, &key, &witnesses);
    let outcomes = wait_each_within(&handle, Duration::from_secs(60));
    let hung: Vec<usize> = (0..outcomes.len()).filter(|&i| outcomes[i].is_err()).collect();
    let log = prover.faults().log();
    let Some(fault) = log.iter().find(|f| f.site == FaultSite::Hang) else { panic!("no hang injected: {log:?}") };
    let own = fault.scope.expect("a hang is injected into a partition's work").partition;
    assert!(hung.contains(&own), "the hung partition {own} did not fail: {outcomes:?}");
    match &outcomes[own] {
        Err(Error::Stage { partition, cause, .. }) => {
            assert_eq!(*partition, own);
            assert!(matches!(**cause, Error::DeviceHang { device: 0, .. }), "{cause:?}");
        }
        other => panic!("{other:?}"),
    }
}

/// A failing stream records no event: the partition whose work it was fails with the injected
/// cause, alone.
#[test]
fn an_event_failure_fails_only_its_partition() {
    let (_, key, witnesses) = setup(6, 6);
    let prover = Prover::with_fault_injection(cpu_config(0), armed(FaultSite::EventRecord, 1)).unwrap();
    let handle = submit(&prover, &key, &witnesses);
    let outcomes = wait_each_within(&handle, Duration::from_secs(60));
    let failed: Vec<usize> = (0..outcomes.len()).filter(|&i| outcomes[i].is_err()).collect();
    let own: Vec<usize> = prover.faults().log().iter().filter_map(|f| f.scope.map(|s| s.partition)).collect();
    assert_eq!(failed, own, "failures {outcomes:?}");
    assert!(outcomes[failed[0]].as_ref().unwrap_err().is_injected());
    assert_nothing_held(&prover, After::Requests);
}

/// A device that failed partitions in a row is quarantined; once it works again, a probe with
/// a known proof brings it back into service. Before probing, a quarantine was for ever.
#[test]
fn a_quarantined_device_is_probed_and_comes_back() {
    let (_, key, witnesses) = setup(6, 8);
    let config =
        ProverConfig { cpu_devices: 2, quarantine_probe_interval: Duration::from_millis(200), ..cpu_config(3) };
    // Device 1 computes every result wrong: verification catches each, and its partitions are
    // proved again on device 0.
    let injected = FaultInjection { devices: Some(vec![1]), wrong_results: true, ..FaultInjection::default() };
    let prover = Prover::with_fault_injection(config, injected).unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while !prover.device_status()[1].quarantined && Instant::now() < until {
        let outcomes = wait_each_within(&submit(&prover, &key, &witnesses), Duration::from_secs(60));
        assert_all_verify(&key, &witnesses, &outcomes);
    }
    assert!(prover.device_status()[1].quarantined, "device 1 failed everything and was never quarantined");
    // The negative twin first: while it still computes wrong, its probes fail and the
    // quarantine stays.
    let wrong_before = prover.faults().injected();
    std::thread::sleep(Duration::from_millis(900));
    assert!(prover.faults().injected() > wrong_before, "no probe ran on the quarantined device");
    assert!(prover.device_status()[1].quarantined, "a failing probe lifted the quarantine");
    // The device heals: the next probe proves, and it takes work again.
    prover.faults().return_right_results();
    let until = Instant::now() + Duration::from_secs(20);
    while prover.device_status()[1].quarantined && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!prover.device_status()[1].quarantined, "the healed device was never probed back");
    let before = spans_on(&prover, 1);
    let outcomes = wait_each_within(&submit(&prover, &key, &witnesses), Duration::from_secs(60));
    assert_all_verify(&key, &witnesses, &outcomes);
    assert!(spans_on(&prover, 1) > before, "the device came back but was given no work");
}

/// Stage spans the timeline drew on `device`.
fn spans_on(prover: &Prover, device: usize) -> usize {
    let timeline = prover.timeline().snapshot();
    timeline
        .spans
        .iter()
        .filter(|s| matches!(&s.track, snarkpipe::timeline::Track::Actor { device: Some(d), .. } if *d == device))
        .count()
}

/// Another process holds memory on the device: the budget starts from the free memory, not
/// the total, and an out-of-memory it causes later is pressure: the partitions are retried,
/// and the device is not quarantined for it. The memory is given back only once an
/// allocation was refused for it (an event, not a guess at how long that takes), and the
/// partitions' requeues show that the out-of-memory reached them.
#[test]
fn another_process_memory_is_pressure_not_failure() {
    let (spec, key, witnesses) = setup(6, 6);
    let device_bytes = 1u64 << 30;
    let others = 300u64 << 20;
    let config = ProverConfig { cpu_device_bytes: device_bytes, ..cpu_config(6) };
    let injected = FaultInjection { others_use_bytes: others, ..FaultInjection::default() };
    let prover = Prover::with_fault_injection(config.clone(), injected).unwrap();
    assert_eq!(prover.budget_reports().unwrap()[0].capacity_bytes, device_bytes - others);
    // The negative twin: alone on the device, the budget is all of it.
    let alone = Prover::new(config).unwrap();
    assert_eq!(alone.budget_reports().unwrap()[0].capacity_bytes, device_bytes);
    drop(alone);
    // The other process takes almost everything while requests run, then lets go.
    let plan = snarkpipe::plan::partition_plan_bytes(
        &snarkpipe::backend::cpu::CpuDevice::new(0, 0),
        &spec.witness(0).unwrap().shape(),
        spec.log_n,
    );
    prover.faults().set_others_use(device_bytes - key.device_bytes() - plan / 2);
    let handle = submit(&prover, &key, &witnesses);
    let refused = prover.faults().wait_for_pressure_refusals(1, Duration::from_secs(60));
    let status = prover.device_status()[0].clone();
    prover.faults().set_others_use(others);
    assert!(refused, "no allocation ran out of memory while the other process held the device");
    let outcomes = wait_each_within(&handle, Duration::from_secs(60));
    assert!(!status.quarantined, "out-of-memory from another process quarantined the device: {status:?}");
    assert!(!prover.device_status()[0].quarantined);
    assert_all_verify(&key, &witnesses, &outcomes);
    let requeues: usize = handle.requeues().iter().sum();
    assert!(requeues > 0, "the out-of-memory never sent a partition round again: {:?}", handle.requeues());
    // The twin: with the memory left alone, nothing is refused and nothing goes round again.
    let before = prover.faults().pressure_refusals();
    let calm = submit(&prover, &key, &witnesses);
    assert_all_verify(&key, &witnesses, &wait_each_within(&calm, Duration::from_secs(60)));
    assert_eq!((prover.faults().pressure_refusals(), calm.requeues().iter().sum::<usize>()), (before, 0));
}

/// A preload and a partition's admission racing to make one key resident: it is resident
/// once, and the device holds its bytes once. Before the second looked again under the lock,
/// both uploads went through and the key sat on the device twice.
#[test]
fn a_preload_racing_admission_makes_a_key_resident_once() {
    let (_, key, witnesses) = setup(6, 1);
    let prover = Prover::new(cpu_config(0)).unwrap();
    for round in 0..30 {
        prover.evict(&key, None);
        std::thread::scope(|scope| {
            let preloading = scope.spawn(|| prover.preload(&key, None));
            let proving = submit(&prover, &key, &witnesses);
            preloading.join().unwrap().unwrap();
            proving.wait().unwrap();
        });
        let (keys, bytes) = prover.residency()[0];
        assert_eq!((keys, bytes), (1, key.device_bytes()), "round {round}: the key is resident {keys} times");
        assert_eq!(prover.device_allocated_bytes()[0], key.device_bytes(), "round {round}");
    }
}

/// `submit` racing `shutdown`: every submit either fails with `ShutDown` or gets a request that
/// finishes; none is stranded with its ticket never taken.
#[test]
fn submit_racing_shutdown_never_strands_a_request() {
    let (_, key, witnesses) = setup(4, 1);
    for round in 0..8 {
        let prover = Prover::new(cpu_config(0)).unwrap();
        let handles = std::sync::Mutex::new(Vec::new());
        let refused = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| loop {
                    match prover.submit(ProofRequest::new(key.clone(), witnesses.clone(), &mut fresh_rng())) {
                        Ok(handle) => handles.lock().unwrap().push(handle),
                        Err(Error::ShutDown) => {
                            refused.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            return;
                        }
                        Err(other) => panic!("{other}"),
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(5 + round));
            prover.shutdown(Shutdown::Drain);
        });
        assert_eq!(refused.into_inner(), 4, "round {round}: every submitter ends with ShutDown");
        for handle in handles.into_inner().unwrap() {
            // Drained: every request that got in finished (proved).
            let outcomes = wait_each_within(&handle, Duration::from_secs(20));
            assert!(outcomes.iter().all(|o| o.is_ok()), "round {round}: {outcomes:?}");
        }
    }
}

/// Shutdown with a device that never answers: it returns within its bounds, says what it
/// cancelled and gave up, and no handle waits for ever. The negative twin drains fully.
#[test]
fn shutdown_is_bounded_and_reports_what_it_cancelled() {
    let (_, key, witnesses) = setup(6, 6);
    let config = ProverConfig {
        stage_timeout: Some(Duration::from_secs(600)),
        shutdown_timeout: Duration::from_millis(500),
        ..cpu_config(0)
    };
    let prover = Prover::with_fault_injection(config.clone(), armed(FaultSite::Hang, 1)).unwrap();
    let handle = submit(&prover, &key, &witnesses);
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let report = prover.shutdown(Shutdown::Drain);
    assert!(started.elapsed() < Duration::from_secs(10), "shutdown took {:?}", started.elapsed());
    let outcomes = wait_each_within(&handle, Duration::from_secs(5));
    assert_eq!(report.requests, 1, "{report:?}");
    assert!(report.cancelled + report.abandoned > 0, "a hung partition must be cancelled or given up: {report:?}");
    assert_eq!(report.proved + report.failed, witnesses.len(), "{report:?}");
    assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), report.proved);
    // The twin: nothing hangs, so a drain proves everything and cancels nothing.
    let prover = Prover::new(config).unwrap();
    let handle = submit(&prover, &key, &witnesses);
    let report = prover.shutdown(Shutdown::Drain);
    assert_eq!((report.proved, report.cancelled, report.abandoned), (witnesses.len(), 0, 0), "{report:?}");
    assert!(handle.wait().is_ok());
}

/// A panic in a stage actor outside the stage's own logic (passing the job on, finishing it):
/// the job fails alone and is retried, the actor is restarted, and the device goes on. Before,
/// the panic ended the actor's thread, and a stage with one thread per device took no more
/// partitions: every later request hung.
#[test]
fn a_panic_outside_a_stage_restarts_its_actor() {
    let (_, key, witnesses) = setup(6, 6);
    for stage in [Stage::Admission, Stage::Htod] {
        let injected = FaultInjection { panic_outside_at: Some(stage), ..armed(FaultSite::PanicOutsideStage, 2) };
        let prover = Prover::with_fault_injection(cpu_config(2), injected).unwrap();
        let outcomes = wait_each_within(&submit(&prover, &key, &witnesses), Duration::from_secs(60));
        assert_all_verify(&key, &witnesses, &outcomes);
        assert_eq!(prover.faults().injected(), 2, "{stage}");
        let outcomes = wait_each_within(&submit(&prover, &key, &witnesses), Duration::from_secs(60));
        assert_all_verify(&key, &witnesses, &outcomes);
    }
}

/// The faults a seed injects do not depend on how threads interleave: the same seed gives the
/// same faults, into the same partitions' work, run after run. A different seed gives others.
/// (Faults are drawn for the operations that happen: the schedule still decides whether a
/// pooled pin or the key's upload happens in a partition's work, so the test takes both out.)
#[test]
fn the_same_seed_injects_the_same_faults_every_run() {
    let (_, key, witnesses) = setup(5, 16);
    // One device with four in flight on two workers: the pool warmed for four partitions never
    // pins afresh.
    let config = ProverConfig { in_flight: 4, ..cpu_config(0) };
    let run = |seed: u64| {
        let prover = Prover::with_fault_injection(config.clone(), FaultInjection::at_rate(0.5, seed)).unwrap();
        // The key resident and the staging buffers pinned before the requests.
        prover.warm_up(&key, None).unwrap();
        let handles: Vec<_> = (0..3).map(|_| submit(&prover, &key, &witnesses)).collect();
        let failed: BTreeSet<(u64, usize)> = handles
            .iter()
            .flat_map(|h| {
                let outcomes = wait_each_within(h, Duration::from_secs(120));
                (0..outcomes.len()).filter(move |&i| outcomes[i].is_err()).map(move |i| (h.id(), i)).collect::<Vec<_>>()
            })
            .collect();
        let faults: BTreeSet<_> = prover.faults().log().into_iter().map(|f| (f.scope, f.stage, f.site)).collect();
        (failed, faults)
    };
    let seed = fresh_seed();
    let (failed, faults) = run(seed);
    assert!(!failed.is_empty() && failed.len() < 48, "the rate must fail some partitions, not all: {failed:?}");
    for again in 0..2 {
        let (failed_again, faults_again) = run(seed);
        let differ: Vec<_> = faults.symmetric_difference(&faults_again).collect();
        assert!(differ.is_empty(), "run {again}: seed {seed} injected other faults: {differ:?}");
        assert_eq!(failed_again, failed, "run {again}: seed {seed} failed other partitions");
    }
    let (other, _) = run(seed ^ 0x5eed);
    assert_ne!(other, failed, "another seed failed the same partitions");
}

/// A failed upload of the key partitions share is its uploader's failure alone: the partition
/// that queued it fails, naming itself; the others go round again and prove. Counted exactly
/// (a failure without a fault in its own work is a cascade), today's sharers were cascades.
#[test]
fn a_failed_key_upload_fails_only_its_uploader() {
    let (_, key, witnesses) = setup(6, 8);
    // Wrapped in the fault injector (a byte held by another process) with nothing armed yet.
    let injected = FaultInjection { others_use_bytes: 1, ..FaultInjection::default() };
    let prover = Prover::with_fault_injection(cpu_config(0), injected).unwrap();
    // A first request moves the prover-wide partition ids away from the indices.
    submit(&prover, &key, &witnesses[..3]).wait().unwrap();
    prover.evict(&key, None);
    prover.faults().arm(FaultSite::CopyToDevice, 1);
    let handle = submit(&prover, &key, &witnesses);
    let outcomes = wait_each_within(&handle, Duration::from_secs(60));
    let log = prover.faults().log();
    let fault = log.iter().find(|f| f.site == FaultSite::CopyToDevice).expect("the armed copy fault");
    let scope = fault.scope.expect("in a partition's work");
    assert_eq!(scope.request, handle.id());
    let attempts = handle.attempts();
    for (i, outcome) in outcomes.iter().enumerate() {
        let own =
            prover.faults().injected_into(FaultScope { request: handle.id(), partition: i, attempt: attempts[i] });
        match outcome {
            Err(err @ Error::Stage { partition, .. }) => {
                assert!(own, "partition {i} failed without a fault in its own work (a cascade): {err}");
                assert_eq!(*partition, i, "the error names another partition: {err}");
            }
            Err(other) => panic!("partition {i}: {other}"),
            Ok(_) => {}
        }
    }
    assert_eq!(outcomes.iter().filter(|o| o.is_err()).count(), 1, "{outcomes:?}");
    assert!(outcomes[scope.partition].is_err(), "the uploader {} proved", scope.partition);
    let proved: Vec<_> = (0..outcomes.len()).filter(|&i| i != scope.partition).collect();
    let pvk = key.prepared_vk();
    for i in proved {
        let proof = outcomes[i].as_ref().unwrap();
        assert!(snarkpipe::groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap(), "partition {i}");
    }
}

/// A partition that fails in its MSM stage after queueing a streamed key's first chunk copy
/// reports its failure only once that copy has ended. On a GPU the copy reads the page-locked
/// key and writes the partition's chunk buffer, so releasing either under it lets another
/// partition's work be overwritten. The copy is held on its stream (a stalled transfer) and
/// the event recorded right after it fails; while the copy is held, no outcome may arrive.
/// Before the MSM stage counted its key stream as used, the failure drained only the compute
/// stream, and the outcome came at once.
#[test]
fn a_failure_after_a_key_chunk_copy_waits_for_the_copy_before_releasing() {
    use snarkpipe::plan::{key_chunk_bytes, partition_plan_bytes};
    use std::sync::mpsc;

    let log_n = 8;
    let (_, key, witnesses) = setup(log_n, 1);
    let plan = partition_plan_bytes(&snarkpipe::backend::cpu::CpuDevice::new(0, 0), &witnesses[0].shape(), log_n);
    let config = ProverConfig {
        // Room for the partition and two chunks of 100 points: the key streams.
        cpu_device_bytes: plan + key_chunk_bytes(100),
        stage_timeout: Some(Duration::from_secs(60)),
        ..cpu_config(0)
    };
    let injected = FaultInjection {
        armed_in: vec![(FaultSite::StalledCopy, Stage::Msm, 1), (FaultSite::EventRecord, Stage::Msm, 1)],
        ..FaultInjection::default()
    };
    let prover = Prover::with_fault_injection(config, injected).unwrap();
    let handle = submit(&prover, &key, &witnesses);
    common::wait_until(Duration::from_secs(60), "the first key chunk copy to stall", || {
        prover.faults().injected_by_site().contains_key("EventRecord")
    });
    assert!(prover.faults().injected_by_site().contains_key("StalledCopy"), "no copy stalled before the failure");
    let held = prover.device_status()[0].keys.clone();
    assert!(held.iter().all(|k| !k.streamed.is_empty()), "the key is wholly resident, so nothing streamed: {held:?}");

    let (tx, rx) = mpsc::channel();
    let waiting = handle.clone();
    std::thread::spawn(move || {
        let _ = tx.send(waiting.wait_each());
    });
    let early = rx.recv_timeout(Duration::from_secs(1));
    assert!(early.is_err(), "the partition reported {early:?} while its key copy was still queued");

    assert_eq!(prover.faults().release_stalled_copies(), 1);
    let outcomes = rx.recv_timeout(Duration::from_secs(60)).expect("the partition never finished");
    let err = outcomes[0].as_ref().expect_err("the armed event failure should fail the partition");
    assert!(err.is_injected(), "{err}");
    assert_nothing_held(&prover, After::Requests);
}
