//! Real Filecoin inputs made on one machine with filecoin-proofs itself: a sealed 2 KiB sector,
//! its C1 output, the Window and Winning PoSt vanilla proofs over it, a SnapDeals update of it,
//! and the parameters of every kind, generated into a parameter directory the way
//! filecoin-proofs' own tests do (`CompoundProof::groth_params(Some(rng), …)`).
//!
//! Tests and the bench use these; a node never does (its sectors, vanilla proofs and
//! parameters come from its own sealing pipeline and the published parameter set).

use std::fs::{self, File, OpenOptions};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ff::{Field, PrimeField};
use filecoin_proofs::{
    add_piece, encode_into, generate_fallback_sector_challenges, generate_partition_proofs, generate_piece_commitment,
    generate_single_vanilla_proof, generate_synth_proofs, seal_commit_phase1, seal_pre_commit_phase1,
    seal_pre_commit_phase2, validate_cache_for_commit, Commitment, DefaultPieceHasher, FallbackPoStSectorProof,
    PaddedBytesAmount, PieceInfo, PoRepConfig, PoStConfig, PoStType, PrivateReplicaInfo, SealCommitPhase1Output,
    SectorShape2KiB, SectorUpdateConfig, UnpaddedBytesAmount, SECTOR_SIZE_2_KIB,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::api_version::{ApiFeature, ApiVersion};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::StackedCompound;
use storage_proofs_post::fallback::FallbackPoStCompound;
use storage_proofs_update::{EmptySectorUpdateCompound, PartitionProof};

use super::{filecoin_error, porep_config, post_config};
use crate::{Error, Result, Scalar};

/// The sector shape of every fixture: 2 KiB sectors, the largest whose PoRep parameters one
/// machine generates in a CI run.
pub type Tree2KiB = SectorShape2KiB;

/// A porep id of API 1.2 (a registered seal proof id above the legacy ones), as filecoin-proofs'
/// tests use; any such id gives the same circuit.
pub const POREP_ID: [u8; 32] = [129; 32];

/// The API version of the PoRep and SnapDeals fixtures.
pub const API_VERSION: ApiVersion = ApiVersion::V1_2_0;

/// The API version of the PoSt fixtures. Under 1.2.0 filecoin-proofs 19.1 derives Winning PoSt
/// challenges differently when it proves (one sector, 66 challenges) and when it verifies (66
/// sectors of one challenge), so its own tests prove PoSt at 1.0.0 and 1.1.0; so do these.
pub const POST_API_VERSION: ApiVersion = ApiVersion::V1_1_0;

/// Points filecoin-proofs' parameter cache at `dir` and its graph-parent cache at
/// `dir/parents` (sealing needs it), before any other filecoin-proofs call of the process.
pub fn use_cache_dir(dir: &Path) -> Result<()> {
    let parents = dir.join("parents");
    fs::create_dir_all(&parents).map_err(|e| Error::io(format!("creating {}", parents.display()), e))?;
    if std::env::var_os("FIL_PROOFS_PARENT_CACHE").is_none() {
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", &parents);
    }
    super::params::use_parameter_dir(dir).map(drop)
}

/// A field element's canonical bytes: prover ids, tickets of PoSt randomness and the like must
/// be valid Fr encodings.
fn random_fr_bytes(rng: &mut impl Rng) -> [u8; 32] {
    Scalar::random(&mut *rng).to_repr()
}

/// A 2 KiB PoRep configuration with `partitions` partitions (1 or 2).
pub fn porep_config_2kib(partitions: u8) -> Result<PoRepConfig> {
    porep_config(SECTOR_SIZE_2_KIB, POREP_ID, API_VERSION, Some(partitions))
}

/// A 2 KiB PoSt configuration.
pub fn post_config_2kib(typ: PoStType) -> Result<PoStConfig> {
    post_config(typ, SECTOR_SIZE_2_KIB, POST_API_VERSION)
}

/// Generates the PoRep parameters of `config` into the parameter cache unless they are there,
/// and returns how long that took (zero when they were).
pub fn ensure_porep_params(config: &PoRepConfig) -> Result<Duration> {
    let public_params = filecoin_proofs::parameters::public_params::<Tree2KiB>(config)
        .map_err(|e| filecoin_error("PoRep public parameters", e))?;
    let started = Instant::now();
    let mut rng = ChaCha20Rng::seed_from_u64(0x5EA1);
    <StackedCompound<Tree2KiB, DefaultPieceHasher> as CompoundProof<_, _>>::groth_params(
        Some(&mut rng),
        &public_params,
    )
    .map_err(|e| filecoin_error("generating PoRep parameters", e))?;
    <StackedCompound<Tree2KiB, DefaultPieceHasher> as CompoundProof<_, _>>::verifying_key(
        Some(&mut rng),
        &public_params,
    )
    .map_err(|e| filecoin_error("writing the PoRep verifying key", e))?;
    Ok(started.elapsed())
}

/// Generates the Window or Winning PoSt parameters of `config` unless they are there.
pub fn ensure_post_params(config: &PoStConfig) -> Result<Duration> {
    let public_params = match config.typ {
        PoStType::Window => filecoin_proofs::parameters::window_post_public_params::<Tree2KiB>(config),
        PoStType::Winning => filecoin_proofs::parameters::winning_post_public_params::<Tree2KiB>(config),
    }
    .map_err(|e| filecoin_error("PoSt public parameters", e))?;
    let started = Instant::now();
    let mut rng = ChaCha20Rng::seed_from_u64(0x9057);
    <FallbackPoStCompound<Tree2KiB> as CompoundProof<_, _>>::groth_params(Some(&mut rng), &public_params)
        .map_err(|e| filecoin_error("generating PoSt parameters", e))?;
    <FallbackPoStCompound<Tree2KiB> as CompoundProof<_, _>>::verifying_key(Some(&mut rng), &public_params)
        .map_err(|e| filecoin_error("writing the PoSt verifying key", e))?;
    Ok(started.elapsed())
}

/// Generates the SnapDeals parameters of `config`'s sector size unless they are there.
pub fn ensure_snap_params(config: &PoRepConfig) -> Result<Duration> {
    let public_params = storage_proofs_update::PublicParams::from_sector_size(u64::from(config.sector_size));
    let started = Instant::now();
    let mut rng = ChaCha20Rng::seed_from_u64(0x5A4D);
    <EmptySectorUpdateCompound<Tree2KiB> as CompoundProof<_, _>>::groth_params(Some(&mut rng), &public_params)
        .map_err(|e| filecoin_error("generating SnapDeals parameters", e))?;
    <EmptySectorUpdateCompound<Tree2KiB> as CompoundProof<_, _>>::verifying_key(Some(&mut rng), &public_params)
        .map_err(|e| filecoin_error("writing the SnapDeals verifying key", e))?;
    Ok(started.elapsed())
}

/// A sealed 2 KiB sector and its C1 output, in a work directory of its own.
pub struct SealedSector {
    pub porep_config: PoRepConfig,
    pub prover_id: [u8; 32],
    pub sector_id: SectorId,
    pub ticket: [u8; 32],
    pub seed: [u8; 32],
    pub comm_r: Commitment,
    pub comm_d: Commitment,
    pub phase1_output: SealCommitPhase1Output<Tree2KiB>,
    /// The sealed replica and its cache (trees, p_aux, t_aux), for PoSt and updates.
    pub replica_path: PathBuf,
    pub cache_dir: PathBuf,
}

/// Writes a random piece filling the whole sector and stages it; returns its piece infos.
fn stage_random_piece(config: &PoRepConfig, dir: &Path, rng: &mut impl Rng) -> Result<(PathBuf, Vec<PieceInfo>)> {
    let io = |what: &str, e: std::io::Error| Error::io(format!("{what} in {}", dir.display()), e);
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(u64::from(config.sector_size)));
    let bytes: Vec<u8> = (0..unpadded.0).map(|_| rng.gen()).collect();
    let piece_path = dir.join("piece");
    fs::write(&piece_path, &bytes).map_err(|e| io("writing the piece", e))?;
    let mut piece = File::open(&piece_path).map_err(|e| io("opening the piece", e))?;
    let info = generate_piece_commitment(&mut piece, unpadded).map_err(|e| filecoin_error("piece commitment", e))?;
    piece.rewind().map_err(|e| io("rewinding the piece", e))?;
    let staged_path = dir.join("staged");
    let mut staged = File::create(&staged_path).map_err(|e| io("creating the staged sector", e))?;
    add_piece(&mut piece, &mut staged, unpadded, &[]).map_err(|e| filecoin_error("adding the piece", e))?;
    staged.flush().map_err(|e| io("writing the staged sector", e))?;
    Ok((staged_path, vec![info]))
}

