//! The bench's flags.

use super::*;

/// The bench's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Which backend proves: auto picks CUDA when a GPU is usable, else the CPU.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendKind,
    /// Devices to use: `all` or a list such as `0,1`.
    #[arg(long, default_value = "all")]
    pub devices: String,
    /// Partitions to prove (one proof each).
    #[arg(long, default_value_t = 4)]
    pub partitions: usize,
    /// Each partition fills a domain of 2^log_n (constraints + public inputs + ONE).
    #[arg(long, default_value_t = 10)]
    pub log_n: u32,
    #[arg(long, value_enum, default_value = "bits")]
    pub witness: WitnessProfile,
    /// `setup`: keys from a test setup, proofs verify. `random`: random points, for sizes
    /// where a setup is too slow; proofs are not verified.
    #[arg(long, value_enum, default_value = "setup")]
    pub keys: KeyKind,
    /// Compute streams per device.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Partitions in flight at once, per device.
    #[arg(long, default_value_t = 4)]
    pub in_flight: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write a Chrome trace (open it in ui.perfetto.dev).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Write the timeline as an SVG Gantt chart.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// Print one JSON object on stdout instead of the human summary.
    #[arg(long)]
    pub json: bool,
    /// Inject faults into this share of partitions (0 to 1), seeded by --seed.
    #[arg(long, default_value_t = 0.0)]
    pub inject_faults: f64,
    /// Extra attempts for a failed partition.
    #[arg(long, default_value_t = 0)]
    pub retries: usize,
    /// Modelled devices for the CPU backend.
    #[arg(long, default_value_t = 1)]
    pub cpu_devices: usize,
    /// Memory of each modelled CPU device, in MiB.
    #[arg(long, default_value_t = 16384)]
    pub cpu_device_mib: u64,
    /// Cap on the device memory each device's budget plans with, in bytes or with a unit
    /// (`24GiB`, `16GB`, `512MiB`): emulates a smaller card on a larger one.
    #[arg(long, value_parser = crate::plan::parse_bytes)]
    pub device_memory: Option<u64>,
    /// Also run the same stream on the first selected device alone and report the speedup.
    #[arg(long)]
    pub scaling: bool,
    /// Start cold: no key preload and no pinned staging buffers before the clock starts.
    #[arg(long)]
    pub no_warm_up: bool,
    /// Skip measuring the host's staging rates and the device's multiplication rates (the
    /// floors): about two seconds of microbenchmarks that a user's first proof never pays, so
    /// `seconds_to_first_proof` is the user's figure.
    #[arg(long)]
    pub no_floors: bool,
    /// How partitions' large host vectors are page-locked for upload: copied into pooled
    /// pinned buffers (copy) or registered where they are (in-place).
    #[arg(long, value_enum, default_value = "copy")]
    pub staging: StagingMode,
    /// Distinct witnesses the stream cycles through (default: enough that no two partitions
    /// in flight share one). Fewer save host memory at large sizes: partitions in flight that
    /// share a witness share its page-locked ranges too.
    #[arg(long)]
    pub witnesses: Option<usize>,
    /// With `--staging in-place`: page-lock every distinct witness's large vectors before the
    /// clock and keep them locked, as a node that synthesizes witnesses into page-locked memory
    /// would. The partitions' own pins then find them locked and lock nothing.
    #[arg(long)]
    pub prepin_witnesses: bool,
    /// Submit each partition as its synthetic circuit (`Prover::submit_circuits`) instead of
    /// its witness: the pipeline's synthesis stage synthesizes it, from the key's recorded
    /// constraint matrices after the first, while the partitions ahead of it prove. The
    /// summary says how long the device waited on synthesis.
    #[arg(long)]
    pub synthesize: bool,
    /// Which API proves: `native` streams requests to the bench's own `Prover`; `compat` calls
    /// `snarkpipe::compat::create_random_proof_batch` as filecoin-proofs calls bellperson (one
    /// `MappedParameters` for every call, on compat's shared prover, whose configuration is
    /// its default one: `--workers`, `--in-flight` and `--cpu-devices` do not apply), then
    /// streams the same circuits natively on that prover, and compares.
    #[arg(long, value_enum, default_value = "native")]
    pub api: BenchApi,
    /// With `--api compat`: circuits per call. The calls prove the `--partitions` circuits in
    /// turn, this many each (the last call may have fewer); there must be at least two calls.
    /// Default: as many as the shared prover keeps in flight over its devices, so that a call
    /// fills the pipeline as the native stream does, but at most half the partitions.
    #[arg(long)]
    pub compat_batch: Option<usize>,
    /// What is proven: synthetic partitions of 2^log_n, or a real Filecoin job (`--job`, with
    /// its parameters in `--params-dir`), proven `--partitions` times (repetitions).
    #[arg(long, value_enum, default_value = "synthetic")]
    pub circuit: BenchCircuit,
    /// With a Filecoin `--circuit`: the parameter directory `snarkpipe fixtures` generated
    /// (it becomes filecoin-proofs' parameter cache for this process).
    #[arg(long)]
    pub params_dir: Option<PathBuf>,
    /// With a Filecoin `--circuit`: the vanilla job file `snarkpipe fixtures` wrote.
    #[arg(long)]
    pub job: Option<PathBuf>,
}

/// The API the bench proves through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BenchApi {
    Native,
    Compat,
}

/// What the bench proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum BenchCircuit {
    Synthetic,
    Porep,
    Snap,
    WindowPost,
    WinningPost,
}

impl BenchCircuit {
    pub fn name(self) -> &'static str {
        match self {
            BenchCircuit::Synthetic => "synthetic",
            BenchCircuit::Porep => "porep",
            BenchCircuit::Snap => "snap",
            BenchCircuit::WindowPost => "window-post",
            BenchCircuit::WinningPost => "winning-post",
        }
    }
}
