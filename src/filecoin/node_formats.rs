//! What a node already holds, read as snarkpipe's vanilla jobs ([`VanillaRequest`]):
//!
//! - filecoin-ffi's C1 output: the JSON of filecoin-proofs-api's `SealCommitPhase1Output`, whose
//!   `registered_proof` names the seal proof and whose `vanilla_proofs` are wrapped in an enum
//!   variant per sector size;
//! - the envelope lotus-bench and Curio keep it in: `{"SectorNum", "Phase1Out", "SectorSize"}`,
//!   `Phase1Out` being that JSON in base64 (Go's encoding of a byte slice);
//! - the PoSt and SnapDeals vanilla proofs filecoin-ffi hands out: one bincode
//!   `FallbackPoStSectorProof` per sector, one bincode `PartitionProof` per partition;
//! - registered proofs in filecoin-ffi's numbering (the chain's), and the prover id a miner's
//!   actor id stands for.
//!
//! Sector size, porep id, API version, partitions and features come from the registered proof,
//! through filecoin-proofs-api's own tables; nothing is guessed from the file.

use std::collections::BTreeMap;

use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::vanilla::{encode_vanilla, PorepVanilla, PostVanilla, SnapVanilla, VanillaRequest};
use super::{sector_size_name, ProofKind};
use crate::with_sector_shape;

/// Why a node's file or request cannot become a job: each names what it found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeFormatError {
    #[error("registered {family} proof {value} is not one filecoin-ffi numbers ({known})")]
    UnknownRegisteredProof { family: &'static str, value: u64, known: &'static str },
    #[error(
        "{proof:?} is a {feature} PoRep, whose proofs filecoin-proofs aggregates; snarkpipe does not prove it yet: \
         prove it with filecoin-proofs, or seal with interactive or synthetic PoRep (StackedDrg*V1, StackedDrg*V1_1, \
         StackedDrg*V1_1_Feat_SyntheticPoRep)"
    )]
    UnsupportedSealProof { proof: RegisteredSealProof, feature: &'static str },
    #[error("{0}")]
    Malformed(String),
    #[error("{0}")]
    Mismatch(String),
}

type Result<T> = std::result::Result<T, NodeFormatError>;

fn malformed(what: impl Into<String>) -> NodeFormatError {
    NodeFormatError::Malformed(what.into())
}

/// The prover id filecoin-ffi derives from a miner's actor id: the payload of its ID address
/// (the id as an unsigned LEB128 varint), left-aligned in 32 zero bytes.
pub fn prover_id_of_miner(miner_id: u64) -> [u8; 32] {
    let mut id = [0u8; 32];
    let mut rest = miner_id;
    for byte in id.iter_mut() {
        *byte = (rest & 0x7f) as u8;
        rest >>= 7;
        if rest == 0 {
            break;
        }
        *byte |= 0x80;
    }
    id
}

/// The seal proofs in filecoin-ffi's numbering: five sizes (2 KiB to 64 GiB) each of V1, V1_1,
/// V1_1 with synthetic PoRep and V1_2 with non-interactive PoRep. It is the chain's numbering,
/// which filecoin-proofs-api also writes into the first bytes of each porep id (a unit test
/// holds the table to that).
pub fn seal_proof_from_ffi(value: u64) -> Result<RegisteredSealProof> {
    use RegisteredSealProof::*;
    const TABLE: [RegisteredSealProof; 20] = [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
        StackedDrg2KiBV1_1,
        StackedDrg8MiBV1_1,
        StackedDrg512MiBV1_1,
        StackedDrg32GiBV1_1,
        StackedDrg64GiBV1_1,
        StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
        StackedDrg8MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg512MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg32GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg64GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg8MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg512MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg32GiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg64GiBV1_2_Feat_NonInteractivePoRep,
    ];
    usize::try_from(value).ok().and_then(|i| TABLE.get(i)).copied().ok_or(NodeFormatError::UnknownRegisteredProof {
        family: "seal",
        value,
        known: "0 to 19",
    })
}

/// Refuses the seal proofs snarkpipe does not prove: non-interactive PoRep, whose partition
/// proofs filecoin-proofs aggregates into one. Interactive and synthetic PoRep are proven, the
/// synthetic feature reaching the PoRep configuration through the porep id
/// ([`super::porep_config`]).
pub fn check_seal_proof_supported(proof: RegisteredSealProof) -> Result<()> {
    if proof.as_v1_config().api_features.contains(&filecoin_proofs_api::ApiFeature::NonInteractivePoRep) {
        return Err(NodeFormatError::UnsupportedSealProof { proof, feature: "non-interactive" });
    }
    Ok(())
}

