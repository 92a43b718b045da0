//! How a [`Prover`] is built: its configuration, the host-memory shares its defaults take,
//! and the faults a test may inject.

use super::*;

/// How to build a [`Prover`].
#[derive(Debug, Clone)]
pub struct ProverConfig {
    pub backend: BackendKind,
    pub devices: DeviceSelection,
    /// Compute streams (and NTT/MSM actor threads) per device. Two is the production setting.
    pub workers_per_device: usize,
    /// Device memory left out of every budget, for the driver and other users.
    pub memory_reserve_bytes: u64,
    /// A cap on the device memory each device's budget plans with (`None`: the device's
    /// free memory). The budget takes the smaller of the cap and the free memory, less the
    /// reserve, so that a 16, 24, 32 or 48 GB card can be emulated on a larger one, and a
    /// prover can share a card with another user. Every plan (the key's residency, chunks,
    /// MSM passes) follows from the budget, so a capped prover behaves as on the smaller card.
    pub device_memory_bytes: Option<u64>,
    /// Partitions in flight at once per device (the bound over all devices is this times the
    /// number of devices).
    pub in_flight: usize,
    /// How many devices the CPU backend models, and how much memory each has.
    pub cpu_devices: usize,
    pub cpu_device_bytes: u64,
    /// Extra attempts for a failed partition (0: off). A retry avoids the device it failed on
    /// when another is allowed, so a failing device loses no work.
    pub retries: usize,
    /// Workers for particular devices, overriding `workers_per_device`.
    pub workers_by_device: std::collections::BTreeMap<usize, usize>,
    /// How partitions' large host vectors are page-locked for their upload.
    pub staging: StagingMode,
    /// Verify every proof before returning it (on by default). A proof that fails is a
    /// device fault: the partition is retried on another device. Costs a pairing check per
    /// partition on the host (the bench reports the verify stage's time).
    pub verify_proofs: bool,
    /// Timeline spans the prover keeps (the latest; older ones are dropped): the bound on the
    /// timeline's memory over a long life.
    pub timeline_spans: usize,
    /// How long a stage waits for a partition's device work before it calls the device hung
    /// (the watchdog): the device is then drained, recovered and the partition retried. Far
    /// above any partition's device time, queueing behind the others in flight included.
    /// `None`: the backend's own ([`default_stage_timeout`]): a GPU's partition takes seconds,
    /// while the CPU backend runs the same work on the host's cores, minutes for a PoRep
    /// partition on a small or busy machine, which is slowness, not a hang.
    pub stage_timeout: Option<Duration>,
    /// How often a quarantined device (one that failed partitions in a row) is probed with a
    /// small known proof; one that proves it right takes work again.
    pub quarantine_probe_interval: Duration,
    /// How long [`Prover::shutdown`] waits for work in flight: `Drain` cancels what has not
    /// finished by then, and both give up on partitions still stuck after it once more.
    pub shutdown_timeout: Duration,
    /// Host bytes of proving keys the key cache holds (`Prover::key_for_source`, every compat
    /// call) before it evicts the least recently used; the most recent key always stays, even
    /// one larger than this. By default what the host's memory has left once the synthesis
    /// budget and the reserve are taken out ([`host_memory_shares`]): 46.9 GiB on a 125 GiB
    /// host, 8 GiB on a 24 GiB one, 384 GiB on 1 TiB.
    pub key_cache_host_bytes: u64,
    /// Host bytes the witnesses of partitions submitted as circuits may take together, from
    /// their synthesis until their partition ends (see `actors/synthesize.rs`): half the
    /// machine's memory by default ([`host_memory_shares`]). A circuit whose witness alone
    /// needs more fails at once.
    ///
    /// This and `key_cache_host_bytes` share the host's memory: [`ProverConfig::validate`]
    /// refuses a config that sets both so that they add up to more than the host has.
    pub synthesis_host_bytes: u64,
    /// Where the a, b and c of partitions synthesized from their key's recorded constraint
    /// matrices are evaluated: on the device by default, so that only the assignment is
    /// staged. The device's evaluation is used only with `verify_proofs` on (a witness that
    /// does not satisfy the matrices is caught by its proof's verification); without it, the
    /// host evaluates and checks every witness.
    pub constraint_evaluation: ConstraintEvaluation,
    /// Keep each `.params` file's recorded constraint matrices beside it, as
    /// `<file>.snarkpipe-matrices` (on by default): a later process reads them instead of
    /// recording them with its first partition. A file of another key, format or shape, or a
    /// damaged one, is never used; it is replaced by the next recording. Needs the directory
    /// to be writable; where it is not, the matrices are only kept in memory.
    pub constraint_matrices_beside_params: bool,
}

