//! Picking a query's scalars out of the aux assignment on the device (kernels/stage/select.cu).

use blstrs::Scalar;

use super::context::{GpuBuffer, GpuStream, KernelArg};
use super::launch::THREADS;
use crate::circuit::PackedDensity;
use crate::error::{Error, Result};

impl GpuStream {
    /// Writes the values of `values` that `selection` uses into `out` from `out_start` on,
    /// uploading the packed density into `packed` (words, then running counts) first.
    pub fn select_scalars(
        &self,
        values: &GpuBuffer<Scalar>,
        selection: &PackedDensity,
        packed: &mut GpuBuffer<u32>,
        out: &mut GpuBuffer<Scalar>,
        out_start: usize,
    ) -> Result<()> {
        let len = selection.len();
        let end = out_start + selection.taken();
        if len > values.len() || end > out.len() || 2 * selection.words().len() > packed.len() {
            return Err(Error::Device {
                device: self.gpu().ordinal(),
                operation: "select scalars",
                message: format!(
                    "selecting {} of {len} values (from {}) into {}..{end} of {} with {} words of scratch",
                    selection.taken(),
                    values.len(),
                    out_start,
                    out.len(),
                    packed.len()
                ),
            });
        }
        if selection.taken() == 0 {
            return Ok(());
        }
        let words = selection.words().len();
        self.upload_at(selection.words(), packed, 0)?;
        self.upload_at(selection.taken_before(), packed, words)?;
        let out_at = out.ptr(self) + (out_start * std::mem::size_of::<Scalar>()) as u64;
        let packed_at = packed.ptr(self);
        self.launch(
            "select_scalars",
            (len as u32).div_ceil(THREADS),
            THREADS,
            &[
                KernelArg::Ptr(values.ptr(self)),
                KernelArg::Ptr(packed_at),
                KernelArg::Ptr(packed_at + 4 * words as u64),
                KernelArg::U32(len as u32),
                KernelArg::Ptr(out_at),
            ],
        )
    }
}
