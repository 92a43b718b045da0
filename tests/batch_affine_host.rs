//! The batch-affine bucket phase's kernels (kernels/msm/batch_affine.cuh) and the production
//! fix-up, run on the host by `kernels/check/batch_affine_host.cpp` the way
//! `src/backend/cuda/affine_buckets.rs` launches them, on G1 and G2, every bucket against a
//! plain XYZZ sum: slices from one entry to all of them, identities, doublings, P + (−P), a
//! later pass, the refusal of a slice too sparse for its buffers, and two twins that must
//! differ. Needs no GPU, only a host C++ compiler (`CXX`, or `g++`); a fresh seed every run.

use std::process::Command;

use snarkpipe::backend::cuda::AFFINE_FINISH_POINTS;

#[test]
fn the_batch_affine_kernels_sum_every_bucket_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("batch_affine_host");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/check/batch_affine_host.cpp");
    let built = Command::new(&cxx)
        .args(["-O2", "-std=c++17", "-o"])
        .arg(&exe)
        .arg(source)
        .output()
        .unwrap_or_else(|e| panic!("running {cxx} (set CXX to a C++17 compiler): {e}"));
    assert!(built.status.success(), "{cxx} failed: {}", String::from_utf8_lossy(&built.stderr));
    let seed = rand::random::<u32>().to_string();
    let run = Command::new(&exe).args([seed.as_str(), &AFFINE_FINISH_POINTS.to_string()]).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    println!("{stdout}");
    assert!(run.status.success() && stdout.contains("PASS (0 failures)"), "seed {seed}:\n{stdout}");
    // both curves ran their cases
    assert!(stdout.contains("G1: 6 slicings") && stdout.contains("G2: 6 slicings"), "{stdout}");
}
