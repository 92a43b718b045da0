//! Filecoin's four proof kinds, proven on snarkpipe's pipeline from the vanilla proofs a node
//! already has: PoRep (a C1 output), SnapDeals (an empty-sector update), Window PoSt and
//! Winning PoSt.
//!
//! The circuits, vanilla-proof types, parameter names and verifiers are filecoin-proofs' and
//! storage-proofs' own: this module builds each partition's circuit with the compound proof's
//! `circuit` (as `CompoundProof::circuit_proofs` does), proves the circuits on a [`Prover`]
//! instead of bellperson's `create_random_proof_batch`, and encodes the proofs exactly as
//! filecoin-proofs does, so its verifiers accept the bytes.
//!
//! Parameters are read from the node's parameter directory by their filecoin-proofs cache
//! names, memory-mapped, and kept resident in the prover's key cache across proofs.
//!
//! [`Prover`]: crate::prover::Prover

pub mod cli;
pub mod engine;
pub mod fixtures;
pub mod node_formats;
pub mod params;
pub mod sparse;
pub mod vanilla;

use std::fmt;

use filecoin_proofs::{PoRepConfig, PoStConfig, PoStType, SectorSize};
use storage_proofs_core::api_version::ApiVersion;

use crate::prover::Priority;
use crate::{Error, Result};

pub use engine::{
    generate_empty_sector_update_proof_with_vanilla, generate_single_window_post_with_vanilla,
    generate_window_post_with_vanilla, generate_winning_post_with_vanilla, seal_commit_phase2, FilecoinProver,
    ProofTimings, ProvenKind, SynthesisFigures,
};
pub use vanilla::VanillaRequest;

/// The proof kinds a storage provider proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ProofKind {
    /// Proof of replication: the SNARK of a sealed sector (commit phase 2).
    Porep,
    /// SnapDeals: the proof that an empty sector was updated with data.
    Snap,
    /// Window PoSt: the proof of a deadline's sectors, due within its window.
    WindowPost,
    /// Winning PoSt: the proof that wins a block, due within the epoch.
    WinningPost,
}

impl ProofKind {
    pub const ALL: [ProofKind; 4] = [ProofKind::Porep, ProofKind::Snap, ProofKind::WindowPost, ProofKind::WinningPost];

    /// How urgently the kind's partitions are scheduled: a late Winning PoSt loses a block, a
    /// late Window PoSt a fault penalty; sealing and updates can wait behind them.
    pub fn priority(self) -> Priority {
        match self {
            ProofKind::WinningPost => Priority::Critical,
            ProofKind::WindowPost => Priority::High,
            ProofKind::Porep | ProofKind::Snap => Priority::Normal,
        }
    }

    /// The name the CLI and the vanilla files use.
    pub fn name(self) -> &'static str {
        match self {
            ProofKind::Porep => "porep",
            ProofKind::Snap => "snap",
            ProofKind::WindowPost => "window-post",
            ProofKind::WinningPost => "winning-post",
        }
    }
}

impl fmt::Display for ProofKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The sector sizes filecoin-proofs publishes parameters for. Each has its own merkle-tree
/// shape, the type parameter of every vanilla proof.
pub const SECTOR_SIZES: [u64; 5] = [
    filecoin_proofs::SECTOR_SIZE_2_KIB,
    filecoin_proofs::SECTOR_SIZE_8_MIB,
    filecoin_proofs::SECTOR_SIZE_512_MIB,
    filecoin_proofs::SECTOR_SIZE_32_GIB,
    filecoin_proofs::SECTOR_SIZE_64_GIB,
];

/// A sector size in words (`2 KiB`, `32 GiB`), for messages.
pub fn sector_size_name(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024 && value % 1024 == 0 && unit + 1 < UNITS.len() {
        value /= 1024;
        unit += 1;
    }
    format!("{value} {}", UNITS[unit])
}

