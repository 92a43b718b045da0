//! `snarkpipe prove` (one Filecoin proof from a vanilla file) and `snarkpipe fixtures` (real
//! 2 KiB inputs made with filecoin-proofs, for tests and benches).

use std::path::PathBuf;

use super::engine::{FilecoinProver, ProofTimings};
use super::vanilla::VanillaRequest;
use super::{fixtures, params, ProofKind};
use crate::backend::BackendKind;
use crate::params::file::PointCheck;
use crate::prover::{Prover, ProverConfig};
use crate::{Error, Result};

/// The flags of `snarkpipe prove`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProveArgs {
    /// The proof kind the vanilla file must hold.
    #[arg(long, value_enum)]
    pub kind: ProofKind,
    /// The vanilla-proof job (JSON; see `snarkpipe::filecoin::vanilla`). For `--kind porep` it may
    /// also be what a node holds: filecoin-ffi's C1 output (with `--miner-id` and
    /// `--sector-number`) or lotus-bench's and Curio's envelope around it (with `--miner-id`).
    #[arg(long)]
    pub vanilla: PathBuf,
    /// The miner's actor id (1000 for f01000), for a node's C1 output: the prover id is its ID
    /// address's payload.
    #[arg(long)]
    pub miner_id: Option<u64>,
    /// The sector number, for filecoin-ffi's C1 output (the envelope carries its own).
    #[arg(long)]
    pub sector_number: Option<u64>,
    /// The node's parameter directory (`FIL_PROOFS_PARAMETER_CACHE`): `.params` and `.vk`
    /// files by their filecoin-proofs names. Nothing is downloaded.
    #[arg(long)]
    pub params_dir: PathBuf,
    /// Where the proof bytes go (default: the vanilla file's path with `.proof`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendKind,
    /// Check that every parameter point is on the curve and in the subgroup when the file is
    /// opened (filecoin-proofs does not; seconds per GiB).
    #[arg(long)]
    pub check_points: bool,
    /// Print one JSON object on stdout instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// For tests and benchmarks of PoRep at sizes whose published key is not at hand: make a
    /// key of the job's real circuit by a test setup with fresh toxic waste (anyone who knew
    /// it could forge proofs), hold it in memory, and write only its `.vk` and `.meta` into
    /// `--params-dir`, whose name must contain `test-setup-known-toxic-waste` (so that no
    /// node's parameter directory gets them). filecoin-proofs' verifier judges the proof with
    /// that `.vk`.
    #[arg(long)]
    pub test_setup: bool,
    /// Cap on the device memory each device's budget plans with, in bytes or with a unit
    /// (`24GiB`): emulates a smaller card on a larger one.
    #[arg(long, value_parser = crate::plan::parse_bytes)]
    pub device_memory: Option<u64>,
    /// Host bytes the witnesses of partitions in synthesis and in flight may take together
    /// (default: half the host's memory). A key held in memory by `--test-setup` is not in
    /// the key cache's share: at 32 GiB, leave room for its points and matrices (about
    /// 75 GB) beside this.
    #[arg(long, value_parser = crate::plan::parse_bytes)]
    pub synthesis_memory: Option<u64>,
}

/// What `snarkpipe prove` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProveReport {
    pub kind: ProofKind,
    pub backend: BackendKind,
    pub out: PathBuf,
    pub proof_bytes: usize,
    pub partitions: usize,
    pub constraints_per_partition: usize,
    /// filecoin-proofs' verifier accepted the proof (a rejected one is an error instead).
    pub verified: bool,
    pub seconds: ProofTimings,
    /// The test setup's figures, with `--test-setup`.
    pub test_setup: Option<TestSetupFigures>,
    /// The process's peak resident host memory (`VmHWM`), key and synthesis included.
    pub host_peak_bytes: Option<u64>,
    /// Each device's memory budget and how the key was held on it.
    pub devices: Vec<crate::prover::DeviceStatus>,
}

/// What `--test-setup` made and how long it took.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TestSetupFigures {
    /// Wall seconds of the setup, and of recording the constraint matrices beside it.
    pub setup_seconds: f64,
    pub record_seconds: f64,
    /// The `.vk` written, by filecoin-proofs' name.
    pub vk: PathBuf,
    /// Host bytes of the key's points.
    pub key_host_bytes: u64,
}