/// The registered seal proof whose porep id `porep_id` is, exactly as filecoin-proofs-api
/// writes it (the proof's number and nonce, little-endian, then zeros); `None` for any other
/// id (a test's own, or the zeros a SnapDeals configuration carries).
pub fn seal_proof_of_porep_id(porep_id: &[u8; 32]) -> Option<RegisteredSealProof> {
    let mut number = [0u8; 8];
    number.copy_from_slice(&porep_id[..8]);
    let proof = seal_proof_from_ffi(u64::from_le_bytes(number)).ok()?;
    (proof.as_v1_config().porep_id == *porep_id).then_some(proof)
}

/// The PoSt proofs in filecoin-ffi's numbering: Winning 2 KiB to 64 GiB are 0 to 4, Window
/// 5 to 9, and Window at the grinding fix (filecoin-proofs-api's `V1_2`, the chain's `V1_1`)
/// 10 to 14.
pub fn post_proof_from_ffi(value: u64) -> Result<RegisteredPoStProof> {
    use RegisteredPoStProof::*;
    const TABLE: [RegisteredPoStProof; 15] = [
        StackedDrgWinning2KiBV1,
        StackedDrgWinning8MiBV1,
        StackedDrgWinning512MiBV1,
        StackedDrgWinning32GiBV1,
        StackedDrgWinning64GiBV1,
        StackedDrgWindow2KiBV1,
        StackedDrgWindow8MiBV1,
        StackedDrgWindow512MiBV1,
        StackedDrgWindow32GiBV1,
        StackedDrgWindow64GiBV1,
        StackedDrgWindow2KiBV1_2,
        StackedDrgWindow8MiBV1_2,
        StackedDrgWindow512MiBV1_2,
        StackedDrgWindow32GiBV1_2,
        StackedDrgWindow64GiBV1_2,
    ];
    usize::try_from(value).ok().and_then(|i| TABLE.get(i)).copied().ok_or(NodeFormatError::UnknownRegisteredProof {
        family: "PoSt",
        value,
        known: "0 to 14",
    })
}

/// The SnapDeals proofs in filecoin-ffi's numbering: 2 KiB to 64 GiB are 0 to 4.
pub fn update_proof_from_ffi(value: u64) -> Result<RegisteredUpdateProof> {
    use RegisteredUpdateProof::*;
    const TABLE: [RegisteredUpdateProof; 5] =
        [StackedDrg2KiBV1, StackedDrg8MiBV1, StackedDrg512MiBV1, StackedDrg32GiBV1, StackedDrg64GiBV1];
    usize::try_from(value).ok().and_then(|i| TABLE.get(i)).copied().ok_or(NodeFormatError::UnknownRegisteredProof {
        family: "update",
        value,
        known: "0 to 4",
    })
}

/// filecoin-proofs-api's name of the `vanilla_proofs` variant a sector size is wrapped in.
fn vanilla_variant(sector_size: u64) -> String {
    let name = sector_size_name(sector_size).replace(' ', "");
    format!("StackedDrg{name}V1")
}

/// filecoin-proofs-api's `SealCommitPhase1Output`, its large parts kept as raw JSON.
#[derive(Deserialize)]
struct FfiPhase1Output<'a> {
    registered_proof: RegisteredSealProof,
    #[serde(borrow)]
    vanilla_proofs: BTreeMap<&'a str, &'a RawValue>,
    #[serde(borrow)]
    comm_r: &'a RawValue,
    #[serde(borrow)]
    comm_d: &'a RawValue,
    #[serde(borrow)]
    replica_id: &'a RawValue,
    #[serde(borrow)]
    seed: &'a RawValue,
    #[serde(borrow)]
    ticket: &'a RawValue,
}

/// Which PoRep input a file or message holds, told by its top-level JSON keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PorepInput {
    /// snarkpipe's own job file (`kind`, `phase1_output`, …).
    SnarkpipeJob,
    /// filecoin-ffi's C1 output (`registered_proof`, `vanilla_proofs`, …).
    FfiC1,
    /// lotus-bench's and Curio's envelope (`SectorNum`, `Phase1Out`, `SectorSize`).
    Envelope,
}

