//! The vanilla-proof file `snarkpipe prove` reads: one proof job as JSON.
//!
//! The vanilla part is exactly the serde JSON of filecoin-proofs' own types (a
//! `SealCommitPhase1Output` for PoRep, `Vec<FallbackPoStSectorProof>` for PoSt,
//! `Vec<PartitionProof>` for SnapDeals). Around it stand the few values filecoin-proofs takes
//! beside the vanilla proofs (prover and sector ids, PoSt randomness, the update's
//! commitments) and what selects the circuit: the kind, the sector size and the API version.
//!
//! ```json
//! { "kind": "porep", "sector_size": 2048, "api_version": "1.2.0",
//!   "porep_id": [129, …], "partitions": 1, "prover_id": […], "sector_id": 7,
//!   "phase1_output": { "vanilla_proofs": …, "comm_r": …, … } }
//! ```
//!
//! A `porep_id` that is a registered seal proof's, exactly as filecoin-proofs-api writes it,
//! brings that proof's API features: `StackedDrg*V1_1_Feat_SyntheticPoRep`'s is proven as
//! synthetic PoRep, a non-interactive proof's is refused by name.
//!
//! The vanilla part is kept as raw JSON until the sector size has chosen the merkle-tree type it
//! is read as, and then read straight from the file's text (a 32 GiB C1 output is tens of MB).

use std::path::Path;

use filecoin_proofs::Commitment;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use storage_proofs_core::api_version::ApiVersion;

use super::{check_sector_size, parse_api_version, ProofKind};
use crate::{Error, Result};

/// One proof job, as the vanilla file holds it. Each variant's struct carries its `kind`, which
/// is read first and selects the struct the rest of the file is read as (serde's tagged enums
/// cannot hold raw JSON).
#[derive(Debug)]
pub enum VanillaRequest {
    Porep(PorepVanilla),
    Snap(SnapVanilla),
    WindowPost(PostVanilla),
    WinningPost(PostVanilla),
}

/// A PoRep commit phase 2: what `seal_commit_phase2` takes.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PorepVanilla {
    pub kind: ProofKind,
    pub sector_size: u64,
    pub api_version: String,
    pub porep_id: [u8; 32],
    /// The sector's partition count, when it is not the published one for its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u8>,
    pub prover_id: [u8; 32],
    pub sector_id: u64,
    /// filecoin-proofs' `SealCommitPhase1Output` (the C1 output).
    pub phase1_output: Box<RawValue>,
}

/// A SnapDeals update: what `generate_empty_sector_update_proof_with_vanilla` takes.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapVanilla {
    pub kind: ProofKind,
    pub sector_size: u64,
    pub api_version: String,
    pub comm_r_old: Commitment,
    pub comm_r_new: Commitment,
    pub comm_d_new: Commitment,
    /// filecoin-proofs' `Vec<PartitionProof>`.
    pub vanilla_proofs: Box<RawValue>,
}

/// A Window or Winning PoSt: what `generate_*_post_with_vanilla` takes.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostVanilla {
    pub kind: ProofKind,
    pub sector_size: u64,
    pub api_version: String,
    pub randomness: [u8; 32],
    pub prover_id: [u8; 32],
    /// filecoin-proofs' `Vec<FallbackPoStSectorProof>`.
    pub vanilla_proofs: Box<RawValue>,
    /// Window PoSt only: prove just this partition of the deadline, from the vanilla proofs
    /// of its sectors (`generate_single_window_post_with_vanilla`); the proof is that
    /// partition's, for the node to merge with the others'. Unset: the whole deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_index: Option<usize>,
}

impl VanillaRequest {
    /// Reads a vanilla file. An unreadable file, truncated or garbled JSON, an unknown kind,
    /// sector size or API version is an [`Error::Vanilla`] naming the file and what is wrong.
    pub fn read(path: &Path) -> Result<VanillaRequest> {
        let text = std::fs::read_to_string(path).map_err(|e| vanilla_error(path, format!("cannot read it: {e}")))?;
        VanillaRequest::parse(&text).map_err(|reason| vanilla_error(path, reason))
    }

