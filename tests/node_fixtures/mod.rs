//! What a node holds, made as a node makes it: a 2 KiB sector sealed through filecoin-proofs-api
//! (the calls filecoin-ffi makes), its C1 output as filecoin-ffi's JSON and in Curio's
//! envelope, PoSt vanilla proofs from the API's single-vanilla-proof call (bincode), and a
//! SnapDeals update's partition proofs; and filecoin-proofs-api's own verifiers for each.
//!
//! Parameters go to the run's shared directory (`filecoin::params_dir`), generated only when it
//! lacks them. Used by tests/cuzk_door.rs and tests/prove_node_formats.rs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use filecoin_proofs_api::{
    post, seal, update, PaddedBytesAmount, PieceInfo, PrivateReplicaInfo, PublicReplicaInfo, RegisteredPoStProof,
    RegisteredSealProof, RegisteredUpdateProof, SectorId, UnpaddedBytesAmount,
};
use rand::Rng;
use snarkpipe::filecoin::fixtures;
use snarkpipe::filecoin::node_formats::prover_id_of_miner;

use super::filecoin::{fixture_root, params_dir};

/// The seal proof of the node sector: interactive PoRep at API 1.1 (filecoin-ffi's 5).
pub const SEAL_PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
pub const SEAL_PROOF_FFI: u64 = 5;
/// Winning PoSt of 2 KiB (filecoin-ffi's 0).
pub const WINNING_PROOF: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWinning2KiBV1;
pub const WINNING_PROOF_FFI: u64 = 0;
/// Window PoSt of 2 KiB after the grinding fix, what nodes use now (filecoin-ffi's 10).
pub const WINDOW_PROOF: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
pub const WINDOW_PROOF_FFI: u64 = 10;
/// SnapDeals of 2 KiB (filecoin-ffi's 0).
pub const UPDATE_PROOF: RegisteredUpdateProof = RegisteredUpdateProof::StackedDrg2KiBV1;
pub const UPDATE_PROOF_FFI: u64 = 0;

/// Synthetic PoRep of 2 KiB (filecoin-ffi's 10): the interactive circuit and parameters,
/// challenges drawn from the synthetic ones by comm_r and the seed.
pub const SYNTHETIC_SEAL_PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1_Feat_SyntheticPoRep;
pub const SYNTHETIC_SEAL_PROOF_FFI: u64 = 10;
/// Non-interactive PoRep of 2 KiB (filecoin-ffi's 15), which snarkpipe refuses.
pub const NON_INTERACTIVE_SEAL_PROOF: RegisteredSealProof =
    RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep;
pub const NON_INTERACTIVE_SEAL_PROOF_FFI: u64 = 15;

/// A sector sealed through filecoin-proofs-api, and its C1 output.
pub struct NodeSector {
    pub proof: RegisteredSealProof,
    pub miner_id: u64,
    pub sector_number: u64,
    pub prover_id: [u8; 32],
    pub ticket: [u8; 32],
    pub seed: [u8; 32],
    pub comm_r: [u8; 32],
    pub comm_d: [u8; 32],
    /// filecoin-ffi's C1 output: the JSON of filecoin-proofs-api's `SealCommitPhase1Output`.
    pub c1_json: Vec<u8>,
    pub replica_path: PathBuf,
    pub cache_dir: PathBuf,
    pub work_dir: PathBuf,
}

/// Points filecoin-proofs at the run's shared parameter directory, once per process.
pub fn use_params_dir() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        fs::create_dir_all(params_dir()).unwrap();
        fixtures::use_cache_dir(&params_dir()).unwrap();
    });
}

/// Writes a piece of random data filling a 2 KiB sector and stages it; its piece info.
fn stage_piece(proof: RegisteredSealProof, dir: &Path, name: &str) -> (PathBuf, PieceInfo) {
    let sector_size = u64::from(proof.sector_size());
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(sector_size));
    let piece_path = dir.join(format!("{name}.piece"));
    let data: Vec<u8> = (0..unpadded.0).map(|_| rand::random()).collect();
    fs::write(&piece_path, &data).unwrap();
    let info = seal::generate_piece_commitment(proof, File::open(&piece_path).unwrap(), unpadded).unwrap();
    let staged_path = dir.join(format!("{name}.staged"));
    let mut staged = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&staged_path).unwrap();
    seal::add_piece(proof, File::open(&piece_path).unwrap(), &mut staged, unpadded, &[]).unwrap();
    staged.flush().unwrap();
    (staged_path, info)
}

