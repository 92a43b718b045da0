//! Failure isolation under injected faults (issue 5): every fault site fails only its own
//! partition with an error naming the stage and the cause, everything the partition held comes
//! back, panicking actors are replaced, retries rescue faulted partitions, and the soak run of
//! the issue (`bench --inject-faults 0.1 --seed 7`, 300 partitions) loses nothing and never
//! cascades, through the library and through the real binary.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use blstrs::{Bls12, Scalar};
use clap::Parser;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::cpu::CpuDevice;
use snarkpipe::backend::{BackendKind, Device, DeviceBuffer, DeviceInfo, DeviceStream, HostRange, PinOutcome};
use snarkpipe::bench::{self, BenchArgs, BenchReport};
use snarkpipe::circuit::Witness;
use snarkpipe::groth16;
use snarkpipe::memory::PinnedRegistry;
use snarkpipe::params::ProvingKey;
use snarkpipe::prover::{FaultInjection, FaultScope, ProofRequest, Prover, ProverConfig};
use snarkpipe::synthetic::{SyntheticSpec, WitnessProfile};
use snarkpipe::timeline::TimelineRecorder;
use snarkpipe::{Error, Stage};

mod common;
use common::{assert_nothing_held, bytes, fresh_rng, fresh_seed, partitions, spec, wait_each_within, After};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn prover(faults: Option<(f64, u64)>, retries: usize) -> Prover {
    let config = ProverConfig {
        backend: BackendKind::Cpu,
        workers_per_device: 2,
        in_flight: 4,
        memory_reserve_bytes: 0,
        retries,
        ..ProverConfig::default()
    };
    let injected = faults.map(|(rate, seed)| FaultInjection::at_rate(rate, seed)).unwrap_or_default();
    Prover::with_fault_injection(config, injected).unwrap()
}

/// Checks every successful proof against the reference prover and the verifier (with a
/// negative twin), and returns how many there were.
fn check_proofs(
    key: &ProvingKey,
    witnesses: &[Arc<Witness>],
    r: &[Scalar],
    s: &[Scalar],
    outcomes: &[Result<Proof<Bls12>, Error>],
) -> usize {
    let pvk = key.prepared_vk();
    let mut ok = 0;
    for (i, outcome) in outcomes.iter().enumerate() {
        let Ok(proof) = outcome else { continue };
        let reference = groth16::prove(key, &witnesses[i], r[i], s[i]).unwrap();
        assert_eq!(bytes(proof), bytes(&reference), "partition {i}: a surviving proof differs from the reference");
        assert!(groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap(), "partition {i} does not verify");
        let mut wrong = witnesses[i].public_inputs().to_vec();
        wrong[0] += Scalar::from(1u64);
        assert!(!groth16::verify(&pvk, proof, &wrong).unwrap(), "partition {i} verifies for the wrong inputs");
        ok += 1;
    }
    ok
}

/// A fault-free request on a fresh prover proves, equals the reference and verifies.
fn fresh_prover_proves(spec: &SyntheticSpec, key: &Arc<ProvingKey>) {
    let prover = prover(None, 0);
    let witnesses = partitions(spec, 2);
    let mut rng = fresh_rng();
    let request = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
    let (r, s) = (request.r.clone(), request.s.clone());
    let outcomes = wait_each_within(&prover.submit(request).unwrap(), Duration::from_secs(120));
    assert!(outcomes.iter().all(|o| o.is_ok()), "a fault-free prover failed: {outcomes:?}");
    assert_eq!(check_proofs(key, &witnesses, &r, &s, &outcomes), 2);
    assert_eq!(prover.faults().injected(), 0);
    assert_nothing_held(&prover, After::Shutdown);
}

/// The fault sites, as their names appear in injected errors and in `injected_by_site`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Site {
    Allocation,
    Pin,
    CopyToDevice,
    CopyToHost,
    KernelLaunch,
    KernelCompletion,
    ActorPanic,
}