/// Seals a fresh 2 KiB sector of random data under `work_dir` and runs commit phase 1 (after
/// the synthetic proofs, when `config` has synthetic PoRep).
pub fn seal_sector(work_dir: &Path, config: &PoRepConfig, seed: u64) -> Result<SealedSector> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let io = |what: &str, e: std::io::Error| Error::io(format!("{what} in {}", work_dir.display()), e);
    let cache_dir = work_dir.join("cache");
    fs::create_dir_all(&cache_dir).map_err(|e| io("creating the sector cache", e))?;
    let (staged_path, piece_infos) = stage_random_piece(config, work_dir, &mut rng)?;
    let replica_path = work_dir.join("sealed");
    File::create(&replica_path).map_err(|e| io("creating the replica", e))?;

    let prover_id = random_fr_bytes(&mut rng);
    let sector_id = SectorId::from(rng.gen::<u64>());
    let ticket: [u8; 32] = rng.gen();
    let seed: [u8; 32] = rng.gen();
    let phase1 = seal_pre_commit_phase1::<_, _, _, Tree2KiB>(
        config,
        &cache_dir,
        &staged_path,
        &replica_path,
        prover_id,
        sector_id,
        ticket,
        &piece_infos,
    )
    .map_err(|e| filecoin_error("pre-commit phase 1", e))?;
    let pre_commit = seal_pre_commit_phase2(config, phase1, &cache_dir, &replica_path)
        .map_err(|e| filecoin_error("pre-commit phase 2", e))?;
    validate_cache_for_commit::<_, _, Tree2KiB>(&cache_dir, &replica_path)
        .map_err(|e| filecoin_error("validating the sector cache", e))?;
    let (comm_r, comm_d) = (pre_commit.comm_r, pre_commit.comm_d);
    // Synthetic PoRep proves its synthetic challenges once, before the seed is known, and
    // commit phase 1 then picks the seed's challenges from those proofs (as a node does).
    if config.feature_enabled(ApiFeature::SyntheticPoRep) {
        generate_synth_proofs::<_, Tree2KiB>(
            config,
            &cache_dir,
            &replica_path,
            prover_id,
            sector_id,
            ticket,
            pre_commit.clone(),
            &piece_infos,
        )
        .map_err(|e| filecoin_error("synthetic proofs", e))?;
    }
    let phase1_output = seal_commit_phase1::<_, Tree2KiB>(
        config,
        &cache_dir,
        &replica_path,
        prover_id,
        sector_id,
        ticket,
        seed,
        pre_commit,
        &piece_infos,
    )
    .map_err(|e| filecoin_error("commit phase 1", e))?;
    Ok(SealedSector {
        porep_config: config.clone(),
        prover_id,
        sector_id,
        ticket,
        seed,
        comm_r,
        comm_d,
        phase1_output,
        replica_path,
        cache_dir,
    })
}

