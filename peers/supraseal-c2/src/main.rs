//! `snarkpipe-vs-supraseal`: proves the same synthetic witnesses, with the same key, r and s,
//! on snarkpipe (its `Prover`, CUDA backend) and on supraseal C2 (the `supraseal-c2` crate,
//! supranational's CUDA Groth16 prover on sppark), alternating the two in one process, and
//! verifies every proof of both with bellperson's `verify_proof`.
//!
//! `--check-only` runs the same preparation at a small size without a GPU (see `check.rs`);
//! `--kernels` races sppark's own G1 MSM and NTT against snarkpipe's (see `kernels.rs`).
#![deny(unsafe_code)]

mod check;
mod kernels;
mod keys;
mod race;
mod report;
mod supraseal;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use snarkpipe::synthetic::WitnessProfile;
use tracing_subscriber::EnvFilter;

/// Race snarkpipe against supraseal C2 on one GPU.
#[derive(Debug, Clone, Parser)]
#[command(name = "snarkpipe-vs-supraseal", version)]
pub struct Args {
    /// Domain sizes to race at, as log2, comma-separated (e.g. 20,22,24,26,27). Each circuit
    /// fills its domain: constraints plus one per public input and ONE.
    #[arg(long = "log-n", value_delimiter = ',', default_values_t = [20u32, 22, 24])]
    pub log_n: Vec<u32>,
    /// Timed proofs per size for each prover (one proof per call, the provers alternating).
    #[arg(long, default_value_t = 4)]
    pub partitions: usize,
    /// Distinct witnesses the proofs cycle through (default: min(partitions, 4)). Each holds
    /// about 160 bytes per constraint: about 10 GB at 2^26.
    #[arg(long)]
    pub witnesses: Option<usize>,
    /// How the free aux values are drawn: `bits` (90% zeros and ones, the shape of Filecoin's
    /// circuits) or `random`.
    #[arg(long, value_enum, default_value = "bits")]
    pub witness: WitnessProfile,
    /// Seeds the key's secrets, the witnesses and every r and s.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Rounds of the batch race after the single-proof race: each prover proves all
    /// `--partitions` in one call, alternating; 0 skips it.
    #[arg(long, default_value_t = 2)]
    pub batch_rounds: usize,
    /// Write the JSON report here (rewritten after each size).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Where the parameter file supraseal reads is written (about 480 bytes per constraint:
    /// 8 GB at 2^24). Default: the system's temporary directory.
    #[arg(long)]
    pub params_dir: Option<PathBuf>,
    /// How the parameter file is written: `bellperson` (its `Parameters::write`, one point at a
    /// time) or `parallel` (the same bytes, encoded on every core; --check-only compares them).
    #[arg(long, value_enum, default_value = "bellperson")]
    pub params_writer: ParamsWriter,
    /// Keep each size's parameter file instead of deleting it after its race.
    #[arg(long)]
    pub keep_params: bool,
    /// GPU memory snarkpipe's budget leaves to others (supraseal allocates its own during its
    /// calls), in GiB; snarkpipe caps it at half the free memory.
    #[arg(long, default_value_t = 24)]
    pub reserve_gib: u64,
    /// snarkpipe's partitions in flight per device (matters for the batch race).
    #[arg(long, default_value_t = 4)]
    pub in_flight: usize,
    /// snarkpipe's compute streams per device.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Let snarkpipe's pipeline verify each proof itself, inside its timed call (off: neither
    /// prover's time includes a verification; both are verified afterwards, outside the clock).
    #[arg(long)]
    pub pipeline_verify: bool,
    /// Check everything but the GPU calls, on the CPU at --check-log-n: parameters written and
    /// read back, the SRS file's layout, supraseal's inputs, a snarkpipe proof verified and its
    /// negative twin rejected.
    #[arg(long)]
    pub check_only: bool,
    /// The domain of --check-only, as log2.
    #[arg(long, default_value_t = 10)]
    pub check_log_n: u32,
    /// Instead of proofs, race sppark's own G1 MSM and forward NTT against snarkpipe's on the
    /// same data, inputs resident on the GPU (see --kernel-log-n, --kernel-runs).
    #[arg(long, conflicts_with = "check_only")]
    pub kernels: bool,
    /// The sizes of --kernels, as log2, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [20u32, 21, 22, 23, 24, 25, 26, 27])]
    pub kernel_log_n: Vec<u32>,
    /// Timed calls per kernel and size in --kernels (after one untimed); the median is reported.
    #[arg(long, default_value_t = 5)]
    pub kernel_runs: usize,
}

/// How the parameter file for supraseal is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamsWriter {
    Bellperson,
    Parallel,
}

/// Smallest domain with room for the 8 public inputs, ONE and a constraint.
const MIN_LOG_N: u32 = 4;
/// snarkpipe's largest domain (and more than one H200 holds for this race).
const MAX_LOG_N: u32 = 27;

impl Args {
    fn validate(&self) -> anyhow::Result<()> {
        let sizes: Vec<u32> = match (self.check_only, self.kernels) {
            (true, _) => vec![self.check_log_n],
            (false, true) => self.kernel_log_n.clone(),
            (false, false) => self.log_n.clone(),
        };
        anyhow::ensure!(self.kernel_runs >= 1, "--kernel-runs must be at least 1");
        anyhow::ensure!(!sizes.is_empty(), "--log-n needs at least one size");
        if let Some(bad) = sizes.iter().find(|k| !(MIN_LOG_N..=MAX_LOG_N).contains(*k)) {
            anyhow::bail!("log-n {bad} is out of range: sizes run from {MIN_LOG_N} to {MAX_LOG_N}");
        }
        anyhow::ensure!(self.partitions >= 1, "--partitions must be at least 1");
        anyhow::ensure!(self.witnesses != Some(0), "--witnesses must be at least 1");
        anyhow::ensure!(self.in_flight >= 1 && self.workers >= 1, "--in-flight and --workers must be at least 1");
        Ok(())
    }

    pub fn distinct_witnesses(&self) -> usize {
        self.witnesses.unwrap_or(4).min(self.partitions).max(1)
    }

    pub fn params_dir(&self) -> PathBuf {
        self.params_dir.clone().unwrap_or_else(|| std::env::temp_dir().join("snarkpipe-peers"))
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_env("SNARKPIPE_LOG").unwrap_or_else(|_| EnvFilter::new("warn")))
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if let Err(err) = args.validate() {
        eprintln!("error: {err:#}");
        return ExitCode::from(2);
    }
    let outcome = match (args.check_only, args.kernels) {
        (true, _) => check::run(&args),
        (false, true) => kernels::run(&args),
        (false, false) => race::run(&args),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
