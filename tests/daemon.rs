//! `snarkpipe serve` as a node sees it: the real binary on the CPU backend, on a Unix socket in
//! a temporary directory, driven by the tonic client generated from proto/snarkpipe.proto.
//! Every proof it returns is checked with filecoin-proofs' own verifier, with a tampered twin
//! that must fail.
//!
//! One daemon serves the scenarios that leave it running (`one_daemon_serves_every_scenario`,
//! in sequence, since each judges the daemon's counters and queue); the tests that stop a
//! daemon (SIGTERM, kill -9) start their own.
#![cfg(feature = "filecoin")]

mod filecoin;
mod serve_harness;

use std::process::Command;
use std::time::Instant;

use bytes::{Buf, BufMut};
use serve_harness::*;
use snarkpipe::daemon::pb;
use snarkpipe::filecoin::ProofKind;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{Code, Status};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_daemon_serves_every_scenario() {
    let fixtures: Vec<Fixture> = tokio::task::block_in_place(|| ProofKind::ALL.map(Fixture::of).into_iter().collect());
    let fixture = |kind: ProofKind| fixtures.iter().find(|f| f.kind == kind).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // One job at a time: the PoReps of the priority scenario queue in the daemon, and only
    // the first is proven (a 2 KiB PoRep is minutes on two cores).
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket_in(&dir), &["--concurrent-jobs", "1"]));
    let mut client = daemon.client().await;
    // The mode the sample unit promises: the daemon's group reads and writes, others nothing.
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(socket_in(&dir)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660, "the socket's mode is {mode:o}");
    }

    let started = Instant::now();
    srs_by_name_before_any_proof(&mut client).await;
    bad_input_gets_typed_statuses(&mut client, &daemon, fixture(ProofKind::WindowPost)).await;
    eprintln!("bad input: {:.1} s", started.elapsed().as_secs_f64());
    for kind in [ProofKind::WindowPost, ProofKind::WinningPost, ProofKind::Snap] {
        let started = Instant::now();
        prove_and_verify(&mut client, fixture(kind)).await;
        eprintln!("{kind}: {:.1} s", started.elapsed().as_secs_f64());
    }
    srs_preload_and_evict(&mut client).await;
    // One partition of the deadline: its bytes are what the node merges with the other
    // partitions'; a deadline of one partition verifies as the whole.
    let partition = tokio::task::block_in_place(Fixture::window_partition);
    let request =
        pb::ProveRequest { submit: Some(partition.submit("prove-window-post-partition-0")), timeout_ms: AWAIT_MS };
    partition.check_proof(&client.prove(request).await.expect("Prove").into_inner());
    same_key_twice_is_one_job(&mut client, fixture(ProofKind::WindowPost), fixture(ProofKind::WinningPost)).await;
    let started = Instant::now();
    cancel_mid_flight(&mut client, fixture(ProofKind::Porep), fixture(ProofKind::WindowPost)).await;
    eprintln!("cancel: {:.1} s", started.elapsed().as_secs_f64());
    let started = Instant::now();
    critical_winning_post_overtakes_porep_batch(
        &mut client,
        fixture(ProofKind::Porep),
        fixture(ProofKind::WinningPost),
    )
    .await;
    eprintln!("priority and PoRep: {:.1} s", started.elapsed().as_secs_f64());
    let started = Instant::now();
    concurrent_clients(&daemon, fixture(ProofKind::WindowPost), 200).await;
    eprintln!("load: {:.1} s", started.elapsed().as_secs_f64());
    metrics_agree_with_status(&mut client).await;
    assert_idle_and_clean(&status(&mut client).await);

    // A clean stop: SIGTERM with nothing running exits 0 and cancels nothing.
    daemon.signal("TERM");
    let log = daemon.log();
    let (exit, stdout) = tokio::task::block_in_place(|| daemon.wait());
    assert!(exit.success(), "exit {exit:?}: {log}");
    assert!(stdout.iter().any(|l| l.contains("cancelled []")), "{stdout:?}");
}

async fn prove_and_verify(client: &mut Client, fixture: &Fixture) {
    let request =
        pb::ProveRequest { submit: Some(fixture.submit(&format!("prove-{}", fixture.kind))), timeout_ms: AWAIT_MS };
    let result = client.prove(request).await.expect("Prove").into_inner();
    assert_eq!(result.kind, pb_kind(fixture.kind) as i32);
    fixture.check_proof(&result);
}

/// Before any proof, PreloadSRS loads a kind's key by name from the parameter directory and
/// makes it hot; a size whose parameters the directory lacks is refused, naming the file.
async fn srs_by_name_before_any_proof(client: &mut Client) {
    let absent = pb::SrsRequest { kind: pb::ProofKind::WindowPost as i32, sector_size: 32 << 30 };
    let refused = client.preload_srs(absent).await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(refused.message().contains(".params") && refused.message().contains("32 GiB"), "{refused:?}");
    let request = pb::SrsRequest { kind: pb::ProofKind::WindowPost as i32, sector_size: 2048 };
    let preloaded = client.preload_srs(request).await.unwrap().into_inner();
    assert_eq!((preloaded.tier.as_str(), preloaded.devices.as_slice()), ("hot", &[0u32][..]), "{preloaded:?}");
    let ready = status(client).await;
    assert_eq!((ready.proofs_completed, ready.keys.len()), (0, 1), "{ready:?}");
}

