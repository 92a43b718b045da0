//! `snarkpipe serve --preload` on a device barely larger than the key (the CPU model under
//! `--device-memory`): the daemon that would have hung behind its own preloaded key proves,
//! and a cap below what a partition needs is refused at once, naming the bytes.

mod filecoin;
mod serve_harness;

use serve_harness::*;
use snarkpipe::backend::cpu::CpuDevice;
use snarkpipe::backend::BackendKind;
use snarkpipe::daemon::pb;
use snarkpipe::filecoin::{FilecoinProver, ProofKind};
use snarkpipe::plan::partition_plan_bytes;
use snarkpipe::prover::{Prover, ProverConfig};

/// The Winning PoSt 2 KiB key's device bytes and one partition's plan on the CPU model.
fn winning_post_key_and_plan() -> (u64, u64) {
    let prover = Prover::new(ProverConfig { backend: BackendKind::Cpu, ..ProverConfig::default() }).unwrap();
    let engine = FilecoinProver::with_params_dir(&prover, &filecoin::params_dir()).unwrap();
    let key = engine.load_key(ProofKind::WinningPost, 2048).unwrap();
    let (shape, log_n) = key.planning_shape();
    (key.device_bytes(), partition_plan_bytes(&CpuDevice::new(0, 0), &shape, log_n))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preloaded_key_that_fills_the_capped_device_still_proves() {
    let fixture = tokio::task::block_in_place(|| Fixture::of(ProofKind::WinningPost));
    let (key_bytes, plan) = tokio::task::block_in_place(winning_post_key_and_plan);
    let cap = (key_bytes + plan / 2).to_string();
    let dir = tempfile::tempdir().unwrap();
    let daemon = tokio::task::block_in_place(|| {
        Daemon::start(&dir.path().join("d.sock"), &["--preload", "winning-post-2k", "--device-memory", &cap])
    });
    let mut client = daemon.client().await;
    // A bound far above a 2 KiB Winning PoSt on two cores; a hang ends as a timeout.
    let request = pb::ProveRequest { submit: Some(fixture.submit("beside-its-key")), timeout_ms: 10 * 60 * 1000 };
    let result = client.prove(request).await.unwrap().into_inner();
    fixture.check_proof(&result);
    daemon.signal("TERM");
    let (exit, _) = tokio::task::block_in_place(|| daemon.wait());
    assert!(exit.success());

    // The twin below every plan: the same proof is refused with the bytes it lacks, and the
    // daemon goes on serving.
    let small = (plan / 2).to_string();
    let daemon =
        tokio::task::block_in_place(|| Daemon::start(&dir.path().join("s.sock"), &["--device-memory", &small]));
    let mut client = daemon.client().await;
    let request = pb::ProveRequest { submit: Some(fixture.submit("too-small")), timeout_ms: 10 * 60 * 1000 };
    let result = client.prove(request).await.unwrap().into_inner();
    assert_eq!(result.state, pb::JobState::Failed as i32, "{result:?}");
    assert!(result.error.contains("bytes short"), "{}", result.error);
    assert!(client.get_status(pb::GetStatusRequest {}).await.is_ok(), "the daemon stopped serving");
}