/// Tells the three PoRep inputs apart; anything else is refused naming the keys it has.
pub fn porep_input_format(bytes: &[u8]) -> Result<PorepInput> {
    // Borrowed raw values: the scan validates the JSON without building it.
    let keys: BTreeMap<&str, &RawValue> = serde_json::from_slice(bytes).map_err(|e| {
        malformed(format!("it is not a JSON object (a C1 output, its envelope or a snarkpipe job): {e}"))
    })?;
    let has = |key: &str| keys.contains_key(key);
    if has("kind") {
        Ok(PorepInput::SnarkpipeJob)
    } else if has("Phase1Out") {
        Ok(PorepInput::Envelope)
    } else if has("registered_proof") && has("vanilla_proofs") {
        Ok(PorepInput::FfiC1)
    } else {
        Err(malformed(format!(
            "it is neither filecoin-ffi's C1 output (registered_proof, vanilla_proofs, …), lotus-bench's envelope \
             (SectorNum, Phase1Out, SectorSize) nor a snarkpipe job (kind, …); its keys are {:?}",
            keys.keys().collect::<Vec<_>>()
        )))
    }
}

/// A PoRep job read from a node's C1 output, with what it was read as.
#[derive(Debug)]
pub struct NodePorep {
    pub proof: RegisteredSealProof,
    pub sector_number: u64,
    pub job: VanillaRequest,
}

/// A PoRep job from filecoin-ffi's C1 output (filecoin-proofs-api's `SealCommitPhase1Output`
/// JSON) of sector `sector_number` of miner `miner_id`.
pub fn porep_job_from_ffi_c1(c1: &[u8], miner_id: u64, sector_number: u64) -> Result<NodePorep> {
    let text = std::str::from_utf8(c1).map_err(|e| malformed(format!("the C1 output is not UTF-8 JSON: {e}")))?;
    let c1: FfiPhase1Output = serde_json::from_str(text).map_err(|e| {
        malformed(format!(
            "it is not filecoin-proofs-api's SealCommitPhase1Output JSON (filecoin-ffi's C1 output): {e}"
        ))
    })?;
    let proof = c1.registered_proof;
    check_seal_proof_supported(proof)?;
    let config = proof.as_v1_config();
    let sector_size = u64::from(config.sector_size);
    let expected = vanilla_variant(sector_size);
    let (variant, proofs) = match c1.vanilla_proofs.iter().next() {
        Some((variant, proofs)) if c1.vanilla_proofs.len() == 1 => (*variant, *proofs),
        _ => {
            return Err(malformed(format!(
                "its vanilla_proofs must be one {expected} entry; it has {:?}",
                c1.vanilla_proofs.keys().collect::<Vec<_>>()
            )))
        }
    };
    if variant != expected {
        return Err(NodeFormatError::Mismatch(format!(
            "the registered proof {proof:?} is of a {} sector but its vanilla proofs are {variant}",
            sector_size_name(sector_size)
        )));
    }
    // filecoin-proofs' own SealCommitPhase1Output: the same fields, the vanilla proofs unwrapped.
    let inner = format!(
        r#"{{"vanilla_proofs":{},"comm_r":{},"comm_d":{},"replica_id":{},"seed":{},"ticket":{}}}"#,
        proofs.get(),
        c1.comm_r.get(),
        c1.comm_d.get(),
        c1.replica_id.get(),
        c1.seed.get(),
        c1.ticket.get()
    );
    let phase1_output =
        RawValue::from_string(inner).map_err(|e| malformed(format!("re-wrapping the C1 output: {e}")))?;
    let job = VanillaRequest::Porep(PorepVanilla {
        kind: ProofKind::Porep,
        sector_size,
        api_version: config.api_version.to_string(),
        porep_id: config.porep_id,
        partitions: Some(config.partitions.0),
        prover_id: prover_id_of_miner(miner_id),
        sector_id: sector_number,
        phase1_output,
    });
    Ok(NodePorep { proof, sector_number, job })
}

/// lotus-bench's and Curio's envelope around a C1 output.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    #[serde(rename = "SectorNum")]
    sector_num: u64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
}

/// A PoRep job from lotus-bench's or Curio's envelope; the sector number is the envelope's.
pub fn porep_job_from_envelope(envelope: &[u8], miner_id: u64) -> Result<NodePorep> {
    use base64::Engine as _;
    let envelope: Envelope = serde_json::from_slice(envelope).map_err(|e| {
        malformed(format!(
            "it is not the C1 envelope of lotus-bench and Curio ({{\"SectorNum\", \"Phase1Out\" in base64, \
             \"SectorSize\"}}): {e}"
        ))
    })?;
    let c1 = base64::engine::general_purpose::STANDARD
        .decode(envelope.phase1_out.as_bytes())
        .map_err(|e| malformed(format!("the envelope's Phase1Out is not base64: {e}")))?;
    let porep = porep_job_from_ffi_c1(&c1, miner_id, envelope.sector_num)?;
    if porep.job.sector_size() != envelope.sector_size {
        return Err(NodeFormatError::Mismatch(format!(
            "the envelope says SectorSize {} ({}) but its C1 output is of a {} sector",
            envelope.sector_size,
            sector_size_name(envelope.sector_size),
            sector_size_name(porep.job.sector_size())
        )));
    }
    Ok(porep)
}