/// After a Window PoSt proved with the key preloaded by name, its key can be evicted from the
/// device and preloaded again; and the proof used the preloaded key: each kind's parameters
/// were read once, into one key.
async fn srs_preload_and_evict(client: &mut Client) {
    let request = || pb::SrsRequest { kind: pb::ProofKind::WindowPost as i32, sector_size: 2048 };
    let evicted = client.evict_srs(request()).await.unwrap().into_inner();
    assert_eq!((evicted.tier.as_str(), evicted.devices.len()), ("warm", 0), "{evicted:?}");
    let preloaded = client.preload_srs(request()).await.unwrap().into_inner();
    assert_eq!((preloaded.tier.as_str(), preloaded.devices.as_slice()), ("hot", &[0u32][..]), "{preloaded:?}");
    let keys = status(client).await.keys;
    assert!(keys.iter().any(|k| k.tier == "hot"), "{keys:?}");
    // Window PoSt, Winning PoSt and SnapDeals proved so far: three keys, each loaded once.
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(keys.iter().all(|k| k.loads == 1), "{keys:?}");
}

async fn same_key_twice_is_one_job(client: &mut Client, window: &Fixture, winning: &Fixture) {
    let before = status(client).await;
    let first = submit(client, window.submit("twice")).await;
    let second = submit(client, window.submit("twice")).await;
    assert_eq!(first.job_id, second.job_id);
    assert!(!first.existing && second.existing, "{first:?} {second:?}");
    // The same key for another request is refused, not answered with the first one's proof.
    let reused = client.submit_proof(winning.submit("twice")).await.unwrap_err();
    assert_eq!(reused.code(), Code::AlreadyExists, "{reused:?}");
    assert!(reused.message().contains(&first.job_id), "{reused:?}");
    window.check_proof(&await_proof(client, &first.job_id).await);
    // A resubmit after the end still finds the job, with its proof.
    let again = submit(client, window.submit("twice")).await;
    assert_eq!((again.job_id.as_str(), again.state), (first.job_id.as_str(), pb::JobState::Succeeded as i32));
    let after = status(client).await;
    assert_eq!(after.proofs_completed, before.proofs_completed + 1, "one job, one proof");
}

