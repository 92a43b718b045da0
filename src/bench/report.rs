//! What the bench reports: the figures of a run, as JSON and for [`super::describe`].

use super::*;

/// The host's own rates for the two ways of staging, measured in the same run on one
/// witness-sized vector: what the `pin` stage's time is judged against.
#[derive(Debug, Clone, Serialize)]
pub struct HostStagingFloors {
    pub bytes: u64,
    /// A parallel copy into page-locked memory (the `copy` staging), GB/s.
    pub copy_gbps: f64,
    /// Page-locking memory in place and unlocking it again (the `in-place` staging), GB/s
    /// of memory locked and unlocked.
    pub lock_unlock_gbps: f64,
}

/// Budget figures in the report.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetFigures {
    pub capacity_bytes: u64,
    pub peak_bytes: u64,
    pub leaked_bytes: u64,
    /// Every device's budget back at full capacity once resident keys are evicted.
    pub back_to_capacity: bool,
}

/// Pinned-memory figures in the report.
#[derive(Debug, Clone, Serialize)]
pub struct PinnedFigures {
    pub leaked_bytes: u64,
}

/// Fault figures in the report.
#[derive(Debug, Clone, Serialize)]
pub struct FaultFigures {
    pub injected: u64,
    pub failed_partitions: usize,
    /// Failures that no injected fault explains: must be 0.
    pub cascaded: usize,
    pub by_site: BTreeMap<String, u64>,
}

/// The bench's report (`--json` prints it).
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub backend: BackendKind,
    pub devices: usize,
    pub partitions: usize,
    pub log_n: u32,
    pub witness: WitnessProfile,
    pub keys: KeyKind,
    pub workers: usize,
    pub in_flight: usize,
    pub api: BenchApi,
    pub circuit: BenchCircuit,
    /// Proofs checked with the pairing (0 with random keys: they cannot verify). With a
    /// Filecoin `--circuit`: whole proofs (all the job's partitions) filecoin-proofs accepted.
    pub verified: usize,
    pub failed: usize,
    pub proofs_checked: bool,
    /// Starting the prover the stream ran on: opening its devices (`device_startup` says what
    /// each GPU's context and kernels cost) and its actors. Zero on a prover made before.
    pub seconds_prover_start: f64,
    pub device_startup: Vec<crate::backend::DeviceStartup>,
    /// Making the proving key (a setup with `--keys setup`).
    pub seconds_key: f64,
    /// Preloading the key and pinning staging buffers before the clock starts.
    pub seconds_warm_up: f64,
    pub staging_bytes_pinned: u64,
    /// Why the warm-up failed, if it did (the run then started cold).
    pub warm_up_error: Option<String>,
    /// From the process's start ([`crate::process_started`]) to the first request's proof:
    /// what a user waits for a process's first proof, with the bench's own setup (the key,
    /// the witnesses, and the floors unless `--no-floors`) inside it.
    pub seconds_to_first_proof: Option<f64>,
    /// The process's peak resident host memory (`VmHWM`) when the report was made: the key,
    /// the witnesses, the staging and everything else the run held at once.
    pub host_peak_bytes: Option<u64>,
    /// From the first submission to the last proof, after the warm-up and with the witnesses
    /// made (the stream cycles through `min(partitions, devices·(in_flight + 2))` distinct ones).
    pub seconds_total: f64,
    pub seconds_per_partition: f64,
    pub stages: BTreeMap<String, StageFigures>,
    /// Throughput once the devices compute (warm-up left out).
    pub steady_state: SteadyState,
    /// With `--scaling`: the same stream on one device, and the speedup of the full run.
    pub scaling: Option<ScalingFigures>,
    pub overlap_fraction: f64,
    pub busy_fraction: BTreeMap<String, f64>,
    pub budget: BudgetFigures,
    pub pinned: PinnedFigures,
    pub faults: FaultFigures,
    pub device_bytes_after: Vec<u64>,
    /// The driver's free memory per device once the prover started, and after the run.
    pub device_free_bytes_before: Vec<Option<u64>>,
    pub device_free_bytes_after: Vec<Option<u64>>,
    /// Proving keys resident per device at the end of the run, before eviction.
    pub residency: Vec<ResidencyFigures>,
    pub staging: StagingMode,
    /// Whether the witnesses were page-locked before the clock (`--prepin-witnesses`).
    pub witnesses_prepinned: bool,
    /// The host's staging rates, measured before the clock starts.
    pub host_floors: Option<HostStagingFloors>,
    /// One partition's device floor ([`floor::partition_floor`]) at the first device's
    /// multiplication rates, measured before the clock starts; `None` on the CPU.
    pub device_floor: Option<floor::PartitionFloor>,
    /// Idle gaps over 1 ms on each device, with what it was waiting on.
    pub idle_gaps: Vec<summary::IdleGap>,
    /// The human-readable timeline summary.
    pub timeline_summary: String,
    pub errors: Vec<String>,
    /// With `--api compat`: the drop-in's calls against the native stream of the same
    /// circuits (the rest of the report is that native stream's).
    pub compat: Option<compat::CompatFigures>,
    /// With a Filecoin `--circuit`: the job's figures on snarkpipe and on bellperson.
    #[cfg(feature = "filecoin")]
    pub filecoin: Option<filecoin::FilecoinFigures>,
}

