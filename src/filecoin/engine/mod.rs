//! Proving Filecoin's kinds on the pipeline: circuits built by the compound proofs from the
//! vanilla proofs, synthesized on the CPU, proven on a [`Prover`] with the kind's priority,
//! encoded as filecoin-proofs encodes them and checked with filecoin-proofs' own verifier
//! before they are returned.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::Proof;
use bellperson::Circuit;
use blstrs::Bls12;
use ff::Field;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{
    as_safe_commitment, partition_vanilla_proofs, verify_empty_sector_update_proof, verify_seal, verify_window_post,
    verify_winning_post, ChallengeSeed, Commitment, DefaultPieceDomain, DefaultPieceHasher, EmptySectorUpdateProof,
    FallbackPoStSectorProof, MerkleTreeTrait, PoRepConfig, PoStConfig, PoStType, ProverId, PublicReplicaInfo,
    SealCommitOutput, SealCommitPhase1Output, SectorUpdateConfig, SnarkProof, TreeRHasher,
};
use rayon::prelude::*;
use storage_proofs_core::api_version::{ApiFeature, ApiVersion};
use storage_proofs_core::compound_proof::{self, CircuitComponent, CompoundProof};
use storage_proofs_core::parameter_cache::{CacheableParameters, ParameterSetMetadata};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::{self, StackedCompound};
use storage_proofs_post::fallback::{self, FallbackPoStCompound, PublicSector};
use storage_proofs_update::{EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof};

use super::params::ParamFiles;
use super::vanilla::{decode_vanilla, VanillaRequest};
use super::{filecoin_error, porep_config, post_config, sector_size_name, ProofKind};
use crate::circuit::{witness_assignment_sized, ConstraintMatrices, SatisfactionCheck, Witness, WitnessShape};
use crate::params::file::PointCheck;
use crate::params::ProvingKey;
use crate::plan::{staged_bytes_per_partition, witness_host_bytes};
use crate::prover::{KeyFor, ProofHandle, Prover};
use crate::{with_sector_shape, Error, Result, Scalar};

mod api;
mod keys;
mod reference;
mod synthesis;

pub use api::{
    generate_empty_sector_update_proof_with_vanilla, generate_single_window_post_with_vanilla,
    generate_window_post_with_vanilla, generate_winning_post_with_vanilla, proofs_to_bytes, seal_commit_phase2,
};
use keys::KnownKey;
use synthesis::measure_synthesis;
pub use synthesis::SynthesisFigures;

/// Where a proof's time went, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct ProofTimings {
    /// Finding the key: opening and checking the parameter files, decoding the points the
    /// first time (zero-ish once the key is cached).
    pub key_load: f64,
    /// Synthesizing the partitions' circuits, summed over them. On snarkpipe's path only the
    /// first partition's comes before the proving (its shape picks the key); the others
    /// overlap it, inside `gpu`.
    pub synthesis: f64,
    /// Of `synthesis`, the first partition's, when it comes before anything is submitted (its
    /// shape picks the key): zero when the key was cached already (an earlier proof of the
    /// kind, or a preload), and on bellperson's path.
    pub first_synthesis: f64,
    /// Waiting for the pipeline before the first partition was placed on a device.
    pub queue: f64,
    /// From the first partition's placement to the last proof (synthesis of the later
    /// partitions, upload, NTT, MSM, assembly, verification).
    pub gpu: f64,
    /// filecoin-proofs' verifier on the encoded proof.
    pub verify: f64,
    pub total: f64,
}

/// A proof of one kind, as filecoin-proofs encodes it, with its figures.
#[derive(Clone)]
pub struct ProvenKind {
    pub kind: ProofKind,
    /// Exactly the bytes filecoin-proofs' prover returns for the same inputs.
    pub bytes: Vec<u8>,
    pub partitions: usize,
    /// Constraints of one partition's circuit.
    pub constraints: usize,
    pub timings: ProofTimings,
    /// Partition 0's synthesis measured four ways, when the prover was asked to
    /// ([`FilecoinProver::with_synthesis_figures`]).
    pub synthesis: Option<SynthesisFigures>,
    /// The proving key it was proven with, from the prover's key cache (None on bellperson's
    /// path): what the daemon preloads and evicts for the kind.
    pub key: Option<Arc<ProvingKey>>,
}