/// A PoRep cancelled once it runs ends cancelled, releases what it held, and the next job
/// proves.
async fn cancel_mid_flight(client: &mut Client, porep: &Fixture, window: &Fixture) {
    let job = submit(client, porep.submit("cancel-me")).await.job_id;
    let request = pb::AwaitProofRequest { job_id: job.clone(), timeout_ms: AWAIT_MS, until_started: true };
    let running = client.await_proof(request).await.unwrap().into_inner();
    assert_eq!(running.state, pb::JobState::Running as i32, "{running:?}");
    // Once its partition is on the (one) device, the status names the job on that GPU.
    let deadline = Instant::now() + std::time::Duration::from_millis(AWAIT_MS);
    loop {
        let gpus = status(client).await.gpus;
        assert_eq!(gpus.len(), 1, "{gpus:?}");
        if gpus[0].current_jobs == [job.clone()] {
            break;
        }
        assert!(gpus[0].current_jobs.is_empty(), "another job on the GPU: {gpus:?}");
        assert!(Instant::now() < deadline, "the running PoRep never showed on the GPU: {gpus:?}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let cancelled = client.cancel_proof(pb::CancelProofRequest { job_id: job.clone() }).await.unwrap().into_inner();
    let stopping = [pb::JobState::Cancelled as i32, pb::JobState::Running as i32];
    assert!(stopping.contains(&cancelled.state), "{cancelled:?}");
    let result = await_proof(client, &job).await;
    assert_eq!(result.state, pb::JobState::Cancelled as i32);
    assert!(result.error.contains("CancelProof") && result.proof.is_empty(), "{result:?}");
    assert_idle_and_clean(&status(client).await);
    // A node retries with the same key: a job that was cancelled (or failed) holds no proof,
    // so the retry is a new job, not the old one's end again. (Cancelled in turn: a PoRep
    // proven would be minutes here.)
    let retry = submit(client, porep.submit("cancel-me")).await;
    assert!(!retry.existing && retry.job_id != job, "the retry got the cancelled job back: {retry:?}");
    assert!(retry.state != pb::JobState::Cancelled as i32, "{retry:?}");
    client.cancel_proof(pb::CancelProofRequest { job_id: retry.job_id.clone() }).await.unwrap();
    assert_eq!(await_proof(client, &retry.job_id).await.state, pb::JobState::Cancelled as i32);
    assert_idle_and_clean(&status(client).await);
    prove_and_verify(client, window).await;
}

/// Three PoReps, then a Winning PoSt (critical by its kind): the PoSt starts before every
/// PoRep still queued when it came, and the first PoRep proves and verifies.
async fn critical_winning_post_overtakes_porep_batch(client: &mut Client, porep: &Fixture, winning: &Fixture) {
    let mut batch = Vec::new();
    for i in 0..3 {
        batch.push(submit(client, porep.submit(&format!("batch-{i}"))).await.job_id);
    }
    let post_id = submit(client, winning.submit("overtaker")).await.job_id;
    let post = await_proof(client, &post_id).await;
    winning.check_proof(&post);
    // The PoSt's proof is in: the rest of the batch is not needed past its first job.
    for id in &batch[1..] {
        client.cancel_proof(pb::CancelProofRequest { job_id: id.clone() }).await.unwrap();
    }
    let mut overtaken = 0;
    for id in &batch {
        let result = await_proof(client, id).await;
        let queued_at_post = result.started_at_ms == 0 || result.started_at_ms >= post.submitted_at_ms;
        if queued_at_post {
            overtaken += 1;
            assert!(
                result.started_at_ms == 0 || result.started_at_ms >= post.started_at_ms,
                "{id} was queued when the PoSt came and started before it: {result:?} {post:?}"
            );
        }
        if id == &batch[0] {
            porep.check_proof(&result);
        }
    }
    assert!(overtaken >= 1, "with one worker, a later PoRep must have been queued when the PoSt came");
}

async fn bad_input_gets_typed_statuses(client: &mut Client, daemon: &Daemon, window: &Fixture) {
    let refused = |request: pb::SubmitProofRequest| {
        let mut client = client.clone();
        async move { client.submit_proof(request).await.expect_err("a bad request was accepted") }
    };
    let check = |status: Status, code: Code, words: &str| {
        assert_eq!(status.code(), code, "{status:?}");
        assert!(status.message().contains(words), "{:?} does not say {words:?}", status.message());
    };
    check(
        refused(pb::SubmitProofRequest { kind: 99, ..window.submit("bad") }).await,
        Code::InvalidArgument,
        "unknown proof kind 99",
    );
    check(refused(pb::SubmitProofRequest { kind: 0, ..window.submit("bad") }).await, Code::InvalidArgument, "not set");
    check(refused(window.submit("")).await, Code::InvalidArgument, "idempotency_key");
    check(
        refused(pb::SubmitProofRequest { vanilla: b"{\"kind\": \"window-post\", ".to_vec(), ..window.submit("bad") })
            .await,
        Code::InvalidArgument,
        "malformed",
    );
    check(
        refused(pb::SubmitProofRequest { vanilla: vec![b' '; MAX_VANILLA + 1], ..window.submit("bad") }).await,
        Code::ResourceExhausted,
        "--max-vanilla-bytes",
    );
    check(
        refused(pb::SubmitProofRequest { sector_size: 8 << 20, ..window.submit("bad") }).await,
        Code::InvalidArgument,
        "2 KiB sector",
    );
    check(
        refused(pb::SubmitProofRequest { sector_size: 4096, ..window.submit("bad") }).await,
        Code::InvalidArgument,
        "4 KiB",
    );
    check(
        refused(pb::SubmitProofRequest { kind: pb::ProofKind::WinningPost as i32, ..window.submit("bad") }).await,
        Code::InvalidArgument,
        "is a window-post",
    );
    let unknown = client
        .await_proof(pb::AwaitProofRequest { job_id: "nope".into(), timeout_ms: 1, until_started: false })
        .await
        .unwrap_err();
    check(unknown, Code::NotFound, "no job");
    // Bytes that are not a SubmitProofRequest at all (field 1 with wire type 7).
    let malformed = raw_call(daemon, "/snarkpipe.v1.ProvingService/SubmitProof", vec![0x0f, 0x01]).await.unwrap_err();
    assert!(matches!(malformed.code(), Code::Internal | Code::InvalidArgument), "{malformed:?}");
    assert!(malformed.message().contains("decode"), "{malformed:?}");
    // None of it reached the queue, and the daemon goes on.
    let after = status(client).await;
    assert_eq!((after.proofs_failed, after.queues.unwrap().queued), (0, 0), "{after:?}");
}

/// Sends `body` as the raw message of a unary call.
async fn raw_call(daemon: &Daemon, path: &'static str, body: Vec<u8>) -> Result<Vec<u8>, Status> {
    #[derive(Clone, Copy, Default)]
    struct Raw;
    impl Codec for Raw {
        type Encode = Vec<u8>;
        type Decode = Vec<u8>;
        type Encoder = Raw;
        type Decoder = Raw;
        fn encoder(&mut self) -> Raw {
            Raw
        }
        fn decoder(&mut self) -> Raw {
            Raw
        }
    }
    impl Encoder for Raw {
        type Item = Vec<u8>;
        type Error = Status;
        fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
            dst.put_slice(&item);
            Ok(())
        }
    }
    impl Decoder for Raw {
        type Item = Vec<u8>;
        type Error = Status;
        fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
            Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
        }
    }
    let channel = channel(daemon.socket.clone()).await;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.map_err(|e| Status::unavailable(e.to_string()))?;
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(path);
    grpc.unary(tonic::Request::new(body), path, Raw).await.map(|r| r.into_inner())
}

