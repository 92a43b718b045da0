//! filecoin-proofs' own entry points, with its inputs and output bytes, on snarkpipe.

use super::*;

/// Proofs back to back in bellperson's encoding: what filecoin-proofs' `MultiProof::write` and
/// `proofs_to_bytes` both produce.
pub fn proofs_to_bytes(proofs: &[Proof<Bls12>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(proofs.len() * filecoin_proofs::SINGLE_PARTITION_PROOF_LEN);
    for proof in proofs {
        proof.write(&mut out).expect("writing to a Vec cannot fail");
    }
    out
}

/// `filecoin_proofs::seal_commit_phase2` on snarkpipe's shared prover, with parameters from
/// filecoin-proofs' parameter cache.
pub fn seal_commit_phase2<Tree: 'static + MerkleTreeTrait>(
    porep_config: &PoRepConfig,
    phase1_output: SealCommitPhase1Output<Tree>,
    prover_id: ProverId,
    sector_id: SectorId,
) -> Result<SealCommitOutput> {
    let prover = crate::compat::default_prover()?;
    let proven = FilecoinProver::new(prover).seal_commit_phase2(porep_config, phase1_output, prover_id, sector_id)?;
    Ok(SealCommitOutput { proof: proven.bytes })
}

/// `filecoin_proofs::generate_window_post_with_vanilla` on snarkpipe's shared prover.
pub fn generate_window_post_with_vanilla<Tree: 'static + MerkleTreeTrait>(
    post_config: &PoStConfig,
    randomness: &ChallengeSeed,
    prover_id: ProverId,
    vanilla_proofs: Vec<FallbackPoStSectorProof<Tree>>,
) -> Result<SnarkProof> {
    if post_config.typ != PoStType::Window {
        return Err(Error::Filecoin("generate_window_post_with_vanilla needs a Window PoSt configuration".into()));
    }
    let prover = crate::compat::default_prover()?;
    Ok(FilecoinProver::new(prover).post(post_config, randomness, prover_id, vanilla_proofs)?.bytes)
}

/// `filecoin_proofs::generate_single_window_post_with_vanilla` on snarkpipe's shared prover:
/// one partition's proof, as `merge_window_post_partition_proofs` takes it.
pub fn generate_single_window_post_with_vanilla<Tree: 'static + MerkleTreeTrait>(
    post_config: &PoStConfig,
    randomness: &ChallengeSeed,
    prover_id: ProverId,
    vanilla_proofs: Vec<FallbackPoStSectorProof<Tree>>,
    partition_index: usize,
) -> Result<filecoin_proofs::PartitionSnarkProof> {
    let prover = crate::compat::default_prover()?;
    let proven = FilecoinProver::new(prover).window_post_partition(
        post_config,
        randomness,
        prover_id,
        vanilla_proofs,
        partition_index,
    )?;
    Ok(filecoin_proofs::PartitionSnarkProof(proven.bytes))
}

/// `filecoin_proofs::generate_winning_post_with_vanilla` on snarkpipe's shared prover.
pub fn generate_winning_post_with_vanilla<Tree: 'static + MerkleTreeTrait>(
    post_config: &PoStConfig,
    randomness: &ChallengeSeed,
    prover_id: ProverId,
    vanilla_proofs: Vec<FallbackPoStSectorProof<Tree>>,
) -> Result<SnarkProof> {
    if post_config.typ != PoStType::Winning {
        return Err(Error::Filecoin("generate_winning_post_with_vanilla needs a Winning PoSt configuration".into()));
    }
    let prover = crate::compat::default_prover()?;
    Ok(FilecoinProver::new(prover).post(post_config, randomness, prover_id, vanilla_proofs)?.bytes)
}

/// `filecoin_proofs::generate_empty_sector_update_proof_with_vanilla` on snarkpipe's shared
/// prover.
pub fn generate_empty_sector_update_proof_with_vanilla<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    porep_config: &PoRepConfig,
    vanilla_proofs: Vec<PartitionProof<Tree>>,
    comm_r_old: Commitment,
    comm_r_new: Commitment,
    comm_d_new: Commitment,
) -> Result<EmptySectorUpdateProof> {
    let prover = crate::compat::default_prover()?;
    let proven = FilecoinProver::new(prover).empty_sector_update(
        porep_config,
        vanilla_proofs,
        comm_r_old,
        comm_r_new,
        comm_d_new,
    )?;
    Ok(EmptySectorUpdateProof(proven.bytes))
}
