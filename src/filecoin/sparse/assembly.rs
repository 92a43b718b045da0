//! A sparse sector's C1 output, assembled from storage-proofs' own proof types.
//!
//! The order follows what depends on what: comm_d (the all-zero tree D) picks the replica id,
//! the replica id and the seed pick the challenges, the challenges pick the opened columns and
//! their labels, the labels give tree C's opened leaves (column hashes) and tree R-last's
//! (the last layer's label encoding zero data), and the two sparse roots give comm_r.

use std::collections::BTreeMap;

use ff::{Field, PrimeField};
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{Commitment, DefaultPieceHasher, PoRepConfig, SealCommitPhase1Output};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::drgraph::BASE_DEGREE;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::{
    generate_replica_id, Column, ColumnProof, EncodingProof, LabelingProof, Proof, PublicInputs, ReplicaColumnProof,
};

use super::labels::{repeated_parents, sector_labels, SectorLabels};
use super::trees::{zero_tree_levels, zero_tree_path, SparseTree};
use crate::filecoin::filecoin_error;
use crate::{Error, Result, Scalar};

/// Tree C's and tree R-last's Merkle proofs in the sector's shape.
type TreeProof<Tree> = MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

type TreeDomain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;

/// A sector that was never sealed, and the C1 output of its interactive PoRep: what
/// `seal_commit_phase1` would return for a committed-capacity sector with these ids.
pub struct SparseSector<Tree: 'static + MerkleTreeTrait> {
    pub porep_config: PoRepConfig,
    pub prover_id: [u8; 32],
    pub sector_id: SectorId,
    pub phase1_output: SealCommitPhase1Output<Tree>,
}