impl Site {
    fn name(self) -> &'static str {
        match self {
            Site::Allocation => "Allocation",
            Site::Pin => "Pin",
            Site::CopyToDevice => "CopyToDevice",
            Site::CopyToHost => "CopyToHost",
            Site::KernelLaunch => "KernelLaunch",
            Site::KernelCompletion => "KernelCompletion",
            Site::ActorPanic => "ActorPanic",
        }
    }

    /// The stages whose error may report this site's fault.
    fn stages(self) -> &'static [Stage] {
        match self {
            // The key's buffers are allocated at admission, the partition's at htod.
            Site::Allocation => &[Stage::Admission, Stage::Htod],
            Site::Pin => &[Stage::Pin],
            // A partition's own copy fails at htod; a failed key upload fails the partitions
            // sharing that key where they check the key (after the device work).
            Site::CopyToDevice => &[Stage::Htod, Stage::Ntt, Stage::Msm, Stage::Dtoh, Stage::Assemble],
            Site::CopyToHost => &[Stage::Dtoh],
            // The htod stage launches the kernel that selects the queries' scalars.
            Site::KernelLaunch => &[Stage::Htod, Stage::Ntt, Stage::Msm],
            // The failure lands in the partition's failure slot and is reported downstream.
            Site::KernelCompletion => &[Stage::Htod, Stage::Ntt, Stage::Msm, Stage::Dtoh, Stage::Assemble],
            Site::ActorPanic => &Stage::ALL,
        }
    }

    /// The site an error names, if it is an injected fault.
    fn of(err: &Error) -> Option<Site> {
        match err.root_cause() {
            Error::Panicked { message, .. } if message.contains("injected panic") => Some(Site::ActorPanic),
            Error::Injected(message) => [
                Site::Allocation,
                Site::Pin,
                Site::CopyToDevice,
                Site::CopyToHost,
                Site::KernelLaunch,
                Site::KernelCompletion,
            ]
            .into_iter()
            .find(|site| message.ends_with(&format!("({})", site.name()))),
            _ => None,
        }
    }
}

/// Checks one failed partition's error: it is `Error::Stage` for partition `index`, injected,
/// names a known site, and a stage where that site can fail. Returns the site and stage.
fn check_failure(index: usize, err: &Error) -> (Site, Stage) {
    let Error::Stage { partition, stage, cause } = err else { panic!("partition {index}: not a stage error: {err:?}") };
    assert_eq!(*partition, index, "the error names partition {partition}, but partition {index} failed: {err}");
    assert!(err.is_injected(), "partition {index} failed without an injected fault (a cascade): {err}");
    let site = Site::of(err).unwrap_or_else(|| panic!("partition {index}: the cause names no fault site: {err}"));
    assert!(site.stages().contains(stage), "partition {index}: {site:?} reported by stage {stage}: {err}");
    if let Error::Panicked { stage: panicked, message } = cause.as_ref() {
        assert_eq!(panicked, stage, "panic reported by another stage: {err}");
        assert!(message.contains(&format!("the {stage} actor")), "panic message names another actor: {message}");
    }
    let shown = err.to_string();
    assert!(
        shown.contains(&format!("partition {index}")) && shown.contains(&format!("stage {stage}")),
        "message: {shown}"
    );
    (site, *stage)
}

/// What one faulty run saw.
struct FaultyRun {
    failures: Vec<(usize, Site, Stage)>,
    proved: usize,
    by_site: BTreeMap<String, u64>,
}

/// Proves `count` partitions on a prover injecting at `rate`, checks every outcome and that
/// everything came back, and reports what failed where.
fn faulty_run(spec: &SyntheticSpec, key: &Arc<ProvingKey>, count: usize, rate: f64, seed: u64) -> FaultyRun {
    let prover = prover(Some((rate, seed)), 0);
    let witnesses = partitions(spec, count);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let request = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
    let (r, s) = (request.r.clone(), request.s.clone());
    let handle = prover.submit(request).unwrap();
    let outcomes = wait_each_within(&handle, Duration::from_secs(300));
    let attempts = handle.attempts();
    let failures: Vec<_> = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| o.as_ref().err().map(|e| (i, e)))
        .map(|(i, e)| {
            let (site, stage) = check_failure(i, e);
            // Exactly: a fault went into this partition's own work, not anyone's.
            let own = FaultScope { request: handle.id(), partition: i, attempt: attempts[i] };
            assert!(
                prover.faults().injected_into(own),
                "partition {i} failed with no fault in its own work (a cascade): {e}"
            );
            (i, site, stage)
        })
        .collect();
    let proved = check_proofs(key, &witnesses, &r, &s, &outcomes);
    assert_eq!(proved + failures.len(), count);
    let by_site = prover.faults().injected_by_site();
    assert!(prover.faults().injected() > 0 || failures.is_empty());
    assert_nothing_held(&prover, After::Shutdown);
    FaultyRun { failures, proved, by_site }
}

