//! Sparse sectors: a PoRep C1 output of any sector size, 32 GiB and 64 GiB included, made
//! without sealing, that storage-proofs' vanilla verifier accepts and the real circuit is
//! satisfied by.
//!
//! A PoRep partition opens only its challenged nodes, their parents' columns and their Merkle
//! paths, so only those need to exist:
//! - the sector is committed capacity (all-zero data), so tree D is the standard all-zero
//!   SHA-256 tree and comm_d is known without hashing 32 GiB; comm_d then picks the replica
//!   id, and the replica id with the seed picks the challenges, exactly as storage-proofs
//!   derives them ([`labels`]);
//! - each challenged node's labels are computed honestly from its parents' labels in
//!   storage-proofs' own graph; parents that are not challenged get random labels;
//! - tree C and tree R-last are sparse ([`trees`]): every node on the opened paths is hashed
//!   from its children and everything off them is a random digest, so all paths agree with
//!   one root, and comm_r = H(comm_c, comm_r_last).
//!
//! Interactive PoRep's challenges depend on the replica id and the seed, not on comm_r, which
//! is what lets the trees be chosen after the challenges. Synthetic and non-interactive PoRep
//! derive challenges from comm_r, so they cannot be made this way and are refused.
//!
//! The proofs are storage-proofs' own types (`Proof`, `ReplicaColumnProof`, `ColumnProof`,
//! `LabelingProof`, `EncodingProof`, `MerkleProof`), built with their public constructors
//! ([`assembly`]); [`check`] judges them with storage-proofs' verifier and the circuit.
//! For tests and benchmarks: the sector was never sealed and holds no data.

mod assembly;
mod check;
pub mod cli;
mod labels;
pub mod test_key;
mod trees;

use std::path::{Path, PathBuf};

use filecoin_proofs::PoRepConfig;
use storage_proofs_core::api_version::{ApiFeature, ApiVersion};
use storage_proofs_core::merkle::MerkleTreeTrait;

pub use assembly::{sparse_sector, SparseSector};
pub use check::{check_partition_satisfied, partition_circuit, verify_vanilla};

use super::vanilla::{encode_vanilla, PorepVanilla, VanillaRequest};
use super::{porep_config, sector_size_name, ProofKind};
use crate::{Error, Result};

/// The porep id of a sector size's interactive PoRep as a node registers it
/// (`RegisteredSealProof::StackedDrg*V1_1`: 5 for 2 KiB up to 9 for 64 GiB, little-endian in
/// the first 8 bytes).
pub fn registered_porep_id(sector_size: u64) -> Result<[u8; 32]> {
    let index = super::SECTOR_SIZES.iter().position(|&s| s == sector_size).ok_or_else(|| {
        super::check_sector_size(sector_size).err().unwrap_or_else(|| Error::Filecoin("unknown sector size".into()))
    })?;
    let mut porep_id = [0u8; 32];
    porep_id[..8].copy_from_slice(&(5 + index as u64).to_le_bytes());
    Ok(porep_id)
}

/// The interactive PoRep configuration of a sparse sector, or an error for one whose
/// challenges depend on comm_r (synthetic or non-interactive PoRep).
pub fn sparse_porep_config(
    sector_size: u64,
    porep_id: [u8; 32],
    api_version: ApiVersion,
    partitions: Option<u8>,
) -> Result<PoRepConfig> {
    let config = porep_config(sector_size, porep_id, api_version, partitions)?;
    refuse_non_interactive(&config)?;
    Ok(config)
}

fn refuse_non_interactive(config: &PoRepConfig) -> Result<()> {
    for feature in [ApiFeature::SyntheticPoRep, ApiFeature::NonInteractivePoRep] {
        if config.feature_enabled(feature) {
            return Err(Error::Filecoin(format!(
                "a sparse sector needs interactive PoRep: {feature:?} derives its challenges from comm_r"
            )));
        }
    }
    Ok(())
}

/// What [`write_sparse_sector`] wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SparseSectorFiles {
    pub sector_size: u64,
    pub partitions: usize,
    pub challenges: usize,
    /// The PoRep job (`snarkpipe prove --kind porep --vanilla JOB`).
    pub job: PathBuf,
    /// The bare C1 output, filecoin-proofs' `SealCommitPhase1Output` as serde writes it.
    pub c1_output: PathBuf,
    pub comm_r: String,
    pub comm_d: String,
}

/// Makes a sparse sector for `config`, checks it with storage-proofs' vanilla verifier and
/// writes its job file and C1 output into `out` (named by the sector size).
pub fn write_sparse_sector(config: &PoRepConfig, seed: u64, out: &Path) -> Result<SparseSectorFiles> {
    crate::with_sector_shape!(u64::from(config.sector_size), Tree => write_shaped::<Tree>(config, seed, out))
}

fn write_shaped<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    seed: u64,
    out: &Path,
) -> Result<SparseSectorFiles> {
    let sector = sparse_sector::<Tree>(config, seed)?;
    verify_vanilla(config, &sector.prover_id, sector.sector_id, &sector.phase1_output)?;
    std::fs::create_dir_all(out).map_err(|e| Error::io(format!("creating {}", out.display()), e))?;
    let sector_size = u64::from(config.sector_size);
    let name = format!("porep-{}-sparse", sector_size_name(sector_size).replace(' ', "").to_lowercase());
    let c1_output = out.join(format!("{name}.c1.json"));
    let c1_text = serde_json::to_string(&sector.phase1_output)
        .map_err(|e| Error::Filecoin(format!("encoding the C1 output: {e}")))?;
    std::fs::write(&c1_output, c1_text).map_err(|e| Error::io(format!("writing {}", c1_output.display()), e))?;
    let job = out.join(format!("{name}.json"));
    VanillaRequest::Porep(PorepVanilla {
        kind: ProofKind::Porep,
        sector_size,
        api_version: config.api_version.to_string(),
        porep_id: config.porep_id,
        partitions: Some(config.partitions.0),
        prover_id: sector.prover_id,
        sector_id: u64::from(sector.sector_id),
        phase1_output: encode_vanilla(&sector.phase1_output)?,
    })
    .write(&job)?;
    Ok(SparseSectorFiles {
        sector_size,
        partitions: sector.phase1_output.vanilla_proofs.len(),
        challenges: sector.phase1_output.vanilla_proofs.iter().map(Vec::len).sum(),
        job,
        c1_output,
        comm_r: hex::encode(sector.phase1_output.comm_r),
        comm_d: hex::encode(sector.phase1_output.comm_d),
    })
}
