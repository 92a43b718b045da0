//! The scheduler over several (modelled) devices: placement, priorities, affinity to a
//! resident key, eviction under budget pressure, per-request device sets, and a failing device
//! whose partitions move to the other one without loss.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use snarkpipe::backend::BackendKind;
use snarkpipe::circuit::Witness;
use snarkpipe::groth16;
use snarkpipe::params::ProvingKey;
use snarkpipe::prover::{FaultInjection, Priority, ProofRequest, Prover, ProverConfig, Shutdown};
use snarkpipe::timeline::Track;

mod common;
use common::{assert_nothing_held, fresh_rng, fresh_seed, partitions, spec, After};

fn two_devices(in_flight: usize) -> ProverConfig {
    ProverConfig {
        backend: BackendKind::Cpu,
        cpu_devices: 2,
        workers_per_device: 1,
        in_flight,
        memory_reserve_bytes: 0,
        ..ProverConfig::default()
    }
}

/// Devices whose streams ran work of request `request`.
fn devices_used(prover: &Prover, request: u64) -> BTreeSet<usize> {
    prover
        .timeline()
        .snapshot()
        .spans
        .iter()
        .filter(|s| s.args.get("request").and_then(|r| r.as_u64()) == Some(request))
        .filter(|s| s.track.is_device())
        .filter(|s| !s.args.contains_key("what"))
        .filter_map(|s| match &s.track {
            Track::Stream { device, .. } => Some(*device),
            _ => None,
        })
        .collect()
}

fn verify_all(key: &ProvingKey, witnesses: &[Arc<Witness>], proofs: &[bellperson::groth16::Proof<blstrs::Bls12>]) {
    let pvk = key.prepared_vk();
    assert_eq!(witnesses.len(), proofs.len());
    for (w, p) in witnesses.iter().zip(proofs) {
        assert!(groth16::verify(&pvk, p, w.public_inputs()).unwrap());
    }
}