/// `clients` concurrent clients, each on its own connection, each proving one Window PoSt:
/// every one gets its own verified proof, and the p99 of their waits is printed.
async fn concurrent_clients(daemon: &Daemon, window: &Fixture, clients: usize) {
    let before = status(&mut daemon.client().await).await;
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            let request = pb::ProveRequest { submit: Some(window.submit(&format!("load-{i}"))), timeout_ms: AWAIT_MS };
            let socket = daemon.socket.clone();
            async move {
                let mut client = connect(socket).await;
                let started = Instant::now();
                let result = client.prove(request).await;
                (started.elapsed(), result)
            }
        })
        .map(tokio::spawn)
        .collect();
    let mut waits = Vec::new();
    let mut ids = std::collections::BTreeSet::new();
    for task in tasks {
        let (waited, result) = task.await.unwrap();
        let result = result.expect("a load request failed").into_inner();
        window.check_proof(&result);
        ids.insert(result.job_id);
        waits.push(waited);
    }
    assert_eq!(ids.len(), clients, "every client got a job of its own");
    let after = status(&mut daemon.client().await).await;
    assert_eq!(after.proofs_completed - before.proofs_completed, clients as u64, "no request lost or doubled");
    waits.sort();
    let at = |q: f64| waits[((waits.len() as f64 * q).ceil() as usize).clamp(1, waits.len()) - 1].as_secs_f64();
    println!(
        "load: {clients} concurrent clients, Window PoSt 2 KiB each: await latency p50 {:.2} s, p99 {:.2} s, max {:.2} s",
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

async fn metrics_agree_with_status(client: &mut Client) {
    let text = client.get_metrics(pb::GetMetricsRequest {}).await.unwrap().into_inner().text;
    let status = status(client).await;
    let line = format!("snarkpipe_proofs_total{{outcome=\"succeeded\"}} {}", status.proofs_completed);
    assert!(text.lines().any(|l| l == line), "{line:?} not in:\n{text}");
    assert!(text.contains("# TYPE snarkpipe_jobs_queued gauge"), "{text}");
}

/// SIGTERM while jobs run and wait: the daemon takes no more, finishes the running job within
/// its grace, cancels the queued ones, tells each client which, and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_or_cancels_every_job_and_exits_0() {
    let window = tokio::task::block_in_place(|| Fixture::of(ProofKind::WindowPost));
    let dir = tempfile::tempdir().unwrap();
    let args = ["--concurrent-jobs", "1", "--shutdown-grace-secs", "600"];
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket_in(&dir), &args));
    let mut client = daemon.client().await;
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(submit(&mut client, window.submit(&format!("term-{i}"))).await.job_id);
    }
    let request = pb::AwaitProofRequest { job_id: ids[0].clone(), timeout_ms: AWAIT_MS, until_started: true };
    client.await_proof(request).await.unwrap();
    let waits: Vec<_> = ids
        .iter()
        .map(|id| {
            let (mut client, id) = (client.clone(), id.clone());
            tokio::spawn(async move { await_proof(&mut client, &id).await })
        })
        .collect();
    // On one connection the awaits' streams open before this call's: once it is answered,
    // the daemon has every await in hand and shutdown lets them finish.
    status(&mut client).await;
    daemon.signal("TERM");
    let mut cancelled = Vec::new();
    for wait in waits {
        let result = wait.await.unwrap();
        match pb::JobState::try_from(result.state).unwrap() {
            pb::JobState::Succeeded => window.check_proof(&result),
            pb::JobState::Cancelled => {
                assert!(result.error.contains("shut down"), "{result:?}");
                cancelled.push(result.job_id);
            }
            other => panic!("{} ended {other:?}: {}", result.job_id, result.error),
        }
    }
    let log = daemon.log();
    let (exit, stdout) = tokio::task::block_in_place(|| daemon.wait());
    assert!(exit.success(), "exit {exit:?}: {log}");
    assert!(!cancelled.is_empty() && cancelled.len() < ids.len(), "{cancelled:?}");
    // The report names what the shutdown cancelled, exactly what the clients were told.
    let report = stdout.iter().find(|l| l.contains("shut down")).expect("the shutdown report");
    assert!(report.contains(&format!("cancelled {cancelled:?}")), "{report} vs {cancelled:?}");
}

