//! The challenged nodes of a sparse sector, their parents in storage-proofs' own graph, and
//! the labels of every opened column.
//!
//! Challenges come from storage-proofs' `PublicInputs::challenges` and parents from the
//! `StackedBucketGraph` of the public parameters, node by node through `Graph::parents`: the
//! DRG parents from the bucket graph's seed, the expander parents from its Feistel
//! permutation. Neither needs the sector's parent cache file (56 GiB at 32 GiB), which only
//! speeds up sealing every node in order.
//!
//! A challenged node's labels are computed from its parents' labels exactly as storage-proofs'
//! `LabelingProof` recomputes them (and [`label`] is checked against storage-proofs'
//! `create_label` in the tests). Every other opened column (a parent that is not itself
//! challenged) holds random labels: nothing above it is opened, so no proof can tell.

use std::collections::{BTreeMap, BTreeSet};

use filecoin_hashers::{Domain, Hasher};
use rand::Rng;
use sha2::{Digest, Sha256};
use storage_proofs_core::drgraph::{Graph, BASE_DEGREE};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{PublicInputs, PublicParams, EXP_DEGREE, TOTAL_PARENTS};

use crate::{Error, Result};

/// A node's parents in the stacked graph: its DRG parents first (same layer), then its
/// expander parents (previous layer), as `Graph::parents` orders them.
pub(super) type Parents = [u32; BASE_DEGREE + EXP_DEGREE];

/// The challenges of every partition and the labels of every column a proof opens.
pub(super) struct SectorLabels<D> {
    /// Partition k's challenges, in storage-proofs' order (repeats kept: each is proven).
    pub challenges: Vec<Vec<usize>>,
    /// The parents of each challenged node.
    pub parents: BTreeMap<usize, Parents>,
    /// Each opened column's labels, layer 1 first.
    pub columns: BTreeMap<usize, Vec<D>>,
}

/// The labels of `layers` layers for the challenges `public_inputs` derives for each of
/// `partitions` partitions: honest for challenged nodes, random for the other opened columns.
pub(super) fn sector_labels<Tree: 'static + MerkleTreeTrait, D: Domain>(
    public_params: &PublicParams<Tree>,
    public_inputs: &PublicInputs<<Tree::Hasher as Hasher>::Domain, D>,
    partitions: usize,
    rng: &mut impl Rng,
) -> Result<SectorLabels<<Tree::Hasher as Hasher>::Domain>> {
    let graph = &public_params.graph;
    let nodes = graph.size();
    let layers = public_params.num_layers;
    let challenges: Vec<Vec<usize>> =
        (0..partitions).map(|k| public_inputs.challenges(&public_params.challenges, nodes, Some(k))).collect();
    let challenged: BTreeSet<usize> = challenges.iter().flatten().copied().collect();
    let mut parents = BTreeMap::new();
    for &node in &challenged {
        let mut node_parents: Parents = [0; BASE_DEGREE + EXP_DEGREE];
        graph
            .parents(node, &mut node_parents)
            .map_err(|e| crate::filecoin::filecoin_error(&format!("the parents of node {node}"), e))?;
        parents.insert(node, node_parents);
    }

    // Parents that are not challenged: random labels, drawn as real ones look (SHA-256
    // truncated to 254 bits).
    let mut columns: BTreeMap<usize, Vec<<Tree::Hasher as Hasher>::Domain>> = BTreeMap::new();
    for node_parents in parents.values() {
        for &parent in node_parents.iter() {
            let parent = parent as usize;
            if !challenged.contains(&parent) && !columns.contains_key(&parent) {
                columns.insert(parent, (0..layers).map(|_| random_label(rng)).collect::<Result<_>>()?);
            }
        }
    }

    // Challenged nodes, layer by layer and in node order within a layer: a DRG parent is an
    // earlier node of the same layer, an expander parent a node of the layer before, so each
    // challenged parent's label is known before its child's.
    let replica_id = public_inputs.replica_id;
    let mut honest: BTreeMap<usize, Vec<<Tree::Hasher as Hasher>::Domain>> =
        challenged.iter().map(|&node| (node, Vec::with_capacity(layers))).collect();
    for layer in 1..=layers {
        for &node in &challenged {
            let node_parents = &parents[&node];
            let mut parent_labels = Vec::with_capacity(BASE_DEGREE + EXP_DEGREE);
            for (i, &parent) in node_parents.iter().enumerate() {
                let parent = parent as usize;
                let parent_layer = if i < BASE_DEGREE { layer } else { layer - 1 };
                if parent_layer == 0 {
                    break;
                }
                let column = columns.get(&parent).or_else(|| honest.get(&parent)).ok_or_else(|| {
                    Error::Filecoin(format!("node {node}'s parent {parent} has no column (a bug of the sparse sector)"))
                })?;
                let parent_label = column.get(parent_layer - 1).copied().ok_or_else(|| {
                    Error::Filecoin(format!(
                        "node {node}'s parent {parent} is not labelled at layer {parent_layer} before it: \
                         storage-proofs' graph gave a DRG parent that is not an earlier node"
                    ))
                })?;
                parent_labels.push(parent_label);
            }
            let value = label(&replica_id, layer as u32, node as u64, &repeated_parents(&parent_labels))?;
            honest.get_mut(&node).expect("every challenged node has a column").push(value);
        }
    }
    columns.extend(honest);
    Ok(SectorLabels { challenges, parents, columns })
}

/// The parents a label hashes: the layer's parents (6 DRG on layer 1, 6 DRG and 8 expander
/// above) repeated to `TOTAL_PARENTS`, as storage-proofs' labelling and its `LabelingProof`
/// both take them.
pub(super) fn repeated_parents<D: Copy>(layer_parents: &[D]) -> Vec<D> {
    layer_parents.iter().copied().cycle().take(TOTAL_PARENTS).collect()
}

/// A node's label: SHA-256 of the replica id, the layer (big-endian u32) and the node
/// (big-endian u64) in a 64-byte block, then the parents' labels, truncated to 254 bits;
/// what storage-proofs' `LabelingProof::verify` recomputes and `create_label` writes.
pub(super) fn label<D: Domain>(replica_id: &impl AsRef<[u8]>, layer: u32, node: u64, parents: &[D]) -> Result<D> {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(replica_id.as_ref());
    block[32..36].copy_from_slice(&layer.to_be_bytes());
    block[36..44].copy_from_slice(&node.to_be_bytes());
    let mut hasher = Sha256::new();
    hasher.update(block);
    for parent in parents {
        hasher.update(parent.as_ref());
    }
    let mut digest: [u8; 32] = hasher.finalize().into();
    digest[31] &= 0b0011_1111;
    D::try_from_bytes(&digest).map_err(|e| crate::filecoin::filecoin_error("a label", e))
}

/// A random label: 32 random bytes truncated to 254 bits, as a SHA-256 label is.
pub(super) fn random_label<D: Domain>(rng: &mut impl Rng) -> Result<D> {
    let mut bytes: [u8; 32] = rng.gen();
    bytes[31] &= 0b0011_1111;
    D::try_from_bytes(&bytes).map_err(|e| crate::filecoin::filecoin_error("a random label", e))
}