#[test]
fn partitions_spread_over_both_devices() {
    let spec = spec(8, 4, fresh_seed());
    let key = spec.proving_key().unwrap();
    let witnesses = partitions(&spec, 8);
    let prover = Prover::new(two_devices(4)).unwrap();
    let mut rng = fresh_rng();
    let handle = prover.submit(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
    verify_all(&key, &witnesses, &handle.wait().unwrap());
    assert_eq!(devices_used(&prover, handle.id()), BTreeSet::from([0, 1]));
    // The key went to each device once, and stays resident on both.
    assert!(prover.is_resident(&key, 0) && prover.is_resident(&key, 1));
    assert_eq!(prover.residency().iter().map(|(n, _)| n).sum::<usize>(), 2);
}

#[test]
fn a_request_can_be_pinned_to_one_device() {
    let spec = spec(7, 2, fresh_seed());
    let key = spec.proving_key().unwrap();
    let witnesses = partitions(&spec, 4);
    let prover = Prover::new(two_devices(4)).unwrap();
    let mut rng = fresh_rng();
    let mut request = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
    request.devices = Some(vec![1]);
    let handle = prover.submit(request).unwrap();
    verify_all(&key, &witnesses, &handle.wait().unwrap());
    assert_eq!(devices_used(&prover, handle.id()), BTreeSet::from([1]));
    assert!(!prover.is_resident(&key, 0), "the key was copied to a device the request excluded");
    // Negative twin: a device the prover does not have is refused up front.
    let mut bad = ProofRequest::new(key, partitions(&spec, 1), &mut rng);
    bad.devices = Some(vec![7]);
    assert!(matches!(prover.submit(bad), Err(snarkpipe::Error::Config(_))));
}

/// While a request runs, its handle names the devices its partitions are on (what the daemon's
/// status reports per GPU): two requests pinned to different devices are each seen on their own
/// device only, an unpinned one only where the timeline shows it ran, and none is seen anywhere
/// once it has ended.
#[test]
fn a_request_reports_the_devices_its_partitions_are_on() {
    let spec = spec(10, 2, fresh_seed());
    let key = spec.proving_key().unwrap();
    let witnesses = partitions(&spec, 8);
    let prover = Prover::new(two_devices(4)).unwrap();
    let mut rng = fresh_rng();
    let pinned = |device: usize, rng: &mut _| {
        let mut request = ProofRequest::new(key.clone(), witnesses.clone(), rng);
        request.devices = Some(vec![device]);
        prover.submit(request).unwrap()
    };
    let anywhere = prover.submit(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
    let handles = [pinned(1, &mut rng), pinned(0, &mut rng), anywhere];
    let mut seen = [BTreeSet::new(), BTreeSet::new(), BTreeSet::new()];
    while handles.iter().any(|h| !h.status().finished) {
        for (handle, seen) in handles.iter().zip(&mut seen) {
            seen.extend(handle.devices_in_use());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    for handle in &handles {
        verify_all(&key, &witnesses, &handle.wait().unwrap());
        assert_eq!(handle.devices_in_use(), Vec::<usize>::new(), "an ended request is still on a device");
    }
    assert_eq!(seen[0], BTreeSet::from([1]), "the request pinned to device 1");
    assert_eq!(seen[1], BTreeSet::from([0]), "the request pinned to device 0");
    assert!(!seen[2].is_empty() && seen[2].is_subset(&devices_used(&prover, handles[2].id())), "{:?}", seen[2]);
}

#[test]
fn a_partition_goes_to_the_device_that_holds_its_key() {
    let spec = spec(7, 2, fresh_seed());
    let key = spec.proving_key().unwrap();
    let prover = Prover::new(two_devices(1)).unwrap();
    prover.preload(&key, Some(&[1])).unwrap();
    assert!(prover.is_resident(&key, 1) && !prover.is_resident(&key, 0));
    let mut rng = fresh_rng();
    for _ in 0..3 {
        let handle = prover.submit(ProofRequest::new(key.clone(), partitions(&spec, 1), &mut rng)).unwrap();
        handle.wait().unwrap();
        assert_eq!(devices_used(&prover, handle.id()), BTreeSet::from([1]), "ignored the resident key");
    }
    // Negative twin: once evicted, placement falls back to the least-loaded device (0 on a tie).
    assert_eq!(prover.evict(&key, None), 1);
    let handle = prover.submit(ProofRequest::new(key.clone(), partitions(&spec, 1), &mut rng)).unwrap();
    handle.wait().unwrap();
    assert_eq!(devices_used(&prover, handle.id()), BTreeSet::from([0]));
}

#[test]
fn higher_priority_is_admitted_before_waiting_lower_priority() {
    let spec = spec(9, 2, fresh_seed());
    let key = spec.proving_key().unwrap();
    let prover = Prover::new(ProverConfig {
        backend: BackendKind::Cpu,
        workers_per_device: 1,
        in_flight: 1,
        memory_reserve_bytes: 0,
        ..ProverConfig::default()
    })
    .unwrap();
    let mut rng = fresh_rng();
    let batch = prover.submit(ProofRequest::new(key.clone(), partitions(&spec, 10), &mut rng)).unwrap();
    while batch.status().proved == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut urgent = ProofRequest::new(key.clone(), partitions(&spec, 1), &mut rng);
    urgent.priority = Priority::Critical;
    let urgent = prover.submit(urgent).unwrap();
    urgent.wait().unwrap();
    let proved_before = batch.status().proved;
    assert!(proved_before <= 4, "the critical request waited behind {proved_before} normal partitions");
    batch.wait().unwrap();
    // Negative twin: a low-priority request submitted during a batch waits for all of it.
    let batch = prover.submit(ProofRequest::new(key.clone(), partitions(&spec, 4), &mut rng)).unwrap();
    let mut late = ProofRequest::new(key, partitions(&spec, 1), &mut rng);
    late.priority = Priority::Low;
    let late = prover.submit(late).unwrap();
    late.wait().unwrap();
    assert_eq!(batch.status().proved, 4, "a low-priority request overtook normal work");
    prover.shutdown(Shutdown::Drain);
}

#[test]
fn least_recently_used_keys_are_evicted_under_budget_pressure() {
    let first_spec = spec(8, 2, fresh_seed());
    let second_spec = spec(8, 3, fresh_seed());
    let first = first_spec.proving_key().unwrap();
    let second = second_spec.proving_key().unwrap();
    let plan = snarkpipe::plan::partition_plan_bytes(
        &snarkpipe::backend::cpu::CpuDevice::new(0, 0),
        &first_spec.witness(0).unwrap().shape(),
        8,
    );
    // Room for one key and one partition, not for two keys.
    let device_bytes = first.device_bytes().max(second.device_bytes()) + plan + plan / 4;
    let prover = Prover::new(ProverConfig {
        backend: BackendKind::Cpu,
        cpu_device_bytes: device_bytes,
        in_flight: 1,
        memory_reserve_bytes: 0,
        ..ProverConfig::default()
    })
    .unwrap();
    let mut rng = fresh_rng();
    for round in 0..2 {
        for (key, spec) in [(&first, &first_spec), (&second, &second_spec)] {
            let witnesses = partitions(spec, 2);
            let proofs = prover.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
            verify_all(key, &witnesses, &proofs);
            assert!(prover.is_resident(key, 0), "round {round}: the key in use is not resident");
            assert_eq!(prover.residency()[0].0, 1, "round {round}: two keys resident beyond the budget");
        }
    }
    let report = &prover.budget_reports().unwrap()[0];
    assert!(report.peak_bytes <= report.capacity_bytes);
}

#[test]
fn a_failing_device_loses_no_work() {
    let spec = spec(7, 2, fresh_seed());
    let key = spec.proving_key().unwrap();
    let witnesses = partitions(&spec, 12);
    let injected = FaultInjection { devices: Some(vec![1]), ..FaultInjection::at_rate(1.0, fresh_seed()) };
    let prover = Prover::with_fault_injection(ProverConfig { retries: 3, ..two_devices(4) }, injected).unwrap();
    let mut rng = fresh_rng();
    let proofs = prover.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
    verify_all(&key, &witnesses, &proofs);
    assert!(prover.faults().injected() > 0, "device 1 never failed");
    assert_nothing_held(&prover, After::Shutdown);
}