/// Proves the vanilla file's job, verifies it and writes the proof bytes.
pub fn prove(args: &ProveArgs) -> Result<ProveReport> {
    if args.test_setup {
        test_key_dir(args)?;
    }
    // filecoin-proofs reads its settings once: point them at the directory first.
    let params_dir = params::use_parameter_dir(&args.params_dir)?;
    let job = read_job(args)?;
    job.expect_kind(args.kind, &args.vanilla)?;
    let defaults = ProverConfig::default();
    let config = ProverConfig {
        backend: args.backend,
        device_memory_bytes: args.device_memory,
        synthesis_host_bytes: args.synthesis_memory.unwrap_or(defaults.synthesis_host_bytes),
        ..defaults
    };
    let prover = Prover::new(config)?;
    let check = if args.check_points { PointCheck::Checked } else { PointCheck::Unchecked };
    let mut filecoin = FilecoinProver::with_params_dir(&prover, &params_dir)?.point_check(check);
    let mut test_setup = None;
    if args.test_setup {
        let held = test_key(&prover, &job, &params_dir)?;
        test_setup = Some(TestSetupFigures {
            setup_seconds: held.setup_seconds,
            record_seconds: held.record_seconds,
            vk: held.files.vk.clone(),
            key_host_bytes: held.key.host_bytes(),
        });
        filecoin = filecoin.with_held_key(held.files.params, held.key);
    }
    let proven = filecoin.prove_job(&job)?;
    let out = args.out.clone().unwrap_or_else(|| args.vanilla.with_extension("proof"));
    std::fs::write(&out, &proven.bytes).map_err(|e| Error::io(format!("writing the proof to {}", out.display()), e))?;
    Ok(ProveReport {
        kind: proven.kind,
        backend: prover.backend(),
        out,
        proof_bytes: proven.bytes.len(),
        partitions: proven.partitions,
        constraints_per_partition: proven.constraints,
        verified: true,
        seconds: proven.timings,
        test_setup,
        host_peak_bytes: crate::memory::host_peak_bytes(),
        devices: prover.device_status(),
    })
}

/// `--test-setup`'s checks before anything is read or made: a PoRep job, and a directory
/// named for test keys (made if missing, so that the check comes first).
fn test_key_dir(args: &ProveArgs) -> Result<()> {
    if args.kind != ProofKind::Porep {
        return Err(Error::Config(format!("--test-setup makes PoRep keys only, not {} keys", args.kind)));
    }
    super::sparse::test_key::check_test_key_dir(&args.params_dir)?;
    std::fs::create_dir_all(&args.params_dir)
        .map_err(|e| Error::io(format!("creating {}", args.params_dir.display()), e))
}

/// The test key of `job`'s PoRep circuit, its fixed-base multiplications on the prover's
/// first device (the host's cores on the CPU backend), with fresh toxic waste.
fn test_key(
    prover: &Prover,
    job: &VanillaRequest,
    dir: &std::path::Path,
) -> Result<super::sparse::test_key::HeldTestKey> {
    use super::sparse::test_key::held_porep_test_key;
    use crate::groth16::setup::ToxicWaste;
    use ff::Field;
    let VanillaRequest::Porep(p) = job else {
        return Err(Error::Config(format!("--test-setup makes PoRep keys only, not {} keys", job.kind())));
    };
    let config = super::porep_config(p.sector_size, p.porep_id, job.api_version()?, p.partitions)?;
    let mut rng = rand::rngs::OsRng;
    let mut secret = || loop {
        let x = crate::Scalar::random(&mut rng);
        if !bool::from(x.is_zero()) {
            break x;
        }
    };
    let waste = ToxicWaste { alpha: secret(), beta: secret(), gamma: secret(), delta: secret(), tau: secret() };
    let device = match prover.backend() {
        BackendKind::Cuda => prover.devices().first().map(|d| d.as_ref()),
        _ => None,
    };
    crate::with_sector_shape!(p.sector_size, Tree => held_porep_test_key::<Tree>(&config, &waste, device, dir))
}