/// A proving key named by its kind and sector size, as `snarkpipe serve --preload` takes it:
/// `porep-32g`, `snap-64g`, `window-post-2k`, `winning-post-32gib`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyName {
    pub kind: ProofKind,
    pub sector_size: u64,
}

impl std::str::FromStr for KeyName {
    type Err = Error;

    fn from_str(text: &str) -> Result<KeyName> {
        let usage = || {
            Error::Config(format!(
                "{text:?} is not a key name: write KIND-SIZE, KIND one of {} and SIZE one of 2k, 8m, 512m, 32g, 64g \
                 (porep-32g, winning-post-2k)",
                ProofKind::ALL.map(ProofKind::name).join(", ")
            ))
        };
        let lower = text.trim().to_ascii_lowercase();
        let (kind, size) = lower.rsplit_once('-').ok_or_else(usage)?;
        let kind = ProofKind::ALL.into_iter().find(|k| k.name() == kind).ok_or_else(usage)?;
        let size = size.strip_suffix("ib").unwrap_or(size);
        let (digits, unit) = size.split_at(size.find(|c: char| !c.is_ascii_digit()).unwrap_or(size.len()));
        let shift = match unit {
            "k" => 10,
            "m" => 20,
            "g" => 30,
            _ => return Err(usage()),
        };
        let sector_size = digits.parse::<u64>().map_err(|_| usage())?.checked_mul(1 << shift).ok_or_else(usage)?;
        check_sector_size(sector_size)?;
        Ok(KeyName { kind, sector_size })
    }
}

impl fmt::Display for KeyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, sector_size_name(self.sector_size))
    }
}

/// Fails unless filecoin-proofs publishes parameters for `bytes`.
pub fn check_sector_size(bytes: u64) -> Result<()> {
    if SECTOR_SIZES.contains(&bytes) {
        Ok(())
    } else {
        Err(Error::Filecoin(format!(
            "sector size {bytes} ({}) is not one filecoin-proofs publishes parameters for; use one of {}",
            sector_size_name(bytes),
            SECTOR_SIZES.iter().map(|s| sector_size_name(*s)).collect::<Vec<_>>().join(", ")
        )))
    }
}

/// Runs `$body` with `$tree` bound to the merkle-tree shape of sector size `$size` (a `u64`),
/// or evaluates to an error for a size filecoin-proofs does not publish.
#[macro_export]
#[doc(hidden)]
macro_rules! with_sector_shape {
    ($size:expr, $tree:ident => $body:expr) => {{
        match $size {
            filecoin_proofs::SECTOR_SIZE_2_KIB => {
                type $tree = filecoin_proofs::SectorShape2KiB;
                $body
            }
            filecoin_proofs::SECTOR_SIZE_8_MIB => {
                type $tree = filecoin_proofs::SectorShape8MiB;
                $body
            }
            filecoin_proofs::SECTOR_SIZE_512_MIB => {
                type $tree = filecoin_proofs::SectorShape512MiB;
                $body
            }
            filecoin_proofs::SECTOR_SIZE_32_GIB => {
                type $tree = filecoin_proofs::SectorShape32GiB;
                $body
            }
            filecoin_proofs::SECTOR_SIZE_64_GIB => {
                type $tree = filecoin_proofs::SectorShape64GiB;
                $body
            }
            other => Err($crate::filecoin::check_sector_size(other).unwrap_err()),
        }
    }};
}

/// Parses an API version as filecoin-proofs writes it (`1.2.0`).
pub fn parse_api_version(text: &str) -> Result<ApiVersion> {
    text.parse::<ApiVersion>().map_err(|e| {
        Error::Filecoin(format!(
            "API version {text:?} is not one filecoin-proofs 19.1 knows (1.0.0, 1.1.0, 1.2.0): {e}"
        ))
    })
}

