//! `--metrics-listen`: the daemon's HTTP door for operators. Prometheus cannot scrape gRPC, so
//! `GET /metrics` serves [`metrics::exposition`] in the text format (0.0.4), and `GET /status`
//! the facts of `GetStatus` as JSON; any other path is 404. Read-only: nothing here submits,
//! cancels or loads.
//!
//! It runs on the daemon's tokio runtime beside the gRPC server, so:
//! - what reads the prover runs on the blocking pool, never on an async thread;
//! - no client holds anything for long: the request head must arrive within
//!   [`HEADER_TIMEOUT`] and fit in [`MAX_HEAD_BYTES`], a connection lives at most
//!   [`CONNECTION_TIMEOUT`] and serves one request, the body of a request is never read, and
//!   at most [`MAX_CONNECTIONS`] are open at once (one more is closed at once);
//! - it ends with the runtime: the serve loop is a task the daemon aborts when its gRPC server
//!   has ended, and the runtime's end drops whatever connection is left.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};

use super::metrics;
use super::pb;
use super::service::ProvingDaemon;
use crate::{Error, Result};

/// The request line and headers must arrive within it.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection is closed this long after it was accepted, whatever it is doing (a client that
/// does not read its answer included).
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest request head read (hyper's least buffer is 8 KiB); a longer one gets 431.
pub const MAX_HEAD_BYTES: usize = 16 << 10;
/// Connections served at once; one beyond is closed as soon as it is accepted.
pub const MAX_CONNECTIONS: usize = 64;

/// The content type of Prometheus' text format.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Reads `--metrics-listen`: a bare `PORT` is `127.0.0.1:PORT`; `localhost:PORT` is the same;
/// otherwise `HOST:PORT` as an IP address, which must be loopback unless `allow_remote`
/// (the pages need no authentication, and `/status` names jobs and parameter files).
pub fn parse_metrics_listen(text: &str, allow_remote: bool) -> Result<SocketAddr> {
    let text = text.trim();
    let bad = |why: String| Error::Config(format!("--metrics-listen {text:?}: {why}"));
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    if let Some(port) = text.strip_prefix("localhost:") {
        let port = port.parse::<u16>().map_err(|e| bad(format!("the port {port:?} is not a port number: {e}")))?;
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    let addr: SocketAddr = text
        .parse()
        .map_err(|e| bad(format!("give PORT (on 127.0.0.1) or IP:PORT, such as 127.0.0.1:9464 or [::1]:9464 ({e})")))?;
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(bad(format!(
            "{addr} is not a loopback address; the metrics and status pages need no authentication, so serving \
             them to other machines needs --allow-remote (and a network that only trusted scrapers reach)"
        )));
    }
    Ok(addr)
}

/// Binds the metrics listener; the error names the flag and the address.
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await.map_err(|e| Error::io(format!("binding --metrics-listen {addr}"), e))
}

/// Serves the metrics and status pages on `listener` until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, daemon: Arc<ProvingDaemon>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                // Out of file descriptors and the like: pause rather than spin on the error.
                tracing::warn!(%err, "the metrics listener could not accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!("metrics: {MAX_CONNECTIONS} connections open already; one more closed");
            continue;
        };
        let daemon = daemon.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |request| {
                let daemon = daemon.clone();
                async move { Ok::<_, Infallible>(respond(daemon, request).await) }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(false)
                .max_buf_size(MAX_HEAD_BYTES);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(CONNECTION_TIMEOUT, connection).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::debug!(%err, "metrics: a connection ended in an error"),
                Err(_) => tracing::debug!("metrics: a connection outlived its bound and was closed"),
            }
        });
    }
}