/// A PoSt's randomness and the vanilla proofs of the challenged sectors (here the one sector).
pub struct PostVanilla {
    pub config: PoStConfig,
    pub randomness: [u8; 32],
    pub vanilla_proofs: Vec<FallbackPoStSectorProof<Tree2KiB>>,
}

/// The Window or Winning PoSt vanilla proof of `sector` for fresh randomness from `seed`.
pub fn post_vanilla(sector: &SealedSector, typ: PoStType, seed: u64) -> Result<PostVanilla> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let config = post_config_2kib(typ)?;
    let randomness = random_fr_bytes(&mut rng);
    let replica =
        PrivateReplicaInfo::<Tree2KiB>::new(sector.replica_path.clone(), sector.comm_r, sector.cache_dir.clone())
            .map_err(|e| filecoin_error("opening the sealed replica", e))?;
    let challenges =
        generate_fallback_sector_challenges::<Tree2KiB>(&config, &randomness, &[sector.sector_id], sector.prover_id)
            .map_err(|e| filecoin_error("PoSt challenges", e))?;
    let sector_challenges = challenges
        .get(&sector.sector_id)
        .ok_or_else(|| Error::Filecoin("filecoin-proofs challenged no sector".into()))?;
    let proof = generate_single_vanilla_proof::<Tree2KiB>(&config, sector.sector_id, &replica, sector_challenges)
        .map_err(|e| filecoin_error("PoSt vanilla proof", e))?;
    Ok(PostVanilla { config, randomness, vanilla_proofs: vec![proof] })
}