/// The PoRep configuration a node seals with: filecoin-proofs' own for the size, with
/// `partitions` overriding the published partition count when given (small test sectors).
///
/// The API features are those of the registered seal proof whose porep id `porep_id` is
/// ([`node_formats::seal_proof_of_porep_id`]): filecoin-proofs-api seals a
/// `StackedDrg*V1_1_Feat_SyntheticPoRep` sector under that proof's own porep id, so the id
/// names the feature, and a synthetic C1 output proven without it would be proven against
/// interactive challenges. Any other porep id (a test's own) is interactive PoRep. A porep id
/// of a featured proof must agree with the sector size and API version it was sealed at, and
/// a non-interactive proof's is refused by name.
pub fn porep_config(
    sector_size: u64,
    porep_id: [u8; 32],
    api_version: ApiVersion,
    partitions: Option<u8>,
) -> Result<PoRepConfig> {
    check_sector_size(sector_size)?;
    let features = registered_features(sector_size, &porep_id, api_version)?;
    let mut config = PoRepConfig::new_groth16_with_features(sector_size, porep_id, api_version, features)
        .map_err(|e| filecoin_error("PoRep configuration", e))?;
    if let Some(partitions) = partitions {
        if partitions == 0 {
            return Err(Error::Filecoin("a PoRep needs at least one partition".into()));
        }
        config.partitions = filecoin_proofs::PoRepProofPartitions(partitions);
    }
    Ok(config)
}

/// The API features of the registered seal proof `porep_id` names, checked against the
/// sector size and API version the job states; none for an id no registered proof has; an
/// error naming the proof for one snarkpipe does not prove (non-interactive PoRep).
fn registered_features(
    sector_size: u64,
    porep_id: &[u8; 32],
    api_version: ApiVersion,
) -> Result<Vec<storage_proofs_core::api_version::ApiFeature>> {
    let Some(proof) = node_formats::seal_proof_of_porep_id(porep_id) else {
        return Ok(Vec::new());
    };
    // Non-interactive PoRep aggregates its partition proofs: refused here, on every path a
    // PoRep takes to a configuration (job file, node C1 output, daemon, library), by name.
    node_formats::check_seal_proof_supported(proof).map_err(|e| Error::Filecoin(e.to_string()))?;
    let registered = proof.as_v1_config();
    // Interactive porep ids carry no feature and are only hashed into the replica id; the
    // zeros of a SnapDeals configuration read as StackedDrg2KiBV1 at every size.
    if registered.api_features.is_empty() {
        return Ok(Vec::new());
    }
    let registered_size = u64::from(registered.sector_size);
    if registered_size != sector_size || registered.api_version != api_version {
        return Err(Error::Filecoin(format!(
            "the porep id is that of {proof:?}, a {} PoRep at API {}, but the job is of a {} sector at API \
             {api_version}: give the sector size and API version it was sealed at",
            sector_size_name(registered_size),
            registered.api_version,
            sector_size_name(sector_size),
        )));
    }
    Ok(registered.api_features)
}

/// The PoSt configuration of `typ` for a sector size, with filecoin-proofs' published
/// challenge and sector counts.
pub fn post_config(typ: PoStType, sector_size: u64, api_version: ApiVersion) -> Result<PoStConfig> {
    check_sector_size(sector_size)?;
    let (challenge_count, sector_count) = match typ {
        PoStType::Winning => {
            (filecoin_proofs::WINNING_POST_CHALLENGE_COUNT, filecoin_proofs::WINNING_POST_SECTOR_COUNT)
        }
        PoStType::Window => {
            let counts = filecoin_proofs::WINDOW_POST_SECTOR_COUNT
                .read()
                .map_err(|_| Error::Filecoin("filecoin-proofs' window PoSt sector counts are poisoned".into()))?;
            let count = counts.get(&sector_size).copied().ok_or_else(|| {
                Error::Filecoin(format!(
                    "filecoin-proofs has no window PoSt sector count for {}",
                    sector_size_name(sector_size)
                ))
            })?;
            (filecoin_proofs::WINDOW_POST_CHALLENGE_COUNT, count)
        }
    };
    Ok(PoStConfig {
        sector_size: SectorSize(sector_size),
        challenge_count,
        sector_count,
        priority: matches!(typ, PoStType::Window),
        typ,
        api_version,
    })
}