/// kill -9 while a job runs: the awaiting client gets an error, not silence; a daemon
/// restarted on the same socket says the old job is lost, and clears what the killed one left
/// on disk: its socket, and the matrices temporaries of a writer killed mid-write (planted
/// here under the killed PID), while one of a live process stays (the twin). A third daemon
/// on the live socket is refused and leaves the socket alone (the socket's twin). (A fresh
/// process holds no pinned memory whatever came before it: the kernel frees a killed one's,
/// so that is not checked here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_then_restart_comes_back_clean() {
    let window = tokio::task::block_in_place(|| Fixture::of(ProofKind::WindowPost));
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_in(&dir);
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket, &["--concurrent-jobs", "1"]));
    let mut client = daemon.client().await;
    let lost = submit(&mut client, window.submit("lost")).await.job_id;
    let request = pb::AwaitProofRequest { job_id: lost.clone(), timeout_ms: AWAIT_MS, until_started: true };
    client.await_proof(request).await.unwrap();
    let waiting = {
        let (mut client, lost) = (client.clone(), lost.clone());
        tokio::spawn(async move {
            client.await_proof(pb::AwaitProofRequest { job_id: lost, timeout_ms: AWAIT_MS, until_started: false }).await
        })
    };
    status(&mut client).await;
    let killed_pid = daemon.child.id();
    daemon.signal("KILL");
    let (exit, _) = tokio::task::block_in_place(|| daemon.wait());
    assert!(!exit.success());
    let params = filecoin::params_dir();
    let plant = |pid: u32| {
        let path = params.join(format!("kill-9-test-{}.params.snarkpipe-matrices.{pid}.tmp", std::process::id()));
        std::fs::write(&path, b"half a file").unwrap();
        path
    };
    let (stale, live) = (plant(killed_pid), plant(std::process::id()));
    let broken = waiting.await.unwrap().expect_err("an await outlived its daemon");
    assert!(matches!(broken.code(), Code::Unavailable | Code::Unknown | Code::Cancelled), "{broken:?}");

    // The killed daemon's socket file is still there; the new one clears it and binds.
    assert!(socket.exists());
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket, &["--concurrent-jobs", "1"]));
    let mut client = daemon.client().await;
    let fresh = status(&mut client).await;
    assert_idle_and_clean(&fresh);
    assert_eq!((fresh.proofs_completed, fresh.proofs_failed, fresh.keys.len()), (0, 0, 0), "{fresh:?}");
    let (stale_left, live_left) = (stale.exists(), live.exists());
    let _ = std::fs::remove_file(&live);
    assert!(!stale_left, "the killed writer's matrices temporary outlived the restart: {}", stale.display());
    assert!(live_left, "a live process's matrices temporary was removed");
    let refused = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(["serve", "--backend", "cpu", "--listen"])
        .arg(format!("unix:{}", socket.display()))
        .arg("--params-dir")
        .arg(filecoin::params_dir())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("already serves"), "{refused:?}");
    assert!(socket.exists(), "a refused daemon removed the live socket");
    let gone = client
        .await_proof(pb::AwaitProofRequest { job_id: lost.clone(), timeout_ms: 1, until_started: false })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound, "{gone:?}");
    assert!(gone.message().contains("earlier run"), "{gone:?}");
    let again = submit(&mut client, window.submit("lost")).await.job_id;
    let result = await_proof(&mut client, &again).await;
    window.check_proof(&result);
    assert_idle_and_clean(&status(&mut client).await);
}

/// A GPU that breaks for the rest of the process (the fault drill: the first kernel breaks it,
/// and on the CPU model the break outlives recovery, as a sticky CUDA error does). With
/// `--restart-when-broken false` (the negative twin) the job fails with the broken device named
/// and the GPU stays out of service. By default the daemon replaces itself, same PID, and both
/// jobs (the one the GPU failed and the one queued behind it) are proven by the new process
/// under their old ids: a client that reconnects and awaits them gets proofs that
/// filecoin-proofs verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_gpu_restarts_the_daemon_and_no_job_is_lost() {
    let (winning, window) =
        tokio::task::block_in_place(|| (Fixture::of(ProofKind::WinningPost), Fixture::of(ProofKind::WindowPost)));
    let drill = [("SNARKPIPE_DRILL_BREAK_GPU", "1")];
    let one_job = ["--concurrent-jobs", "1"];
    let dir = tempfile::tempdir().unwrap();

    // The twin: no restart, so the job the GPU failed fails, and says why.
    let socket = dir.path().join("twin.sock");
    let twin = tokio::task::block_in_place(|| {
        Daemon::start_with(&socket, &[&one_job[..], &["--restart-when-broken", "false"]].concat(), &drill)
    });
    let mut client = twin.client().await;
    let failed = submit(&mut client, winning.submit("twin")).await.job_id;
    let result = await_proof(&mut client, &failed).await;
    assert_eq!(result.state, pb::JobState::Failed as i32, "{result:?}");
    assert!(result.error.contains("broke") || result.error.contains("out of service"), "{}", result.error);
    let after = status(&mut client).await;
    assert_eq!(after.restarts, 0);
    assert!(after.gpus.iter().any(|g| g.health.starts_with("OutOfService")), "{:?}", after.gpus);
    drop(twin);

    // The restart.
    let socket = socket_in(&dir);
    let daemon = tokio::task::block_in_place(|| Daemon::start_with(&socket, &one_job, &drill));
    let pid = daemon.child.id();
    let mut client = daemon.client().await;
    let before = status(&mut client).await;
    let first = submit(&mut client, winning.submit("first")).await.job_id;
    let second = submit(&mut client, window.submit("second")).await.job_id;
    let awaited = {
        let (mut client, first) = (client.clone(), first.clone());
        tokio::spawn(async move {
            client
                .await_proof(pb::AwaitProofRequest { job_id: first, timeout_ms: AWAIT_MS, until_started: false })
                .await
        })
    };
    // The old process's await ends with the process (it never answers with a failure).
    match awaited.await.unwrap() {
        Err(broken) => {
            assert!(matches!(broken.code(), Code::Unavailable | Code::Unknown | Code::Cancelled), "{broken:?}")
        }
        Ok(answer) => panic!("the old process answered {:?}", answer.into_inner()),
    }
    tokio::task::block_in_place(|| daemon.wait_for_another_ready_line(std::time::Duration::from_secs(300)));
    assert_eq!(daemon.child.id(), pid);
    let mut client = daemon.client().await;
    let after = status(&mut client).await;
    assert_eq!(after.restarts, 1, "{after:?}");
    assert_ne!(after.instance, before.instance, "the same process answered");
    let (first_result, second_result) =
        (await_proof(&mut client, &first).await, await_proof(&mut client, &second).await);
    winning.check_proof(&first_result);
    window.check_proof(&second_result);
    // The idempotency keys came along: resubmitting names the same jobs.
    let again = submit(&mut client, winning.submit("first")).await;
    assert!(again.existing && again.job_id == first, "{again:?}");
    assert!(after.gpus.iter().all(|g| !g.health.starts_with("OutOfService")), "{:?}", after.gpus);
    assert_idle_and_clean(&status(&mut client).await);
    let log = daemon.log();
    assert!(log.contains("restarting the daemon") && log.contains("carried over the restart"), "{log}");
}