/// A Window or Winning PoSt job from filecoin-ffi's per-sector vanilla proofs (bincode
/// `FallbackPoStSectorProof`s, as its single-vanilla-proof call returns them). A Window PoSt
/// with `partition_index` is that partition's proof, for the node to merge.
pub fn post_job_from_ffi(
    proof: RegisteredPoStProof,
    vanilla_proofs: &[Vec<u8>],
    randomness: [u8; 32],
    prover_id: [u8; 32],
    partition_index: Option<usize>,
) -> Result<VanillaRequest> {
    let kind = match proof.typ() {
        filecoin_proofs_api::PoStType::Window => ProofKind::WindowPost,
        filecoin_proofs_api::PoStType::Winning => ProofKind::WinningPost,
    };
    if vanilla_proofs.is_empty() {
        return Err(malformed(format!("a {kind} needs the vanilla proof of at least one sector; none came")));
    }
    let sector_size = u64::from(proof.sector_size());
    let what = format!("FallbackPoStSectorProof of a {} sector ({proof:?})", sector_size_name(sector_size));
    let vanilla_proofs = with_sector_shape!(sector_size, Tree => {
        Ok(rewrite_bincode::<filecoin_proofs::FallbackPoStSectorProof<Tree>>(vanilla_proofs, &what))
    })
    .map_err(|e| malformed(e.to_string()))??;
    Ok(post_request(
        kind,
        PostVanilla {
            kind,
            sector_size,
            api_version: proof.version().to_string(),
            randomness,
            prover_id,
            vanilla_proofs,
            partition_index: if kind == ProofKind::WindowPost { partition_index } else { None },
        },
    ))
}

fn post_request(kind: ProofKind, post: PostVanilla) -> VanillaRequest {
    if kind == ProofKind::WindowPost {
        VanillaRequest::WindowPost(post)
    } else {
        VanillaRequest::WinningPost(post)
    }
}

/// A SnapDeals job from filecoin-ffi's per-partition vanilla proofs (bincode `PartitionProof`s)
/// and the update's raw 32-byte commitments.
pub fn snap_job_from_ffi(
    proof: RegisteredUpdateProof,
    vanilla_proofs: &[Vec<u8>],
    comm_r_old: [u8; 32],
    comm_r_new: [u8; 32],
    comm_d_new: [u8; 32],
) -> Result<VanillaRequest> {
    if vanilla_proofs.is_empty() {
        return Err(malformed("a SnapDeals update needs its partitions' vanilla proofs; none came"));
    }
    let sector_size = u64::from(proof.sector_size());
    let what = format!("PartitionProof of a {} sector ({proof:?})", sector_size_name(sector_size));
    let vanilla_proofs = with_sector_shape!(sector_size, Tree => {
        Ok(rewrite_bincode::<storage_proofs_update::PartitionProof<Tree>>(vanilla_proofs, &what))
    })
    .map_err(|e| malformed(e.to_string()))??;
    Ok(VanillaRequest::Snap(SnapVanilla {
        kind: ProofKind::Snap,
        sector_size,
        api_version: proof.version().to_string(),
        comm_r_old,
        comm_r_new,
        comm_d_new,
        vanilla_proofs,
    }))
}

/// Reads each of `items` as bincode `T` and writes them as one JSON array (what the job's
/// vanilla part holds). A trailing byte is refused: a proof of another type must not pass.
fn rewrite_bincode<T: serde::de::DeserializeOwned + serde::Serialize>(
    items: &[Vec<u8>],
    what: &str,
) -> Result<Box<RawValue>> {
    use bincode::Options as _;
    // bincode::deserialize's own settings (fixed-width integers, no size limit), trailing bytes refused.
    let options = bincode::DefaultOptions::new().with_fixint_encoding().reject_trailing_bytes();
    let decoded = items
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            options
                .deserialize::<T>(bytes)
                .map_err(|e| malformed(format!("vanilla proof {i} is not a bincode {what}: {e}")))
        })
        .collect::<Result<Vec<T>>>()?;
    encode_vanilla(&decoded).map_err(|e| malformed(e.to_string()))
}

