//! Helpers shared by the integration tests; each test file that needs them says `mod common;`.
//! Each file uses a different subset, so some go unused in any one of them.
#![allow(dead_code)]

use std::sync::mpsc;
use std::time::Duration;

use bellperson::groth16::Proof;
use blstrs::Bls12;
use snarkpipe::prover::ProofHandle;
use snarkpipe::Error;

/// A seed for this run's random inputs, printed so that a failure can be replayed.
pub fn fresh_seed() -> u64 {
    let seed = rand::random();
    eprintln!("seed {seed}");
    seed
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

/// Whether a CUDA GPU is usable here; says why a GPU test skips when not.
pub fn have_gpu() -> bool {
    let found = snarkpipe::backend::cuda::cuda_available();
    if !found {
        println!("skipped: no CUDA driver or GPU on this machine");
    }
    found
}
