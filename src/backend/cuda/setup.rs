//! Fixed-base multiplication on the GPU (kernels/setup/fixed_base.cu), for making test and
//! benchmark proving keys at sizes where the CPU setup takes minutes: a 2^26 key has about
//! 3·10^8 points. The host builds the byte-window table of the generator; the GPU sums one
//! table point per scalar byte; the host normalises the Jacobian results in parallel batches.

use std::sync::Arc;

use blstrs::{G1Affine, G2Affine, Scalar};
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;

use super::context::{GpuBuffer, GpuContext, GpuStream, KernelArg};
use super::msm_curves::{MsmCurve, G1, G2};
use crate::error::{Error, Result};
use crate::math::{filled, BatchAffine};

/// Scalars per kernel launch (and per round trip): bounds the device memory used.
const SCALARS_PER_CHUNK: usize = 1 << 22;
const THREADS: u32 = 128;
/// Table points: 32 byte windows of 255 nonzero multiples each.
pub const TABLE_POINTS: usize = 32 * 255;
/// Points per host normalisation batch (one field inversion each).
const NORMALISE_BATCH: usize = 1 << 12;

/// A curve whose fixed-base kernel exists.
trait FixedBaseCurve: MsmCurve {
    const KERNEL: &'static str;
}
impl FixedBaseCurve for G1 {
    const KERNEL: &'static str = "setup_g1_fixed_base";
}
impl FixedBaseCurve for G2 {
    const KERNEL: &'static str = "setup_g2_fixed_base";
}

/// `scalars[i]·G` on G1 on `gpu`, where `table[w·255 + b − 1] = b·2^(8w)·G`.
pub(super) fn fixed_base_g1(gpu: &Arc<GpuContext>, table: &[G1Affine], scalars: &[Scalar]) -> Result<Vec<G1Affine>> {
    fixed_base::<G1>(gpu, table, scalars)
}

/// `scalars[i]·G` on G2 on `gpu`, with the table laid out as for [`fixed_base_g1`].
pub(super) fn fixed_base_g2(gpu: &Arc<GpuContext>, table: &[G2Affine], scalars: &[Scalar]) -> Result<Vec<G2Affine>> {
    fixed_base::<G2>(gpu, table, scalars)
}

fn fixed_base<C>(gpu: &Arc<GpuContext>, table: &[C::Affine], scalars: &[Scalar]) -> Result<Vec<C::Affine>>
where
    C: FixedBaseCurve,
    C::Affine: PrimeCurveAffine + Send + Sync,
    C::Projective: BatchAffine<Affine = C::Affine> + Send + Sync,
    C::Jacobian: Sync,
{
    if table.len() != TABLE_POINTS {
        return Err(Error::Config(format!("a fixed-base table has {TABLE_POINTS} points, not {}", table.len())));
    }
    let mut out = filled(scalars.len(), C::Affine::identity());
    if scalars.is_empty() {
        return Ok(out);
    }
    let stream = gpu.new_stream()?;
    let table = stream.upload(table)?;
    let chunk = SCALARS_PER_CHUNK.min(scalars.len());
    let mut on_device = stream.alloc::<Scalar>(chunk)?;
    let jacobian = stream.alloc::<C::Jacobian>(chunk)?;
    for (scalars, out) in scalars.chunks(chunk).zip(out.chunks_mut(chunk)) {
        let sums = stream.fixed_base_chunk::<C>(&table, scalars, &mut on_device, &jacobian)?;
        out.par_chunks_mut(NORMALISE_BATCH).zip(sums.par_chunks(NORMALISE_BATCH)).for_each(|(out, sums)| {
            let projective: Vec<C::Projective> = sums.iter().map(C::to_projective).collect();
            C::Projective::batch_to_affine(&projective, out);
        });
    }
    Ok(out)
}

impl GpuStream {
    /// One launch: uploads `scalars`, multiplies, downloads the Jacobian sums (waits).
    fn fixed_base_chunk<C: FixedBaseCurve>(
        &self,
        table: &GpuBuffer<C::Affine>,
        scalars: &[Scalar],
        on_device: &mut GpuBuffer<Scalar>,
        jacobian: &GpuBuffer<C::Jacobian>,
    ) -> Result<Vec<C::Jacobian>> {
        self.upload_into(scalars, on_device)?;
        let n = scalars.len();
        let grid = n.div_ceil(THREADS as usize).max(1) as u32;
        self.launch(
            C::KERNEL,
            grid,
            THREADS,
            &[
                KernelArg::Ptr(table.ptr(self)),
                KernelArg::Ptr(on_device.ptr(self)),
                KernelArg::U32(n as u32),
                KernelArg::Ptr(jacobian.ptr(self)),
            ],
        )?;
        let mut sums = self.download(jacobian)?;
        sums.truncate(n);
        Ok(sums)
    }
}
