//! `GetMetrics`: the daemon's status and counters in Prometheus' text exposition format
//! (version 0.0.4), so that a node's existing scraper can read them.

use std::fmt::Write;

use super::jobs::Counters;
use super::pb;

/// The exposition text: every family with its HELP and TYPE lines.
pub fn render(status: &pb::StatusResponse, counters: &Counters) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: &[(String, f64)]| {
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
        "Jobs ended, by outcome.",
        &[
            ("{outcome=\"succeeded\"}".into(), counters.completed as f64),
            ("{outcome=\"failed\"}".into(), counters.failed as f64),
            ("{outcome=\"cancelled\"}".into(), counters.cancelled as f64),
        ],
    );
    family(
        "snarkpipe_proof_seconds_sum",
        "counter",
        "Seconds from submit to proof, summed over succeeded jobs.",
        &plain(counters.completed_seconds),
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
    let per_gpu = |f: fn(&pb::Gpu) -> f64| -> Vec<(String, f64)> {
        status.gpus.iter().map(|g| (format!("{{gpu=\"{}\"}}", g.ordinal), f(g))).collect()
    };
    family(
        "snarkpipe_gpu_memory_total_bytes",
        "gauge",
        "Device memory proving may use.",
        &per_gpu(|g| g.total_bytes as f64),
    );
    family(
        "snarkpipe_gpu_memory_free_bytes",
        "gauge",
        "The driver's free device memory.",
        &per_gpu(|g| g.free_bytes as f64),
    );
    family(
        "snarkpipe_gpu_partitions_in_flight",
        "gauge",
        "Partitions on the device now.",
        &per_gpu(|g| g.partitions_in_flight as f64),
    );
    let tiers = ["hot", "warm", "cold"]
        .map(|t| (format!("{{tier=\"{t}\"}}"), status.keys.iter().filter(|k| k.tier == t).count() as f64));
    family("snarkpipe_keys", "gauge", "Proving keys in the key cache, by tier.", &tiers);
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
    family("snarkpipe_uptime_seconds", "gauge", "Seconds since the daemon started.", &plain(status.uptime_seconds));
    family(
        "snarkpipe_restarts_total",
        "counter",
        "Times the daemon replaced itself to have a broken GPU back.",
        &plain(f64::from(status.restarts)),
    );
    out
}