/// Turns filecoin-proofs' `anyhow` errors into snarkpipe's, keeping the whole chain.
pub(crate) fn filecoin_error(context: &str, err: anyhow::Error) -> Error {
    Error::Filecoin(format!("{context}: {err:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names_parse_every_kind_and_size() {
        let sizes = [("2k", 2 << 10), ("8m", 8 << 20), ("512m", 512 << 20), ("32g", 32 << 30), ("64g", 64 << 30)];
        for kind in ProofKind::ALL {
            for (size, bytes) in sizes {
                for text in [format!("{kind}-{size}"), format!("{}-{}IB", kind.name().to_uppercase(), size)] {
                    let name: KeyName = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
                    assert_eq!(name, KeyName { kind, sector_size: bytes }, "{text}");
                }
            }
        }
    }

    #[test]
    fn every_registered_seal_proof_gets_filecoin_proofs_apis_configuration_or_a_refusal_by_name() {
        for value in 0..20 {
            let proof = node_formats::seal_proof_from_ffi(value).unwrap();
            let api = proof.as_v1_config();
            let size = u64::from(api.sector_size);
            let ours = porep_config(size, api.porep_id, api.api_version, None);
            let non_interactive =
                api.api_features.contains(&storage_proofs_core::api_version::ApiFeature::NonInteractivePoRep);
            if non_interactive {
                let err = ours.unwrap_err();
                assert!(matches!(err, Error::Filecoin(_)), "{err:?}");
                assert!(err.to_string().contains(&format!("{proof:?}")), "{err}");
                continue;
            }
            let ours = ours.unwrap_or_else(|e| panic!("{proof:?}: {e}"));
            assert_eq!(ours.api_features, api.api_features, "{proof:?}");
            assert_eq!((ours.partitions.0, ours.api_version), (api.partitions.0, api.api_version), "{proof:?}");
            // The twin: the same porep id at another API version or size is refused when the id
            // carries a feature (the configuration would not be the one it was sealed with).
            if !api.api_features.is_empty() {
                let err = porep_config(size, api.porep_id, ApiVersion::V1_1_0, None).unwrap_err().to_string();
                assert!(err.contains(&format!("{proof:?}")) && err.contains("API 1.2.0"), "{err}");
                let other = if size == SECTOR_SIZES[0] { SECTOR_SIZES[1] } else { SECTOR_SIZES[0] };
                let err = porep_config(other, api.porep_id, api.api_version, None).unwrap_err().to_string();
                assert!(err.contains(&format!("{proof:?}")) && err.contains(&sector_size_name(other)), "{err}");
            }
        }
        // Another porep id (a test's own, a SnapDeals configuration's zeros at any size) is
        // interactive PoRep.
        assert!(porep_config(SECTOR_SIZES[3], [129; 32], ApiVersion::V1_2_0, None).unwrap().api_features.is_empty());
        assert!(porep_config(SECTOR_SIZES[4], [0; 32], ApiVersion::V1_1_0, None).unwrap().api_features.is_empty());
    }

    #[test]
    fn bad_key_names_say_what_is_accepted() {
        for text in ["porep", "porep-", "-32g", "proof-32g", "porep-32t", "porep-32", "porep-g", "porep-99999999999g"] {
            let err = text.parse::<KeyName>().unwrap_err().to_string();
            assert!(err.contains("KIND-SIZE") && err.contains("winning-post"), "{text}: {err}");
        }
        // A size filecoin-proofs publishes no parameters for names the sizes it does.
        let err = "porep-4k".parse::<KeyName>().unwrap_err().to_string();
        assert!(err.contains("32 GiB") && err.contains("4 KiB"), "{err}");
    }
}