/// Makes sure the shared directory holds the parameters of every kind the node fixtures prove
/// (generated once per checkout; minutes when it lacks them).
pub fn ensure_all_params() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        use_params_dir();
        fixtures::ensure_porep_params(&SEAL_PROOF.as_v1_config()).unwrap();
        fixtures::ensure_post_params(&WINNING_PROOF.as_v1_config()).unwrap();
        fixtures::ensure_post_params(&WINDOW_PROOF.as_v1_config()).unwrap();
        fixtures::ensure_snap_params(&UPDATE_PROOF.as_v1_config()).unwrap();
    });
}

/// The process's node sector: sealed once (seconds) as [`SEAL_PROOF`], with fresh ids, ticket
/// and seed.
pub fn sector() -> &'static NodeSector {
    sector_of(SEAL_PROOF)
}

/// The process's sector of seal proof `proof` (sealed once each); the PoRep parameters are
/// made sure of first.
pub fn sector_of(proof: RegisteredSealProof) -> &'static NodeSector {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static SECTORS: OnceLock<Mutex<HashMap<RegisteredSealProof, &'static OnceLock<NodeSector>>>> = OnceLock::new();
    let slot = *SECTORS
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(proof)
        .or_insert_with(|| Box::leak(Box::new(OnceLock::new())));
    slot.get_or_init(|| seal_sector(proof))
}

fn seal_sector(proof: RegisteredSealProof) -> NodeSector {
    use_params_dir();
    fixtures::ensure_porep_params(&proof.as_v1_config()).unwrap();
    let mut rng = rand::thread_rng();
    let work_dir = fixture_root().join(format!("node-{:016x}", rng.gen::<u64>()));
    let cache_dir = work_dir.join("cache");
    fs::create_dir_all(&cache_dir).unwrap();
    let (staged, piece) = stage_piece(proof, &work_dir, "sealed");
    let replica_path = work_dir.join("sealed");
    File::create(&replica_path).unwrap();
    let miner_id = rng.gen_range(1000..1u64 << 40);
    let sector_number = rng.gen_range(0..1u64 << 30);
    let prover_id = prover_id_of_miner(miner_id);
    let sector_id = SectorId::from(sector_number);
    let ticket: [u8; 32] = fr_bytes(&mut rng);
    let seed: [u8; 32] = fr_bytes(&mut rng);
    let pieces = [piece];
    let p1 =
        seal::seal_pre_commit_phase1(proof, &cache_dir, &staged, &replica_path, prover_id, sector_id, ticket, &pieces)
            .unwrap();
    let p2 = seal::seal_pre_commit_phase2(p1, &cache_dir, &replica_path).unwrap();
    let (comm_r, comm_d) = (p2.comm_r, p2.comm_d);
    // A synthetic PoRep sector proves its synthetic challenges before the seed, as a node's
    // pipeline does between PreCommit and the seed; commit phase 1 then reads them.
    if proof.feature_enabled(filecoin_proofs_api::ApiFeature::SyntheticPoRep) {
        seal::generate_synth_proofs(
            cache_dir.as_path(),
            replica_path.as_path(),
            prover_id,
            sector_id,
            ticket,
            p2.clone(),
            &pieces,
        )
        .unwrap();
    }
    let c1 = seal::seal_commit_phase1(
        cache_dir.as_path(),
        replica_path.as_path(),
        prover_id,
        sector_id,
        ticket,
        seed,
        p2,
        &pieces,
    )
    .unwrap();
    // filecoin-ffi hands the node exactly this: serde JSON of the API's output.
    let c1_json = serde_json::to_vec(&c1).unwrap();
    NodeSector {
        proof,
        miner_id,
        sector_number,
        prover_id,
        ticket,
        seed,
        comm_r,
        comm_d,
        c1_json,
        replica_path,
        cache_dir,
        work_dir,
    }
}

/// 32 random bytes that are a canonical field element (top two bits clear), as the chain's
/// randomness is.
pub fn fr_bytes(rng: &mut impl Rng) -> [u8; 32] {
    let mut bytes: [u8; 32] = rng.gen();
    bytes[31] &= 0x3f;
    bytes
}

/// Curio's envelope around the C1 output (what `PoRepSnarkCuzk` sends and lotus-bench writes):
/// Go's encoding/json writes a byte slice as base64.
pub fn envelope(sector: &NodeSector) -> Vec<u8> {
    use base64::Engine as _;
    let phase1 = base64::engine::general_purpose::STANDARD.encode(&sector.c1_json);
    let json = serde_json::json!({
        "SectorNum": sector.sector_number,
        "Phase1Out": phase1,
        "SectorSize": u64::from(sector.proof.sector_size()),
    });
    serde_json::to_vec(&json).unwrap()
}

