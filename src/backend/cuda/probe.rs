//! Ceilings measured on the device itself, for the bench's floors: copy bandwidths and the
//! rate of field multiplications in the kernels' own arithmetic.

use std::time::Instant;

use blstrs::Scalar;
use ff::Field;

use super::context::{GpuStream, KernelArg};
use crate::error::Result;

/// Which field a multiplication-rate probe runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeField {
    Fr,
    Fp,
    /// Fp squarings (the dedicated squaring, kernels/ff/mont.cuh).
    FpSquaring,
}

impl GpuStream {
    /// Field multiplications per second: every thread runs `iters` rounds of independent chains.
    pub fn field_mul_rate(&self, field: ProbeField, threads: usize, iters: u32) -> Result<f64> {
        let (name, chains, limbs) = match field {
            ProbeField::Fr => ("ff_fr_mul_rate", 4usize, 1usize),
            ProbeField::Fp => ("ff_fp_mul_rate", 2usize, 2usize),
            ProbeField::FpSquaring => ("ff_fp_sqr_rate", 2, 2),
        };
        // Fp elements are 48 bytes: 1.5 scalars; random Fr limbs are valid Fp values (< p).
        let words = threads * chains * limbs * 3 / 2 + 8;
        let mut rng = rand::thread_rng();
        let data: Vec<Scalar> = (0..words).map(|_| Scalar::random(&mut rng)).collect();
        let buf = self.upload(&data)?;
        let launch =
            || self.launch(name, (threads / 256) as u32, 256, &[KernelArg::Ptr(buf.ptr(self)), KernelArg::U32(iters)]);
        launch()?; // warm-up
        let start = self.record()?;
        launch()?;
        let end = self.record()?;
        let ms = self.elapsed_ms(&start, &end)? as f64;
        Ok((threads * chains) as f64 * iters as f64 / (ms / 1e3))
    }

    /// Device-to-device copy bandwidth in bytes per second (read + write counted).
    pub fn dtod_bandwidth(&self, bytes: usize) -> Result<f64> {
        let src = self.alloc_zeroed::<u8>(bytes)?;
        let mut dst = self.alloc::<u8>(bytes)?;
        self.copy(&src, &mut dst)?;
        let start = self.record()?;
        for _ in 0..5 {
            self.copy(&src, &mut dst)?;
        }
        let end = self.record()?;
        let ms = self.elapsed_ms(&start, &end)? as f64;
        Ok(2.0 * 5.0 * bytes as f64 / (ms / 1e3))
    }

    /// Host-to-device bandwidth from page-locked (registered) memory, bytes per second.
    pub fn pinned_htod_bandwidth(&self, bytes: usize) -> Result<f64> {
        let host = vec![1u8; bytes];
        let registration = self.gpu().register_host(&host[..])?;
        let mut dst = self.alloc::<u8>(bytes)?;
        self.upload_into(&host, &mut dst)?;
        self.synchronize()?;
        let t = Instant::now();
        let start = self.record()?;
        for _ in 0..5 {
            self.upload_into(&host, &mut dst)?;
        }
        let end = self.record()?;
        let ms = self.elapsed_ms(&start, &end)? as f64;
        let _ = t;
        drop(registration);
        Ok(5.0 * bytes as f64 / (ms / 1e3))
    }
}