fn answer(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

async fn respond(daemon: Arc<ProvingDaemon>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response =
            answer(StatusCode::METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", "only GET and HEAD are served\n");
        response.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let page = match request.uri().path() {
        "/metrics" => Page::Metrics,
        "/status" => Page::Status,
        path => {
            return answer(
                StatusCode::NOT_FOUND,
                "text/plain; charset=utf-8",
                format!("no page {path:?}: this daemon serves /metrics (Prometheus) and /status (JSON)\n"),
            )
        }
    };
    // Reading the prover takes locks the workers hold: never on an async thread.
    let rendered = tokio::task::spawn_blocking(move || match page {
        Page::Metrics => (METRICS_CONTENT_TYPE, metrics::exposition(&daemon)),
        Page::Status => ("application/json", status_json(&daemon.status()).to_string()),
    })
    .await;
    match rendered {
        Ok((content_type, body)) => answer(StatusCode::OK, content_type, body),
        Err(err) => {
            tracing::error!(%err, "rendering a metrics page failed (a bug; please report it)");
            answer(StatusCode::INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8", format!("{err}\n"))
        }
    }
}

#[derive(Clone, Copy)]
enum Page {
    Metrics,
    Status,
}

/// `GetStatus`' answer as JSON, each field under its name in proto/snarkpipe.proto (a message
/// that is not set is `null`).
pub fn status_json(status: &pb::StatusResponse) -> Value {
    let gpus: Vec<Value> = status
        .gpus
        .iter()
        .map(|g| {
            let residency: Vec<Value> = g
                .key_residency
                .iter()
                .map(|k| {
                    json!({
                        "resident": k.resident,
                        "streamed": k.streamed,
                        "resident_bytes": k.resident_bytes,
                        "chunk_points": k.chunk_points,
                        "partitions": k.partitions,
                    })
                })
                .collect();
            json!({
                "ordinal": g.ordinal,
                "name": g.name,
                "total_bytes": g.total_bytes,
                "free_bytes": g.free_bytes,
                "health": g.health,
                "partitions_in_flight": g.partitions_in_flight,
                "current_jobs": g.current_jobs,
                "memory_budget_bytes": g.memory_budget_bytes,
                "key_residency": residency,
            })
        })
        .collect();
    let keys: Vec<Value> = status
        .keys
        .iter()
        .map(|k| {
            json!({
                "params_file": k.params_file,
                "tier": k.tier,
                "host_bytes": k.host_bytes,
                "devices": k.devices,
                "hits": k.hits,
                "loads": k.loads,
            })
        })
        .collect();
    let queues = status.queues.map(|q| {
        json!({
            "queued": q.queued,
            "running": q.running,
            "queued_critical": q.queued_critical,
            "queued_high": q.queued_high,
            "queued_normal": q.queued_normal,
            "queued_low": q.queued_low,
        })
    });
    let held = status.held.map(|h| {
        json!({
            "budget_leaked_bytes": h.budget_leaked_bytes,
            "pinned_leaked_bytes": h.pinned_leaked_bytes,
            "synthesis_host_bytes": h.synthesis_host_bytes,
            "waiting_grants": h.waiting_grants,
            "unfinished_requests": h.unfinished_requests,
        })
    });
    json!({
        "instance": status.instance,
        "backend": status.backend,
        "uptime_seconds": status.uptime_seconds,
        "gpus": gpus,
        "keys": keys,
        "queues": queues,
        "proofs_completed": status.proofs_completed,
        "proofs_failed": status.proofs_failed,
        "proofs_cancelled": status.proofs_cancelled,
        "held": held,
        "shutting_down": status.shutting_down,
        "restarts": status.restarts,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The field names prost's `Debug` prints for a value (`name: `), nested messages included.
    fn debug_field_names(text: &str) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for (at, _) in text.match_indices(": ") {
            let before = &text[..at];
            let start = before.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
            names.insert(before[start..].to_string());
        }
        names
    }

    fn json_keys(value: &Value, into: &mut BTreeSet<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    into.insert(k.clone());
                    json_keys(v, into);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| json_keys(v, into)),
            _ => {}
        }
    }

    /// Every field of the status, at every depth, is in the JSON: a field added to the proto
    /// and not to [`status_json`] fails here.
    #[test]
    fn the_status_json_has_every_field_of_get_status() {
        let status = pb::StatusResponse {
            gpus: vec![pb::Gpu { key_residency: vec![pb::KeyResidency::default()], ..pb::Gpu::default() }],
            keys: vec![pb::Key::default()],
            queues: Some(pb::Queues::default()),
            held: Some(pb::Held::default()),
            ..pb::StatusResponse::default()
        };
        let fields = debug_field_names(&format!("{status:?}"));
        let mut keys = BTreeSet::new();
        json_keys(&status_json(&status), &mut keys);
        assert!(fields.len() > 30, "the Debug text was not read: {fields:?}");
        assert_eq!(fields, keys);
        // The twin: a status whose messages are unset still names them, as null.
        let bare = status_json(&pb::StatusResponse::default());
        assert!(bare["queues"].is_null() && bare["held"].is_null(), "{bare}");
    }

    #[test]
    fn a_bare_port_is_loopback_and_a_remote_address_needs_allow_remote() {
        assert_eq!(parse_metrics_listen("9464", false).unwrap(), "127.0.0.1:9464".parse().unwrap());
        assert_eq!(parse_metrics_listen("localhost:0", false).unwrap(), "127.0.0.1:0".parse().unwrap());
        assert_eq!(parse_metrics_listen("[::1]:9464", false).unwrap(), "[::1]:9464".parse().unwrap());
        let remote = parse_metrics_listen("0.0.0.0:9464", false).unwrap_err().to_string();
        assert!(remote.contains("--allow-remote"), "{remote}");
        assert_eq!(parse_metrics_listen("0.0.0.0:9464", true).unwrap(), "0.0.0.0:9464".parse().unwrap());
        let junk = parse_metrics_listen("metrics.example:x", false).unwrap_err().to_string();
        assert!(junk.contains("IP:PORT"), "{junk}");
    }
}