/// The host memory the defaults assume where the host's cannot be read: its shares are the
/// 16 GiB of synthesis budget the prover has always fallen back on, and 12 GiB of keys.
pub const ASSUMED_HOST_BYTES: u64 = 32 << 30;

/// The least host memory left out of the default host budgets (see [`host_memory_reserve`]).
pub const MIN_HOST_RESERVE_BYTES: u64 = 4 << 30;

/// `MemTotal` of a `/proc/meminfo` text, in bytes; `None` when it has none (or says 0).
pub(super) fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib.saturating_mul(1024))
        .filter(|&bytes| bytes > 0)
}

/// The machine's memory (`MemTotal` in `/proc/meminfo`); `None` where it cannot be read.
///
/// This is the machine's, not a container's memory limit (a cgroup's `memory.max`): in a
/// container limited below the machine, set both host budgets explicitly.
pub fn host_memory_bytes() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo").ok().as_deref().and_then(mem_total_bytes)
}

/// The host memory the default host budgets leave to everything else: the OS and its page
/// cache, the pools of page-locked staging buffers (which grow with the GPUs and partitions in
/// flight, so with the host), the constraint matrices and other allocations of the process.
/// An eighth of the host's memory, at least [`MIN_HOST_RESERVE_BYTES`]; all of it on a host
/// smaller than that.
pub fn host_memory_reserve(host_bytes: u64) -> u64 {
    (host_bytes / 8).max(MIN_HOST_RESERVE_BYTES).min(host_bytes)
}

/// The default `(key_cache_host_bytes, synthesis_host_bytes)` of a host with `host_bytes` of
/// memory, chosen together so that the two budgets and [`host_memory_reserve`] never add up
/// to more than the host has:
///
/// - synthesis takes half the host's memory (as it always has), less only on a host under
///   8 GiB, where half would eat into the reserve;
/// - the key cache takes what is left after the synthesis share and the reserve: 46.9 GiB on
///   a 125 GiB host (synthesis 62.5 GiB, reserve 15.6 GiB), 8 GiB on 24 GiB, 384 GiB on
///   1 TiB, 0 on a host of 8 GiB or less.
///
/// There is no floor of one key: the key sizes are not known when the config is made, and the
/// cache keeps the most recently used key whatever its size, so a bound smaller than one key
/// (a large Filecoin key on a smaller host) means one key at a time. Only then do the keys in
/// host memory exceed their share, by part of that one key.
pub fn host_memory_shares(host_bytes: u64) -> (u64, u64) {
    let usable = host_bytes - host_memory_reserve(host_bytes);
    let synthesis = (host_bytes / 2).min(usable);
    (usable - synthesis, synthesis)
}

impl Default for ProverConfig {
    fn default() -> Self {
        let (default_key_cache, default_synthesis) =
            host_memory_shares(host_memory_bytes().unwrap_or(ASSUMED_HOST_BYTES));
        ProverConfig {
            backend: BackendKind::Auto,
            devices: DeviceSelection::All,
            workers_per_device: 2,
            memory_reserve_bytes: 1 << 30,
            device_memory_bytes: None,
            in_flight: 4,
            cpu_devices: 1,
            cpu_device_bytes: 16 << 30,
            retries: 2,
            workers_by_device: Default::default(),
            staging: StagingMode::default(),
            key_cache_host_bytes: default_key_cache,
            synthesis_host_bytes: default_synthesis,
            constraint_evaluation: ConstraintEvaluation::default(),
            constraint_matrices_beside_params: true,
            timeline_spans: crate::timeline::DEFAULT_TIMELINE_SPANS,
            verify_proofs: true,
            stage_timeout: None,
            quarantine_probe_interval: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(60),
        }
    }
}