/// A SnapDeals update of a sealed sector: new data encoded into a new replica, and the
/// vanilla partition proofs of the update.
pub struct UpdatedSector {
    pub porep_config: PoRepConfig,
    pub comm_r_old: Commitment,
    pub comm_r_new: Commitment,
    pub comm_d_new: Commitment,
    pub vanilla_proofs: Vec<PartitionProof<Tree2KiB>>,
}

/// Encodes fresh random data into `sector` (as its sector key) under `work_dir`.
pub fn update_sector(sector: &SealedSector, work_dir: &Path, seed: u64) -> Result<UpdatedSector> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let io = |what: &str, e: std::io::Error| Error::io(format!("{what} in {}", work_dir.display()), e);
    let config = SectorUpdateConfig::from_porep_config(&sector.porep_config);
    let new_cache = work_dir.join("update-cache");
    fs::create_dir_all(&new_cache).map_err(|e| io("creating the update cache", e))?;
    let (staged_path, piece_infos) = stage_random_piece(&sector.porep_config, work_dir, &mut rng)?;
    // encode_into maps the new replica, so it must have the sector's length already.
    let new_replica = work_dir.join("updated");
    let replica_len = fs::metadata(&sector.replica_path).map_err(|e| io("reading the replica", e))?.len();
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&new_replica)
        .and_then(|f| f.set_len(replica_len))
        .map_err(|e| io("sizing the updated replica", e))?;
    let encoded = encode_into::<Tree2KiB>(
        &config,
        &new_replica,
        &new_cache,
        &sector.replica_path,
        &sector.cache_dir,
        &staged_path,
        &piece_infos,
    )
    .map_err(|e| filecoin_error("encoding the update", e))?;
    let vanilla_proofs = generate_partition_proofs::<Tree2KiB>(
        config,
        sector.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &sector.replica_path,
        &sector.cache_dir,
        &new_replica,
        &new_cache,
    )
    .map_err(|e| filecoin_error("SnapDeals vanilla proofs", e))?;
    Ok(UpdatedSector {
        porep_config: sector.porep_config.clone(),
        comm_r_old: sector.comm_r,
        comm_r_new: encoded.comm_r_new,
        comm_d_new: encoded.comm_d_new,
        vanilla_proofs,
    })
}

/// What [`write_fixture_jobs`] made: each job file and the figures of making it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FixtureJob {
    pub kind: super::ProofKind,
    pub partitions: usize,
    pub path: PathBuf,
    /// Seconds spent generating this kind's parameters (0 when they were already there).
    pub seconds_params: f64,
}