/// The job `--vanilla` names: snarkpipe's job file, or for PoRep a node's C1 output or its
/// envelope, told apart by their keys.
fn read_job(args: &ProveArgs) -> Result<VanillaRequest> {
    use super::node_formats::{porep_input_format, porep_job_from_envelope, porep_job_from_ffi_c1, PorepInput};
    let path = &args.vanilla;
    let refuse = |reason: String| Error::Vanilla { path: path.display().to_string(), reason };
    let bytes = std::fs::read(path).map_err(|e| refuse(format!("cannot read it: {e}")))?;
    let format = match porep_input_format(&bytes) {
        Ok(format) => format,
        // Not JSON at all (truncated, garbled): the job file's reader says what is wrong.
        Err(_) if serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_err() => PorepInput::SnarkpipeJob,
        // JSON of none of the PoRep inputs: named by the keys it has.
        Err(e) if args.kind == ProofKind::Porep => return Err(refuse(e.to_string())),
        Err(_) => PorepInput::SnarkpipeJob,
    };
    if format != PorepInput::SnarkpipeJob && args.kind != ProofKind::Porep {
        return Err(refuse(format!(
            "it holds a node's PoRep C1 output ({}), not a {} job",
            if format == PorepInput::Envelope { "lotus-bench's envelope" } else { "filecoin-ffi's JSON" },
            args.kind
        )));
    }
    let miner_id = || {
        args.miner_id.ok_or_else(|| {
            refuse("a node's C1 output is proven for a miner: give --miner-id (1000 for f01000)".to_string())
        })
    };
    let porep = match format {
        PorepInput::SnarkpipeJob => {
            let text = String::from_utf8(bytes).map_err(|e| refuse(format!("it is not UTF-8 JSON: {e}")))?;
            return VanillaRequest::parse(&text).map_err(refuse);
        }
        PorepInput::FfiC1 => {
            let miner = miner_id()?;
            let sector = args.sector_number.ok_or_else(|| {
                refuse("filecoin-ffi's C1 output does not name its sector: give --sector-number".to_string())
            })?;
            porep_job_from_ffi_c1(&bytes, miner, sector)
        }
        PorepInput::Envelope => porep_job_from_envelope(&bytes, miner_id()?),
    }
    .map_err(|e| refuse(e.to_string()))?;
    if let Some(sector) = args.sector_number.filter(|s| *s != porep.sector_number) {
        return Err(refuse(format!(
            "--sector-number is {sector} but the envelope is of sector {}",
            porep.sector_number
        )));
    }
    tracing::info!(proof = ?porep.proof, sector = porep.sector_number, "a node's C1 output");
    Ok(porep.job)
}

/// The summary `snarkpipe prove` prints.
pub fn describe(report: &ProveReport) -> String {
    let t = &report.seconds;
    format!(
        "{kind}: {partitions} partition(s) of {constraints} constraints on {backend:?}, verified by filecoin-proofs\n\
         proof: {out} ({bytes} bytes)\n\
         seconds: queue {queue:.3}, key load {key:.3}, synthesis {synth:.3}, gpu {gpu:.3}, verify {verify:.3}, total {total:.3}\n{setup}",
        kind = report.kind,
        partitions = report.partitions,
        constraints = report.constraints_per_partition,
        backend = report.backend,
        out = report.out.display(),
        bytes = report.proof_bytes,
        queue = t.queue,
        key = t.key_load,
        synth = t.synthesis,
        gpu = t.gpu,
        verify = t.verify,
        total = t.total,
        setup = match &report.test_setup {
            Some(s) => format!(
                "test setup (known toxic waste, tests only): {:.1} s, matrices recorded beside it in {:.1} s; .vk at {}\n",
                s.setup_seconds,
                s.record_seconds,
                s.vk.display()
            ),
            None => String::new(),
        },
    )
}

/// The flags of `snarkpipe fixtures`.
#[derive(Debug, Clone, clap::Args)]
pub struct FixturesArgs {
    /// Parameter directory to generate into (and reuse: kinds already there are not
    /// generated again).
    #[arg(long)]
    pub params_dir: PathBuf,
    /// Where sealed sectors and the vanilla job files go.
    #[arg(long)]
    pub out: PathBuf,
    /// Kinds to make (default: all four).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub kinds: Vec<ProofKind>,
    /// PoRep partition counts to make 2 KiB sectors for (each has its own parameters).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub porep_partitions: Vec<u8>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Seals 2 KiB sectors, makes their vanilla proofs and generates the parameters.
pub fn make_fixtures(args: &FixturesArgs) -> Result<Vec<fixtures::FixtureJob>> {
    std::fs::create_dir_all(&args.params_dir)
        .map_err(|e| Error::io(format!("creating {}", args.params_dir.display()), e))?;
    fixtures::use_cache_dir(&args.params_dir)?;
    let kinds = if args.kinds.is_empty() { ProofKind::ALL.to_vec() } else { args.kinds.clone() };
    fixtures::write_fixture_jobs(&args.out.join("sectors"), &args.out, &kinds, &args.porep_partitions, args.seed)
}
