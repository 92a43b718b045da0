//! Groth16 proving keys: the query vectors a circuit's MSMs run over, taken from any bellperson
//! `ParameterSource` (in-memory `Parameters`, memory-mapped `MappedParameters`, ...).
//!
//! A [`ProvingKey`] holds exactly the points one circuit shape uses, each vector starting at
//! its first point (no offsets): `a` is every input's point followed by the points of the aux
//! variables that occur in A, `b_g1`/`b_g2` the B-input points followed by the B-aux points.
//! Scalars from [`crate::circuit::Witness::a_query_scalars`] and
//! [`crate::circuit::Witness::b_query_scalars`] pair with them index by index.

use std::sync::Arc;

use bellperson::groth16::{ParameterSource, Parameters, PreparedVerifyingKey, VerifyingKey};
use blstrs::{Bls12, G1Affine, G2Affine};
use ec_gpu_gen::multiexp_cpu::SourceBuilder;

use crate::circuit::{ShapeRecording, WitnessShape};
use crate::math::Domain;
use crate::{Error, Result};

pub mod cache;
pub mod file;

/// Bytes of one G1 affine point on a device (two 48-byte coordinates).
const G1_AFFINE_BYTES: u64 = 96;
/// Bytes of one G2 affine point on a device (two 96-byte coordinates).
const G2_AFFINE_BYTES: u64 = 192;

/// A query vector as bellperson's sources hand it out: the points and the offset of the first.
pub type G1Points = (Arc<Vec<G1Affine>>, usize);
/// The G2 counterpart of [`G1Points`].
pub type G2Points = (Arc<Vec<G2Affine>>, usize);

/// The points one circuit shape needs to be proven, plus its verifying key.
#[derive(Clone)]
pub struct ProvingKey {
    /// The verifying key (alpha, beta, gamma, delta and the input commitments `ic`).
    pub vk: VerifyingKey<Bls12>,
    /// `tau^i · Z(tau) / delta` for `i < domain - 1`: paired with h's coefficients.
    pub h: Arc<Vec<G1Affine>>,
    /// One point per aux variable: paired with the aux assignment.
    pub l: Arc<Vec<G1Affine>>,
    /// Input points, then the points of aux variables that occur in A.
    pub a: Arc<Vec<G1Affine>>,
    /// B-input points, then B-aux points, in G1.
    pub b_g1: Arc<Vec<G1Affine>>,
    /// The same in G2.
    pub b_g2: Arc<Vec<G2Affine>>,
    /// The constraint matrices of the circuit shape, recorded by the first partition
    /// synthesized in the pipeline for this key (see `circuit::recording`).
    pub recording: Arc<ShapeRecording>,
}

impl std::fmt::Debug for ProvingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The points themselves are noise in a log; their counts are what matters.
        f.debug_struct("ProvingKey")
            .field("ic", &self.vk.ic.len())
            .field("h", &self.h.len())
            .field("l", &self.l.len())
            .field("a", &self.a.len())
            .field("b_g1", &self.b_g1.len())
            .field("b_g2", &self.b_g2.len())
            .finish()
    }
}

impl ProvingKey {
    /// Takes the points `shape` needs from `source`, and checks their counts.
    ///
    /// Works for `&Parameters<Bls12>` (shares its vectors, no copy) and
    /// `&MappedParameters<Bls12>` (reads the points from the file).
    pub fn from_source<P: ParameterSource<Bls12>>(source: P, shape: &WitnessShape) -> Result<Arc<ProvingKey>> {
        let domain = Domain::for_len(shape.num_constraints)?;
        let vk = source.get_vk(shape.num_inputs)?.clone();
        let h = whole_from("h", source.get_h(domain.size() - 1)?.get())?;
        let l = whole_from("l", source.get_l(shape.num_aux)?.get())?;
        let (a_inputs, a_aux) = source.get_a(shape.num_inputs, shape.a_aux_total)?;
        let a = join_split("a", a_inputs.get(), shape.num_inputs, a_aux.get())?;
        let (b_g1_inputs, b_g1_aux) = source.get_b_g1(shape.b_input_total, shape.b_aux_total)?;
        let b_g1 = join_split("b_g1", b_g1_inputs.get(), shape.b_input_total, b_g1_aux.get())?;
        let (b_g2_inputs, b_g2_aux) = source.get_b_g2(shape.b_input_total, shape.b_aux_total)?;
        let b_g2 = join_split("b_g2", b_g2_inputs.get(), shape.b_input_total, b_g2_aux.get())?;

        let key = ProvingKey { vk, h, l, a, b_g1, b_g2, recording: Default::default() };
        key.check_shape(shape)?;
        Ok(Arc::new(key))
    }

    /// Shares the vectors of in-memory parameters as they are (no copy, no shape check).
    pub fn from_parameters(params: &Parameters<Bls12>) -> Arc<ProvingKey> {
        Arc::new(ProvingKey {
            vk: params.vk.clone(),
            h: params.h.clone(),
            l: params.l.clone(),
            a: params.a.clone(),
            b_g1: params.b_g1.clone(),
            b_g2: params.b_g2.clone(),
            recording: Default::default(),
        })
    }