/// Keys resident on one device.
#[derive(Debug, Clone, Serialize)]
pub struct ResidencyFigures {
    pub device: usize,
    pub keys: usize,
    pub bytes: u64,
    /// The device memory its budget planned with (the cap where one was set).
    pub budget_bytes: u64,
    /// How each resident key was held: which vectors resident, which streamed.
    pub plans: Vec<crate::prover::KeyResidency>,
    /// The longest a partition waited in admission for its device memory.
    pub longest_admission_wait_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageFigures {
    pub seconds: f64,
}

/// The single-device run of `--scaling`, against which the full run is compared.
#[derive(Debug, Clone, Serialize)]
pub struct ScalingFigures {
    pub single_device_seconds_per_partition: f64,
    pub single_device_steady_seconds_per_partition: f64,
    pub single_device_verified: usize,
    pub single_device_failed: usize,
    /// Single-device seconds per partition over the full run's, end to end (after warm-up).
    pub speedup: f64,
    /// The same from the steady-state figures.
    pub steady_speedup: f64,
}

/// Throughput once the devices compute: from each device's first NTT to its last device
/// work, so pinned-pool and key warm-up at the start of a run are left out.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SteadyState {
    /// Seconds per partition over all devices together.
    pub seconds_per_partition: f64,
    /// Per device: seconds per partition on that device, and how busy its compute streams were.
    pub devices: BTreeMap<String, SteadyDevice>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SteadyDevice {
    pub partitions: usize,
    pub seconds_per_partition: f64,
    pub busy_fraction: f64,
}

/// Computes [`SteadyState`] from the device streams' compute spans.
pub(crate) fn steady_state(timeline: &crate::timeline::Timeline) -> SteadyState {
    use crate::stage::Stage;
    let mut by_device: BTreeMap<usize, Vec<&crate::timeline::Span>> = BTreeMap::new();
    for span in timeline.spans.iter().filter(|s| s.track.is_device() && matches!(s.stage, Stage::Ntt | Stage::Msm)) {
        if let Some(device) = span.track.device() {
            by_device.entry(device).or_default().push(span);
        }
    }
    let mut steady = SteadyState::default();
    let mut rate = 0.0;
    for (device, spans) in by_device {
        let Some(first) = spans.iter().filter(|s| s.stage == Stage::Ntt).map(|s| s.start_s).reduce(f64::min) else {
            continue;
        };
        let last = spans.iter().map(|s| s.end_s).fold(first, f64::max);
        let partitions = spans.iter().map(|s| s.partition).collect::<std::collections::BTreeSet<_>>().len();
        let window = (last - first).max(f64::EPSILON);
        let mut intervals: Vec<(f64, f64)> = spans.iter().map(|s| (s.start_s, s.end_s)).collect();
        intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut busy, mut open) = (0.0, intervals[0]);
        for &(start, end) in &intervals[1..] {
            if start > open.1 {
                busy += open.1 - open.0;
                open = (start, end);
            } else {
                open.1 = open.1.max(end);
            }
        }
        busy += open.1 - open.0;
        rate += partitions as f64 / window;
        steady.devices.insert(
            format!("gpu{device}"),
            SteadyDevice {
                partitions,
                seconds_per_partition: window / partitions as f64,
                busy_fraction: busy / window,
            },
        );
    }
    steady.seconds_per_partition = if rate > 0.0 { 1.0 / rate } else { 0.0 };
    steady
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::steady_state;
    use crate::stage::Stage;
    use crate::timeline::{TimelineRecorder, Track};

    #[test]
    fn steady_state_leaves_out_warm_up_and_adds_devices_up() {
        let recorder = TimelineRecorder::new();
        let at = |ms: u64| recorder.origin() + Duration::from_millis(ms);
        let stream = |device| Track::Stream { device, name: "compute0".into() };
        // A long warm-up (pinning) before either device computes.
        recorder.record(
            Track::Actor { name: "pin".into(), device: Some(0), worker: None },
            Stage::Pin,
            0,
            at(0),
            at(5000),
            BTreeMap::new(),
        );
        for device in 0..2 {
            for p in 0..2u64 {
                let start = 5000 + p * 1000;
                recorder.record(
                    stream(device),
                    Stage::Ntt,
                    (device * 2) + p as usize,
                    at(start),
                    at(start + 200),
                    BTreeMap::new(),
                );
                recorder.record(
                    stream(device),
                    Stage::Msm,
                    (device * 2) + p as usize,
                    at(start + 200),
                    at(start + 1000),
                    BTreeMap::new(),
                );
            }
        }
        let steady = steady_state(&recorder.snapshot());
        // Each device: 2 partitions in 2 s, fully busy; together 0.5 s per partition.
        assert!((steady.devices["gpu0"].seconds_per_partition - 1.0).abs() < 1e-3);
        assert!((steady.devices["gpu1"].busy_fraction - 1.0).abs() < 1e-3);
        assert!((steady.seconds_per_partition - 0.5).abs() < 1e-3, "{steady:?}");
        // The negative twin: counting the warm-up would give 3.5 s per partition per device.
        assert!(steady.devices["gpu0"].seconds_per_partition < 3.5);
    }
}