    /// Parses a vanilla file's text; the error says what is wrong, without the path.
    pub fn parse(text: &str) -> std::result::Result<VanillaRequest, String> {
        #[derive(Deserialize)]
        struct Kind {
            kind: ProofKind,
        }
        let read = |e: serde_json::Error| describe_json_error(&e);
        let Kind { kind } = serde_json::from_str(text).map_err(read)?;
        let request = match kind {
            ProofKind::Porep => VanillaRequest::Porep(serde_json::from_str(text).map_err(read)?),
            ProofKind::Snap => VanillaRequest::Snap(serde_json::from_str(text).map_err(read)?),
            ProofKind::WindowPost => VanillaRequest::WindowPost(serde_json::from_str(text).map_err(read)?),
            ProofKind::WinningPost => VanillaRequest::WinningPost(serde_json::from_str(text).map_err(read)?),
        };
        check_sector_size(request.sector_size()).map_err(|e| e.to_string())?;
        request.api_version().map_err(|e| e.to_string())?;
        if let VanillaRequest::WinningPost(PostVanilla { partition_index: Some(_), .. }) = &request {
            return Err("a Winning PoSt has one partition: partition_index is for Window PoSt jobs".into());
        }
        if let VanillaRequest::Porep(p) = &request {
            // The porep id of a registered proof names its features (super::porep_config): a
            // non-interactive one is refused here, by name, and a synthetic one must agree
            // with the job's size and API version.
            let api_version = request.api_version().map_err(|e| e.to_string())?;
            super::porep_config(p.sector_size, p.porep_id, api_version, p.partitions).map_err(|e| e.to_string())?;
        }
        Ok(request)
    }

    /// Writes the request as JSON (what [`VanillaRequest::read`] reads back).
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = match self {
            VanillaRequest::Porep(p) => serde_json::to_string(p),
            VanillaRequest::Snap(s) => serde_json::to_string(s),
            VanillaRequest::WindowPost(p) | VanillaRequest::WinningPost(p) => serde_json::to_string(p),
        }
        .map_err(|e| vanilla_error(path, format!("cannot encode it: {e}")))?;
        std::fs::write(path, text).map_err(|e| vanilla_error(path, format!("cannot write it: {e}")))
    }

    pub fn kind(&self) -> ProofKind {
        match self {
            VanillaRequest::Porep(_) => ProofKind::Porep,
            VanillaRequest::Snap(_) => ProofKind::Snap,
            VanillaRequest::WindowPost(_) => ProofKind::WindowPost,
            VanillaRequest::WinningPost(_) => ProofKind::WinningPost,
        }
    }

    pub fn sector_size(&self) -> u64 {
        match self {
            VanillaRequest::Porep(p) => p.sector_size,
            VanillaRequest::Snap(s) => s.sector_size,
            VanillaRequest::WindowPost(p) | VanillaRequest::WinningPost(p) => p.sector_size,
        }
    }

    pub fn api_version(&self) -> Result<ApiVersion> {
        let text = match self {
            VanillaRequest::Porep(p) => &p.api_version,
            VanillaRequest::Snap(s) => &s.api_version,
            VanillaRequest::WindowPost(p) | VanillaRequest::WinningPost(p) => &p.api_version,
        };
        parse_api_version(text)
    }

    /// Fails unless the file holds a job of `kind`.
    pub fn expect_kind(&self, kind: ProofKind, path: &Path) -> Result<()> {
        if self.kind() == kind {
            Ok(())
        } else {
            Err(vanilla_error(path, format!("it holds a {} job, not {kind}", self.kind())))
        }
    }
}

/// Reads the vanilla part of a job as filecoin-proofs' type `T`.
pub(crate) fn decode_vanilla<T: serde::de::DeserializeOwned>(what: &str, raw: &RawValue) -> Result<T> {
    serde_json::from_str(raw.get()).map_err(|e| {
        Error::Filecoin(format!(
            "the {what} is not filecoin-proofs' serde JSON for this sector size: {}",
            describe_json_error(&e)
        ))
    })
}

/// Encodes filecoin-proofs' type as the raw vanilla part of a job.
pub(crate) fn encode_vanilla<T: Serialize>(value: &T) -> Result<Box<RawValue>> {
    serde_json::to_string(value)
        .and_then(RawValue::from_string)
        .map_err(|e| Error::Filecoin(format!("encoding a vanilla proof: {e}")))
}

fn vanilla_error(path: &Path, reason: String) -> Error {
    Error::Vanilla { path: path.display().to_string(), reason }
}

