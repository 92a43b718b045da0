//! The soak: a prover that runs for months inside a node, compressed into one run. Partitions
//! at 2^10 with three keys of different shapes, all four priorities, requests cancelled
//! mid-flight, keys preloaded and evicted in between, on two CPU devices with faults injected
//! into a share of their operations and every proof verified before it leaves the prover.
//!
//! It checks what a node needs of a prover that never restarts: its memory stops growing once
//! it is warm (resident memory after the first partitions against the end), no handle waits for
//! ever, nothing is held once the requests are done, every proof verifies with bellperson's
//! verifier (and not for a changed input), and every failure is a cancel or has an injected
//! fault at its root.
//!
//! `SNARKPIPE_SOAK_PARTITIONS` sets the number of partitions: CI's default below, 10000 for the
//! full soak.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::{verify_proof, PreparedVerifyingKey};
use blstrs::{Bls12, Scalar};
use cap::Cap;
use ff::Field;
use mimalloc::MiMalloc;
use rand::Rng;
use snarkpipe::backend::BackendKind;
use snarkpipe::circuit::Witness;
use snarkpipe::params::ProvingKey;
use snarkpipe::prover::{FaultInjection, FaultScope, Priority, ProofHandle, ProofRequest, Prover, ProverConfig};
use snarkpipe::synthetic::{SyntheticSpec, WitnessProfile};
use snarkpipe::Error;

/// The `snarkpipe` binary's allocator (src/main.rs), counted: the live bytes tell a leak from
/// pages the allocator keeps.
#[global_allocator]
static ALLOCATOR: Cap<MiMalloc> = Cap::new(MiMalloc, usize::MAX);

/// mimalloc returns a freed span to the OS only after this many milliseconds, and only when the
/// thread that owns it next calls into the allocator, so an idle worker's freed spans stay
/// resident until it works again: readings of an idle prover then differ by what each thread
/// last freed (10 to 16 MiB, a CI-sized run failed the bound once on that alone). The soak
/// runs in a child process where that delay is 0, so that resident memory is what the prover
/// and the allocator's fragmentation hold, which is what must not grow.
const PURGE_DELAY_VARIABLE: &str = "MIMALLOC_PURGE_DELAY";

mod common;
use common::{assert_nothing_held, fresh_rng, fresh_seed, spec, wait_each_within, After};

/// Partitions when `SNARKPIPE_SOAK_PARTITIONS` is not set: a CI run of a few minutes on two
/// cores, with enough partitions past the first measurement for a leak to show.
const CI_PARTITIONS: usize = 1_500;
/// Resident memory is first measured after this many partitions, once the prover is warm: its
/// pools are filled, its keys have been resident and its timeline ring is full.
const WARM_PARTITIONS: usize = 1_000;
/// The most the resident memory may grow from the first measurement to the end.
const MAX_RSS_GROWTH: f64 = 0.05;
/// The most the heap's live bytes may grow over the same span: what the prover holds when
/// idle (its keys, pools and full timeline ring) is the same at both ends, so growth is a leak.
const MAX_LIVE_GROWTH: f64 = 0.05;
/// Share of device operations that fail.
const FAULT_RATE: f64 = 0.05;
/// Requests submitted and not yet collected, so that priorities compete in the queue.
const OUTSTANDING: usize = 4;
/// A request that takes longer than this to end hangs.
const HANG_BOUND: Duration = Duration::from_secs(300);
/// Spans the prover's timeline keeps. The ring is bounded (tests/robustness.rs checks it); one
/// this small is full well before the first measurement, so that the measurements compare a
/// warm prover with itself rather than with a ring still filling.
const TIMELINE_SPANS: usize = 4_096;
/// Partitions between two readings of the resident memory along the way (printed).
const CHECKPOINT_EVERY: usize = 1_000;

const PRIORITIES: [Priority; 4] = [Priority::Low, Priority::Normal, Priority::High, Priority::Critical];

/// The process's resident memory (`VmRSS` in /proc/self/status), in bytes.
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
    let kib: u64 = line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse().unwrap();
    kib * 1024
}

