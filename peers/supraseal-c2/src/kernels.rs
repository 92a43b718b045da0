//! `--kernels`: sppark's own G1 MSM and forward NTT against snarkpipe's, on the same data in the
//! same process, each with its inputs resident on the GPU before the clock.
//!
//! - MSM: random scalars over 2^20 distinct random points repeated to n (the time does not
//!   depend on the points being distinct), the host clock around each call (both return the
//!   sum to the host), median of `--kernel-runs` after one untimed call. The two sums must be
//!   equal; a difference is an error.
//! - NTT: random values, natural order in and out, CUDA events around the transform alone,
//!   median of `--kernel-runs` after one untimed. The outputs are compared: equal, or equal up
//!   to the choice of root (ω against ω⁻¹: output k of one is output n − k of the other), which
//!   is said, or different, which is an error.

use std::time::Instant;

use anyhow::{Context, Result};
use blstrs::{G1Affine, G1Projective, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::{Curve, Group};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;
use snarkpipe::backend::cuda::{GpuContext, MsmOptions};

use crate::report::median;
use crate::supraseal::{sppark_msm_g1, sppark_ntt_forward};
use crate::Args;

#[derive(Debug, Serialize)]
struct KernelReport {
    tool: &'static str,
    device: Option<String>,
    runs: usize,
    sizes: Vec<KernelSize>,
    errors: Vec<String>,
}

#[derive(Debug, Serialize)]
struct KernelSize {
    log_n: u32,
    msm_g1: Option<KernelRace>,
    ntt_forward: Option<KernelRace>,
}

/// One kernel at one size: each implementation's milliseconds, medians, and whether the
/// results agree.
#[derive(Debug, Serialize)]
struct KernelRace {
    snarkpipe_ms: Vec<f64>,
    sppark_ms: Vec<f64>,
    snarkpipe_median_ms: Option<f64>,
    sppark_median_ms: Option<f64>,
    /// sppark's median over snarkpipe's: above 1, snarkpipe's kernel is faster.
    ratio_sppark_over_snarkpipe: Option<f64>,
    agreement: String,
}

impl KernelRace {
    fn new(snarkpipe_ms: Vec<f64>, sppark_ms: Vec<f64>, agreement: String) -> KernelRace {
        let med = |v: &[f64]| {
            let mut sorted = v.to_vec();
            sorted.sort_by(f64::total_cmp);
            median(&sorted)
        };
        let (a, b) = (med(&snarkpipe_ms), med(&sppark_ms));
        KernelRace {
            ratio_sppark_over_snarkpipe: a.zip(b).filter(|(a, _)| *a > 0.0).map(|(a, b)| b / a),
            snarkpipe_median_ms: a,
            sppark_median_ms: b,
            snarkpipe_ms,
            sppark_ms,
            agreement,
        }
    }

    fn line(&self, what: &str, log_n: u32) -> String {
        let f = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2} ms"));
        format!(
            "{what} 2^{log_n}: snarkpipe {}, sppark {}, sppark/snarkpipe {} ({})",
            f(self.snarkpipe_median_ms),
            f(self.sppark_median_ms),
            self.ratio_sppark_over_snarkpipe.map_or("-".into(), |r| format!("{r:.2}")),
            self.agreement
        )
    }
}