// By hand: the proving key has no `Debug` (its points are megabytes); its presence is enough.
impl std::fmt::Debug for ProvenKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProvenKind")
            .field("kind", &self.kind)
            .field("bytes", &self.bytes)
            .field("partitions", &self.partitions)
            .field("constraints", &self.constraints)
            .field("timings", &self.timings)
            .field("synthesis", &self.synthesis)
            .field("key", &self.key.as_ref().map(|_| "cached"))
            .finish()
    }
}

/// Proves Filecoin's kinds on a [`Prover`], with parameters from one parameter directory.
///
/// filecoin-proofs' verifiers read verifying keys from its parameter cache
/// (`FIL_PROOFS_PARAMETER_CACHE`, read once per process), and every proof is verified before it
/// is returned, so the parameter directory must be that cache.
pub struct FilecoinProver<'p> {
    prover: &'p Prover,
    params_dir: PathBuf,
    point_check: PointCheck,
    blinding: Option<(Vec<Scalar>, Vec<Scalar>)>,
    bellperson: bool,
    synthesis_figures: bool,
    submitted: Option<&'p (dyn Fn(&ProofHandle) + Sync)>,
    /// Keys held in memory in place of `.params` files, by the path the file would have
    /// ([`Self::with_held_key`]).
    held: Vec<(PathBuf, Arc<ProvingKey>)>,
}

impl<'p> FilecoinProver<'p> {
    /// A Filecoin prover over filecoin-proofs' parameter cache directory. Points are not
    /// checked on open, as filecoin-proofs does not check them (see [`Self::point_check`]).
    pub fn new(prover: &'p Prover) -> FilecoinProver<'p> {
        FilecoinProver {
            prover,
            params_dir: storage_proofs_core::parameter_cache::parameter_cache_dir(),
            point_check: PointCheck::Unchecked,
            blinding: None,
            bellperson: false,
            synthesis_figures: false,
            submitted: None,
            held: Vec::new(),
        }
    }

    /// A Filecoin prover over `dir`, which must be filecoin-proofs' parameter cache.
    pub fn with_params_dir(prover: &'p Prover, dir: &Path) -> Result<FilecoinProver<'p>> {
        let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(a), Ok(b)) => a == b,
            _ => a == b,
        };
        let settled = storage_proofs_core::parameter_cache::parameter_cache_dir();
        if !same(dir, &settled) {
            return Err(Error::Config(format!(
                "filecoin-proofs' verifiers read their keys from {} in this process, not {}; set \
                 FIL_PROOFS_PARAMETER_CACHE={} before the process starts",
                settled.display(),
                dir.display(),
                dir.display()
            )));
        }
        Ok(FilecoinProver { params_dir: dir.to_path_buf(), ..FilecoinProver::new(prover) })
    }

    /// Whether opening a `.params` file checks every point (seconds per GiB on many cores).
    pub fn point_check(mut self, check: PointCheck) -> Self {
        self.point_check = check;
        self
    }

    /// Blinds partition `i` with `r[i]` and `s[i]` instead of fresh randomness, to reproduce
    /// another prover's proof byte for byte. Never for production proofs.
    pub fn fixed_blinding(mut self, r: Vec<Scalar>, s: Vec<Scalar>) -> Self {
        self.blinding = Some((r, s));
        self
    }

    /// Proves the same circuits with bellperson's own prover (`create_proof_batch` over the
    /// file's `MappedParameters`, on this machine's CPU) instead of the pipeline: the reference
    /// snarkpipe's proofs are compared with byte for byte, and the baseline the bench reports.
    /// bellperson synthesizes inside its prover, so its figure is `gpu` alone, synthesis included.
    pub fn bellperson_reference(mut self) -> Self {
        self.bellperson = true;
        self
    }

    /// Before proving, measures partition 0's synthesis four ways ([`SynthesisFigures`]), in
    /// [`ProvenKind::synthesis`].
    pub fn with_synthesis_figures(mut self) -> Self {
        self.synthesis_figures = true;
        self
    }

