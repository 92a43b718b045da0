//! The sector's Merkle trees, without materialising them.
//!
//! - Tree D of a committed-capacity sector: the all-zero SHA-256 binary tree, whose every
//!   level is one digest repeated, so any path is the list of those digests.
//! - Tree C and tree R-last: sparse trees of the sector's shape (8-ary Poseidon base trees,
//!   with 8 sub-trees at 32 GiB and a top of 2 at 64 GiB). Every node on the union of the
//!   opened paths is hashed from its children; a child off those paths is a random digest
//!   (it stands for an untouched subtree). All paths then agree with one root.
//!
//! Nodes are hashed with storage-proofs' own `InclusionPath::root`, one level at a time: the
//! very function its Merkle proofs are verified with.

use std::collections::{BTreeMap, HashMap};

use filecoin_hashers::{Domain, Hasher, PoseidonArity};
// typenum through sha2's re-export: the one typenum of the build, whose U8 is filecoin-hashers'.
use rand::Rng;
use sha2::digest::generic_array::typenum::{Unsigned, U8};
use storage_proofs_core::merkle::{InclusionPath, MerkleProof, MerkleTreeTrait, PathElement};

use crate::{Error, Result};

/// A Merkle path as storage-proofs' `MerkleProof::from_parts` takes it: from the leaf up, each
/// level's siblings (the node itself left out) and the node's position among them.
pub(super) type Path<D> = Vec<(Vec<D>, usize)>;

/// One level's parent: `children` hashed as storage-proofs hashes a path level.
fn hash_children<H: Hasher>(children: &[H::Domain]) -> H::Domain {
    // InclusionPath::root inserts the node among its siblings and hashes them with the
    // hasher's multi_node; its arity parameter only types the path, so any arity serves.
    let (first, rest) = children.split_first().expect("a tree level has children");
    InclusionPath::<H, U8>::from(vec![PathElement::from((rest.to_vec(), 0))]).root(*first)
}

/// Tree D of an all-zero sector of `nodes` leaves: the zero digest of every level, leaves
/// first, root last.
pub(super) fn zero_tree_levels<H: Hasher>(nodes: usize) -> Result<Vec<H::Domain>> {
    if !nodes.is_power_of_two() || nodes < 2 {
        return Err(Error::Filecoin(format!("a binary tree of {nodes} leaves is not a full binary tree")));
    }
    let mut levels = vec![H::Domain::default()];
    for _ in 0..nodes.trailing_zeros() {
        let below = *levels.last().expect("levels start with the leaf");
        levels.push(hash_children::<H>(&[below, below]));
    }
    Ok(levels)
}

/// The path of `leaf` in the all-zero tree of `levels`: every sibling is its level's zero digest.
pub(super) fn zero_tree_path<D: Domain>(levels: &[D], leaf: usize) -> Path<D> {
    levels[..levels.len() - 1]
        .iter()
        .enumerate()
        .map(|(height, sibling)| (vec![*sibling], (leaf >> height) & 1))
        .collect()
}

/// A sparse Merkle tree: the opened leaves, every node on their paths, and the random digests
/// beside them.
pub(super) struct SparseTree<D> {
    /// The arity of each level, from the leaves up.
    arities: Vec<usize>,
    /// The known nodes of each level, by index within the level; level 0 holds leaves.
    levels: Vec<HashMap<usize, D>>,
}

impl<D: Domain> SparseTree<D> {
    /// The arities of `Tree`'s levels for a sector of `nodes` leaves: the base tree's levels,
    /// then the sub-tree level and the top level where the shape has them.
    pub fn arities<Tree: MerkleTreeTrait>(nodes: usize) -> Result<Vec<usize>> {
        let base = Tree::Arity::to_usize();
        let sub = Tree::SubTreeArity::to_usize();
        let top = Tree::TopTreeArity::to_usize();
        let base_leaves = nodes / sub.max(1) / top.max(1);
        let mut arities = Vec::new();
        let mut width = 1;
        while width < base_leaves {
            arities.push(base);
            width *= base;
        }
        arities.extend([sub, top].into_iter().filter(|&a| a > 0));
        if width != base_leaves || arities.iter().product::<usize>() != nodes {
            return Err(Error::Filecoin(format!(
                "{nodes} leaves do not fill a tree of arity {base} with {sub} sub-trees and a top of {top}"
            )));
        }
        Ok(arities)
    }

    /// Builds the tree over `leaves` (the opened ones, by index), hashing with `H`.
    pub fn build<H: Hasher<Domain = D>>(arities: Vec<usize>, leaves: &BTreeMap<usize, D>, rng: &mut impl Rng) -> Self {
        let mut levels = vec![leaves.iter().map(|(&i, &d)| (i, d)).collect::<HashMap<_, _>>()];
        for &arity in &arities {
            let below = levels.last_mut().expect("the leaves' level is there");
            let mut parents: Vec<usize> = below.keys().map(|i| i / arity).collect();
            parents.sort_unstable();
            parents.dedup();
            let mut level = HashMap::with_capacity(parents.len());
            for parent in parents {
                let children: Vec<D> = (parent * arity..(parent + 1) * arity)
                    .map(|i| *below.entry(i).or_insert_with(|| D::random(rng)))
                    .collect();
                level.insert(parent, hash_children::<H>(&children));
            }
            levels.push(level);
        }
        SparseTree { arities, levels }
    }

    pub fn root(&self) -> D {
        self.levels.last().and_then(|top| top.get(&0)).copied().expect("a built tree has its root")
    }

    pub fn leaf(&self, leaf: usize) -> Option<D> {
        self.levels[0].get(&leaf).copied()
    }

    /// The path of an opened leaf.
    pub fn path(&self, leaf: usize) -> Result<Path<D>> {
        let mut index = leaf;
        let mut path = Vec::with_capacity(self.arities.len());
        for (level, &arity) in self.arities.iter().enumerate() {
            let first = index / arity * arity;
            let siblings = (first..first + arity)
                .filter(|&i| i != index)
                .map(|i| self.levels[level].get(&i).copied())
                .collect::<Option<Vec<D>>>()
                .ok_or_else(|| Error::Filecoin(format!("leaf {leaf} was not opened in the sparse tree")))?;
            path.push((siblings, index - first));
            index /= arity;
        }
        Ok(path)
    }

    /// storage-proofs' Merkle proof of an opened leaf, in `Tree`'s shape.
    pub fn proof<H, A, B, C>(&self, leaf: usize) -> Result<MerkleProof<H, A, B, C>>
    where
        H: Hasher<Domain = D>,
        A: PoseidonArity,
        B: PoseidonArity,
        C: PoseidonArity,
    {
        let value =
            self.leaf(leaf).ok_or_else(|| Error::Filecoin(format!("leaf {leaf} was not opened in the sparse tree")))?;
        Ok(MerkleProof::from_parts(value, self.root(), self.path(leaf)?))
    }
}
