//! Judging a C1 output with storage-proofs' and filecoin-proofs' own checks: the vanilla
//! verifier, the Merkle paths it does not hash, and the circuit itself.

use filecoin_hashers::Hasher;
use filecoin_proofs::{DefaultPieceHasher, PoRepConfig, SealCommitPhase1Output};
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::{
    generate_replica_id, PublicInputs, StackedCircuit, StackedCompound, StackedDrg, Tau,
};

use crate::circuit::{SatisfactionCheck, Witness};
use crate::filecoin::filecoin_error;
use crate::{Error, Result};

/// The public inputs filecoin-proofs' `verify_seal` rebuilds from the ids, the ticket, the
/// seed and the commitments; the replica id must be the one the ids give.
fn public_inputs<Tree: 'static + MerkleTreeTrait>(
    porep_config: &PoRepConfig,
    prover_id: &[u8; 32],
    sector_id: SectorId,
    c1: &SealCommitPhase1Output<Tree>,
) -> Result<PublicInputs<<Tree::Hasher as Hasher>::Domain, <DefaultPieceHasher as Hasher>::Domain>> {
    let replica_id = generate_replica_id::<Tree::Hasher, _>(
        prover_id,
        u64::from(sector_id),
        &c1.ticket,
        c1.comm_d,
        &porep_config.porep_id,
    );
    if replica_id != c1.replica_id {
        return Err(Error::Filecoin(
            "the C1 output's replica id is not the one its prover id, sector id, ticket and comm_d give".into(),
        ));
    }
    Ok(PublicInputs {
        replica_id,
        seed: Some(c1.seed),
        tau: Some(Tau { comm_d: domain(&c1.comm_d, "comm_d")?, comm_r: domain(&c1.comm_r, "comm_r")? }),
        k: None,
    })
}

fn domain<D: filecoin_hashers::Domain>(bytes: &[u8; 32], what: &str) -> Result<D> {
    D::try_from_bytes(bytes).map_err(|e| filecoin_error(&format!("the C1 output's {what}"), e))
}

/// Checks a C1 output as far as a CPU can cheaply: storage-proofs' vanilla verifier
/// (`StackedDrg::verify_all_partitions`, filecoin-proofs' own check after commit phase 1),
/// then the tree-D and tree-R-last paths it checks only by index, hashed up to their roots.
pub fn verify_vanilla<Tree: 'static + MerkleTreeTrait>(
    porep_config: &PoRepConfig,
    prover_id: &[u8; 32],
    sector_id: SectorId,
    c1: &SealCommitPhase1Output<Tree>,
) -> Result<()> {
    let inputs = public_inputs(porep_config, prover_id, sector_id, c1)?;
    let public_params = filecoin_proofs::parameters::public_params::<Tree>(porep_config)
        .map_err(|e| filecoin_error("PoRep public parameters", e))?;
    let partitions = usize::from(porep_config.partitions);
    if c1.vanilla_proofs.len() != partitions {
        return Err(Error::Filecoin(format!(
            "the C1 output has {} partitions, the PoRep configuration {partitions}",
            c1.vanilla_proofs.len()
        )));
    }
    let accepted =
        StackedDrg::<Tree, DefaultPieceHasher>::verify_all_partitions(&public_params, &inputs, &c1.vanilla_proofs)
            .map_err(|e| filecoin_error("storage-proofs' vanilla verifier", e))?;
    if !accepted {
        return Err(Error::Filecoin("storage-proofs' vanilla verifier rejects the C1 output".into()));
    }
    for (k, partition) in c1.vanilla_proofs.iter().enumerate() {
        for (i, proof) in partition.iter().enumerate() {
            if !proof.comm_d_proofs.verify() {
                return Err(Error::Filecoin(format!(
                    "partition {k}, challenge {i}: the tree-D path does not hash to comm_d"
                )));
            }
            if !proof.comm_r_last_proof.verify() {
                return Err(Error::Filecoin(format!(
                    "partition {k}, challenge {i}: the tree-R-last path does not hash to comm_r_last"
                )));
            }
        }
    }
    Ok(())
}

/// Synthesizes partition `k`'s circuit from the C1 output (as `CompoundProof::circuit_proofs`
/// builds it) with every constraint checked; returns its constraint count. This is what the
/// vanilla verifier cannot judge: a witness the circuit refuses fails here, naming the
/// first constraint it breaks.
pub fn check_partition_satisfied<Tree: 'static + MerkleTreeTrait>(
    porep_config: &PoRepConfig,
    prover_id: &[u8; 32],
    sector_id: SectorId,
    c1: &SealCommitPhase1Output<Tree>,
    k: usize,
) -> Result<usize> {
    let circuit = partition_circuit(porep_config, prover_id, sector_id, c1, k)?;
    Ok(Witness::synthesize(circuit, SatisfactionCheck::On)?.a.len())
}

/// Partition `k`'s PoRep circuit from a C1 output, as `CompoundProof::circuit_proofs` builds
/// it.
pub fn partition_circuit<Tree: 'static + MerkleTreeTrait>(
    porep_config: &PoRepConfig,
    prover_id: &[u8; 32],
    sector_id: SectorId,
    c1: &SealCommitPhase1Output<Tree>,
    k: usize,
) -> Result<StackedCircuit<Tree, DefaultPieceHasher>> {
    let inputs = public_inputs(porep_config, prover_id, sector_id, c1)?;
    let proof =
        c1.vanilla_proofs.get(k).ok_or_else(|| Error::Filecoin(format!("the C1 output has no partition {k}")))?;
    let setup = compound_proof::SetupParams {
        vanilla_params: filecoin_proofs::parameters::setup_params(porep_config)
            .map_err(|e| filecoin_error("PoRep setup", e))?,
        partitions: Some(usize::from(porep_config.partitions)),
        priority: false,
    };
    let public_params = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<_, _>>::setup(&setup)
        .map_err(|e| filecoin_error("PoRep compound setup", e))?;
    <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<_, _>>::circuit(
        &inputs,
        Default::default(),
        proof,
        &public_params.vanilla_params,
        Some(k),
    )
    .map_err(|e| filecoin_error(&format!("building partition {k}'s circuit"), e))
}