    /// Hands each proof's pipeline request to `submitted` once its partitions are queued, so
    /// that another thread can cancel it ([`ProofHandle::cancel`]) while this one waits.
    pub fn on_submitted(mut self, submitted: &'p (dyn Fn(&ProofHandle) + Sync)) -> Self {
        self.submitted = Some(submitted);
        self
    }

    pub fn params_dir(&self) -> &Path {
        &self.params_dir
    }

    /// Proves the job a vanilla file holds, whatever its kind and sector size.
    pub fn prove_job(&self, job: &VanillaRequest) -> Result<ProvenKind> {
        let api_version = job.api_version()?;
        with_sector_shape!(job.sector_size(), Tree => match job {
            VanillaRequest::Porep(p) => {
                let config = porep_config(p.sector_size, p.porep_id, api_version, p.partitions)?;
                let c1: SealCommitPhase1Output<Tree> = decode_vanilla("C1 output", &p.phase1_output)?;
                self.seal_commit_phase2::<Tree>(&config, c1, p.prover_id, SectorId::from(p.sector_id))
            }
            VanillaRequest::Snap(u) => {
                let config = porep_config(u.sector_size, [0; 32], api_version, None)?;
                let proofs: Vec<PartitionProof<Tree>> = decode_vanilla("SnapDeals partition proofs", &u.vanilla_proofs)?;
                self.empty_sector_update::<Tree>(&config, proofs, u.comm_r_old, u.comm_r_new, u.comm_d_new)
            }
            VanillaRequest::WindowPost(p) | VanillaRequest::WinningPost(p) => {
                let typ = if job.kind() == ProofKind::WindowPost { PoStType::Window } else { PoStType::Winning };
                let config = post_config(typ, p.sector_size, api_version)?;
                let proofs: Vec<FallbackPoStSectorProof<Tree>> = decode_vanilla("PoSt sector proofs", &p.vanilla_proofs)?;
                match p.partition_index {
                    Some(index) => self.window_post_partition::<Tree>(&config, &p.randomness, p.prover_id, proofs, index),
                    None => self.post::<Tree>(&config, &p.randomness, p.prover_id, proofs),
                }
            }
        })
    }

