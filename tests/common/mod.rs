//! Helpers shared by the integration tests; each test file that needs them says `mod common;`.
//! Each file uses a different subset, so some go unused in any one of them.
#![allow(dead_code)]

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use bellperson::groth16::Proof;
use blstrs::Bls12;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use snarkpipe::circuit::Witness;
use snarkpipe::prover::{ProofHandle, Prover, Shutdown};
use snarkpipe::synthetic::{KeyKind, SyntheticSpec, WitnessProfile};
use snarkpipe::Error;

/// A seed for this run's random inputs, printed so that a failure can be replayed.
pub fn fresh_seed() -> u64 {
    let seed = rand::random();
    eprintln!("seed {seed}");
    seed
}

/// A random number generator from a [`fresh_seed`] (printed, so that a failure can be
/// replayed with `ChaCha20Rng::seed_from_u64(seed)`).
pub fn fresh_rng() -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(fresh_seed())
}

/// The synthetic circuit family of `2^log_n` constraints with `num_inputs` public inputs
/// (ONE excluded) and `seed`: bit-heavy witnesses (Filecoin's shape) and a real setup's keys,
/// so that proofs verify. A test that needs another witness profile or key kind says so with
/// `SyntheticSpec { profile: WitnessProfile::Random, ..spec(log_n, num_inputs, seed) }`.
pub fn spec(log_n: u32, num_inputs: usize, seed: u64) -> SyntheticSpec {
    eprintln!("spec 2^{log_n} with {num_inputs} inputs: seed {seed}");
    SyntheticSpec { log_n, num_inputs, profile: WitnessProfile::Bits, keys: KeyKind::Setup, seed }
}

/// The first `n` partitions (witnesses 0..n) of `spec`.
pub fn partitions(spec: &SyntheticSpec, n: usize) -> Vec<Arc<Witness>> {
    (0..n).map(|i| Arc::new(spec.witness(i).unwrap())).collect()
}

/// When [`assert_nothing_held`] looks at a prover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Every request has finished and the prover goes on (it may be shared, or prove again):
    /// nothing is leaked (no budget beyond the resident keys, no page-locked bytes beyond idle
    /// staging buffers and keys, no grant request waiting), the budget holds exactly the
    /// resident keys' bytes, and no budget ever granted more than its capacity. Changes nothing.
    Requests,
    /// [`After::Requests`]' checks; then every key is evicted, and neither the budget nor the
    /// device holds a byte; then the prover is shut down (draining; nothing happens if it was
    /// shut down already), and it holds nothing at all ([`snarkpipe::prover::Held::is_nothing`]:
    /// no budget, no waiting grant, no page-locked byte, no device byte, no resident key).
    Shutdown,
}

/// The one leak check of the tests: what `prover` holds once its requests are done, as
/// [`After`] says. Every failure shows the prover's [`snarkpipe::prover::Held`] snapshot and
/// its budget reports.
pub fn assert_nothing_held(prover: &Prover, after: After) {
    let held = prover.held().expect("the prover reports what it holds");
    let reports = prover.budget_reports().expect("the budgets report");
    let resident_bytes: u64 = prover.residency().iter().map(|(_, bytes)| bytes).sum();
    assert!(!held.leaked(), "leaked after the requests: {held:?}; budgets {reports:?}");
    assert_eq!(
        held.budget_in_use_bytes, resident_bytes,
        "the budget holds other than the resident keys' {resident_bytes} bytes: {held:?}; budgets {reports:?}"
    );
    for report in &reports {
        assert!(report.peak_bytes <= report.capacity_bytes, "a budget granted beyond its capacity: {report:?}");
    }
    if after == After::Requests {
        return;
    }

    prover.evict_all_keys();
    let held = prover.held().expect("the prover reports what it holds");
    assert!(
        held.budget_in_use_bytes == 0 && held.device_bytes == 0 && held.resident_keys == 0 && !held.leaked(),
        "held with every key evicted: {held:?}; budgets {:?}",
        prover.budget_reports()
    );

    prover.shutdown(Shutdown::Drain);
    let held = prover.held().expect("the prover reports what it held when it stopped");
    let reports = prover.budget_reports().expect("the budgets as they stood when the actors stopped");
    assert!(held.is_nothing(), "held after shutdown: {held:?}; budgets {reports:?}");
    for report in &reports {
        assert!(
            report.in_use_bytes == 0 && report.waiting == 0 && report.peak_bytes <= report.capacity_bytes,
            "a budget after shutdown: {report:?}"
        );
    }
}

/// A proof's canonical bytes (bellperson's encoding), for byte-for-byte comparisons.
pub fn bytes(proof: &Proof<Bls12>) -> Vec<u8> {
    let mut out = Vec::new();
    proof.write(&mut out).unwrap();
    out
}

/// `wait_each`, but a pipeline that hangs (a pool that lost its workers, a grant never given
/// back) fails the test instead of blocking it forever.
pub fn wait_each_within(handle: &ProofHandle, limit: Duration) -> Vec<Result<Proof<Bls12>, Error>> {
    let (tx, rx) = mpsc::channel();
    let waiting = handle.clone();
    std::thread::spawn(move || {
        let _ = tx.send(waiting.wait_each());
    });
    rx.recv_timeout(limit).unwrap_or_else(|_| {
        panic!("the request did not finish within {limit:?}: the pipeline hangs ({:?})", handle.status())
    })
}

/// Polls `done` until it holds; a condition that never comes (work that never ends, a token
/// never returned) fails the test after `limit` instead of blocking it forever.
pub fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what} did not happen within {limit:?}: the pipeline hangs");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether a CUDA GPU is usable here; says why a GPU test skips when not.
/// With `SNARKPIPE_REQUIRE_GPU=1` (the device scripts set it) a GPU test that finds no GPU
/// fails instead of passing by skipping.
pub fn have_gpu() -> bool {
    let found = snarkpipe::backend::cuda::cuda_available();
    if !found {
        assert!(
            !gpu_required(),
            "SNARKPIPE_REQUIRE_GPU=1 but no CUDA driver or GPU was found: a GPU test must not pass by skipping"
        );
        println!("skipped: no CUDA driver or GPU on this machine");
    }
    found
}

/// Whether the environment demands a GPU (`SNARKPIPE_REQUIRE_GPU=1`).
pub fn gpu_required() -> bool {
    std::env::var("SNARKPIPE_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Every `.rs` file under `dir`.
pub fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}
