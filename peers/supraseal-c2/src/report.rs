//! What the race reports: per size, each prover's seconds per proof (median, min, every
//! sample), its verification counts, and the ratio supraseal/snarkpipe.

use serde::Serialize;

use crate::keys::SrsHeader;

/// The whole run (`--out FILE`), rewritten after each size so a run cut short keeps the sizes
/// it finished.
#[derive(Debug, Clone, Serialize)]
pub struct RaceReport {
    pub tool: &'static str,
    pub version: &'static str,
    /// The GPU as snarkpipe's CUDA backend names it.
    pub device: Option<String>,
    pub partitions: usize,
    pub distinct_witnesses: usize,
    pub witness_profile: String,
    pub seed: u64,
    pub batch: bool,
    pub params_writer: crate::ParamsWriter,
    pub snarkpipe_verifies_in_pipeline: bool,
    pub sizes: Vec<SizeReport>,
    /// Every failure, of either prover, in words. Non-empty means the run exits nonzero.
    pub errors: Vec<String>,
    /// Whether every size asked for finished.
    pub complete: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SizeReport {
    pub log_n: u32,
    pub constraints: usize,
    pub num_inputs: usize,
    pub num_aux: usize,
    /// The key: snarkpipe's setup (on the GPU from 2^16), bellperson's writer, the file.
    pub setup_seconds: f64,
    pub params_write_seconds: f64,
    pub params_file: SrsHeader,
    pub witnesses_seconds: f64,
    /// `SRS::try_new` (it starts supraseal's own reading thread and returns).
    pub supraseal_srs_open_seconds: f64,
    /// `Prover::warm_up`: the key uploaded and staging buffers pinned.
    pub snarkpipe_warm_up_seconds: f64,
    /// One untimed proof each before the timed rounds (supraseal's waits for its SRS read).
    pub snarkpipe_first_proof_seconds: f64,
    pub supraseal_first_proof_seconds: f64,
    /// One proof per call, the two provers alternating.
    pub single: Race,
    /// With `--batch`: all partitions in one call of each (snarkpipe: one request whose
    /// partitions flow through its pipeline; supraseal: one call of `num_circuits`).
    pub batch: Option<Race>,
}

/// One way of racing: both provers' samples and the ratio.
#[derive(Debug, Clone, Serialize)]
pub struct Race {
    pub snarkpipe: Samples,
    pub supraseal: Samples,
    /// supraseal's seconds per proof over snarkpipe's: above 1, snarkpipe is faster.
    pub ratio_median: Option<f64>,
    pub ratio_min: Option<f64>,
    /// Proofs of the same witness, r and s from both that are byte for byte equal (Groth16's
    /// proof is fixed by them, so two correct provers agree).
    pub identical_proofs: usize,
    pub compared_proofs: usize,
}

impl Race {
    pub fn new(snarkpipe: Samples, supraseal: Samples, identical_proofs: usize, compared_proofs: usize) -> Race {
        let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
            (Some(x), Some(y)) if y > 0.0 => Some(x / y),
            _ => None,
        };
        Race {
            ratio_median: ratio(supraseal.median, snarkpipe.median),
            ratio_min: ratio(supraseal.min, snarkpipe.min),
            snarkpipe,
            supraseal,
            identical_proofs,
            compared_proofs,
        }
    }
}

/// Seconds per proof of one prover. Only verified proofs' times count.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Samples {
    pub seconds_per_proof: Vec<f64>,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub mean: Option<f64>,
    pub proofs: usize,
    pub verified: usize,
    pub failed: usize,
}

impl Samples {
    pub fn record(&mut self, seconds_per_proof: f64, proofs: usize, verified: usize) {
        self.proofs += proofs;
        self.verified += verified;
        self.failed += proofs - verified;
        if verified == proofs {
            self.seconds_per_proof.push(seconds_per_proof);
        }
        self.summarize();
    }

    pub fn record_failure(&mut self, proofs: usize) {
        self.proofs += proofs;
        self.failed += proofs;
    }

    fn summarize(&mut self) {
        let mut sorted = self.seconds_per_proof.clone();
        sorted.sort_by(f64::total_cmp);
        self.min = sorted.first().copied();
        self.median = median(&sorted);
        self.mean = (!sorted.is_empty()).then(|| sorted.iter().sum::<f64>() / sorted.len() as f64);
    }
}

/// The median of sorted samples (the mean of the middle two for an even count).
pub fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// One line per way of racing, for the log.
pub fn describe(size: &SizeReport) -> String {
    let mut out = format!(
        "2^{} ({} constraints): setup {:.1} s, params write {:.1} s ({:.2} GB), witnesses {:.1} s; \
         first proofs: snarkpipe {:.3} s (after {:.2} s warm-up), supraseal {:.3} s (after {:.2} s SRS open)\n",
        size.log_n,
        size.constraints,
        size.setup_seconds,
        size.params_write_seconds,
        size.params_file.bytes as f64 / 1e9,
        size.witnesses_seconds,
        size.snarkpipe_first_proof_seconds,
        size.snarkpipe_warm_up_seconds,
        size.supraseal_first_proof_seconds,
        size.supraseal_srs_open_seconds,
    );
    let mut line = |name: &str, race: &Race| {
        let s = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.4}"));
        let r = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2}"));
        out += &format!(
            "  {name:<6} s/proof median/min: snarkpipe {}/{} ({}/{} verified), supraseal {}/{} ({}/{} verified); \
             supraseal/snarkpipe median {} min {}; identical proofs {}/{}\n",
            s(race.snarkpipe.median),
            s(race.snarkpipe.min),
            race.snarkpipe.verified,
            race.snarkpipe.proofs,
            s(race.supraseal.median),
            s(race.supraseal.min),
            race.supraseal.verified,
            race.supraseal.proofs,
            r(race.ratio_median),
            r(race.ratio_min),
            race.identical_proofs,
            race.compared_proofs,
        );
    };
    line("single", &size.single);
    if let Some(batch) = &size.batch {
        line("batch", batch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_failures() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, 3.0]), Some(2.0));
        let mut s = Samples::default();
        s.record(2.0, 1, 1);
        s.record(1.0, 1, 1);
        s.record(0.1, 1, 0);
        s.record(3.0, 1, 1);
        assert_eq!((s.proofs, s.verified, s.failed), (4, 3, 1));
        assert_eq!((s.median, s.min), (Some(2.0), Some(1.0)));
        let race = Race::new(s.clone(), Samples { median: Some(4.0), min: Some(1.5), ..Samples::default() }, 0, 0);
        assert_eq!((race.ratio_median, race.ratio_min), (Some(2.0), Some(1.5)));
    }
}