pub fn run(args: &Args) -> Result<bool> {
    if !snarkpipe::backend::cuda::cuda_available() {
        anyhow::bail!("no CUDA GPU found (no libcuda or no device): --kernels needs one");
    }
    let runs = args.kernel_runs;
    let ctx = GpuContext::open(0).context("opening GPU 0 for snarkpipe's kernels")?;
    let stream = ctx.new_stream()?;
    let mut report = KernelReport {
        tool: "snarkpipe-vs-supraseal --kernels",
        device: Some(ctx.name()),
        runs,
        sizes: Vec::new(),
        errors: Vec::new(),
    };
    let largest = args.kernel_log_n.iter().copied().max().unwrap_or(20);
    eprintln!("kernels: making 2^{largest} points and scalars");
    let points = random_points(1usize << largest);
    let scalars = random_scalars(1usize << largest, 7);
    for &log_n in &args.kernel_log_n {
        let n = 1usize << log_n;
        let (points, scalars) = (&points[..n], &scalars[..n]);
        let mut size = KernelSize { log_n, msm_g1: None, ntt_forward: None };

        let started = Instant::now();
        let msm = (|| -> Result<KernelRace> {
            let (snark_sum, snark_ms) = {
                let bases = stream.upload(points)?;
                let values = stream.upload(scalars)?;
                let mut sum = G1Projective::identity();
                let mut ms = Vec::with_capacity(runs);
                for run in 0..=runs {
                    let t = Instant::now();
                    sum = stream.msm_g1(&bases, &values, n, MsmOptions::default())?;
                    if run > 0 {
                        ms.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                }
                (sum.to_affine(), ms)
            };
            let (spp_sum, spp_ms) = sppark_msm_g1(points, scalars, runs)?;
            let agreement = match snark_sum == spp_sum {
                true => "same sum".to_string(),
                false => anyhow::bail!("the G1 MSM sums differ: snarkpipe {snark_sum:?}, sppark {spp_sum:?}"),
            };
            Ok(KernelRace::new(snark_ms, spp_ms, agreement))
        })();
        match msm {
            Ok(race) => {
                println!("{}", race.line("G1 MSM", log_n));
                size.msm_g1 = Some(race);
            }
            Err(err) => report.errors.push(format!("G1 MSM 2^{log_n}: {err:#}")),
        }

        let ntt = (|| -> Result<KernelRace> {
            let input = random_scalars(n, 11 + log_n as u64);
            let (snark_out, snark_ms) = {
                let mut buf = stream.upload(&input)?;
                let mut ms = Vec::with_capacity(runs);
                for run in 0..=runs {
                    let a = stream.record()?;
                    stream.ntt_forward(&mut buf, log_n)?;
                    let b = stream.record()?;
                    let elapsed = stream.elapsed_ms(&a, &b)? as f64;
                    if run > 0 {
                        ms.push(elapsed);
                    }
                }
                // One transform of the input itself, for the comparison.
                stream.upload_into(&input, &mut buf)?;
                stream.ntt_forward(&mut buf, log_n)?;
                (stream.download(&buf)?, ms)
            };
            let mut spp_out = input;
            let spp_ms: Vec<f64> = sppark_ntt_forward(&mut spp_out, runs)?.into_iter().map(f64::from).collect();
            let agreement = if snark_out == spp_out {
                "same output".to_string()
            } else if (0..n).all(|k| spp_out[k] == snark_out[(n - k) % n]) {
                "same output up to the root (one uses ω, the other ω⁻¹)".to_string()
            } else {
                anyhow::bail!("the NTT outputs differ (and not by the choice of root)");
            };
            Ok(KernelRace::new(snark_ms, spp_ms, agreement))
        })();
        match ntt {
            Ok(race) => {
                println!("{}", race.line("forward NTT", log_n));
                size.ntt_forward = Some(race);
            }
            Err(err) => report.errors.push(format!("NTT 2^{log_n}: {err:#}")),
        }
        eprintln!("kernels: 2^{log_n} done in {:.1} s", started.elapsed().as_secs_f64());
        report.sizes.push(size);
        if let Some(out) = &args.out {
            std::fs::write(out, serde_json::to_vec_pretty(&report)?)
                .with_context(|| format!("writing {}", out.display()))?;
        }
    }
    for error in &report.errors {
        eprintln!("failed: {error}");
    }
    Ok(report.errors.is_empty())
}

/// 2^20 distinct random points (a running sum of a random step per chunk, normalized in one
/// batch per chunk), repeated to n.
fn random_points(n: usize) -> Vec<G1Affine> {
    let distinct = n.min(1 << 20);
    let mut projective = vec![G1Projective::identity(); distinct];
    projective.par_chunks_mut(4096).enumerate().for_each(|(chunk, out)| {
        let mut rng = ChaCha8Rng::seed_from_u64(0x9e37_0000 + chunk as u64);
        let (mut p, step) = (G1Projective::random(&mut rng), G1Projective::random(&mut rng));
        for x in out.iter_mut() {
            *x = p;
            p += step;
        }
    });
    let mut affine = vec![G1Affine::identity(); distinct];
    projective.par_chunks(4096).zip(affine.par_chunks_mut(4096)).for_each(|(p, a)| G1Projective::batch_normalize(p, a));
    (0..n).into_par_iter().map(|i| affine[i % distinct]).collect()
}

/// n random scalars, reproducible from `seed`.
fn random_scalars(n: usize, seed: u64) -> Vec<Scalar> {
    const CHUNK: usize = 1 << 16;
    let mut out = vec![Scalar::ZERO; n];
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(chunk, values)| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x1_0000_0001) ^ chunk as u64);
        for v in values {
            *v = Scalar::random(&mut rng);
        }
    });
    out
}