impl ProverConfig {
    /// Checks the config before a prover starts from it ([`Prover::new`] calls it), against
    /// this machine's memory ([`host_memory_bytes`]).
    pub fn validate(&self) -> Result<()> {
        self.validate_for_host(host_memory_bytes())
    }

    /// [`ProverConfig::validate`] for a host of `host_bytes` of memory (`None`: not known, and
    /// then not checked).
    ///
    /// `key_cache_host_bytes` and `synthesis_host_bytes` that add up to more than the host's
    /// memory are refused with [`Error::HostMemoryOvercommitted`] when *both* were set, that
    /// is, differ from this host's defaults ([`host_memory_shares`]): filled, such budgets get
    /// the process killed by the OS instead of evicting a key or holding a synthesis back, and
    /// two explicit values are a choice the user can correct. When one of them is at its
    /// default, the over-commit is only logged as a warning and the prover starts:
    /// - a larger key cache bound than the host holds is the established way to say "never
    ///   evict" (the key cache tests use 1 TiB on 24 GiB CI machines, and embedders may too),
    ///   and the bounds are ceilings, not allocations: such a config worked before and
    ///   overcommits only if that many keys are actually loaded;
    /// - the fields are plain and filled in with `..ProverConfig::default()`, so a value the
    ///   user did not set cannot be told from one they set to the default, and a config that
    ///   changes one budget cannot be refused for the other, which it did not choose.
    pub fn validate_for_host(&self, host_bytes: Option<u64>) -> Result<()> {
        if self.in_flight == 0 || self.workers_per_device == 0 {
            return Err(Error::Config("in_flight and workers_per_device must be at least 1".into()));
        }
        let Some(host_bytes) = host_bytes else { return Ok(()) };
        let (key_cache_bytes, synthesis_bytes) = (self.key_cache_host_bytes, self.synthesis_host_bytes);
        if key_cache_bytes.saturating_add(synthesis_bytes) <= host_bytes {
            return Ok(());
        }
        let (default_key_cache, default_synthesis) = host_memory_shares(host_bytes);
        if key_cache_bytes != default_key_cache && synthesis_bytes != default_synthesis {
            return Err(Error::HostMemoryOvercommitted { key_cache_bytes, synthesis_bytes, host_bytes });
        }
        tracing::warn!(
            key_cache_bytes,
            synthesis_bytes,
            host_bytes,
            "ProverConfig::key_cache_host_bytes and synthesis_host_bytes add up to more than the host's memory: \
             if both fill up the OS may kill the process; lower the one that was set"
        );
        Ok(())
    }
}

/// Faults to inject into a prover's devices, for fault tests and the bench's `--faults`; a
/// node never sets them ([`Prover::new`] injects none).
#[derive(Debug, Clone, Default)]
pub struct FaultInjection {
    /// The share of device operations that fail, and the seed they are drawn from.
    pub rate: f64,
    pub seed: u64,
    /// Inject only into these devices (None: all), e.g. to model one failing GPU.
    pub devices: Option<Vec<usize>>,
    /// Tells each budget its device has this many bytes: a lie that provokes real
    /// out-of-memory failures.
    pub budget_bytes_override: Option<u64>,
    /// The stage whose actor drops every job it is given without an outcome, as a message to
    /// a stopped actor is dropped.
    pub lose_jobs_at: Option<Stage>,
    /// Every MSM result copied back from a faulty device is wrong (as a silently failing GPU's
    /// would be): the proof assembled from it fails verification.
    pub wrong_results: bool,
    /// An injected sticky error outlives recovery, as a real one does on CUDA: the device
    /// goes out of service and [`Prover::needs_restart`] lists it.
    pub sticky_needs_restart: bool,
    /// Sites armed to fail their next operations (in partitions' stages), and how many: the
    /// sites real devices fail at one at a time (a hang, a sticky error, an event failure).
    pub armed: Vec<(FaultSite, usize)>,
    /// As `armed`, for operations in one stage only.
    pub armed_in: Vec<(FaultSite, Stage, usize)>,
    /// The stage an armed `FaultSite::PanicOutsideStage` panics in (None: admission).
    pub panic_outside_at: Option<Stage>,
    /// Device bytes another process holds on each faulty device from the start (more can be
    /// taken later with `FaultInjector::set_others_use`).
    pub others_use_bytes: u64,
}