/// Runs faulty provers (every site rolling at 1.0/25) until `site` failed a partition, checks
/// that run, and then that a fresh prover proves. Up to 40 runs: a site late in the pipeline
/// (the copy to the host) is reached only by the partitions no earlier fault stopped.
fn site_fails_only_its_partition(site: Site) {
    let spec = SyntheticSpec { profile: WitnessProfile::Random, ..spec(5, 3, fresh_seed()) };
    let key = spec.proving_key().unwrap();
    for attempt in 0..40 {
        let seed = fresh_seed();
        let run = faulty_run(&spec, &key, 24, 1.0, seed);
        let hits: Vec<_> = run.failures.iter().filter(|(_, s, _)| *s == site).collect();
        eprintln!(
            "attempt {attempt}: {} proved, {} failed, {} by {site:?} at {:?}; injected {:?}",
            run.proved,
            run.failures.len(),
            hits.len(),
            hits.iter().map(|(_, _, stage)| *stage).collect::<Vec<_>>(),
            run.by_site
        );
        // A run in which no partition proved cannot show containment: at this rate most
        // partitions meet some fault, and a failed upload of the shared key fails every
        // partition sharing it (by design, see the test below). Such a run is tried again.
        // faulty_run has checked that every failure is its own partition's injected fault.
        if !hits.is_empty() && run.proved > 0 {
            fresh_prover_proves(&spec, &key);
            return;
        }
    }
    panic!("no {site:?} fault failed a partition in 40 runs");
}

// ---------------------------------------------------------------------------------------------
// Per site
// ---------------------------------------------------------------------------------------------

#[test]
fn an_allocation_fault_fails_only_its_partition() {
    site_fails_only_its_partition(Site::Allocation);
}

#[test]
fn a_pinning_fault_fails_only_its_partition() {
    site_fails_only_its_partition(Site::Pin);
}

#[test]
fn a_host_to_device_copy_fault_fails_only_its_partition() {
    site_fails_only_its_partition(Site::CopyToDevice);
}

#[test]
fn a_device_to_host_copy_fault_fails_only_its_partition() {
    site_fails_only_its_partition(Site::CopyToHost);
}

#[test]
fn a_kernel_launch_fault_fails_only_its_partition() {
    site_fails_only_its_partition(Site::KernelLaunch);
}

#[test]
fn a_kernel_completion_fault_fails_only_its_partition() {
    site_fails_only_its_partition(Site::KernelCompletion);
}

#[test]
fn a_panic_in_an_actor_fails_only_its_partition() {
    site_fails_only_its_partition(Site::ActorPanic);
}

#[test]
fn a_failed_key_upload_fails_no_sharer() {
    // The key is uploaded once by the first partition through htod; partitions admitted
    // meanwhile share it. When that upload fails, it is the uploader's failure alone: the
    // sharers go round again without spending an attempt (retries are off here) and prove.
    // So no run fails more partitions at a copy than copy faults were injected. When sharers
    // failed with the uploader's injected cause, runs did (see `tests/recovery.rs` for the
    // armed, exact version).
    let spec = SyntheticSpec { profile: WitnessProfile::Random, ..spec(5, 3, fresh_seed()) };
    let key = spec.proving_key().unwrap();
    for attempt in 0..8 {
        let run = faulty_run(&spec, &key, 12, 1.0, fresh_seed());
        let copy_failures = run.failures.iter().filter(|(_, site, _)| *site == Site::CopyToDevice).count() as u64;
        let copy_faults = run.by_site.get("CopyToDevice").copied().unwrap_or(0);
        assert!(
            copy_failures <= copy_faults,
            "attempt {attempt}: {copy_faults} copy faults failed {copy_failures} partitions"
        );
    }
}

