//! The daemon's status and counters in Prometheus' text exposition format (version 0.0.4),
//! served by `GetMetrics` over gRPC and by `/metrics` over HTTP ([`super::http`]), so that a
//! node's existing scraper can read them. `docs/metrics.md` says what each family means.
//!
//! The counts by kind ([`KindCounts`]) are kept by the job table under its lock, where a job
//! starts and ends; the GPUs' busy time ([`GpuBusy`]) by a thread that samples the prover.
//! Everything else is read from the same [`pb::StatusResponse`] that `GetStatus` returns.

use std::fmt::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::jobs::{Counters, JobState};
use super::pb;
use super::service::ProvingDaemon;
use crate::filecoin::ProofKind;
use crate::prover::Prover;

/// The upper bounds of the queue-wait histogram's buckets, in seconds: from a Winning PoSt
/// that must start within a fraction of a second to PoReps that queue for an hour.
pub const QUEUE_WAIT_BUCKETS: [f64; 12] =
    [0.01, 0.05, 0.25, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0];

/// A cumulative histogram with [`QUEUE_WAIT_BUCKETS`]' bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Histogram {
    /// Observations at or below each bound (not cumulative: summed when rendered).
    buckets: [u64; QUEUE_WAIT_BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    pub fn observe(&mut self, seconds: f64) {
        if let Some(i) = QUEUE_WAIT_BUCKETS.iter().position(|&bound| seconds <= bound) {
            self.buckets[i] += 1;
        }
        self.count += 1;
        self.sum += seconds;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// `(le, cumulative count)` per bound, `+Inf` last.
    fn cumulative(&self) -> Vec<(String, u64)> {
        let mut total = 0;
        let mut rows: Vec<(String, u64)> = QUEUE_WAIT_BUCKETS
            .iter()
            .zip(self.buckets)
            .map(|(bound, n)| {
                total += n;
                (bound.to_string(), total)
            })
            .collect();
        rows.push(("+Inf".into(), self.count));
        rows
    }
}

/// How a job ended, as the metrics name it.
const OUTCOMES: [(JobState, &str); 3] =
    [(JobState::Succeeded, "succeeded"), (JobState::Failed, "failed"), (JobState::Cancelled, "cancelled")];

fn kind_index(kind: ProofKind) -> usize {
    ProofKind::ALL.iter().position(|k| *k == kind).expect("ProofKind::ALL lists every kind")
}

/// Per proof kind: how its jobs ended and how long they queued. Plain data, updated by the job
/// table under its lock, so that it agrees with the table's own counters.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KindCounts {
    /// By [`ProofKind::ALL`]'s order, then [`OUTCOMES`]'.
    ended: [[u64; OUTCOMES.len()]; ProofKind::ALL.len()],
    queue_wait: [Histogram; ProofKind::ALL.len()],
}

impl KindCounts {
    /// A job of `kind` ended in `state` (a state that is not final is no end: ignored).
    pub fn ended(&mut self, kind: ProofKind, state: JobState) {
        if let Some(o) = OUTCOMES.iter().position(|(s, _)| *s == state) {
            self.ended[kind_index(kind)][o] += 1;
        }
    }

    /// A worker took a job of `kind` that had waited `waited` since it was submitted.
    pub fn started(&mut self, kind: ProofKind, waited: Duration) {
        self.queue_wait[kind_index(kind)].observe(waited.as_secs_f64());
    }

    pub fn ended_count(&self, kind: ProofKind, state: JobState) -> u64 {
        OUTCOMES.iter().position(|(s, _)| *s == state).map_or(0, |o| self.ended[kind_index(kind)][o])
    }

    pub fn queue_wait(&self, kind: ProofKind) -> Histogram {
        self.queue_wait[kind_index(kind)]
    }
}