    /// Checks every query's point count against `shape`, failing with
    /// [`Error::ParamsMismatch`] naming the first query that differs.
    pub fn check_shape(&self, shape: &WitnessShape) -> Result<()> {
        let domain = Domain::for_len(shape.num_constraints)?;
        let b_total = shape.b_query_len();
        let expected = [
            ("vk.ic (public inputs incl. ONE)", self.vk.ic.len(), shape.num_inputs),
            ("h (domain size - 1)", self.h.len(), domain.size() - 1),
            ("l (aux variables)", self.l.len(), shape.num_aux),
            ("a (inputs + aux in A)", self.a.len(), shape.a_query_len()),
            ("b_g1 (inputs and aux in B)", self.b_g1.len(), b_total),
            ("b_g2 (inputs and aux in B)", self.b_g2.len(), b_total),
        ];
        match expected.into_iter().find(|(_, in_params, in_circuit)| in_params != in_circuit) {
            Some((what, in_params, in_circuit)) => Err(Error::ParamsMismatch { what, in_params, in_circuit }),
            None => Ok(()),
        }
    }

    /// The scalar vectors a partition of this key may stage in pooled pinned memory, by
    /// length: the domain-sized a, b and c evaluations and the aux assignment (copied when
    /// they are not page-locked in place), then the inputs of the A and B queries (always).
    pub fn staging_lengths(&self) -> [usize; 6] {
        let domain = self.h.len() + 1;
        let inputs = self.vk.ic.len();
        [domain, domain, domain, self.l.len(), inputs, inputs]
    }

    /// Points in the longest query vector (what a streamed key's chunks must cover).
    pub fn longest_query(&self) -> usize {
        [self.h.len(), self.l.len(), self.a.len(), self.b_g1.len(), self.b_g2.len()].into_iter().max().unwrap_or(0)
    }

    /// The points of each query vector, as the device-memory plan sees the key.
    pub fn vectors(&self) -> crate::plan::KeyVectors {
        crate::plan::KeyVectors { points: [self.h.len(), self.l.len(), self.a.len(), self.b_g1.len(), self.b_g2.len()] }
    }

    /// The shape of this key's partitions as far as their device-memory plan needs it, and
    /// the log2 of its domain: what a preload plans with before any partition has come.
    /// (Which of the b query's points are inputs does not change the plan.)
    pub fn planning_shape(&self) -> (WitnessShape, u32) {
        let domain = self.h.len() + 1;
        let num_inputs = self.vk.ic.len();
        let shape = WitnessShape {
            num_constraints: domain,
            num_inputs,
            num_aux: self.l.len(),
            a_aux_total: self.a.len().saturating_sub(num_inputs),
            b_input_total: 0,
            b_aux_total: self.b_g1.len(),
        };
        (shape, domain.trailing_zeros())
    }

    /// The bytes the query vectors occupy on a device: 96 per G1 point, 192 per G2 point.
    pub fn device_bytes(&self) -> u64 {
        let g1_points = self.h.len() + self.l.len() + self.a.len() + self.b_g1.len();
        g1_points as u64 * G1_AFFINE_BYTES + self.b_g2.len() as u64 * G2_AFFINE_BYTES
    }

    /// The bytes the query vectors occupy in host memory.
    pub fn host_bytes(&self) -> u64 {
        use std::mem::size_of;
        let g1_points = self.h.len() + self.l.len() + self.a.len() + self.b_g1.len();
        (g1_points * size_of::<G1Affine>() + self.b_g2.len() * size_of::<G2Affine>()) as u64
    }

    /// The verifying key prepared for pairing checks.
    pub fn prepared_vk(&self) -> PreparedVerifyingKey<Bls12> {
        bellperson::groth16::prepare_verifying_key(&self.vk)
    }
}

/// A source hands back `(vector, offset)`; the query is everything from the offset on.
fn whole_from<G: Clone>(what: &'static str, (points, offset): (Arc<Vec<G>>, usize)) -> Result<Arc<Vec<G>>> {
    if offset == 0 {
        return Ok(points);
    }
    match points.get(offset..) {
        Some(tail) => Ok(Arc::new(tail.to_vec())),
        None => Err(Error::ParamsMismatch { what, in_params: points.len(), in_circuit: offset }),
    }
}

/// Joins a query's input part (`num_inputs` points from its offset) and aux part (from its
/// offset to the end). When both parts are one shared vector laid out contiguously, as with
/// `&Parameters`, the vector is shared rather than copied.
fn join_split<G: Clone>(
    what: &'static str,
    (inputs, input_offset): (Arc<Vec<G>>, usize),
    num_inputs: usize,
    (aux, aux_offset): (Arc<Vec<G>>, usize),
) -> Result<Arc<Vec<G>>> {
    let contiguous = Arc::ptr_eq(&inputs, &aux) && input_offset == 0 && aux_offset == num_inputs;
    if contiguous && aux_offset <= aux.len() {
        return Ok(aux);
    }
    let too_short = |have: usize, need: usize| Error::ParamsMismatch { what, in_params: have, in_circuit: need };
    let input_points = inputs
        .get(input_offset..input_offset + num_inputs)
        .ok_or_else(|| too_short(inputs.len().saturating_sub(input_offset), num_inputs))?;
    let aux_points = aux.get(aux_offset..).ok_or_else(|| too_short(aux.len(), aux_offset))?;
    let mut joined = Vec::with_capacity(input_points.len() + aux_points.len());
    joined.extend_from_slice(input_points);
    joined.extend_from_slice(aux_points);
    Ok(Arc::new(joined))
}