#[test]
fn without_faults_nothing_is_injected_and_everything_proves() {
    // The negative twin of the per-site tests: the same run without an injector.
    let spec = SyntheticSpec { profile: WitnessProfile::Random, ..spec(5, 3, fresh_seed()) };
    let key = spec.proving_key().unwrap();
    let prover = prover(None, 0);
    let witnesses = partitions(&spec, 24);
    let mut rng = fresh_rng();
    let request = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
    let (r, s) = (request.r.clone(), request.s.clone());
    let outcomes = wait_each_within(&prover.submit(request).unwrap(), Duration::from_secs(300));
    assert_eq!(check_proofs(&key, &witnesses, &r, &s, &outcomes), 24, "{outcomes:?}");
    assert_eq!(prover.faults().injected(), 0);
    assert!(prover.faults().injected_by_site().is_empty());
    assert_nothing_held(&prover, After::Shutdown);
}

// ---------------------------------------------------------------------------------------------
// "Already registered"
// ---------------------------------------------------------------------------------------------

/// A CPU device on which some host ranges are already page-locked by someone else: pinning
/// them answers "already registered", and unpinning one we did not pin is an error.
struct ForeignPins {
    inner: CpuDevice,
    foreign: Vec<HostRange>,
    unpinned_foreign: AtomicUsize,
}

impl Device for ForeignPins {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }
    fn allocated_bytes(&self) -> u64 {
        self.inner.allocated_bytes()
    }
    fn free_bytes(&self) -> Option<u64> {
        self.inner.free_bytes()
    }
    fn allocate(&self, bytes: u64) -> snarkpipe::Result<DeviceBuffer> {
        self.inner.allocate(bytes)
    }
    fn pin_host(&self, range: HostRange) -> snarkpipe::Result<PinOutcome> {
        if self.foreign.contains(&range) {
            return Ok(PinOutcome::AlreadyPinned);
        }
        self.inner.pin_host(range)
    }
    fn unpin_host(&self, range: HostRange) -> snarkpipe::Result<()> {
        if self.foreign.contains(&range) {
            self.unpinned_foreign.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.unpin_host(range)
    }
    fn new_stream(&self, name: &str, timeline: TimelineRecorder) -> snarkpipe::Result<Arc<dyn DeviceStream>> {
        self.inner.new_stream(name, timeline)
    }
    fn workspace_bytes(&self, log_n: u32, max_msm_len: usize, msm_pass_points: usize) -> u64 {
        self.inner.workspace_bytes(log_n, max_msm_len, msm_pass_points)
    }
    fn min_msm_pass_points(&self) -> usize {
        self.inner.min_msm_pass_points()
    }
}

#[test]
fn an_already_registered_range_is_state_and_is_never_unpinned_by_us() {
    let foreign_buf = Arc::new(vec![0u8; 4096]);
    let own_buf = Arc::new(vec![0u8; 4096]);
    let foreign = HostRange::of(foreign_buf.as_slice());
    let device = Arc::new(ForeignPins {
        inner: CpuDevice::new(0, 1 << 20),
        foreign: vec![foreign],
        unpinned_foreign: AtomicUsize::new(0),
    });
    let registry = PinnedRegistry::new(device.clone());

    let first = registry.pin_owned(foreign_buf.clone()).expect("already registered is not a failure");
    let second = registry.pin_owned(foreign_buf).expect("a second lease of the same range");
    let mine = registry.pin_owned(own_buf).unwrap();
    assert_eq!(registry.pinned_ranges(), 2);
    assert_eq!(registry.pinned_bytes(), 8192);
    assert_eq!(device.inner.pinned_ranges(), 1, "only our own range is page-locked by us");
    drop(first);
    drop(second);
    drop(mine);
    assert_eq!(registry.pinned_ranges(), 0);
    assert_eq!(device.unpinned_foreign.load(Ordering::SeqCst), 0, "a range someone else pinned was unpinned by us");
    // Negative twin: our own range was unpinned when its last lease went.
    assert_eq!(device.inner.pinned_ranges(), 0, "our own range was never unpinned");
}