/// Seconds each GPU had partitions in flight, accumulated by sampling (see
/// [`sample_gpu_busy`]): a stretch starts at the first sample that sees work on the device and
/// ends at the first that sees none, so each edge is off by at most [`BUSY_SAMPLE`].
#[derive(Debug, Default)]
pub struct GpuBusy {
    /// Per ordinal: the seconds of busy stretches that ended, and the start of the one under way.
    devices: Mutex<Vec<(usize, Duration, Option<Instant>)>>,
}

/// How often [`sample_gpu_busy`] looks at the devices.
pub const BUSY_SAMPLE: Duration = Duration::from_millis(100);

impl GpuBusy {
    /// Records what a sample saw at `now`: each device's ordinal and partitions in flight.
    pub fn observe(&self, now: Instant, loads: &[(usize, usize)]) {
        let mut devices = self.devices.lock();
        for &(ordinal, in_flight) in loads {
            let at = match devices.iter().position(|d| d.0 == ordinal) {
                Some(at) => at,
                None => {
                    devices.push((ordinal, Duration::ZERO, None));
                    devices.len() - 1
                }
            };
            let (_, total, since) = &mut devices[at];
            match (in_flight > 0, *since) {
                (true, None) => *since = Some(now),
                (false, Some(start)) => {
                    *total += now.saturating_duration_since(start);
                    *since = None;
                }
                _ => {}
            }
        }
    }

    /// Busy seconds per ordinal up to `now`, the stretch under way included.
    pub fn seconds(&self, now: Instant) -> Vec<(usize, f64)> {
        let devices = self.devices.lock();
        let mut out: Vec<(usize, f64)> = devices
            .iter()
            .map(|(ordinal, total, since)| {
                let running = since.map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
                (*ordinal, (*total + running).as_secs_f64())
            })
            .collect();
        out.sort_by_key(|d| d.0);
        out
    }
}

/// A thread that samples each device's partitions in flight every [`BUSY_SAMPLE`] into `busy`,
/// until `stop` says so (the daemon's job table closing).
pub fn sample_gpu_busy(
    prover: Arc<Prover>,
    busy: Arc<GpuBusy>,
    stop: impl Fn() -> bool + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("daemon-gpu-busy".into()).spawn(move || {
        while !stop() {
            let loads: Vec<(usize, usize)> = prover.device_status().iter().map(|d| (d.ordinal, d.in_flight)).collect();
            busy.observe(Instant::now(), &loads);
            std::thread::sleep(BUSY_SAMPLE);
        }
    })
}

/// The exposition of `daemon` now: the status `GetStatus` returns, the table's counters and
/// the GPUs' busy time. Blocking (it reads the prover): call it off the async runtime.
pub fn exposition(daemon: &ProvingDaemon) -> String {
    let busy: Vec<(u32, f64)> =
        daemon.gpu_busy.seconds(Instant::now()).into_iter().map(|(ordinal, s)| (ordinal as u32, s)).collect();
    render(&daemon.status(), &daemon.table.counters(), &busy)
}

/// A label value, escaped as the text format requires.
fn label_value(value: &str) -> String {
    value.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

/// A sample's labels, `{a="x",b="y"}` (empty for none).
fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}=\"{}\"", label_value(v))).collect();
    format!("{{{}}}", inner.join(","))
}