/// The service has no authentication: a non-loopback TCP address is refused without the flag.
#[test]
fn a_remote_listen_address_needs_allow_remote() {
    let out = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(["serve", "--listen", "0.0.0.0:0", "--backend", "cpu", "--params-dir"])
        .arg(std::env::temp_dir())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--allow-remote") && stderr.contains("no authentication"), "{stderr}");
}

/// Keys named with `--preload` are loaded and hot before the daemon serves, with no proof; the
/// first proof of the kind uses the preloaded key (no load, no second key). A name that is not
/// one, or one whose parameters the directory lacks, stops the start and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_named_with_preload_is_hot_before_serving() {
    let fixture = tokio::task::block_in_place(|| Fixture::of(ProofKind::WinningPost));
    let dir = tempfile::tempdir().unwrap();
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket_in(&dir), &["--preload", "winning-post-2k"]));
    let mut client = daemon.client().await;
    let ready = status(&mut client).await;
    assert_eq!(ready.proofs_completed, 0, "{ready:?}");
    assert_eq!(ready.keys.iter().map(|k| (k.tier.as_str(), k.loads)).collect::<Vec<_>>(), [("hot", 1)], "{ready:?}");
    let request = pb::ProveRequest { submit: Some(fixture.submit("after-preload")), timeout_ms: AWAIT_MS };
    let result = client.prove(request).await.unwrap().into_inner();
    fixture.check_proof(&result);
    assert_eq!(result.timings.unwrap().key_load, 0.0, "the first proof loaded a key: {result:?}");
    let after = status(&mut client).await;
    assert_eq!(after.keys.iter().map(|k| (k.loads, k.hits > 0)).collect::<Vec<_>>(), [(1, true)], "{after:?}");
    daemon.signal("TERM");
    let (exit, _) = tokio::task::block_in_place(|| daemon.wait());
    assert!(exit.success());

    let refusals = [("porep-32", "KIND-SIZE"), ("porep-3k", "3 KiB"), ("winning-post-32g", "winning-post 32 GiB")];
    for (name, says) in refusals {
        let out = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
            .args(["serve", "--backend", "cpu", "--listen"])
            .arg(format!("unix:{}", dir.path().join("other.sock").display()))
            .arg("--params-dir")
            .arg(filecoin::params_dir())
            .args(["--preload", name])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{name}: {stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"), "{name}");
    }
}