/// Makes real inputs for each kind in `kinds`: parameters into filecoin-proofs' parameter
/// cache (see [`use_cache_dir`]), a sealed sector and its update under `work_dir`, and one
/// vanilla job file per kind (PoRep once per entry of `porep_partitions`) in `jobs_dir`.
pub fn write_fixture_jobs(
    work_dir: &Path,
    jobs_dir: &Path,
    kinds: &[super::ProofKind],
    porep_partitions: &[u8],
    seed: u64,
) -> Result<Vec<FixtureJob>> {
    use super::vanilla::{encode_vanilla, PorepVanilla, PostVanilla as PostJob, SnapVanilla, VanillaRequest};
    use super::ProofKind;
    fs::create_dir_all(jobs_dir).map_err(|e| Error::io(format!("creating {}", jobs_dir.display()), e))?;
    let api_version = API_VERSION.to_string();
    let mut made = Vec::new();
    let mut write = |kind: ProofKind, name: String, partitions: usize, seconds: Duration, job: VanillaRequest| {
        let path = jobs_dir.join(name);
        job.write(&path)?;
        made.push(FixtureJob { kind, partitions, path, seconds_params: seconds.as_secs_f64() });
        Ok::<_, Error>(())
    };
    let sector_dir = |name: &str| {
        let dir = work_dir.join(name);
        // A sector cache left by an earlier run would be reused by sealing (its data tree
        // belongs to other data): always seal into a fresh directory.
        if dir.exists() {
            fs::remove_dir_all(&dir).map_err(|e| Error::io(format!("clearing {}", dir.display()), e))?;
        }
        fs::create_dir_all(&dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e)).map(|()| dir)
    };
    if kinds.contains(&ProofKind::Porep) {
        for &partitions in porep_partitions {
            let config = porep_config_2kib(partitions)?;
            // Sealing takes seconds, the parameters minutes: a sealing problem shows first.
            let sector =
                seal_sector(&sector_dir(&format!("porep-{partitions}"))?, &config, seed ^ u64::from(partitions))?;
            let seconds = ensure_porep_params(&config)?;
            let job = VanillaRequest::Porep(PorepVanilla {
                kind: ProofKind::Porep,
                sector_size: SECTOR_SIZE_2_KIB,
                api_version: api_version.clone(),
                porep_id: POREP_ID,
                partitions: Some(partitions),
                prover_id: sector.prover_id,
                sector_id: u64::from(sector.sector_id),
                phase1_output: encode_vanilla(&sector.phase1_output)?,
            });
            write(ProofKind::Porep, format!("porep-{partitions}.json"), usize::from(partitions), seconds, job)?;
        }
    }
    let others: Vec<_> = kinds.iter().copied().filter(|k| *k != ProofKind::Porep).collect();
    if others.is_empty() {
        return Ok(made);
    }
    // One sealed sector serves both PoSts and the update.
    let sector = seal_sector(&sector_dir("sector")?, &porep_config_2kib(1)?, seed)?;
    for kind in others {
        match kind {
            ProofKind::Snap => {
                let update = update_sector(&sector, &sector_dir("update")?, seed + 1)?;
                let seconds = ensure_snap_params(&sector.porep_config)?;
                let job = VanillaRequest::Snap(SnapVanilla {
                    kind,
                    sector_size: SECTOR_SIZE_2_KIB,
                    api_version: api_version.clone(),
                    comm_r_old: update.comm_r_old,
                    comm_r_new: update.comm_r_new,
                    comm_d_new: update.comm_d_new,
                    vanilla_proofs: encode_vanilla(&update.vanilla_proofs)?,
                });
                write(kind, "snap.json".into(), update.vanilla_proofs.len(), seconds, job)?;
            }
            ProofKind::WindowPost | ProofKind::WinningPost => {
                let typ = if kind == ProofKind::WindowPost { PoStType::Window } else { PoStType::Winning };
                let post = post_vanilla(&sector, typ.clone(), seed + 2)?;
                let seconds = ensure_post_params(&post_config_2kib(typ)?)?;
                let job = PostJob {
                    kind,
                    sector_size: SECTOR_SIZE_2_KIB,
                    api_version: POST_API_VERSION.to_string(),
                    randomness: post.randomness,
                    prover_id: sector.prover_id,
                    vanilla_proofs: encode_vanilla(&post.vanilla_proofs)?,
                    partition_index: None,
                };
                let job = if kind == ProofKind::WindowPost {
                    VanillaRequest::WindowPost(job)
                } else {
                    VanillaRequest::WinningPost(job)
                };
                write(kind, format!("{kind}.json"), 1, seconds, job)?;
            }
            ProofKind::Porep => unreachable!("filtered out above"),
        }
    }
    Ok(made)
}
