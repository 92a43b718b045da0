//! `snarkpipe serve --metrics-listen` as an operator's scraper sees it: the real binary on the
//! CPU backend, its `/metrics` read over plain HTTP while a proof runs and after, and parsed by
//! a strict parser of Prometheus' text format (prom_text_format_parser); `/status` read as JSON
//! and held against `GetStatus`. The twins: a page that is not served is 404, a method that is
//! not GET is 405, a malformed exposition fails the parser, and a client that sends half a
//! request or an oversized head holds nothing.
#![cfg(feature = "filecoin")]

mod filecoin;
mod serve_harness;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use prom_text_format_parser::{Scrape, ValueType};
use serve_harness::*;
use snarkpipe::daemon::pb;
use snarkpipe::filecoin::ProofKind;

/// A read that takes longer than this is a hang (the server's own bound is 30 s).
const READ_BOUND: Duration = Duration::from_secs(60);

/// Sends `raw` on a new connection and reads until the server closes it.
fn exchange(addr: SocketAddr, raw: &[u8]) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(READ_BOUND))?;
    stream.write_all(raw)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// An HTTP answer: status code, head, body.
struct Answer {
    code: u16,
    head: String,
    body: String,
}

fn parse_answer(text: &str) -> Answer {
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no HTTP head in {text:?}"));
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("status line: {head}"));
    Answer { code, head: head.to_ascii_lowercase(), body: body.to_string() }
}

fn http(addr: SocketAddr, method: &str, path: &str) -> Answer {
    let raw = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    parse_answer(&exchange(addr, raw.as_bytes()).expect("an HTTP exchange with the metrics door"))
}

fn scrape(addr: SocketAddr) -> Scrape {
    let answer = http(addr, "GET", "/metrics");
    assert_eq!(answer.code, 200, "{}", answer.body);
    assert!(answer.head.contains("content-type: text/plain; version=0.0.4"), "{}", answer.head);
    Scrape::parse(&answer.body).unwrap_or_else(|e| panic!("the exposition does not parse: {e:?}\n{}", answer.body))
}

/// The value of `name`'s sample with exactly these labels (and this part, for a histogram).
fn value(scrape: &Scrape, name: &str, part: ValueType, labels: &[(&str, &str)]) -> Option<f64> {
    let metric = scrape.metrics.iter().find(|m| m.name == name)?;
    let sample = metric.samples.iter().find(|s| {
        s.value.value_type == part
            && s.labels.len() == labels.len()
            && labels.iter().all(|(k, v)| s.labels.iter().any(|l| l.key == *k && l.value == *v))
    })?;
    Some(sample.value.value.as_f64())
}

fn proofs(scrape: &Scrape, kind: &str, outcome: &str) -> f64 {
    value(scrape, "snarkpipe_proofs_by_kind_total", ValueType::Sample, &[("kind", kind), ("outcome", outcome)])
        .unwrap_or(0.0)
}

fn queue_waits(scrape: &Scrape, kind: &str) -> f64 {
    value(scrape, "snarkpipe_queue_wait_seconds", ValueType::Count, &[("kind", kind)]).unwrap_or(0.0)
}

fn status_page(addr: SocketAddr) -> serde_json::Value {
    let answer = http(addr, "GET", "/status");
    assert_eq!(answer.code, 200, "{}", answer.body);
    assert!(answer.head.contains("content-type: application/json"), "{}", answer.head);
    serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("/status is not JSON: {e}: {}", answer.body))
}