    /// PoRep commit phase 2 from a C1 output: `filecoin_proofs::seal_commit_phase2`'s inputs and
    /// proof bytes (interactive or synthetic PoRep; non-interactive PoRep aggregates and is not supported).
    pub fn seal_commit_phase2<Tree: 'static + MerkleTreeTrait>(
        &self,
        porep_config: &PoRepConfig,
        phase1_output: SealCommitPhase1Output<Tree>,
        prover_id: ProverId,
        sector_id: SectorId,
    ) -> Result<ProvenKind> {
        let started = Instant::now();
        if porep_config.feature_enabled(ApiFeature::NonInteractivePoRep) {
            return Err(Error::Filecoin(
                "non-interactive PoRep aggregates its proofs; snarkpipe proves interactive and synthetic PoRep only"
                    .into(),
            ));
        }
        let SealCommitPhase1Output { vanilla_proofs, comm_d, comm_r, replica_id, seed, ticket } = phase1_output;
        refuse(comm_d == [0; 32], "the C1 output's comm_d is all zeros")?;
        refuse(comm_r == [0; 32], "the C1 output's comm_r is all zeros")?;
        refuse(seed == [0; 32], "the C1 output's seed is all zeros")?;
        refuse(
            vanilla_proofs.is_empty() || vanilla_proofs.iter().any(|p| p.is_empty()),
            "the C1 output holds no vanilla proofs",
        )?;
        let partitions = usize::from(porep_config.partitions);
        refuse(
            vanilla_proofs.len() != partitions,
            &format!("the C1 output has {} partitions, the PoRep configuration {partitions}", vanilla_proofs.len()),
        )?;
        let public_inputs = stacked::PublicInputs {
            replica_id,
            tau: Some(stacked::Tau {
                comm_d: as_safe_commitment::<DefaultPieceDomain, _>(&comm_d, "comm_d")
                    .map_err(|e| filecoin_error("C1 output", e))?,
                comm_r: as_safe_commitment(&comm_r, "comm_r").map_err(|e| filecoin_error("C1 output", e))?,
            }),
            k: None,
            seed: Some(seed),
        };
        let (public_params, files) = self.porep_setup::<Tree>(porep_config)?;
        let proven = self.prove_compound::<_, _, StackedCompound<Tree, DefaultPieceHasher>>(
            ProofKind::Porep,
            &files,
            &public_inputs,
            vanilla_proofs,
            &public_params.vanilla_params,
        )?;
        self.verified(proven, started, |bytes| {
            verify_seal::<Tree>(porep_config, comm_r, comm_d, prover_id, sector_id, ticket, seed, bytes)
        })
    }

    /// Window or Winning PoSt from the challenged sectors' vanilla proofs:
    /// `generate_{window,winning}_post_with_vanilla`'s inputs and proof bytes.
    pub fn post<Tree: 'static + MerkleTreeTrait>(
        &self,
        post_config: &PoStConfig,
        randomness: &ChallengeSeed,
        prover_id: ProverId,
        vanilla_proofs: Vec<FallbackPoStSectorProof<Tree>>,
    ) -> Result<ProvenKind> {
        let started = Instant::now();
        let kind = match post_config.typ {
            PoStType::Window => ProofKind::WindowPost,
            PoStType::Winning => ProofKind::WinningPost,
        };
        refuse(vanilla_proofs.is_empty(), "there are no sector proofs to prove")?;
        let public_inputs = post_public_inputs(randomness, prover_id, &vanilla_proofs, None)?;
        let partitions = match post_config.typ {
            // As filecoin-proofs: one partition per `sector_count` sectors, `None` for one.
            PoStType::Window => {
                Some(vanilla_proofs.len().div_ceil(post_config.sector_count.max(1))).filter(|&needed| needed > 1)
            }
            PoStType::Winning => {
                refuse(
                    vanilla_proofs.len() != post_config.sector_count,
                    &format!("Winning PoSt proves {} sectors, not {}", post_config.sector_count, vanilla_proofs.len()),
                )?;
                None
            }
        };
        let (public_params, files) = self.post_setup::<Tree>(post_config, partitions)?;
        let partitioned = partition_vanilla_proofs(
            post_config,
            &public_params.vanilla_params,
            &public_inputs,
            partitions.unwrap_or(1),
            &vanilla_proofs,
        )
        .map_err(|e| filecoin_error("the PoSt vanilla proofs", e))?;
        let proven = self.prove_compound::<_, _, FallbackPoStCompound<Tree>>(
            kind,
            &files,
            &public_inputs,
            partitioned,
            &public_params.vanilla_params,
        )?;
        let replicas = vanilla_proofs
            .iter()
            .map(|p| Ok((p.sector_id, PublicReplicaInfo::new(commitment(&p.comm_r))?)))
            .collect::<anyhow::Result<Vec<_>>>()
            .map_err(|e| filecoin_error("the PoSt sectors", e))?;
        self.verified(proven, started, |bytes| match post_config.typ {
            PoStType::Window => {
                let replicas: BTreeMap<_, _> = replicas.iter().cloned().collect();
                verify_window_post::<Tree>(post_config, randomness, &replicas, prover_id, bytes)
            }
            PoStType::Winning => verify_winning_post::<Tree>(post_config, randomness, &replicas, prover_id, bytes),
        })
    }

    /// One partition of a Window PoSt, from the vanilla proofs of that partition's sectors:
    /// `generate_single_window_post_with_vanilla`'s inputs and proof bytes. A node proves a
    /// deadline's partitions one by one (each may go to another prover) and merges their
    /// bytes in partition order (`merge_window_post_partition_proofs`).
    ///
    /// filecoin-proofs checks the vanilla proofs against the partition's challenges; the proof
    /// is then checked against the public inputs its verifier derives for partition
    /// `partition_index` of the deadline before it is returned.
    pub fn window_post_partition<Tree: 'static + MerkleTreeTrait>(
        &self,
        post_config: &PoStConfig,
        randomness: &ChallengeSeed,
        prover_id: ProverId,
        vanilla_proofs: Vec<FallbackPoStSectorProof<Tree>>,
        partition_index: usize,
    ) -> Result<ProvenKind> {
        let started = Instant::now();
        refuse(post_config.typ != PoStType::Window, "only a Window PoSt is proven one partition at a time")?;
        refuse(vanilla_proofs.is_empty(), "there are no sector proofs to prove")?;
        let per_partition = post_config.sector_count.max(1);
        refuse(
            vanilla_proofs.len() > per_partition,
            &format!(
                "a Window PoSt partition of {} sectors holds at most {per_partition} sectors, not {}",
                sector_size_name(u64::from(post_config.sector_size)),
                vanilla_proofs.len()
            ),
        )?;
        // The check below stands a placeholder for every sector of the partitions before this
        // one: bounded, as no deadline comes near it.
        refuse(
            partition_index.saturating_mul(per_partition) > MAX_SECTORS_BEFORE_PARTITION,
            &format!("partition index {partition_index} is beyond any Window PoSt deadline"),
        )?;
        let public_inputs = post_public_inputs(randomness, prover_id, &vanilla_proofs, Some(partition_index))?;
        let (public_params, files) = self.post_setup::<Tree>(post_config, None)?;
        let partition = filecoin_proofs::single_partition_vanilla_proofs(
            post_config,
            &public_params.vanilla_params,
            &public_inputs,
            &vanilla_proofs,
        )
        .map_err(|e| filecoin_error(&format!("the vanilla proofs of Window PoSt partition {partition_index}"), e))?;
        let proven = self.prove_compound::<_, _, FallbackPoStCompound<Tree>>(
            ProofKind::WindowPost,
            &files,
            &public_inputs,
            vec![partition],
            &public_params.vanilla_params,
        )?;
        let vk = files.read_vk()?;
        self.verified(proven, started, |bytes| {
            verify_window_post_partition::<Tree>(
                &vk,
                &public_params.vanilla_params,
                &public_inputs,
                partition_index,
                bytes,
            )
        })
    }

    /// SnapDeals from the update's partition proofs:
    /// `generate_empty_sector_update_proof_with_vanilla`'s inputs and proof bytes.
    pub fn empty_sector_update<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        &self,
        porep_config: &PoRepConfig,
        vanilla_proofs: Vec<PartitionProof<Tree>>,
        comm_r_old: Commitment,
        comm_r_new: Commitment,
        comm_d_new: Commitment,
    ) -> Result<ProvenKind> {
        let started = Instant::now();
        let config = SectorUpdateConfig::from_porep_config(porep_config);
        let partitions = usize::from(config.update_partitions);
        refuse(
            vanilla_proofs.len() != partitions,
            &format!(
                "a {} update has {partitions} partitions, the vanilla proofs {}",
                sector_size_name(u64::from(config.sector_size)),
                vanilla_proofs.len()
            ),
        )?;
        let domain = |c: &Commitment, name: &str| {
            <TreeRHasher as Hasher>::Domain::try_from_bytes(c)
                .map_err(|e| filecoin_error(&format!("the update's {name}"), e))
        };
        let public_inputs = storage_proofs_update::PublicInputs {
            k: partitions,
            comm_r_old: domain(&comm_r_old, "comm_r_old")?,
            comm_d_new: as_safe_commitment::<DefaultPieceDomain, _>(&comm_d_new, "comm_d_new")
                .map_err(|e| filecoin_error("the update's comm_d_new", e))?,
            comm_r_new: domain(&comm_r_new, "comm_r_new")?,
            h: config.h,
        };
        let (public_params, files) = self.snap_setup::<Tree>(&config)?;
        let proven = self.prove_compound::<_, _, EmptySectorUpdateCompound<Tree>>(
            ProofKind::Snap,
            &files,
            &public_inputs,
            vanilla_proofs,
            &public_params.vanilla_params,
        )?;
        self.verified(proven, started, |bytes| {
            verify_empty_sector_update_proof::<Tree>(porep_config, bytes, comm_r_old, comm_r_new, comm_d_new)
        })
    }

    /// Every partition's circuit, as `CompoundProof::circuit_proofs` builds them, proven on the
    /// pipeline with the kind's priority.
    fn prove_compound<'a, S, C, P>(
        &self,
        kind: ProofKind,
        files: &ParamFiles,
        public_inputs: &S::PublicInputs,
        vanilla_proofs: Vec<S::Proof>,
        public_params: &S::PublicParams,
    ) -> Result<ProvenKind>
    where
        S: ProofScheme<'a>,
        S::Proof: Sync + Send,
        S::PublicParams: ParameterSetMetadata + Sync + Send,
        S::PublicInputs: Clone + Sync,
        C: Circuit<Scalar> + CircuitComponent + Send,
        P: CompoundProof<'a, S, C>,
    {
        let mut timings = ProofTimings::default();
        if self.bellperson {
            if self.held_key(files).is_some() {
                return Err(Error::Config(format!(
                    "{} is held in memory, not in {}: bellperson's reference path reads keys from files only",
                    files.what,
                    files.params.display()
                )));
            }
            return self.prove_with_bellperson::<S, C, P>(kind, files, public_inputs, vanilla_proofs, public_params);
        }
        let circuits = vanilla_proofs
            .par_iter()
            .enumerate()
            .map(|(k, vanilla)| partition_circuit::<S, C, P>(public_inputs, vanilla, public_params, k))
            .collect::<Result<Vec<C>>>()?;
        let partitions = circuits.len();
        if partitions == 0 {
            return Err(Error::Filecoin("no partitions to prove".into()));
        }
        let synthesis = match self.synthesis_figures {
            true => Some(measure_synthesis(|| {
                partition_circuit::<S, C, P>(public_inputs, &vanilla_proofs[0], public_params, 0)
            })?),
            false => None,
        };
        let (r, s) = self.blinding(partitions);
        // A key cached for the file (an earlier proof of the kind, or a preload) is the
        // circuit's: every partition, the first included, is synthesized by this call's threads
        // while the partitions ahead of it prove, witness-only once the matrices are known.
        // Otherwise the first partition is synthesized first and its shape picks the key.
        // A new process finds the key from the matrices an earlier one kept beside the
        // parameters, in the same way.
        let constraints = std::cell::Cell::new(0);
        let (known, key_load) = self.known_key(files)?;
        timings.key_load = key_load;
        let find = match known {
            Some(KnownKey { key, constraints: count }) => {
                constraints.set(count);
                KeyFor::Known(key)
            }
            None => KeyFor::Shape(Box::new(|shape: &WitnessShape| {
                constraints.set(shape.num_constraints);
                self.key(files, shape)
            })),
        };
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let started = Instant::now();
        let batch = self.prover.prove_circuits_observed(
            find,
            circuits,
            r,
            s,
            kind.priority(),
            threads,
            self.submitted.unwrap_or(&|_| {}),
        )?;
        let proving = started.elapsed().saturating_sub(batch.before_proving);
        let queue = batch.handle.queued_for().unwrap_or(Duration::ZERO).min(proving);
        timings.synthesis = batch.synthesis_time.as_secs_f64();
        timings.key_load += batch.key_time.as_secs_f64();
        timings.first_synthesis = batch.before_proving.saturating_sub(batch.key_time).as_secs_f64();
        timings.queue = queue.as_secs_f64();
        timings.gpu = (proving - queue).as_secs_f64();
        let (proofs, constraints) = (batch.proofs, constraints.get());
        let key = Some(batch.key);
        Ok(ProvenKind { kind, bytes: proofs_to_bytes(&proofs), partitions, constraints, timings, synthesis, key })
    }

    /// r and s for each partition: the fixed ones when set, else fresh from the OS.
    fn blinding(&self, partitions: usize) -> (Vec<Scalar>, Vec<Scalar>) {
        match &self.blinding {
            Some((r, s)) => (r.clone(), s.clone()),
            None => {
                let mut rng = rand::rngs::OsRng;
                let r = (0..partitions).map(|_| Scalar::random(&mut rng)).collect();
                let s = (0..partitions).map(|_| Scalar::random(&mut rng)).collect();
                (r, s)
            }
        }
    }

    /// Runs filecoin-proofs' verifier on the proof; a rejected proof is an error, never returned.
    fn verified(
        &self,
        mut proven: ProvenKind,
        started: Instant,
        verify: impl FnOnce(&[u8]) -> anyhow::Result<bool>,
    ) -> Result<ProvenKind> {
        let verifying = Instant::now();
        let accepted = verify(&proven.bytes).map_err(|e| filecoin_error("verifying the proof", e))?;
        proven.timings.verify = verifying.elapsed().as_secs_f64();
        proven.timings.total = started.elapsed().as_secs_f64();
        if accepted {
            Ok(proven)
        } else {
            Err(Error::ProofRejected { kind: proven.kind.name() })
        }
    }
}