/// A job file given to `--preload-job` is proven before the daemon serves: its key is hot for
/// the first call, and `PreloadSRS` knows the kind. One that does not prove stops the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preload_job_makes_its_key_hot_before_serving() {
    let path = tokio::task::block_in_place(|| filecoin::job(ProofKind::WindowPost, 1));
    let dir = tempfile::tempdir().unwrap();
    let preload = format!("--preload-job={}", path.display());
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket_in(&dir), &[preload.as_str()]));
    let mut client = daemon.client().await;
    let ready = status(&mut client).await;
    assert_eq!(ready.proofs_completed, 1, "{ready:?}");
    assert!(ready.keys.iter().any(|k| k.tier == "hot"), "{ready:?}");
    let request = pb::SrsRequest { kind: pb::ProofKind::WindowPost as i32, sector_size: 2048 };
    assert_eq!(client.preload_srs(request).await.unwrap().into_inner().tier, "hot");
    daemon.signal("TERM");
    let (exit, _) = tokio::task::block_in_place(|| daemon.wait());
    assert!(exit.success());

    // A job file that is not one: the daemon says which and does not serve.
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"kind\": \"window-post\"").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(["serve", "--backend", "cpu", "--listen"])
        .arg(format!("unix:{}", dir.path().join("other.sock").display()))
        .arg("--params-dir")
        .arg(filecoin::params_dir())
        .arg(format!("--preload-job={}", broken.display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("broken.json"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"));
}

/// The restart with a job that does not stop in time: two workers, a 1 s grace, and a PoRep
/// whose key is cold (its first partition synthesized and its parameters read before it has a
/// pipeline request to cancel) while the Winning PoSt beside it breaks the GPU. A client
/// awaits the PoRep with no timeout. The daemon must come back within 60 s: the PoRep is
/// carried with the others even though it still ran, the await ends with the old process, and
/// the new process has both jobs under their old ids. Before the fix, the interrupt of a job
/// without a pipeline request was a flag nobody read, the job was requeued after the carry
/// was taken (neither carried nor ended), and the await held the server's graceful end for
/// ever: the exec never came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_a_job_still_loading_its_key_comes_back_within_a_minute() {
    let (winning, porep) =
        tokio::task::block_in_place(|| (Fixture::of(ProofKind::WinningPost), Fixture::of(ProofKind::Porep)));
    let dir = tempfile::tempdir().unwrap();
    let args = ["--concurrent-jobs", "2", "--shutdown-grace-secs", "1"];
    let daemon = tokio::task::block_in_place(|| {
        Daemon::start_with(&socket_in(&dir), &args, &[("SNARKPIPE_DRILL_BREAK_GPU", "1")])
    });
    let mut client = daemon.client().await;
    let slow = submit(&mut client, porep.submit("slow-cold-key")).await.job_id;
    let breaker = submit(&mut client, winning.submit("breaker")).await.job_id;
    let awaited = {
        let (mut client, slow) = (client.clone(), slow.clone());
        // timeout_ms 0: no timeout at all.
        tokio::spawn(async move {
            client.await_proof(pb::AwaitProofRequest { job_id: slow, timeout_ms: 0, until_started: false }).await
        })
    };
    let restarting = Instant::now();
    tokio::task::block_in_place(|| daemon.wait_for_another_ready_line(std::time::Duration::from_secs(60)));
    eprintln!("back in {:.1} s", restarting.elapsed().as_secs_f64());
    match awaited.await.unwrap() {
        Err(ended) => assert!(matches!(ended.code(), Code::Unavailable | Code::Unknown | Code::Cancelled), "{ended:?}"),
        Ok(answer) => panic!("the old process answered the PoRep's await: {:?}", answer.into_inner()),
    }
    let mut client = daemon.client().await;
    assert_eq!(status(&mut client).await.restarts, 1);
    winning.check_proof(&await_proof(&mut client, &breaker).await);
    // The PoRep came along under its id and key; proving it would take minutes here, so it
    // is cancelled once the new process has it.
    let again = submit(&mut client, porep.submit("slow-cold-key")).await;
    assert!(again.existing && again.job_id == slow, "{again:?}");
    client.cancel_proof(pb::CancelProofRequest { job_id: slow.clone() }).await.unwrap();
    let log = daemon.log();
    assert!(log.contains("carried over the restart"), "{log}");
}

/// SIGTERM while a PoRep's first partition is still synthesized (its key cold), with a 1 s
/// grace and a client awaiting it with no timeout: the daemon exits 0 within its shutdown
/// bound, and what it reports for the job is what the job did: cancelled only if it had ended
/// cancelled by the report, and then the client was told cancelled; still running otherwise,
/// and then the client was told the result is lost. Before the fix the report called a job
/// cancelled that still ran (its end logged after the report).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_job_still_synthesizing_reports_it_as_it_is() {
    let porep = tokio::task::block_in_place(|| Fixture::of(ProofKind::Porep));
    let dir = tempfile::tempdir().unwrap();
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket_in(&dir), &["--shutdown-grace-secs", "1"]));
    let mut client = daemon.client().await;
    let job = submit(&mut client, porep.submit("synthesizing")).await.job_id;
    let request = pb::AwaitProofRequest { job_id: job.clone(), timeout_ms: AWAIT_MS, until_started: true };
    client.await_proof(request).await.unwrap();
    let awaited = {
        let (mut client, job) = (client.clone(), job.clone());
        tokio::spawn(async move {
            client.await_proof(pb::AwaitProofRequest { job_id: job, timeout_ms: 0, until_started: false }).await
        })
    };
    status(&mut client).await;
    let stopping = Instant::now();
    daemon.signal("TERM");
    let log_path = daemon.log.clone();
    let (exit, stdout) = tokio::task::block_in_place(|| daemon.wait());
    let log = std::fs::read_to_string(log_path).unwrap_or_default();
    let took = stopping.elapsed();
    let bound = snarkpipe::daemon::serve::shutdown_bound(std::time::Duration::from_secs(1));
    eprintln!("stopped in {:.1} s (bound {bound:?})", took.as_secs_f64());
    assert!(exit.success(), "exit {exit:?}: {log}");
    assert!(took < bound, "the shutdown took {took:?}, past its bound {bound:?}: {log}");
    let report = stdout.iter().find(|l| l.contains("shut down")).expect("the shutdown report").clone();
    let answer = awaited.await.unwrap();
    let reported_cancelled = report.contains(&format!("cancelled [\"{job}\"]"));
    let reported_running = report.contains(&format!("still running [\"{job}\"]"));
    assert!(reported_cancelled != reported_running, "{report}");
    // The report comes after the job's end when it calls it cancelled.
    let at = |what: &str| log.find(what);
    if reported_cancelled {
        let result = answer.expect("a cancelled job's await failed").into_inner();
        assert_eq!(result.state, pb::JobState::Cancelled as i32, "{result:?}");
        let ended = at("failed").or(at("cancelled")).expect("the job's end in the log");
        assert!(ended < at("jobs at shutdown").unwrap(), "reported cancelled before it ended: {log}");
    } else {
        let lost = answer.expect_err("an await of a job the shutdown gave up on was answered");
        assert_eq!(lost.code(), Code::Unavailable, "{lost:?}");
        assert!(lost.message().contains("lost"), "{lost:?}");
    }
}