/// The job as the JSON `snarkpipe prove --vanilla` and the daemon's own service read.
pub fn job_json(job: &VanillaRequest) -> String {
    let text = match job {
        VanillaRequest::Porep(p) => serde_json::to_string(p),
        VanillaRequest::Snap(s) => serde_json::to_string(s),
        VanillaRequest::WindowPost(p) | VanillaRequest::WinningPost(p) => serde_json::to_string(p),
    };
    // Serializing plain structs of numbers, strings and raw JSON cannot fail.
    text.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_miner_id_is_its_id_address_payload() {
        // LEB128: 7 bits a byte, low first, the high bit set on every byte but the last.
        assert_eq!(prover_id_of_miner(0)[..2], [0, 0]);
        assert_eq!(prover_id_of_miner(1000)[..3], [0xe8, 0x07, 0]);
        assert_eq!(prover_id_of_miner(127)[..2], [0x7f, 0]);
        assert_eq!(prover_id_of_miner(128)[..3], [0x80, 0x01, 0]);
        let max = prover_id_of_miner(u64::MAX);
        assert_eq!(max[..10], [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert!(max[10..].iter().all(|b| *b == 0));
    }

    #[test]
    fn the_seal_proof_numbers_are_those_filecoin_proofs_api_writes_into_porep_ids() {
        for value in 0..20u64 {
            let proof = seal_proof_from_ffi(value).unwrap();
            assert_eq!(proof.as_v1_config().porep_id[..8], value.to_le_bytes(), "{proof:?}");
        }
        let err = seal_proof_from_ffi(20).unwrap_err();
        assert!(err.to_string().contains("seal proof 20"), "{err}");
    }

    #[test]
    fn the_post_and_update_numbers_follow_size_then_type() {
        let sizes = super::super::SECTOR_SIZES;
        for (i, size) in sizes.iter().enumerate() {
            let winning = post_proof_from_ffi(i as u64).unwrap();
            let window = post_proof_from_ffi(5 + i as u64).unwrap();
            let window_v1_2 = post_proof_from_ffi(10 + i as u64).unwrap();
            assert_eq!(winning.typ(), filecoin_proofs_api::PoStType::Winning);
            for proof in [winning, window, window_v1_2] {
                assert_eq!(u64::from(proof.sector_size()), *size, "{proof:?}");
            }
            assert_eq!(window.typ(), filecoin_proofs_api::PoStType::Window);
            assert_eq!(window.version(), filecoin_proofs_api::ApiVersion::V1_0_0);
            assert_eq!(window_v1_2.version(), filecoin_proofs_api::ApiVersion::V1_2_0);
            assert_eq!(u64::from(update_proof_from_ffi(i as u64).unwrap().sector_size()), *size);
        }
        assert!(post_proof_from_ffi(15).is_err() && update_proof_from_ffi(5).is_err());
    }

    #[test]
    fn only_non_interactive_porep_is_refused_and_by_name() {
        // 0 to 9 interactive, 10 to 14 synthetic: proven.
        for value in 0..15 {
            check_seal_proof_supported(seal_proof_from_ffi(value).unwrap()).unwrap();
        }
        for value in 15..20 {
            let proof = seal_proof_from_ffi(value).unwrap();
            let err = check_seal_proof_supported(proof).unwrap_err();
            assert!(matches!(err, NodeFormatError::UnsupportedSealProof { proof: p, .. } if p == proof), "{err}");
            let err = err.to_string();
            assert!(err.contains(&format!("{proof:?}")) && err.contains("non-interactive"), "{err}");
        }
    }

    #[test]
    fn a_porep_id_names_its_registered_proof_only_when_it_is_exactly_filecoin_proofs_apis() {
        for value in 0..20u64 {
            let proof = seal_proof_from_ffi(value).unwrap();
            let porep_id = proof.as_v1_config().porep_id;
            assert_eq!(seal_proof_of_porep_id(&porep_id), Some(proof));
            // A nonce or any later byte set: some other id, not the registered proof's.
            for byte in [8, 16, 31] {
                let mut other = porep_id;
                other[byte] = 1;
                assert_eq!(seal_proof_of_porep_id(&other), None, "{proof:?} with byte {byte} set");
            }
        }
        let mut past = [0u8; 32];
        past[0] = 20;
        assert_eq!(seal_proof_of_porep_id(&past), None);
        assert_eq!(seal_proof_of_porep_id(&[129; 32]), None);
    }

    #[test]
    fn the_vanilla_variant_names_are_filecoin_proofs_apis() {
        let names: Vec<String> = super::super::SECTOR_SIZES.iter().map(|s| vanilla_variant(*s)).collect();
        assert_eq!(
            names,
            ["StackedDrg2KiBV1", "StackedDrg8MiBV1", "StackedDrg512MiBV1", "StackedDrg32GiBV1", "StackedDrg64GiBV1"]
        );
    }
}