#[test]
fn already_registered_answers_do_not_fail_partitions() {
    let spec = SyntheticSpec { profile: WitnessProfile::Random, ..spec(5, 3, fresh_seed()) };
    let key = spec.proving_key().unwrap();
    let mut seen = 0;
    for attempt in 0..12 {
        let run = faulty_run(&spec, &key, 24, 1.0, fresh_seed());
        let already = run.by_site.get("PinAlreadyRegistered").copied().unwrap_or(0);
        eprintln!(
            "attempt {attempt}: {already} already-registered answers, {} failed, {} proved",
            run.failures.len(),
            run.proved
        );
        // faulty_run has checked that every failure names the site that caused it; none can
        // name "already registered", which is no error at all. A run where every partition
        // met some other fault shows nothing about the answer, and is not counted.
        if run.proved == 0 {
            continue;
        }
        seen += already;
        if seen >= 2 {
            fresh_prover_proves(&spec, &key);
            return;
        }
    }
    panic!("no already-registered answer was injected in 12 runs");
}

// ---------------------------------------------------------------------------------------------
// Panics, retries, several partitions
// ---------------------------------------------------------------------------------------------

#[test]
fn panicking_actors_are_replaced_and_the_pools_keep_working() {
    let spec = SyntheticSpec { profile: WitnessProfile::Random, ..spec(5, 3, fresh_seed()) };
    let key = spec.proving_key().unwrap();
    let seed = fresh_seed();
    let prover = prover(Some((1.0, seed)), 0);
    let witnesses = partitions(&spec, 24);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let pvk = key.prepared_vk();
    let mut panics: BTreeMap<Stage, usize> = BTreeMap::new();
    let enough = |panics: &BTreeMap<Stage, usize>| {
        // More panics than a pool has threads, in every pool: a pool that lost its threads
        // would hang the next wave.
        Stage::ALL.iter().all(|stage| {
            let threads = if matches!(stage, Stage::Ntt | Stage::Msm | Stage::Assemble) { 2 } else { 1 };
            panics.get(stage).copied().unwrap_or(0) > threads
        })
    };
    let mut waves = 0;
    while !enough(&panics) {
        assert!(waves < 40, "too few panics injected after {waves} waves: {panics:?}");
        waves += 1;
        let outcomes = wait_each_within(
            &prover.submit(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap(),
            Duration::from_secs(120),
        );
        for (i, outcome) in outcomes.iter().enumerate() {
            match outcome {
                Err(err) => {
                    if let Error::Panicked { stage, .. } = err.root_cause() {
                        *panics.entry(*stage).or_default() += 1;
                    }
                    check_failure(i, err);
                }
                Ok(proof) => assert!(groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap()),
            }
        }
    }
    eprintln!("{waves} waves, panics per stage: {panics:?}");
    // The prover still answers (no lock poisoned) and later partitions still prove on it.
    assert_nothing_held(&prover, After::Requests);
    let mut proved = 0;
    for _ in 0..10 {
        let handle = prover.submit(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
        let outcomes = wait_each_within(&handle, Duration::from_secs(120));
        for (i, outcome) in outcomes.iter().enumerate() {
            if let Ok(proof) = outcome {
                assert!(groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap());
                proved += 1;
            }
        }
        if proved >= 10 {
            break;
        }
    }
    assert!(proved >= 10, "only {proved} partitions proved after the panics");
    assert_nothing_held(&prover, After::Shutdown);
}

/// The lines of the `.rs` files under `dir` (every level) that use a lock which poisons.
fn poisoning_locks(dir: &std::path::Path) -> Vec<String> {
    let mut offenders = Vec::new();
    for path in common::rust_files(dir) {
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("std::sync::Mutex")
                || code.contains("std::sync::RwLock")
                || (code.contains("use std::sync::{") && (code.contains("Mutex") || code.contains("RwLock")))
                || code.contains("lock().unwrap()")
            {
                offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    offenders
}

#[test]
fn the_prover_uses_no_poisoning_locks() {
    // A panic while a std lock is held poisons it, and every later partition fails: the
    // failure mode of bellperson's GPU lock. The crate uses parking_lot only, backends included.
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let offenders = poisoning_locks(&src);
    assert!(offenders.is_empty(), "std locks poison on panic; use parking_lot:\n{}", offenders.join("\n"));
    // The negative twin: the scan sees a std lock in a nested folder.
    let nested = std::env::temp_dir().join(format!("snarkpipe-lock-scan-{}", std::process::id()));
    std::fs::create_dir_all(nested.join("backend/cuda")).unwrap();
    std::fs::write(nested.join("backend/cuda/x.rs"), "use std::sync::{Arc, Mutex};\n").unwrap();
    let found = poisoning_locks(&nested);
    std::fs::remove_dir_all(&nested).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
}

#[test]
fn retries_rescue_faulted_partitions_and_every_proof_verifies() {
    let spec = SyntheticSpec { profile: WitnessProfile::Random, ..spec(5, 3, fresh_seed()) };
    let key = spec.proving_key().unwrap();
    let witnesses = partitions(&spec, 40);
    let seed = fresh_seed();
    let run = |retries: usize| {
        let prover = prover(Some((0.3, seed)), retries);
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let request = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
        let (r, s) = (request.r.clone(), request.s.clone());
        let outcomes = wait_each_within(&prover.submit(request).unwrap(), Duration::from_secs(300));
        for (i, outcome) in outcomes.iter().enumerate() {
            if let Err(err) = outcome {
                check_failure(i, err);
            }
        }
        let proved = check_proofs(&key, &witnesses, &r, &s, &outcomes);
        let injected = prover.faults().injected();
        assert_nothing_held(&prover, After::Shutdown);
        (proved, injected)
    };
    let (without, injected_without) = run(0);
    let (with, injected_with) = run(3);
    eprintln!(
        "retries 0: {without}/40 proved ({injected_without} injected); retries 3: {with}/40 ({injected_with} injected)"
    );
    assert!(without < 40, "no partition failed without retries: the twin proves nothing");
    assert!(with > without, "retries rescued nothing: {with} vs {without}");
    assert!(with >= 36, "retries 3 at rate 0.3 should leave few failures, got {with}/40");
}

#[test]
fn a_request_reports_which_partition_failed_and_keeps_the_others() {
    let spec = SyntheticSpec { profile: WitnessProfile::Random, ..spec(5, 3, fresh_seed()) };
    let key = spec.proving_key().unwrap();
    let witnesses = partitions(&spec, 8);
    for attempt in 0..20 {
        let seed = fresh_seed();
        let prover = prover(Some((1.0, seed)), 0);
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let request = ProofRequest::new(key.clone(), witnesses.clone(), &mut rng);
        let (r, s) = (request.r.clone(), request.s.clone());
        let handle = prover.submit(request).unwrap();
        let each = wait_each_within(&handle, Duration::from_secs(120));
        let failed: Vec<usize> = (0..each.len()).filter(|&i| each[i].is_err()).collect();
        eprintln!("attempt {attempt}: failed partitions {failed:?}");
        if failed.is_empty() || failed.len() == each.len() {
            assert_nothing_held(&prover, After::Shutdown);
            continue;
        }
        // wait() reports the first failed partition by its index in the request.
        let err = handle.wait().unwrap_err();
        match &err {
            Error::Stage { partition, .. } => {
                assert_eq!(*partition, failed[0], "wait() names the wrong partition: {err}")
            }
            other => panic!("wait() lost the partition: {other:?}"),
        }
        for &i in &failed {
            check_failure(i, each[i].as_ref().unwrap_err());
        }
        let status = handle.status();
        assert_eq!((status.failed, status.proved, status.finished), (failed.len(), each.len() - failed.len(), true));
        // The others' proofs are the reference's and verify.
        assert_eq!(check_proofs(&key, &witnesses, &r, &s, &each), each.len() - failed.len());
        assert_nothing_held(&prover, After::Shutdown);
        return;
    }
    panic!("no run had both failed and proved partitions");
}

// ---------------------------------------------------------------------------------------------
// Soak
// ---------------------------------------------------------------------------------------------

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

/// The soak command line, with `partitions` partitions.
fn soak_args(partitions: usize) -> Vec<String> {
    format!("bench --backend cpu --partitions {partitions} --log-n 10 --workers 2 --inject-faults 0.1 --seed 7 --json")
        .split(' ')
        .map(String::from)
        .collect()
}

/// What the issue demands of a soak report, on its JSON form (the library's and the binary's).
fn check_soak(report: &serde_json::Value, partitions: u64) {
    let u = |path: &str| {
        report.pointer(path).and_then(|v| v.as_u64()).unwrap_or_else(|| panic!("{path} missing in {report}"))
    };
    assert_eq!(u("/partitions"), partitions);
    assert_eq!(report["proofs_checked"], true);
    assert!(u("/faults/injected") > 0, "no fault was injected");
    assert!(u("/faults/failed_partitions") > 0, "no partition failed: the soak tested nothing");
    assert_eq!(u("/faults/cascaded"), 0, "failures no injected fault explains: {}", report["errors"]);
    assert_eq!(u("/verified"), partitions - u("/faults/failed_partitions"));
    assert_eq!(u("/failed"), u("/faults/failed_partitions"));
    assert_eq!(u("/budget/leaked_bytes"), 0);
    assert_eq!(report["budget"]["back_to_capacity"], true);
    assert_eq!(u("/pinned/leaked_bytes"), 0);
    let after = report["device_bytes_after"].as_array().expect("device_bytes_after");
    assert!(!after.is_empty() && after.iter().all(|b| b.as_u64() == Some(0)), "device memory left: {after:?}");
    for error in report["errors"].as_array().unwrap() {
        let error = error.as_str().unwrap();
        assert!(error.contains("injected"), "a failure that is not an injected fault: {error}");
    }
}

fn check_soak_report(report: &BenchReport) {
    assert!(report.faults.injected > 0);
    assert_eq!(report.faults.cascaded, 0, "{:?}", report.errors);
    assert_eq!(report.verified, report.partitions - report.faults.failed_partitions);
    assert_eq!(report.budget.leaked_bytes, 0);
    assert!(report.budget.back_to_capacity);
    assert_eq!(report.pinned.leaked_bytes, 0);
    assert!(report.device_bytes_after.iter().all(|&b| b == 0));
    check_soak(&serde_json::to_value(report).unwrap(), report.partitions as u64);
}

/// The soak, exactly, through the library.
#[test]
fn soak_300_partitions_at_a_tenth_faulted_loses_nothing_and_never_cascades() {
    let started = Instant::now();
    let mut argv = vec!["x".to_string()];
    argv.extend(soak_args(300).into_iter().skip(1));
    let cli = Cli::parse_from(argv);
    assert_eq!((cli.args.partitions, cli.args.log_n, cli.args.workers, cli.args.seed), (300, 10, 2, 7));
    let report = bench::run(&cli.args).unwrap();
    eprintln!(
        "soak: {:.1} s, {} verified, {} failed, faults {:?}",
        started.elapsed().as_secs_f64(),
        report.verified,
        report.faults.failed_partitions,
        report.faults.by_site
    );
    check_soak_report(&report);
}

/// The soak through the real binary and its JSON (about 25 s on two cores, like the
/// library run).
#[test]
fn soak_through_the_binary_reports_the_same() {
    let partitions = 300u64;
    let started = Instant::now();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(soak_args(partitions as usize))
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "snarkpipe bench failed: {}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {stdout}"));
    eprintln!("binary soak of {partitions}: {:.1} s, faults {}", started.elapsed().as_secs_f64(), report["faults"]);
    check_soak(&report, partitions);
}
