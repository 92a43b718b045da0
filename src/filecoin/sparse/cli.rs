//! `snarkpipe sparse-sector`: a sparse sector's PoRep job and C1 output, for tests and
//! benchmarks of sizes no machine here can seal.

use std::path::PathBuf;

use super::{registered_porep_id, sparse_porep_config, write_sparse_sector, SparseSectorFiles};
use crate::filecoin::{parse_api_version, KeyName};
use crate::Result;

/// The flags of `snarkpipe sparse-sector`.
#[derive(Debug, Clone, clap::Args)]
pub struct SparseSectorArgs {
    /// The sector size: 2k, 8m, 512m, 32g or 64g (or 32GiB).
    #[arg(long)]
    pub sector_size: String,
    /// Where the job file and the C1 output go.
    #[arg(long)]
    pub out: PathBuf,
    /// The registered seal proof number its porep id encodes (default: the size's
    /// interactive `StackedDrg*V1_1`, 8 for 32 GiB).
    #[arg(long)]
    pub registered_proof: Option<u64>,
    #[arg(long, default_value = "1.2.0")]
    pub api_version: String,
    /// The partition count, when not the published one for the size (small test sectors).
    #[arg(long)]
    pub partitions: Option<u8>,
    /// Seeds every random choice: the ids, ticket and seed, and the labels and digests off
    /// the opened paths.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Makes the sparse sector, checks it with storage-proofs' vanilla verifier and writes it.
pub fn make_sparse_sector(args: &SparseSectorArgs) -> Result<SparseSectorFiles> {
    let sector_size = format!("porep-{}", args.sector_size).parse::<KeyName>()?.sector_size;
    let porep_id = match args.registered_proof {
        Some(number) => {
            let mut porep_id = [0u8; 32];
            porep_id[..8].copy_from_slice(&number.to_le_bytes());
            porep_id
        }
        None => registered_porep_id(sector_size)?,
    };
    let config = sparse_porep_config(sector_size, porep_id, parse_api_version(&args.api_version)?, args.partitions)?;
    write_sparse_sector(&config, args.seed, &args.out)
}