/// The Winning PoSt 2 KiB key's device bytes and one partition's plan on the CPU model.
fn winning_post_key_and_plan() -> (u64, u64) {
    use snarkpipe::backend::cpu::CpuDevice;
    use snarkpipe::backend::BackendKind;
    use snarkpipe::filecoin::FilecoinProver;
    use snarkpipe::plan::partition_plan_bytes;
    use snarkpipe::prover::{Prover, ProverConfig};
    let prover = Prover::new(ProverConfig { backend: BackendKind::Cpu, ..ProverConfig::default() }).unwrap();
    let engine = FilecoinProver::with_params_dir(&prover, &filecoin::params_dir()).unwrap();
    let key = engine.load_key(ProofKind::WinningPost, 2048).unwrap();
    let (shape, log_n) = key.planning_shape();
    (key.device_bytes(), partition_plan_bytes(&CpuDevice::new(0, 0), &shape, log_n))
}

/// `--preload` on a device barely larger than the key (the CPU model under `--device-memory`):
/// the daemon that would have hung behind its own preloaded key proves, and a cap below what a
/// partition needs fails the job at once, naming the bytes, while the daemon serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preloaded_key_that_fills_the_capped_device_still_proves() {
    let fixture = tokio::task::block_in_place(|| Fixture::of(ProofKind::WinningPost));
    let (key_bytes, plan) = tokio::task::block_in_place(winning_post_key_and_plan);
    // The budget is the cap less the reserve, which takes half of a device this small (the
    // reserve is at most half the memory): twice the budget wanted, the key and half a plan.
    let budget = key_bytes + plan / 2;
    let cap = (2 * budget).to_string();
    let dir = tempfile::tempdir().unwrap();
    let daemon = tokio::task::block_in_place(|| {
        Daemon::start(&dir.path().join("d.sock"), &["--preload", "winning-post-2k", "--device-memory", &cap])
    });
    let mut client = daemon.client().await;
    // A bound far above a 2 KiB Winning PoSt on two cores; a hang ends as a timeout.
    let request = pb::ProveRequest { submit: Some(fixture.submit("beside-its-key")), timeout_ms: 10 * 60 * 1000 };
    let result = client.prove(request).await.unwrap().into_inner();
    fixture.check_proof(&result);
    // GetStatus says how the key is held: partly resident, within the cap.
    let gpu = status(&mut client).await.gpus.remove(0);
    assert_eq!(gpu.memory_budget_bytes, budget, "{gpu:?}");
    let held = gpu.key_residency.first().unwrap_or_else(|| panic!("no key resident after the preload: {gpu:?}"));
    assert!(!held.resident.is_empty() && !held.streamed.is_empty(), "{held:?}");
    assert!(held.resident_bytes + plan <= gpu.memory_budget_bytes, "{held:?}");
    daemon.signal("TERM");
    let (exit, _) = tokio::task::block_in_place(|| daemon.wait());
    assert!(exit.success());

    // The twin below every plan: the same proof is refused with the bytes it lacks, and the
    // daemon goes on serving.
    let small = plan.to_string();
    let daemon =
        tokio::task::block_in_place(|| Daemon::start(&dir.path().join("s.sock"), &["--device-memory", &small]));
    let mut client = daemon.client().await;
    let request = pb::ProveRequest { submit: Some(fixture.submit("too-small")), timeout_ms: 10 * 60 * 1000 };
    let result = client.prove(request).await.unwrap().into_inner();
    assert_eq!(result.state, pb::JobState::Failed as i32, "{result:?}");
    assert!(result.error.contains("bytes short"), "{}", result.error);
    assert!(client.get_status(pb::GetStatusRequest {}).await.is_ok(), "the daemon stopped serving");
}