/// Makes a sparse sector of `porep_config`'s size and partitions, every random choice (ids,
/// ticket, seed, the labels and digests off the opened paths) drawn from `seed`.
pub fn sparse_sector<Tree: 'static + MerkleTreeTrait>(
    porep_config: &PoRepConfig,
    seed: u64,
) -> Result<SparseSector<Tree>> {
    super::refuse_non_interactive(porep_config)?;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let sector_bytes = u64::from(porep_config.sector_size);
    let nodes = usize::try_from(sector_bytes / 32)
        .map_err(|_| Error::Filecoin("the sector does not fit in memory's address space".into()))?;
    let partitions = usize::from(porep_config.partitions);

    // Tree D: committed capacity, all-zero data.
    let tree_d = zero_tree_levels::<DefaultPieceHasher>(nodes)?;
    let comm_d_domain = *tree_d.last().expect("a tree has a root");
    // filecoin-proofs' `compute_comm_d` of no pieces streams the whole zero sector through
    // SHA-256; the tests compare the two roots where that is cheap.
    let comm_d = commitment(&comm_d_domain);

    // A prover id is a field element's canonical bytes.
    let prover_id: [u8; 32] = Scalar::random(&mut rng).to_repr();
    let sector_id = SectorId::from(rng.gen::<u64>());
    let ticket: [u8; 32] = rng.gen();
    let challenge_seed: [u8; 32] = rng.gen();
    let replica_id = generate_replica_id::<Tree::Hasher, _>(
        &prover_id,
        u64::from(sector_id),
        &ticket,
        comm_d,
        &porep_config.porep_id,
    );

    let public_params = filecoin_proofs::parameters::public_params::<Tree>(porep_config)
        .map_err(|e| filecoin_error("PoRep public parameters", e))?;
    let layers = public_params.num_layers;
    let public_inputs = PublicInputs::<TreeDomain<Tree>, <DefaultPieceHasher as Hasher>::Domain> {
        replica_id,
        seed: Some(challenge_seed),
        tau: None,
        k: None,
    };
    let SectorLabels { challenges, parents, columns } =
        sector_labels::<Tree, _>(&public_params, &public_inputs, partitions, &mut rng)?;

    // Tree C: each opened column's hash; tree R-last: each challenged node's replica value,
    // its last label encoding the data (zero here), as storage-proofs encodes (key + data).
    let arities = SparseTree::<TreeDomain<Tree>>::arities::<Tree>(nodes)?;
    let column_hashes: BTreeMap<usize, TreeDomain<Tree>> = columns
        .iter()
        .map(|(&node, rows)| Ok((node, column::<Tree::Hasher>(node, rows)?.hash().into())))
        .collect::<Result<_>>()?;
    let tree_c = SparseTree::build::<Tree::Hasher>(arities.clone(), &column_hashes, &mut rng);
    let data: Scalar = tree_d[0].into();
    let replica_values: BTreeMap<usize, TreeDomain<Tree>> = parents
        .keys()
        .map(|&node| {
            let key: Scalar = columns[&node][layers - 1].into();
            (node, (key + data).into())
        })
        .collect();
    let tree_r = SparseTree::build::<Tree::Hasher>(arities, &replica_values, &mut rng);
    let comm_r_domain = <Tree::Hasher as Hasher>::Function::hash2(&tree_c.root(), &tree_r.root());

    let column_proof = |node: usize| -> Result<ColumnProof<TreeProof<Tree>>> {
        Ok(ColumnProof::from_column(column::<Tree::Hasher>(node, &columns[&node])?, tree_c.proof(node)?)
            .map_err(|e| filecoin_error("a column proof", e))?)
    };
    let vanilla_proofs = challenges
        .iter()
        .map(|partition| {
            partition
                .iter()
                .map(|&challenge| {
                    let node_parents = &parents[&challenge];
                    let drg = &node_parents[..BASE_DEGREE];
                    let exp = &node_parents[BASE_DEGREE..];
                    let labeling_proofs: Vec<LabelingProof<Tree::Hasher>> = (1..=layers)
                        .map(|layer| {
                            LabelingProof::new(layer as u32, challenge as u64, layer_parents(&columns, drg, exp, layer))
                        })
                        .collect();
                    let encoding_proof =
                        EncodingProof::new(layers as u32, challenge as u64, layer_parents(&columns, drg, exp, layers));
                    let comm_d_proofs =
                        MerkleProof::from_parts(tree_d[0], comm_d_domain, zero_tree_path(&tree_d, challenge));
                    Ok(Proof::<Tree, DefaultPieceHasher> {
                        comm_d_proofs,
                        comm_r_last_proof: tree_r.proof(challenge)?,
                        replica_column_proofs: ReplicaColumnProof {
                            c_x: column_proof(challenge)?,
                            drg_parents: drg.iter().map(|&p| column_proof(p as usize)).collect::<Result<_>>()?,
                            exp_parents: exp.iter().map(|&p| column_proof(p as usize)).collect::<Result<_>>()?,
                        },
                        labeling_proofs,
                        encoding_proof,
                    })
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;

    Ok(SparseSector {
        porep_config: porep_config.clone(),
        prover_id,
        sector_id,
        phase1_output: SealCommitPhase1Output {
            vanilla_proofs,
            comm_r: commitment(&comm_r_domain),
            comm_d,
            replica_id,
            seed: challenge_seed,
            ticket,
        },
    })
}

/// The parents a node's label on `layer` hashes (repeated to 37), read from the opened
/// columns as the circuit reads them: DRG parents on the same layer, expander parents on the
/// layer before (none on layer 1).
fn layer_parents<D: Domain>(columns: &BTreeMap<usize, Vec<D>>, drg: &[u32], exp: &[u32], layer: usize) -> Vec<D> {
    let mut labels: Vec<D> = drg.iter().map(|&p| columns[&(p as usize)][layer - 1]).collect();
    if layer > 1 {
        labels.extend(exp.iter().map(|&p| columns[&(p as usize)][layer - 2]));
    }
    repeated_parents(&labels)
}

fn column<H: Hasher>(node: usize, rows: &[H::Domain]) -> Result<Column<H>> {
    let index = u32::try_from(node).map_err(|_| Error::Filecoin(format!("node {node} is past a u32 column index")))?;
    Column::new(index, rows.to_vec()).map_err(|e| filecoin_error("a column", e))
}

/// A domain element's 32 bytes as filecoin-proofs' commitment.
pub(super) fn commitment(domain: &impl AsRef<[u8]>) -> Commitment {
    let mut out = [0u8; 32];
    out.copy_from_slice(domain.as_ref());
    out
}