/// Bytes allocated and not yet freed, as the global allocator counted them.
fn live_heap_bytes() -> u64 {
    ALLOCATOR.allocated() as u64
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// One of the three keys, and the index of its next fresh witness.
struct Shape {
    spec: SyntheticSpec,
    key: Arc<ProvingKey>,
    pvk: PreparedVerifyingKey<Bls12>,
    next_witness: usize,
}

/// A request submitted and not yet collected.
struct Submitted {
    handle: ProofHandle,
    shape: usize,
    witnesses: Vec<Arc<Witness>>,
    cancelled: bool,
}

/// What the soak counted.
#[derive(Default)]
struct Tally {
    partitions: usize,
    proved: usize,
    cancelled: usize,
    /// Failures with an injected fault (or a wrong result it caused) at their root.
    failed_injected: usize,
    /// Failures that are neither a cancel nor an injected fault's: each a bug.
    unexplained: Vec<String>,
    requests: usize,
    by_priority: [usize; 4],
    preloads: usize,
    evictions: usize,
}

impl Tally {
    /// Waits for `request` within the hang bound and checks each partition's outcome.
    fn collect(&mut self, request: Submitted, shapes: &[Shape], faults: &snarkpipe::backend::faults::FaultInjector) {
        let outcomes = wait_each_within(&request.handle, HANG_BOUND);
        let attempts = request.handle.attempts();
        let shape = &shapes[request.shape];
        let mut twin_checked = false;
        for (index, (outcome, witness)) in outcomes.iter().zip(&request.witnesses).enumerate() {
            // Exactly: a failure counts as the partition's own only when a fault went into the
            // work of its last attempt; any other is a cascade.
            let own = faults.injected_into(FaultScope {
                request: request.handle.id(),
                partition: index,
                attempt: attempts[index],
            });
            self.partitions += 1;
            match outcome {
                Ok(proof) => {
                    let inputs = witness.public_inputs();
                    assert!(verify_proof(&shape.pvk, proof, inputs).unwrap(), "a returned proof does not verify");
                    if !twin_checked {
                        let mut wrong = inputs.to_vec();
                        wrong[0] += Scalar::ONE;
                        assert!(!verify_proof(&shape.pvk, proof, &wrong).unwrap(), "verifies for a changed input");
                        twin_checked = true;
                    }
                    self.proved += 1;
                }
                Err(err) if matches!(err.root_cause(), Error::Cancelled) => {
                    assert!(request.cancelled, "a request nobody cancelled failed as cancelled: {err}");
                    self.cancelled += 1;
                }
                Err(_) if own => {
                    self.failed_injected += 1;
                }
                Err(err) => self.unexplained.push(err.to_string()),
            }
        }
    }
}

#[test]
fn a_prover_that_never_restarts_keeps_its_memory_its_proofs_and_its_failures_in_bounds() {
    // mimalloc reads its options once, when the process starts: the soak itself runs in a
    // child that starts with the purge delay at 0, and this test passes when the child does.
    if std::env::var(PURGE_DELAY_VARIABLE).as_deref() != Ok("0") {
        const NAME: &str = "a_prover_that_never_restarts_keeps_its_memory_its_proofs_and_its_failures_in_bounds";
        let child = std::process::Command::new(std::env::current_exe().expect("the test executable"))
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(PURGE_DELAY_VARIABLE, "0")
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("the soak's child process starts");
        let summary = String::from_utf8_lossy(&child.stdout);
        print!("{summary}");
        assert!(child.status.success(), "the soak failed in its child process ({}); its output is above", child.status);
        // A filter that matched nothing would also succeed.
        assert!(summary.contains("1 passed"), "the child process ran no soak:\n{summary}");
        return;
    }
    let partitions: usize = std::env::var("SNARKPIPE_SOAK_PARTITIONS")
        .map(|v| v.parse().expect("SNARKPIPE_SOAK_PARTITIONS is a number of partitions"))
        .unwrap_or(CI_PARTITIONS);
    assert!(partitions > WARM_PARTITIONS, "a soak of {partitions} partitions ends before it is warm");
    let config = ProverConfig {
        backend: BackendKind::Cpu,
        cpu_devices: 2,
        workers_per_device: 2,
        in_flight: 4,
        memory_reserve_bytes: 0,
        verify_proofs: true,
        retries: 2,
        timeline_spans: TIMELINE_SPANS,
        ..ProverConfig::default()
    };
    let fault_seed = fresh_seed();
    let prover = Prover::with_fault_injection(config, FaultInjection::at_rate(FAULT_RATE, fault_seed)).unwrap();
    let mut rng = fresh_rng();
    // Three shapes: one, four and nine public inputs (the second with random values, not bits).
    let specs = [
        spec(10, 1, fresh_seed()),
        SyntheticSpec { profile: WitnessProfile::Random, ..spec(10, 4, fresh_seed()) },
        spec(10, 9, fresh_seed()),
    ];
    let mut shapes: Vec<Shape> = specs
        .iter()
        .map(|spec| {
            let key = spec.proving_key().unwrap();
            Shape { spec: *spec, pvk: key.prepared_vk(), key, next_witness: 0 }
        })
        .collect();
    let shape_set: std::collections::HashSet<_> = specs.iter().map(|s| s.witness(0).unwrap().shape()).collect();
    assert_eq!(shape_set.len(), 3, "the three keys must have different shapes");

    let started = Instant::now();
    let mut tally = Tally::default();
    let mut outstanding: VecDeque<Submitted> = VecDeque::new();
    let mut submitted = 0;
    let mut warm: Option<(u64, u64, f64)> = None;
    let mut checkpoints: Vec<(usize, u64, u64)> = Vec::new();
    while submitted < partitions {
        let count = rng.gen_range(1..=6).min(partitions - submitted);
        let which = rng.gen_range(0..shapes.len());
        let shape = &mut shapes[which];
        // Fresh witnesses every time: a witness the prover kept would show in its memory.
        let witnesses: Vec<Arc<Witness>> =
            (0..count).map(|i| Arc::new(shape.spec.witness(shape.next_witness + i).unwrap())).collect();
        shape.next_witness += count;
        let priority = rng.gen_range(0..PRIORITIES.len());
        let request = ProofRequest {
            priority: PRIORITIES[priority],
            ..ProofRequest::new(shape.key.clone(), witnesses.clone(), &mut rng)
        };
        let handle = prover.submit(request).unwrap();
        submitted += count;
        tally.requests += 1;
        tally.by_priority[priority] += 1;
        let mut request = Submitted { handle, shape: which, witnesses, cancelled: false };
        // Some requests are cancelled at once, some while they are in flight.
        if rng.gen_bool(0.04) {
            request.handle.cancel();
            request.cancelled = true;
        }
        outstanding.push_back(request);
        if rng.gen_bool(0.04) {
            if let Some(running) = outstanding.iter_mut().find(|r| !r.cancelled) {
                running.handle.cancel();
                running.cancelled = true;
            }
        }
        // Now and then a node pins a key it expects, or frees a device of one.
        if rng.gen_bool(0.05) {
            let key = &shapes[rng.gen_range(0..shapes.len())].key;
            if rng.gen_bool(0.5) {
                prover.preload(key, None).unwrap();
                tally.preloads += 1;
            } else {
                prover.evict(key, None);
                tally.evictions += 1;
            }
        }
        while outstanding.len() >= OUTSTANDING {
            tally.collect(outstanding.pop_front().unwrap(), &shapes, prover.faults());
        }
        // The first measurement, on an idle prover as the last one is.
        if warm.is_none() && submitted >= WARM_PARTITIONS {
            outstanding.drain(..).for_each(|r| tally.collect(r, &shapes, prover.faults()));
            warm = Some((resident_bytes(), live_heap_bytes(), started.elapsed().as_secs_f64()));
        }
        // The resident memory along the way, so that a leak shows as a slope and not only in
        // the end's figure.
        if submitted / CHECKPOINT_EVERY > checkpoints.len() {
            checkpoints.push((submitted, resident_bytes(), live_heap_bytes()));
        }
    }
    outstanding.drain(..).for_each(|r| tally.collect(r, &shapes, prover.faults()));
    let wall = started.elapsed().as_secs_f64();
    let (end_bytes, end_live) = (resident_bytes(), live_heap_bytes());
    let (warm_bytes, warm_live, warm_at) = warm.expect("measured once warm");
    let growth = (end_bytes as f64 - warm_bytes as f64) / warm_bytes as f64;
    let live_growth = (end_live as f64 - warm_live as f64) / warm_live as f64;
    let injected = prover.faults().injected();

    eprintln!("soak ─────────────────────────────────────────────");
    eprintln!("  partitions        {} in {} requests", tally.partitions, tally.requests);
    eprintln!("  proved            {} (each verified by bellperson)", tally.proved);
    eprintln!("  failed            {} (an injected fault at the root)", tally.failed_injected);
    eprintln!("  cancelled         {}", tally.cancelled);
    eprintln!("  unexplained       {}", tally.unexplained.len());
    eprintln!(
        "  injected faults   {injected} at a rate of {FAULT_RATE}, seed {fault_seed}: {:?}",
        prover.faults().injected_by_site()
    );
    eprintln!(
        "  priorities        low {}, normal {}, high {}, critical {} requests",
        tally.by_priority[0], tally.by_priority[1], tally.by_priority[2], tally.by_priority[3]
    );
    eprintln!("  preloads/evicts   {} / {}", tally.preloads, tally.evictions);
    eprintln!("  RSS after {WARM_PARTITIONS}   {:.1} MiB (at {warm_at:.1} s)", mib(warm_bytes));
    eprintln!("  RSS at the end    {:.1} MiB", mib(end_bytes));
    let along: Vec<String> = checkpoints.iter().map(|(n, b, _)| format!("{n}: {:.1}", mib(*b))).collect();
    eprintln!("  RSS along the way {} (MiB, busy)", along.join(", "));
    eprintln!(
        "  RSS growth        {:+.2} % (at most {:.0} %), {:+.1} MiB",
        growth * 100.0,
        MAX_RSS_GROWTH * 100.0,
        mib(end_bytes) - mib(warm_bytes)
    );
    eprintln!(
        "  live heap         {:.1} MiB after {WARM_PARTITIONS}, {:.1} MiB at the end",
        mib(warm_live),
        mib(end_live)
    );
    let along: Vec<String> = checkpoints.iter().map(|(n, _, l)| format!("{n}: {:.1}", mib(*l))).collect();
    eprintln!("  live along the way {} (MiB, busy)", along.join(", "));
    eprintln!("  live heap growth  {:+.2} % (at most {:.0} %)", live_growth * 100.0, MAX_LIVE_GROWTH * 100.0);
    eprintln!("  wall time         {wall:.1} s, {:.1} partitions/s", tally.partitions as f64 / wall);
    eprintln!("──────────────────────────────────────────────────");

    assert_eq!(tally.partitions, partitions, "every partition submitted was collected");
    assert!(
        tally.unexplained.is_empty(),
        "failures that are neither cancelled nor injected:\n{}",
        tally.unexplained.join("\n")
    );
    // Retries rescue most faulted partitions, so few or none fail: that faults were injected is
    // what shows the failure paths ran.
    assert!(injected > 0, "no fault was injected: the soak tested no failure");
    assert!(tally.cancelled > 0, "no partition was cancelled: the soak tested no cancel");
    assert!(tally.by_priority.iter().all(|&n| n > 0), "a priority was never used: {:?}", tally.by_priority);
    assert!(
        live_growth < MAX_LIVE_GROWTH,
        "the live heap grew {:.2} % after the first {WARM_PARTITIONS} partitions: a leak",
        live_growth * 100.0
    );
    assert!(
        growth < MAX_RSS_GROWTH,
        "resident memory grew {:.2} % after the first {WARM_PARTITIONS} partitions",
        growth * 100.0
    );
    assert_nothing_held(&prover, After::Requests);
}