/// serde's message, with what kind of failure it was, so a truncated file reads as one.
fn describe_json_error(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Eof => format!("the JSON ends early (truncated?): {e}"),
        Category::Syntax => format!("it is not valid JSON: {e}"),
        Category::Data => format!("the JSON does not describe a proof job: {e}"),
        Category::Io => format!("reading it failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post_job(kind: &str, sector_size: u64, api: &str) -> String {
        format!(
            r#"{{"kind":"{kind}","sector_size":{sector_size},"api_version":"{api}","randomness":{z},"prover_id":{z},"vanilla_proofs":[]}}"#,
            z = serde_json::to_string(&[0u8; 32]).unwrap()
        )
    }

    #[test]
    fn a_well_formed_job_parses_with_its_kind() {
        let job = VanillaRequest::parse(&post_job("window-post", 2048, "1.2.0")).unwrap();
        assert_eq!(job.kind(), ProofKind::WindowPost);
        assert_eq!(job.sector_size(), 2048);
        assert_eq!(job.api_version().unwrap(), ApiVersion::V1_2_0);
        let job = VanillaRequest::parse(&post_job("winning-post", 2048, "1.1.0")).unwrap();
        assert_eq!(job.kind(), ProofKind::WinningPost);
        let partition = post_job("window-post", 2048, "1.2.0").replace("}", r#","partition_index":3}"#);
        match VanillaRequest::parse(&partition).unwrap() {
            VanillaRequest::WindowPost(p) => assert_eq!(p.partition_index, Some(3)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_jobs_say_what_is_wrong() {
        let good = post_job("window-post", 2048, "1.2.0");
        let cases = [
            (good[..good.len() / 2].to_string(), "ends early"),
            (good.replace(':', ";"), "not valid JSON"),
            (post_job("window-post", 4096, "1.2.0"), "sector size 4096"),
            (post_job("window-post", 2048, "9.9.9"), "API version \"9.9.9\""),
            (post_job("lottery", 2048, "1.2.0"), "does not describe a proof job"),
            (good.replace("\"randomness\"", "\"seed\""), "does not describe a proof job"),
            (post_job("winning-post", 2048, "1.2.0").replace("}", r#","partition_index":0}"#), "is for Window PoSt"),
        ];
        for (text, expected) in cases {
            let err = VanillaRequest::parse(&text).expect_err(&text);
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    fn porep_job(registered: u64, sector_size: u64, api: &str) -> String {
        let proof = super::super::node_formats::seal_proof_from_ffi(registered).unwrap();
        format!(
            r#"{{"kind":"porep","sector_size":{sector_size},"api_version":"{api}","porep_id":{},"partitions":1,"prover_id":{},"sector_id":1,"phase1_output":{{}}}}"#,
            serde_json::to_string(&proof.as_v1_config().porep_id).unwrap(),
            serde_json::to_string(&[0u8; 32]).unwrap()
        )
    }

    #[test]
    fn a_registered_porep_id_brings_its_features_or_its_refusal() {
        // Interactive (5) and synthetic (10) 2 KiB PoRep parse; the synthetic one's
        // configuration has the feature.
        VanillaRequest::parse(&porep_job(5, 2048, "1.1.0")).unwrap();
        match VanillaRequest::parse(&porep_job(10, 2048, "1.2.0")).unwrap() {
            VanillaRequest::Porep(p) => {
                let config = super::super::porep_config(p.sector_size, p.porep_id, ApiVersion::V1_2_0, p.partitions);
                let feature = storage_proofs_core::api_version::ApiFeature::SyntheticPoRep;
                assert!(config.unwrap().feature_enabled(feature));
            }
            other => panic!("{other:?}"),
        }
        let cases = [
            (porep_job(15, 2048, "1.2.0"), vec!["StackedDrg2KiBV1_2_Feat_NonInteractivePoRep", "non-interactive"]),
            (porep_job(10, 2048, "1.1.0"), vec!["StackedDrg2KiBV1_1_Feat_SyntheticPoRep", "API 1.1.0", "API 1.2.0"]),
            (porep_job(13, 2048, "1.2.0"), vec!["StackedDrg32GiBV1_1_Feat_SyntheticPoRep", "32 GiB", "2 KiB"]),
        ];
        for (text, words) in cases {
            let err = VanillaRequest::parse(&text).expect_err(&text);
            for word in words {
                assert!(err.contains(word), "{text}: {err} does not name {word}");
            }
        }
    }

    #[test]
    fn another_kind_is_refused_by_name() {
        let job = VanillaRequest::parse(&post_job("winning-post", 2048, "1.2.0")).unwrap();
        let err = job.expect_kind(ProofKind::Porep, Path::new("job.json")).unwrap_err();
        assert!(matches!(err, Error::Vanilla { .. }));
        assert!(err.to_string().contains("winning-post job, not porep"), "{err}");
        job.expect_kind(ProofKind::WinningPost, Path::new("job.json")).unwrap();
    }
}