/// `/status` says what `GetStatus` says, field by field (the uptime and the driver's free
/// memory move between the two reads, and are left out).
fn assert_status_agrees(json: &serde_json::Value, grpc: &pb::StatusResponse) {
    assert_eq!(json["instance"], grpc.instance);
    assert_eq!(json["backend"], grpc.backend);
    assert_eq!(json["restarts"], grpc.restarts);
    assert_eq!(json["shutting_down"], grpc.shutting_down);
    assert_eq!(json["proofs_completed"], grpc.proofs_completed);
    assert_eq!(json["proofs_failed"], grpc.proofs_failed);
    assert_eq!(json["proofs_cancelled"], grpc.proofs_cancelled);
    let queues = grpc.queues.unwrap();
    assert_eq!(json["queues"]["queued"], queues.queued);
    assert_eq!(json["queues"]["running"], queues.running);
    let held = grpc.held.unwrap();
    assert_eq!(json["held"]["budget_leaked_bytes"], held.budget_leaked_bytes);
    assert_eq!(json["held"]["pinned_leaked_bytes"], held.pinned_leaked_bytes);
    let gpus = json["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), grpc.gpus.len(), "{json}");
    for (j, g) in gpus.iter().zip(&grpc.gpus) {
        assert_eq!(j["ordinal"], g.ordinal);
        assert_eq!(j["name"], g.name);
        assert_eq!(j["total_bytes"], g.total_bytes);
        assert_eq!(j["memory_budget_bytes"], g.memory_budget_bytes);
        assert_eq!(j["health"], g.health);
        assert_eq!(j["key_residency"].as_array().unwrap().len(), g.key_residency.len());
        for (jk, k) in j["key_residency"].as_array().unwrap().iter().zip(&g.key_residency) {
            assert_eq!(jk["resident"], serde_json::json!(k.resident));
            assert_eq!(jk["streamed"], serde_json::json!(k.streamed));
            assert_eq!(jk["resident_bytes"], k.resident_bytes);
        }
    }
    let keys = json["keys"].as_array().unwrap();
    assert_eq!(keys.len(), grpc.keys.len(), "{json}");
    for (j, k) in keys.iter().zip(&grpc.keys) {
        assert_eq!(j["params_file"], k.params_file);
        assert_eq!(j["tier"], k.tier);
        assert_eq!(j["host_bytes"], k.host_bytes);
        assert_eq!(j["loads"], k.loads);
        assert_eq!(j["devices"], serde_json::json!(k.devices));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_scraped_while_a_proof_runs_and_after() {
    let (porep, winning) =
        tokio::task::block_in_place(|| (Fixture::of(ProofKind::Porep), Fixture::of(ProofKind::WinningPost)));
    let dir = tempfile::tempdir().unwrap();
    let daemon = tokio::task::block_in_place(|| {
        Daemon::start(&socket_in(&dir), &["--concurrent-jobs", "1", "--metrics-listen", "127.0.0.1:0"])
    });
    let addr = daemon.metrics_address().unwrap_or_else(|| panic!("no metrics address in {:?}", daemon.ready));
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    let mut client = daemon.client().await;

    // Before any job: every kind's counters are there, at 0.
    let before = tokio::task::block_in_place(|| scrape(addr));
    for kind in ProofKind::ALL {
        for outcome in ["succeeded", "failed", "cancelled"] {
            let labels = [("kind", kind.name()), ("outcome", outcome)];
            let n = value(&before, "snarkpipe_proofs_by_kind_total", ValueType::Sample, &labels);
            assert_eq!(n, Some(0.0), "{kind} {outcome}");
        }
        assert_eq!(queue_waits(&before, kind.name()), 0.0);
    }
    assert_eq!(value(&before, "snarkpipe_restarts_total", ValueType::Sample, &[]), Some(0.0));

    // While a PoRep runs (minutes on two cores, so it cannot end before the scrape): it is
    // running, its queue wait was observed when it started, and it has not ended.
    let job = submit(&mut client, porep.submit("metrics-porep")).await.job_id;
    let started = pb::AwaitProofRequest { job_id: job.clone(), timeout_ms: AWAIT_MS, until_started: true };
    let running = client.await_proof(started).await.unwrap().into_inner();
    assert_eq!(running.state, pb::JobState::Running as i32, "{running:?}");
    let during = tokio::task::block_in_place(|| scrape(addr));
    assert_eq!(value(&during, "snarkpipe_jobs_running", ValueType::Sample, &[]), Some(1.0));
    assert_eq!(queue_waits(&during, "porep"), 1.0);
    assert_eq!(proofs(&during, "porep", "succeeded") + proofs(&during, "porep", "cancelled"), 0.0);
    let json = tokio::task::block_in_place(|| status_page(addr));
    assert_eq!(json["queues"]["running"], 1, "{json}");
    // Once its partition is on the device, the device's busy time grows while it runs.
    let deadline = Instant::now() + Duration::from_millis(AWAIT_MS);
    loop {
        let now = tokio::task::block_in_place(|| scrape(addr));
        let busy = value(&now, "snarkpipe_gpu_busy_seconds_total", ValueType::Sample, &[("gpu", "0")]);
        if busy.is_some_and(|s| s > 0.0) {
            break;
        }
        assert!(Instant::now() < deadline, "GPU 0 never showed busy while the PoRep ran");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    client.cancel_proof(pb::CancelProofRequest { job_id: job.clone() }).await.unwrap();
    assert_eq!(await_proof(&mut client, &job).await.state, pb::JobState::Cancelled as i32);

    // A Winning PoSt proven and verified: its counter goes from 0 to 1, and its wait is sampled.
    let request = pb::ProveRequest { submit: Some(winning.submit("metrics-winning")), timeout_ms: AWAIT_MS };
    winning.check_proof(&client.prove(request).await.expect("Prove").into_inner());
    let after = tokio::task::block_in_place(|| scrape(addr));
    assert_eq!(proofs(&after, "winning-post", "succeeded"), 1.0);
    assert_eq!(proofs(&after, "porep", "cancelled"), 1.0);
    assert_eq!(proofs(&after, "porep", "succeeded"), 0.0);
    assert_eq!(queue_waits(&after, "winning-post"), 1.0);
    let inf =
        value(&after, "snarkpipe_queue_wait_seconds", ValueType::Sample, &[("kind", "winning-post"), ("le", "+Inf")]);
    assert_eq!(inf, Some(1.0));
    assert_eq!(value(&after, "snarkpipe_proofs_total", ValueType::Sample, &[("outcome", "succeeded")]), Some(1.0));
    assert_eq!(value(&after, "snarkpipe_jobs_running", ValueType::Sample, &[]), Some(0.0));

    // /status agrees with GetStatus, and the key families with both.
    let (json, grpc) = (tokio::task::block_in_place(|| status_page(addr)), status(&mut client).await);
    assert_status_agrees(&json, &grpc);
    let hot = grpc.keys.iter().filter(|k| k.tier == "hot").count() as f64;
    assert!(hot >= 1.0, "{grpc:?}");
    let after = tokio::task::block_in_place(|| scrape(addr));
    assert_eq!(value(&after, "snarkpipe_keys", ValueType::Sample, &[("tier", "hot")]), Some(hot));
    let per_key = after.metrics.iter().find(|m| m.name == "snarkpipe_key_tier").expect("snarkpipe_key_tier");
    assert_eq!(per_key.samples.len(), grpc.keys.len());
    let resident = value(&after, "snarkpipe_gpu_keys", ValueType::Sample, &[("gpu", "0"), ("residency", "whole")])
        .unwrap()
        + value(&after, "snarkpipe_gpu_keys", ValueType::Sample, &[("gpu", "0"), ("residency", "partial")]).unwrap();
    assert_eq!(resident, grpc.gpus[0].key_residency.len() as f64);

    // The twins: a page not served, and a method that is not GET.
    let missing = tokio::task::block_in_place(|| http(addr, "GET", "/metrics/extra"));
    assert_eq!(missing.code, 404, "{}", missing.body);
    assert!(missing.body.contains("/metrics") && missing.body.contains("/status"), "{}", missing.body);
    let posted = tokio::task::block_in_place(|| http(addr, "POST", "/metrics"));
    assert_eq!(posted.code, 405, "{}", posted.body);

    // The door closes with the daemon: SIGTERM exits, and nothing answers on the port after.
    daemon.signal("TERM");
    let log = daemon.log();
    let (exit, _) = tokio::task::block_in_place(|| daemon.wait());
    assert!(exit.success(), "exit {exit:?}: {log}");
    assert!(TcpStream::connect(addr).is_err(), "the metrics port still answers after the daemon exited");
}

/// A client that sends half a request, or a head larger than the bound, holds nothing: a
/// scrape beside it is answered at once, the half request is closed within the head's bound,
/// and the oversized head is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_oversized_request_holds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket_in(&dir), &["--metrics-listen", "localhost:0"]));
    let addr = daemon.metrics_address().unwrap_or_else(|| panic!("no metrics address in {:?}", daemon.ready));
    tokio::task::block_in_place(|| {
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.write_all(b"GET /metr").unwrap();
        let opened = Instant::now();
        // A scrape beside the stalled one is served.
        let beside = scrape(addr);
        assert!(value(&beside, "snarkpipe_uptime_seconds", ValueType::Sample, &[]).is_some());
        assert!(opened.elapsed() < Duration::from_secs(5), "the scrape waited on the stalled client");
        // The stalled one is closed by the server (with a 408 or without an answer).
        slow.set_read_timeout(Some(READ_BOUND)).unwrap();
        let mut rest = Vec::new();
        let closed = slow.read_to_end(&mut rest);
        assert!(closed.is_ok(), "the stalled connection was not closed by the server: {closed:?}");
        let elapsed = opened.elapsed();
        assert!(elapsed < Duration::from_secs(20), "closed only after {elapsed:?}");
        let rest = String::from_utf8_lossy(&rest);
        assert!(!rest.contains(" 200 "), "a half request was answered: {rest}");

        let mut huge = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Filler: ".to_vec();
        huge.extend(std::iter::repeat(b'a').take(256 << 10));
        huge.extend(b"\r\n\r\n");
        // The server may close before reading it all: a reset on the write is an answer too.
        if let Ok(answer) = exchange(addr, &huge) {
            assert!(!answer.contains(" 200 "), "an oversized head was served: {}", &answer[..answer.len().min(200)]);
        }
        // The twin: the same request with a short head is served.
        let short = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Filler: aaaa\r\n\r\n").unwrap();
        assert_eq!(parse_answer(&short).code, 200, "{short}");
    });
}

/// The parser used above is strict: a malformed sample line, a label list left open or a
/// value that is not a number each fail it; the same text well formed parses.
#[test]
fn the_parser_refuses_a_malformed_exposition() {
    let good = "# HELP x_total Things.\n# TYPE x_total counter\nx_total{kind=\"a\"} 3\n";
    let parsed = Scrape::parse(good).expect("a well-formed exposition");
    assert_eq!(value(&parsed, "x_total", ValueType::Sample, &[("kind", "a")]), Some(3.0));
    for bad in [
        "# HELP x_total Things.\n# TYPE x_total counter\nx_total{kind=\"a\" 3\n",
        "# HELP x_total Things.\n# TYPE x_total counter\nx_total{kind=\"a\"} three\n",
        "# HELP x_total Things.\n# TYPE x_total counter\nx_total{kind=\"a\"}\n",
    ] {
        assert!(Scrape::parse(bad).is_err(), "parsed: {bad:?}");
    }
}

/// The restart counter is carried across the daemon's restart (an `exec`, same PID), and the
/// door comes back on the same fixed port: the old process's listener does not linger into the
/// new one. The job carried over proves in the new process, and its counters count it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_are_counted_across_the_restart_and_the_door_comes_back_on_its_port() {
    let winning = tokio::task::block_in_place(|| Fixture::of(ProofKind::WinningPost));
    // A port free now, named explicitly so that the restarted process must bind it again.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let metrics = format!("127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let daemon = tokio::task::block_in_place(|| {
        Daemon::start_with(
            &socket_in(&dir),
            &["--concurrent-jobs", "1", "--metrics-listen", &metrics],
            &[("SNARKPIPE_DRILL_BREAK_GPU", "1")],
        )
    });
    let addr = daemon.metrics_address().unwrap();
    assert_eq!(addr.port(), port);
    let before = tokio::task::block_in_place(|| scrape(addr));
    assert_eq!(value(&before, "snarkpipe_restarts_total", ValueType::Sample, &[]), Some(0.0));

    // The drill breaks the GPU at the job's first kernel: the daemon carries the job and restarts.
    let mut client = daemon.client().await;
    let job = submit(&mut client, winning.submit("carried")).await.job_id;
    tokio::task::block_in_place(|| daemon.wait_for_another_ready_line(Duration::from_secs(300)));
    let ready = daemon.stdout.lock().unwrap().iter().find(|l| l.contains("listening on unix:")).cloned().unwrap();
    assert!(ready.contains(&format!("metrics on http://{metrics}/metrics")), "{ready}");

    let mut client = daemon.client().await;
    winning.check_proof(&await_proof(&mut client, &job).await);
    let after = tokio::task::block_in_place(|| scrape(addr));
    assert_eq!(value(&after, "snarkpipe_restarts_total", ValueType::Sample, &[]), Some(1.0));
    assert_eq!(proofs(&after, "winning-post", "succeeded"), 1.0);
    assert_status_agrees(&tokio::task::block_in_place(|| status_page(addr)), &status(&mut client).await);
}

/// A metrics address that cannot be served stops the start and says why: one taken by another
/// process, one that is not loopback without `--allow-remote`, one that is not an address.
#[test]
fn a_metrics_address_that_cannot_be_served_stops_the_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_at = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    for (metrics, expected) in
        [(taken_at.as_str(), "binding --metrics-listen"), ("0.0.0.0:0", "--allow-remote"), ("metrics:9821", "IP:PORT")]
    {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
            .args(["serve", "--backend", "cpu", "--listen"])
            .arg(format!("unix:{}", dir.path().join("refused.sock").display()))
            .arg("--params-dir")
            .arg(filecoin::params_dir())
            .args(["--metrics-listen", metrics])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{metrics}: started: {stderr}");
        assert!(stderr.contains(expected), "{metrics}: {stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("listening on"), "{metrics}: it announced");
    }
    drop(taken);
}