/// The most sectors of the partitions before the one [`FilecoinProver::window_post_partition`]
/// proves (placeholders of 40 bytes each in its check): 2^22, far beyond a deadline's.
const MAX_SECTORS_BEFORE_PARTITION: usize = 1 << 22;

/// A PoSt's public inputs over the sectors of `vanilla_proofs`, for partition `k` (None: all).
fn post_public_inputs<Tree: 'static + MerkleTreeTrait>(
    randomness: &ChallengeSeed,
    prover_id: ProverId,
    vanilla_proofs: &[FallbackPoStSectorProof<Tree>],
    k: Option<usize>,
) -> Result<fallback::PublicInputs<<Tree::Hasher as Hasher>::Domain>> {
    let randomness = as_safe_commitment(randomness, "randomness").map_err(|e| filecoin_error("PoSt inputs", e))?;
    let prover_id = as_safe_commitment(&prover_id, "prover_id").map_err(|e| filecoin_error("PoSt inputs", e))?;
    let sectors = vanilla_proofs.iter().map(|p| PublicSector { id: p.sector_id, comm_r: p.comm_r }).collect();
    Ok(fallback::PublicInputs { randomness, prover_id, sectors, k })
}

/// Whether `bytes` is partition `index`'s proof of a Window PoSt whose partition holds the
/// sectors of `partition_inputs`, judged against the public inputs filecoin-proofs' verifier
/// derives for that partition (`generate_public_inputs` over a deadline's sectors, as
/// `verify_window_post` calls it). That routine reads only partition `index`'s chunk of the
/// deadline's sectors, so the sectors of the partitions before it are placeholders here.
fn verify_window_post_partition<Tree: 'static + MerkleTreeTrait>(
    vk: &bellperson::groth16::VerifyingKey<Bls12>,
    params: &fallback::PublicParams,
    partition_inputs: &fallback::PublicInputs<<Tree::Hasher as Hasher>::Domain>,
    index: usize,
    bytes: &[u8],
) -> anyhow::Result<bool> {
    let proof = Proof::<Bls12>::read(bytes)?;
    let placeholder = PublicSector { id: SectorId::from(0), comm_r: Default::default() };
    let mut sectors = vec![placeholder; index * params.sector_count];
    sectors.extend(partition_inputs.sectors.iter().cloned());
    let deadline = fallback::PublicInputs { sectors, k: None, ..partition_inputs.clone() };
    let inputs = FallbackPoStCompound::<Tree>::generate_public_inputs(&deadline, params, Some(index))?;
    let prepared = bellperson::groth16::prepare_verifying_key(vk);
    Ok(bellperson::groth16::verify_proof(&prepared, &proof, &inputs)?)
}