impl FaultInjection {
    /// Faults at `rate`, drawn from `seed`, into every device.
    pub fn at_rate(rate: f64, seed: u64) -> FaultInjection {
        FaultInjection { rate, seed, ..FaultInjection::default() }
    }

    /// No injected faults; each budget believes its device has `bytes`.
    pub fn budget_of(bytes: u64) -> FaultInjection {
        FaultInjection { budget_bytes_override: Some(bytes), ..FaultInjection::default() }
    }
}

/// The watchdog's stage timeout when the configuration sets none: two minutes on a GPU, far
/// above any partition's device time there; an hour on the CPU backend, whose "device" work is
/// a PoRep partition's MSMs on the host's cores.
pub fn default_stage_timeout(backend: BackendKind) -> Duration {
    match backend {
        BackendKind::Cpu => Duration::from_secs(3600),
        _ => Duration::from_secs(120),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// The defaults' shares plus the reserve stay within the host.
    fn assert_fits(host: u64) {
        let (key_cache, synthesis) = host_memory_shares(host);
        let reserve = host_memory_reserve(host);
        assert!(
            key_cache + synthesis <= host - reserve,
            "host {host}: key cache {key_cache} + synthesis {synthesis} over the host less its reserve {reserve}"
        );
    }

    #[test]
    fn host_memory_shares_of_a_125_gib_host_fit_it() {
        // The host of the report: 128 GiB of keys and 62.5 GiB of witnesses did not fit it.
        let host = 125 * GIB;
        let (key_cache, synthesis) = host_memory_shares(host);
        assert_eq!(synthesis, host / 2);
        assert_eq!(host_memory_reserve(host), host / 8);
        assert_eq!(key_cache, host - host / 2 - host / 8);
        assert!(key_cache > 46 * GIB && key_cache < 47 * GIB, "{key_cache}");
        assert!(key_cache + synthesis < host - 15 * GIB);
        assert_fits(host);
    }

    #[test]
    fn host_memory_shares_of_a_24_gib_host_fit_it() {
        let (key_cache, synthesis) = host_memory_shares(24 * GIB);
        assert_eq!(host_memory_reserve(24 * GIB), MIN_HOST_RESERVE_BYTES);
        assert_eq!((key_cache, synthesis), (8 * GIB, 12 * GIB));
        assert_fits(24 * GIB);
    }

    #[test]
    fn host_memory_shares_of_a_1_tib_host_fit_it() {
        let (key_cache, synthesis) = host_memory_shares(1024 * GIB);
        assert_eq!(host_memory_reserve(1024 * GIB), 128 * GIB);
        assert_eq!((key_cache, synthesis), (384 * GIB, 512 * GIB));
        assert_fits(1024 * GIB);
    }

    #[test]
    fn host_memory_shares_fit_every_host_and_grow_with_it() {
        // Small hosts too, where the reserve is most of the memory, and odd byte counts.
        let mut hosts: Vec<u64> = vec![0, 1, 4095, GIB, 4 * GIB, 6 * GIB, 8 * GIB, 8 * GIB + 1, u64::MAX];
        hosts.extend((1..=4096).map(|gib| gib * GIB + 12345));
        hosts.sort_unstable();
        let mut last = (0, 0);
        for host in hosts {
            assert_fits(host);
            let shares = host_memory_shares(host);
            if host >= 8 * GIB {
                assert_eq!(shares.1, host / 2, "host {host}: synthesis keeps half the host");
            }
            assert!(shares.0 >= last.0 && shares.1 >= last.1, "host {host}: {shares:?} below {last:?}");
            last = shares;
        }
        assert_eq!(host_memory_shares(0), (0, 0));
        assert_eq!(host_memory_shares(6 * GIB), (0, 2 * GIB));
    }

    #[test]
    fn an_unreadable_host_gets_the_old_synthesis_fallback() {
        assert_eq!(host_memory_shares(ASSUMED_HOST_BYTES), (12 * GIB, 16 * GIB));
    }

    #[test]
    fn mem_total_is_read_from_meminfo() {
        let meminfo = "MemTotal:       131072000 kB\nMemFree:         1024 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(mem_total_bytes(meminfo), Some(131_072_000 * 1024));
        assert_eq!(mem_total_bytes("MemFree: 1024 kB\n"), None);
        assert_eq!(mem_total_bytes("MemTotal: lots\n"), None);
        assert_eq!(mem_total_bytes("MemTotal: 0 kB\n"), None);
    }

    #[test]
    fn the_default_config_fits_this_machine() {
        let config = ProverConfig::default();
        config.validate().unwrap();
        let host = host_memory_bytes().unwrap_or(ASSUMED_HOST_BYTES);
        assert_eq!((config.key_cache_host_bytes, config.synthesis_host_bytes), host_memory_shares(host));
        assert!(config.key_cache_host_bytes + config.synthesis_host_bytes <= host - host_memory_reserve(host));
    }

    fn with_budgets(key_cache_host_bytes: u64, synthesis_host_bytes: u64) -> ProverConfig {
        ProverConfig { key_cache_host_bytes, synthesis_host_bytes, ..ProverConfig::default() }
    }

    #[test]
    fn both_budgets_set_over_the_host_are_refused() {
        let host = 125 * GIB;
        // The old default key cache beside a synthesis budget set by hand.
        let err = with_budgets(128 * GIB, 60 * GIB).validate_for_host(Some(host)).unwrap_err();
        match err {
            Error::HostMemoryOvercommitted { key_cache_bytes, synthesis_bytes, host_bytes } => {
                assert_eq!((key_cache_bytes, synthesis_bytes, host_bytes), (128 * GIB, 60 * GIB, host));
            }
            other => panic!("expected HostMemoryOvercommitted, got {other:?}"),
        }
        let message = with_budgets(100 * GIB, 100 * GIB).validate_for_host(Some(host)).unwrap_err().to_string();
        assert!(message.contains("key_cache_host_bytes") && message.contains("synthesis_host_bytes"), "{message}");
        assert!(message.contains("lower"), "{message}");
        // No overflow on absurd values.
        let err = with_budgets(u64::MAX, u64::MAX).validate_for_host(Some(host)).unwrap_err();
        assert!(matches!(err, Error::HostMemoryOvercommitted { .. }), "{err:?}");
    }

    #[test]
    fn both_budgets_set_within_the_host_are_accepted() {
        // The twin of the refusal: the same host, explicit values that fit it (to the byte).
        let host = 125 * GIB;
        with_budgets(60 * GIB, 60 * GIB).validate_for_host(Some(host)).unwrap();
        with_budgets(65 * GIB, 60 * GIB).validate_for_host(Some(host)).unwrap();
        assert!(with_budgets(65 * GIB + 1, 60 * GIB).validate_for_host(Some(host)).is_err());
    }

    #[test]
    fn one_budget_set_over_the_host_beside_the_others_default_is_allowed() {
        // The key cache tests' "never evict" (1 TiB) on a 24 GiB CI machine, synthesis default.
        let host = 24 * GIB;
        let (_, default_synthesis) = host_memory_shares(host);
        with_budgets(1 << 40, default_synthesis).validate_for_host(Some(host)).unwrap();
        let (default_key_cache, _) = host_memory_shares(host);
        with_budgets(default_key_cache, 1 << 40).validate_for_host(Some(host)).unwrap();
    }

    #[test]
    fn an_unknown_host_is_not_checked() {
        with_budgets(1 << 40, 1 << 40).validate_for_host(None).unwrap();
    }

    #[test]
    fn in_flight_and_workers_are_still_checked() {
        let config = ProverConfig { in_flight: 0, ..ProverConfig::default() };
        assert!(matches!(config.validate_for_host(None), Err(Error::Config(_))));
        let config = ProverConfig { workers_per_device: 0, ..ProverConfig::default() };
        assert!(matches!(config.validate_for_host(Some(24 * GIB)), Err(Error::Config(_))));
    }

    #[test]
    fn a_prover_is_not_started_from_budgets_over_this_host() {
        let Some(host) = host_memory_bytes() else { return };
        let config = ProverConfig { backend: BackendKind::Cpu, ..with_budgets(host, host) };
        match Prover::new(config) {
            Err(Error::HostMemoryOvercommitted { host_bytes, .. }) => assert_eq!(host_bytes, host),
            Err(other) => panic!("expected HostMemoryOvercommitted, got {other:?}"),
            Ok(_) => panic!("a prover started with twice the host's memory in its budgets"),
        }
    }
}
