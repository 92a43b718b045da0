//! Evaluating a circuit's constraint matrices on the device (kernels/sparse/sparse.cu): the
//! upload of the matrices into one buffer as [`MatricesLayout`] lays them out, and a = A·w,
//! b = B·w, c = C·w from them; and the check that a·b = c at every constraint, whichever way
//! a, b and c reached the device.

use blstrs::Scalar;

use super::context::{as_bytes, GpuBuffer, GpuStream, KernelArg};
use super::launch::THREADS;
use crate::circuit::ConstraintMatrices;
use crate::error::{Error, Result};
use crate::plan::MatricesLayout;

impl GpuStream {
    /// Copies `matrices` into `dst` as `layout` (which must be `MatricesLayout::of(matrices)`)
    /// places them: the coefficient table, then each matrix's row starts, columns and
    /// coefficient indices. Waits for nothing but the copies' ordering on this stream.
    pub fn upload_matrices(
        &self,
        matrices: &ConstraintMatrices,
        layout: &MatricesLayout,
        dst: &mut GpuBuffer<u8>,
    ) -> Result<()> {
        if *layout != MatricesLayout::of(matrices) || (dst.len() as u64) < layout.bytes {
            return Err(self.sparse_error(
                "copy constraint matrices to device",
                format!("{} bytes for matrices laid out in {}, or a layout of other matrices", dst.len(), layout.bytes),
            ));
        }
        self.upload_at(as_bytes(matrices.coefficient_table()), dst, 0)?;
        for (m, at) in [matrices.a(), matrices.b(), matrices.c()].into_iter().zip(&layout.matrices) {
            self.upload_at(as_bytes(m.row_starts()), dst, at.row_starts as usize)?;
            self.upload_at(as_bytes(m.columns()), dst, at.columns as usize)?;
            self.upload_at(as_bytes(m.coefficients()), dst, at.coefficients as usize)?;
        }
        Ok(())
    }

    /// a = A·w, b = B·w, c = C·w into `outputs` for w = `inputs` ‖ `aux`, from matrices
    /// uploaded into `resident` by [`GpuStream::upload_matrices`] with `layout`. Each output's
    /// values past the last constraint are set to zero. Waits for the kernels: a term whose
    /// row range, column or coefficient index is out of range (the buffer was overwritten) is an error.
    pub fn evaluate_constraints(
        &self,
        resident: &GpuBuffer<u8>,
        layout: &MatricesLayout,
        inputs: &GpuBuffer<Scalar>,
        aux: &GpuBuffer<Scalar>,
        outputs: [&mut GpuBuffer<Scalar>; 3],
    ) -> Result<()> {
        let short = (resident.len() as u64) < layout.bytes
            || inputs.len() < layout.num_inputs
            || aux.len() < layout.num_aux
            || outputs.iter().any(|out| out.len() < layout.num_constraints);
        // The kernel's counts are 32-bit; an output's padding included.
        let too_long = [layout.num_inputs, layout.num_aux, layout.num_constraints, layout.table_len]
            .into_iter()
            .chain(outputs.iter().map(|out| out.len()))
            .any(|n| n > u32::MAX as usize);
        if short || too_long {
            return Err(self.sparse_error(
                "evaluate constraints",
                format!(
                    "matrices of {} constraints, {} inputs and {} aux in {} bytes (of {}), with buffers of {} inputs, \
                     {} aux and outputs of {:?}",
                    layout.num_constraints,
                    layout.num_inputs,
                    layout.num_aux,
                    resident.len(),
                    layout.bytes,
                    inputs.len(),
                    aux.len(),
                    outputs.iter().map(|out| out.len()).collect::<Vec<_>>()
                ),
            ));
        }
        let bad = self.alloc_zeroed::<u32>(1)?;
        let base = resident.ptr(self);
        for (at, out) in layout.matrices.iter().zip(outputs) {
            let out_len = out.len() as u32;
            self.launch(
                "sparse_evaluate_rows",
                out_len.div_ceil(THREADS),
                THREADS,
                &[
                    KernelArg::Ptr(base + at.row_starts),
                    KernelArg::Ptr(base + at.columns),
                    KernelArg::Ptr(base + at.coefficients),
                    KernelArg::U32(layout.num_constraints as u32),
                    KernelArg::U64(at.terms as u64),
                    KernelArg::Ptr(base),
                    KernelArg::U32(layout.table_len as u32),
                    KernelArg::Ptr(inputs.ptr(self)),
                    KernelArg::U32(layout.num_inputs as u32),
                    KernelArg::Ptr(aux.ptr(self)),
                    KernelArg::U32(layout.num_aux as u32),
                    KernelArg::Ptr(out.ptr(self)),
                    KernelArg::U32(out_len),
                    KernelArg::Ptr(bad.ptr(self)),
                ],
            )?;
        }
        if self.download_first(&bad, 1)?[0] != 0 {
            return Err(self.sparse_error(
                "evaluate constraints",
                "a term's row range, column or coefficient index is out of range: the matrices' buffer was overwritten"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The first `i < len` at which `a[i]·b[i] ≠ c[i]`, or None when every one holds: the
    /// kernel writes it to a word on the device, read back here (which waits for the kernel).
    /// The reference is [`crate::backend::cpu::first_unsatisfied`].
    pub fn first_unsatisfied(
        &self,
        a: &GpuBuffer<Scalar>,
        b: &GpuBuffer<Scalar>,
        c: &GpuBuffer<Scalar>,
        len: usize,
    ) -> Result<Option<usize>> {
        // u32::MAX is the kernel's "none", so the last index it can name is one below.
        if [a.len(), b.len(), c.len()].into_iter().any(|held| held < len) || len >= u32::MAX as usize {
            return Err(self.sparse_error(
                "check the witness",
                format!(
                    "{len} constraints checked in buffers of {}, {} and {} scalars (at most {} at once)",
                    a.len(),
                    b.len(),
                    c.len(),
                    u32::MAX - 1
                ),
            ));
        }
        if len == 0 {
            return Ok(None);
        }
        let mut first = self.alloc::<u32>(1)?;
        self.fill_u32(&mut first, u32::MAX)?;
        self.launch(
            "sparse_first_unsatisfied",
            (len as u32).div_ceil(THREADS),
            THREADS,
            &[
                KernelArg::Ptr(a.ptr(self)),
                KernelArg::Ptr(b.ptr(self)),
                KernelArg::Ptr(c.ptr(self)),
                KernelArg::U32(len as u32),
                KernelArg::Ptr(first.ptr(self)),
            ],
        )?;
        Ok(match self.download_first(&first, 1)?[0] {
            u32::MAX => None,
            i => Some(i as usize),
        })
    }

    fn sparse_error(&self, operation: &'static str, message: String) -> Error {
        Error::Device { device: self.gpu().ordinal(), operation, message }
    }
}