/// Partition `k`'s circuit, built as `CompoundProof::circuit_proofs` builds it: from the whole
/// public inputs, default component inputs and the partition's vanilla proof.
fn partition_circuit<'a, S, C, P>(
    public_inputs: &S::PublicInputs,
    vanilla: &S::Proof,
    public_params: &S::PublicParams,
    k: usize,
) -> Result<C>
where
    S: ProofScheme<'a>,
    S::Proof: Sync + Send,
    S::PublicParams: ParameterSetMetadata + Sync + Send,
    S::PublicInputs: Clone + Sync,
    C: Circuit<Scalar> + CircuitComponent + Send,
    P: CompoundProof<'a, S, C>,
{
    P::circuit(public_inputs, C::ComponentPrivateInputs::default(), vanilla, public_params, Some(k))
        .map_err(|e| filecoin_error(&format!("building partition {k}'s circuit"), e))
}

fn refuse(bad: bool, why: &str) -> Result<()> {
    if bad {
        Err(Error::Filecoin(why.to_string()))
    } else {
        Ok(())
    }
}

/// A domain element's 32 bytes as a commitment.
fn commitment(domain: &impl AsRef<[u8]>) -> Commitment {
    let mut out = [0u8; 32];
    out.copy_from_slice(domain.as_ref());
    out
}