/// The exposition text: every family with its HELP and TYPE lines. A family with no samples
/// (no GPUs, no keys) is left out whole: a HELP and TYPE without samples is refused by strict
/// parsers.
pub fn render(status: &pb::StatusResponse, counters: &Counters, gpu_busy: &[(u32, f64)]) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
        if samples.is_empty() {
            return;
        }
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    let plain = |v: f64| vec![(String::new(), v)];
    family(
        "snarkpipe_jobs_submitted_total",
        "counter",
        "Jobs queued (resubmits of a key excluded).",
        &plain(counters.submitted as f64),
    );
    family(
        "snarkpipe_proofs_total",
        "counter",
        "Jobs ended, by outcome (the sum over kinds of snarkpipe_proofs_by_kind_total).",
        &[
            ("{outcome=\"succeeded\"}".into(), counters.completed as f64),
            ("{outcome=\"failed\"}".into(), counters.failed as f64),
            ("{outcome=\"cancelled\"}".into(), counters.cancelled as f64),
        ],
    );
    let by_kind: Vec<(String, f64)> = ProofKind::ALL
        .iter()
        .flat_map(|&kind| {
            OUTCOMES.iter().map(move |&(state, outcome)| {
                (labels(&[("kind", kind.name()), ("outcome", outcome)]), counters.kinds.ended_count(kind, state) as f64)
            })
        })
        .collect();
    family("snarkpipe_proofs_by_kind_total", "counter", "Jobs ended, by proof kind and outcome.", &by_kind);
    family(
        "snarkpipe_proof_seconds_sum",
        "counter",
        "Seconds from submit to proof, summed over succeeded jobs.",
        &plain(counters.completed_seconds),
    );
    // A histogram's samples: the buckets, then the sum and count, per kind.
    let mut waits = Vec::new();
    for kind in ProofKind::ALL {
        let h = counters.kinds.queue_wait(kind);
        for (le, n) in h.cumulative() {
            waits.push((format!("_bucket{}", labels(&[("kind", kind.name()), ("le", &le)])), n as f64));
        }
        waits.push((format!("_sum{}", labels(&[("kind", kind.name())])), h.sum));
        waits.push((format!("_count{}", labels(&[("kind", kind.name())])), h.count as f64));
    }
    family(
        "snarkpipe_queue_wait_seconds",
        "histogram",
        "Seconds a job waited in the daemon's queue before a worker took it, by proof kind (observed when it starts).",
        &waits,
    );
    let queues = status.queues.unwrap_or_default();
    family(
        "snarkpipe_jobs_queued",
        "gauge",
        "Jobs waiting for a worker, by priority.",
        &[
            ("{priority=\"critical\"}".into(), queues.queued_critical as f64),
            ("{priority=\"high\"}".into(), queues.queued_high as f64),
            ("{priority=\"normal\"}".into(), queues.queued_normal as f64),
            ("{priority=\"low\"}".into(), queues.queued_low as f64),
        ],
    );
    family("snarkpipe_jobs_running", "gauge", "Jobs being proven.", &plain(queues.running as f64));
    let per_gpu = |f: &dyn Fn(&pb::Gpu) -> f64| -> Vec<(String, f64)> {
        status.gpus.iter().map(|g| (labels(&[("gpu", &g.ordinal.to_string())]), f(g))).collect()
    };
    family(
        "snarkpipe_gpu_memory_total_bytes",
        "gauge",
        "Device memory proving may use.",
        &per_gpu(&|g| g.total_bytes as f64),
    );
    family(
        "snarkpipe_gpu_memory_free_bytes",
        "gauge",
        "The driver's free device memory.",
        &per_gpu(&|g| g.free_bytes as f64),
    );
    family(
        "snarkpipe_gpu_memory_budget_bytes",
        "gauge",
        "Device memory the GPU's budget plans with (after --device-memory and the reserve).",
        &per_gpu(&|g| g.memory_budget_bytes as f64),
    );
    family(
        "snarkpipe_gpu_partitions_in_flight",
        "gauge",
        "Partitions on the device now.",
        &per_gpu(&|g| g.partitions_in_flight as f64),
    );
    let busy: Vec<(String, f64)> = gpu_busy.iter().map(|(gpu, s)| (labels(&[("gpu", &gpu.to_string())]), *s)).collect();
    family(
        "snarkpipe_gpu_busy_seconds_total",
        "counter",
        "Seconds the GPU had partitions in flight (sampled every 100 ms); its rate is the GPU's busy fraction.",
        &busy,
    );
    // How each GPU holds its resident keys: whole, or partly with the rest streamed.
    let held_as =
        |whole: bool| per_gpu(&|g| g.key_residency.iter().filter(|k| k.streamed.is_empty() == whole).count() as f64);
    let mut residency: Vec<(String, f64)> = Vec::new();
    for (whole, name) in [(true, "whole"), (false, "partial")] {
        for (gpu, (_, n)) in status.gpus.iter().zip(held_as(whole)) {
            residency.push((labels(&[("gpu", &gpu.ordinal.to_string()), ("residency", name)]), n));
        }
    }
    family(
        "snarkpipe_gpu_keys",
        "gauge",
        "Proving keys resident on the GPU: whole, or partly (the rest streamed for every partition).",
        &residency,
    );
    family(
        "snarkpipe_gpu_key_resident_bytes",
        "gauge",
        "Device bytes of the resident parts of the GPU's keys.",
        &per_gpu(&|g| g.key_residency.iter().map(|k| k.resident_bytes).sum::<u64>() as f64),
    );
    let tiers = ["hot", "warm", "cold"]
        .map(|t| (format!("{{tier=\"{t}\"}}"), status.keys.iter().filter(|k| k.tier == t).count() as f64));
    family("snarkpipe_keys", "gauge", "Proving keys in the key cache, by tier.", &tiers);
    // One series per key, named by its parameter file (its base name, which filecoin-proofs
    // makes unique; a key without a file, or a name seen twice, gets its place in the list).
    let mut seen = std::collections::HashSet::new();
    let names: Vec<String> = status
        .keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let base = std::path::Path::new(&k.params_file)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            if base.is_empty() || !seen.insert(base.clone()) {
                format!("{base}#{i}")
            } else {
                base
            }
        })
        .collect();
    let per_key = |f: &dyn Fn(&pb::Key) -> f64| -> Vec<(String, f64)> {
        status.keys.iter().zip(&names).map(|(k, name)| (labels(&[("key", name), ("tier", &k.tier)]), f(k))).collect()
    };
    family(
        "snarkpipe_key_tier",
        "gauge",
        "1 for each proving key the cache knows, labelled with its tier: hot (resident on a GPU), warm (in host memory), cold (on disk only).",
        &per_key(&|_| 1.0),
    );
    family(
        "snarkpipe_key_host_bytes",
        "gauge",
        "Host bytes the key holds in the key cache.",
        &per_key(&|k| k.host_bytes as f64),
    );
    let held = status.held.unwrap_or_default();
    family(
        "snarkpipe_leaked_bytes",
        "gauge",
        "Bytes held that no job or resident key explains (0 unless something leaks).",
        &[
            ("{kind=\"budget\"}".into(), held.budget_leaked_bytes as f64),
            ("{kind=\"pinned\"}".into(), held.pinned_leaked_bytes as f64),
        ],
    );
    family(
        "snarkpipe_uptime_seconds",
        "gauge",
        "Seconds since this process started serving.",
        &plain(status.uptime_seconds),
    );
    family(
        "snarkpipe_shutting_down",
        "gauge",
        "1 while the daemon drains for a shutdown.",
        &plain(f64::from(u8::from(status.shutting_down))),
    );
    family(
        "snarkpipe_restarts_total",
        "counter",
        "Times the daemon replaced itself to have a broken GPU back (carried across those restarts).",
        &plain(f64::from(status.restarts)),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_is_cumulative_and_its_last_bucket_counts_all() {
        let mut h = Histogram::default();
        for s in [0.0, 0.01, 0.02, 4.0, 1e6] {
            h.observe(s);
        }
        let rows = h.cumulative();
        assert_eq!(rows[0], ("0.01".to_string(), 2), "{rows:?}");
        assert_eq!(rows[1], ("0.05".to_string(), 3), "{rows:?}");
        // Above every bound: only in +Inf.
        assert_eq!(rows[rows.len() - 2].1, 4);
        assert_eq!(rows.last().unwrap(), &("+Inf".to_string(), 5));
        assert!(rows.windows(2).all(|w| w[0].1 <= w[1].1), "{rows:?}");
    }

    #[test]
    fn busy_time_counts_the_stretches_with_work_and_the_one_under_way() {
        let busy = GpuBusy::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        busy.observe(at(0), &[(0, 0), (1, 2)]);
        busy.observe(at(1000), &[(0, 1), (1, 1)]);
        busy.observe(at(3000), &[(0, 0), (1, 0)]);
        busy.observe(at(4000), &[(0, 3), (1, 0)]);
        // GPU 0: 1 s to 3 s, and 4 s to now (5 s); GPU 1: 0 to 3 s.
        assert_eq!(busy.seconds(at(5000)), [(0, 3.0), (1, 3.0)]);
        // The twin: an idle device accumulates nothing.
        let idle = GpuBusy::default();
        idle.observe(at(0), &[(0, 0)]);
        idle.observe(at(9000), &[(0, 0)]);
        assert_eq!(idle.seconds(at(9000)), [(0, 0.0)]);
    }

    #[test]
    fn kinds_count_only_final_states() {
        let mut kinds = KindCounts::default();
        kinds.ended(ProofKind::Porep, JobState::Succeeded);
        kinds.ended(ProofKind::Porep, JobState::Running);
        kinds.ended(ProofKind::WinningPost, JobState::Cancelled);
        assert_eq!(kinds.ended_count(ProofKind::Porep, JobState::Succeeded), 1);
        assert_eq!(kinds.ended_count(ProofKind::Porep, JobState::Running), 0);
        assert_eq!(kinds.ended_count(ProofKind::WinningPost, JobState::Cancelled), 1);
        assert_eq!(kinds.ended_count(ProofKind::WinningPost, JobState::Succeeded), 0);
    }

    /// The family names in `text`'s TYPE lines.
    fn families(text: &str) -> std::collections::BTreeSet<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect()
    }

    /// The `snarkpipe_*` names a document mentions.
    fn names_in(doc: &str) -> std::collections::BTreeSet<String> {
        let mut names = std::collections::BTreeSet::new();
        for (at, _) in doc.match_indices("snarkpipe_") {
            let name: String =
                doc[at..].chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_').collect();
            names.insert(name);
        }
        names
    }

    /// docs/metrics.md describes every family the daemon renders, and it, the sample dashboard
    /// and the sample alerts name no family that is not rendered (a renamed metric fails here
    /// until the documents follow).
    #[test]
    fn the_documents_name_exactly_the_families_rendered() {
        let status = pb::StatusResponse {
            gpus: vec![pb::Gpu {
                key_residency: vec![pb::KeyResidency { streamed: vec!["h".into()], ..Default::default() }],
                ..Default::default()
            }],
            keys: vec![pb::Key { params_file: "/p/v28-a.params".into(), tier: "hot".into(), ..Default::default() }],
            queues: Some(pb::Queues::default()),
            held: Some(pb::Held::default()),
            ..Default::default()
        };
        let rendered = families(&render(&status, &Counters::default(), &[(0, 1.5)]));
        let histograms = ["snarkpipe_queue_wait_seconds"];
        let known = |name: &str| {
            rendered.contains(name)
                || ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|s| name.strip_suffix(s).is_some_and(|base| histograms.contains(&base)))
        };
        let table = include_str!("../../docs/metrics.md");
        for family in &rendered {
            assert!(table.contains(&format!("`{family}`")), "docs/metrics.md does not describe {family}");
        }
        for (doc, text) in [
            ("docs/metrics.md", table),
            ("docs/grafana-dashboard.json", include_str!("../../docs/grafana-dashboard.json")),
            ("docs/prometheus.yml", include_str!("../../docs/prometheus.yml")),
        ] {
            for name in names_in(text) {
                assert!(known(&name), "{doc} names {name}, which the daemon does not render");
            }
        }
        // The twin: a name the daemon does not render is caught.
        assert!(!known("snarkpipe_proofs_by_kind") && !known("snarkpipe_gpu_busy_bucket"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(labels(&[("key", "a\"b\\c\nd")]), r#"{key="a\"b\\c\nd"}"#);
        assert_eq!(labels(&[]), "");
    }
}