/// filecoin-proofs-api's verify_seal for the sector's proof; `sector_number` lets a twin ask
/// for another sector's public inputs.
pub fn verify_seal(sector: &NodeSector, proof: &[u8], sector_number: u64) -> bool {
    seal::verify_seal(
        sector.proof,
        sector.comm_r,
        sector.comm_d,
        sector.prover_id,
        SectorId::from(sector_number),
        sector.ticket,
        sector.seed,
        proof,
    )
    .unwrap_or(false)
}

/// The sector's PoSt vanilla proof for `proof` and `randomness`, as filecoin-ffi's
/// single-vanilla-proof call returns it (bincode).
pub fn post_vanilla(sector: &NodeSector, proof: RegisteredPoStProof, randomness: &[u8; 32]) -> Vec<Vec<u8>> {
    let sector_id = SectorId::from(sector.sector_number);
    let challenges =
        post::generate_fallback_sector_challenges(proof, randomness, &[sector_id], sector.prover_id).unwrap();
    let replica = PrivateReplicaInfo::new(proof, sector.comm_r, sector.cache_dir.clone(), sector.replica_path.clone());
    vec![post::generate_single_vanilla_proof(proof, sector_id, &replica, &challenges[&sector_id]).unwrap()]
}

/// filecoin-proofs-api's verifier for a PoSt of the sector; `prover_id` lets a twin ask for
/// another miner's.
pub fn verify_post(
    sector: &NodeSector,
    proof: RegisteredPoStProof,
    randomness: &[u8; 32],
    bytes: &[u8],
    prover_id: [u8; 32],
) -> bool {
    let replicas: BTreeMap<SectorId, PublicReplicaInfo> =
        [(SectorId::from(sector.sector_number), PublicReplicaInfo::new(proof, sector.comm_r))].into_iter().collect();
    match proof.typ() {
        filecoin_proofs_api::PoStType::Winning => post::verify_winning_post(randomness, bytes, &replicas, prover_id),
        filecoin_proofs_api::PoStType::Window => {
            post::verify_window_post(randomness, &[(proof, bytes)], &replicas, prover_id)
        }
    }
    .unwrap_or(false)
}

/// A SnapDeals update of the node sector: the new commitments and the partitions' vanilla
/// proofs as filecoin-ffi returns them (bincode `PartitionProof`s).
pub struct NodeUpdate {
    pub comm_r_old: [u8; 32],
    pub comm_r_new: [u8; 32],
    pub comm_d_new: [u8; 32],
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// The process's update of the node sector (made once).
pub fn update() -> &'static NodeUpdate {
    static UPDATE: OnceLock<NodeUpdate> = OnceLock::new();
    UPDATE.get_or_init(|| {
        let sector = sector();
        let dir = sector.work_dir.join("update");
        let new_cache = dir.join("cache");
        fs::create_dir_all(&new_cache).unwrap();
        let (staged, piece) = stage_piece(SEAL_PROOF, &dir, "update");
        let new_replica = dir.join("updated");
        let len = fs::metadata(&sector.replica_path).unwrap().len();
        File::create(&new_replica).unwrap().set_len(len).unwrap();
        let encoded = update::empty_sector_update_encode_into(
            UPDATE_PROOF,
            &new_replica,
            &new_cache,
            &sector.replica_path,
            &sector.cache_dir,
            &staged,
            &[piece],
        )
        .unwrap();
        let proofs = update::generate_partition_proofs(
            UPDATE_PROOF,
            sector.comm_r,
            encoded.comm_r_new,
            encoded.comm_d_new,
            &sector.replica_path,
            &sector.cache_dir,
            &new_replica,
            &new_cache,
        )
        .unwrap();
        NodeUpdate {
            comm_r_old: sector.comm_r,
            comm_r_new: encoded.comm_r_new,
            comm_d_new: encoded.comm_d_new,
            vanilla_proofs: proofs.into_iter().map(|p| p.0).collect(),
        }
    })
}

/// filecoin-proofs-api's verifier for the update's proof; `comm_r_new` lets a twin ask for
/// another replica's.
pub fn verify_update(update: &NodeUpdate, proof: &[u8], comm_r_new: [u8; 32]) -> bool {
    update::verify_empty_sector_update_proof(UPDATE_PROOF, proof, update.comm_r_old, comm_r_new, update.comm_d_new)
        .unwrap_or(false)
}
