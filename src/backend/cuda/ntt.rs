//! NTTs over Fr on the GPU and the Groth16 quotient h = (a·b − c)/Z, orchestrating the kernels
//! of kernels/ntt/ntt.cu. Roots follow bellperson's domain: ω = ROOT_OF_UNITY^(2^(32−log n)),
//! coset generator g = MULTIPLICATIVE_GENERATOR (7), Z on the coset = g^n − 1.

use std::sync::Arc;

use blstrs::Scalar;
use ff::{Field, PrimeField};

use super::context::{GpuBuffer, GpuStream, KernelArg, NttTables, PowerTables};
use super::launch::THREADS;
use crate::error::{Error, Result};

/// ntt_dit_pass: tiles of up to 2^10 elements, 4 per thread (NTT_ROUND_BITS in ntt.cu).
const LOG_TILE: u32 = 10;
const LOG_PER_THREAD: u32 = 2;
/// Below 2^3 elements the transform is one launch of the radix-2 kernel (ntt_dit_pass wants
/// tiles of at least 2^3).
const LOG_SMALLEST_PASS: u32 = 3;
/// ntt_bit_reverse: 16×16-element tiles (256 threads) from 2^8 elements up.
const LOG_BIT_REVERSE_TILES: u32 = 8;
/// ntt_bit_reverse's block: one thread an element of its 16×16 tile, whatever [`THREADS`] is.
const BIT_REVERSE_THREADS: u32 = 1 << LOG_BIT_REVERSE_TILES;

/// ω for a domain of 2^log_n.
pub fn domain_root(log_n: u32) -> Scalar {
    let mut w = Scalar::ROOT_OF_UNITY;
    for _ in log_n..Scalar::S {
        w = w.square();
    }
    w
}

/// Tables of scale·base^i for i < 2^log_count, split as hi[i >> log_lo]·lo[i & mask] (hi carries
/// the scale).
fn split_powers(stream: &GpuStream, base: Scalar, scale: Scalar, log_count: u32) -> Result<PowerTables> {
    let log_lo = log_count.div_ceil(2);
    let lo_len = 1usize << log_lo;
    let hi_len = 1usize << (log_count - log_lo.min(log_count));
    let mut lo = Vec::with_capacity(lo_len);
    let mut acc = Scalar::ONE;
    for _ in 0..lo_len {
        lo.push(acc);
        acc *= base;
    }
    // acc = base^(2^log_lo)
    let step = acc;
    let mut hi = Vec::with_capacity(hi_len);
    let mut acc = scale;
    for _ in 0..hi_len {
        hi.push(acc);
        acc *= step;
    }
    Ok(PowerTables { hi: stream.upload(&hi)?, lo: stream.upload(&lo)?, log_lo })
}

fn grid_for(n: usize) -> u32 {
    (n.div_ceil(THREADS as usize)).clamp(1, 65_535 * 4) as u32
}

impl NttTables {
    fn build(stream: &GpuStream, log_n: u32) -> Result<NttTables> {
        let n = 1usize << log_n;
        let half = (n / 2).max(1);
        let omega = domain_root(log_n);
        let split = split_powers(stream, omega, Scalar::ONE, (half as u64).trailing_zeros())?;
        let twiddles = stream.alloc::<Scalar>(half)?;
        stream.launch_with_powers("ntt_expand_powers", grid_for(half), &twiddles, &split, half)?;
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let g_inv = g.invert().unwrap();
        let n_inv = Scalar::from(n as u64).invert().unwrap();
        let z_inv = (g.pow_vartime([n as u64]) - Scalar::ONE).invert().unwrap();
        let tables = NttTables {
            twiddles,
            coset: split_powers(stream, g, Scalar::ONE, log_n)?,
            coset_over_n: split_powers(stream, g, n_inv, log_n)?,
            coset_inv_over_n: split_powers(stream, g_inv, n_inv, log_n)?,
            n_inv: stream.upload(&[n_inv])?,
            z_inv: stream.upload(&[z_inv])?,
        };
        stream.synchronize()?; // the host tables (`split`) are dropped after this
        Ok(tables)
    }
}

/// The passes of a forward transform as (first stage, stage count): the first pass takes 2^10
/// contiguous elements (all its columns are one), the rest of the stages are split evenly so that
/// later tiles keep several contiguous columns (2^(10-k)) for their global accesses.
fn pass_plan(log_n: u32) -> Vec<(u32, u32)> {
    let first = log_n.min(LOG_TILE);
    let mut plan = vec![(0, first)];
    let rest = log_n - first;
    if rest > 0 {
        let passes = rest.div_ceil(LOG_TILE);
        let mut s = first;
        for i in 0..passes {
            let k = rest / passes + u32::from(i < rest % passes);
            plan.push((s, k));
            s += k;
        }
    }
    plan
}

fn check_size(stream: &GpuStream, data: &GpuBuffer<Scalar>, log_n: u32) -> Result<usize> {
    let n = 1usize << log_n;
    if log_n == 0 || log_n > 31 || data.len() < n {
        return Err(Error::Device {
            device: stream.gpu().ordinal(),
            operation: "ntt",
            message: format!(
                "a domain of 2^{log_n} needs 1 ≤ log n ≤ 31 and a buffer of {n} scalars (got {})",
                data.len()
            ),
        });
    }
    Ok(n)
}

impl GpuStream {
    fn ntt_tables(&self, log_n: u32) -> Result<Arc<NttTables>> {
        if let Some(t) = self.gpu().ntt_tables.lock().get(&log_n) {
            return Ok(t.clone());
        }
        let t = Arc::new(NttTables::build(self, log_n)?);
        self.gpu().ntt_tables.lock().insert(log_n, t.clone());
        Ok(t)
    }

    /// In place: data[k] ← Σ_i data[i]·ω^(ik) over the first 2^log_n scalars.
    pub fn ntt_forward(&self, data: &mut GpuBuffer<Scalar>, log_n: u32) -> Result<()> {
        let n = check_size(self, data, log_n)?;
        let t = self.ntt_tables(log_n)?;
        self.forward_with(data, n, log_n, &t)
    }

    fn forward_with(&self, data: &GpuBuffer<Scalar>, n: usize, log_n: u32, t: &NttTables) -> Result<()> {
        let d = data.ptr(self);
        let reverse_grid =
            if log_n >= LOG_BIT_REVERSE_TILES { (n >> LOG_BIT_REVERSE_TILES) as u32 } else { grid_for(n) };
        self.launch("ntt_bit_reverse", reverse_grid, BIT_REVERSE_THREADS, &[KernelArg::Ptr(d), KernelArg::U32(log_n)])?;
        if log_n < LOG_SMALLEST_PASS {
            // 2 or 4 elements: the radix-2 kernel, one pass
            return self.launch(
                "ntt_dit_stages",
                1,
                1 << (log_n - 1),
                &[
                    KernelArg::Ptr(d),
                    KernelArg::Ptr(t.twiddles.ptr(self)),
                    KernelArg::U32(log_n),
                    KernelArg::U32(0),
                    KernelArg::U32(log_n),
                    KernelArg::U32(log_n),
                ],
            );
        }
        self.dit_passes(data, n, log_n, t)
    }

    /// The DIT passes of a forward transform (every stage), on data in bit-reversed order;
    /// log_n >= LOG_SMALLEST_PASS.
    fn dit_passes(&self, data: &GpuBuffer<Scalar>, n: usize, log_n: u32, t: &NttTables) -> Result<()> {
        let d = data.ptr(self);
        let log_tile = log_n.min(LOG_TILE);
        for (s, k) in pass_plan(log_n) {
            self.launch(
                "ntt_dit_pass",
                (n >> log_tile) as u32,
                1 << (log_tile - LOG_PER_THREAD),
                &[
                    KernelArg::Ptr(d),
                    KernelArg::Ptr(t.twiddles.ptr(self)),
                    KernelArg::U32(log_n),
                    KernelArg::U32(s),
                    KernelArg::U32(k),
                    KernelArg::U32(log_tile),
                ],
            )?;
        }
        Ok(())
    }

    /// The inverse transform by decimation in frequency (ntt_dif_inverse_pass), with the 1/n and a
    /// coset shift carried by `powers` (g^±i/n): afterwards position p holds coefficient
    /// i = brev(p) times g^±i, in bit-reversed order, as [`dit_passes`](Self::dit_passes) takes
    /// it. The passes of [`pass_plan`] run in reverse, and the last (stage 0 and up) applies the
    /// powers as it stores: no bit reversal and no pass of its own for the shift.
    /// log_n >= LOG_SMALLEST_PASS.
    fn inverse_dif_scaled_with(
        &self,
        data: &GpuBuffer<Scalar>,
        n: usize,
        log_n: u32,
        t: &NttTables,
        powers: &PowerTables,
    ) -> Result<()> {
        let log_tile = log_n.min(LOG_TILE);
        for (s, k) in pass_plan(log_n).into_iter().rev() {
            let kernel = if s == 0 { "ntt_dif_inverse_pass_scaled" } else { "ntt_dif_inverse_pass" };
            self.launch(
                kernel,
                (n >> log_tile) as u32,
                1 << (log_tile - LOG_PER_THREAD),
                &[
                    KernelArg::Ptr(data.ptr(self)),
                    KernelArg::Ptr(t.twiddles.ptr(self)),
                    KernelArg::U32(log_n),
                    KernelArg::U32(s),
                    KernelArg::U32(k),
                    KernelArg::U32(log_tile),
                    KernelArg::Ptr(powers.hi.ptr(self)),
                    KernelArg::Ptr(powers.lo.ptr(self)),
                    KernelArg::U32(powers.log_lo),
                ],
            )?;
        }
        Ok(())
    }

    fn inverse_with(&self, data: &GpuBuffer<Scalar>, n: usize, log_n: u32, t: &NttTables) -> Result<()> {
        self.forward_with(data, n, log_n, t)?;
        self.launch(
            "ntt_reverse_and_scale",
            grid_for(n / 2 + 1),
            THREADS,
            &[KernelArg::Ptr(data.ptr(self)), KernelArg::Ptr(t.n_inv.ptr(self)), KernelArg::U32(n as u32)],
        )
    }

    /// The inverse transform with its 1/n carried by `powers` (g^±i/n): afterwards element i is
    /// the inverse's coefficient i times g^±i, in one pass after the forward transform.
    fn inverse_scaled_with(
        &self,
        data: &GpuBuffer<Scalar>,
        n: usize,
        log_n: u32,
        t: &NttTables,
        powers: &PowerTables,
    ) -> Result<()> {
        self.forward_with(data, n, log_n, t)?;
        self.launch_with_powers("ntt_reverse_and_scale_by_powers", grid_for(n / 2 + 1), data, powers, n)
    }

    fn scale_by(&self, data: &GpuBuffer<Scalar>, n: usize, p: &PowerTables) -> Result<()> {
        self.launch_with_powers("ntt_scale_by_powers", grid_for(n), data, p, n)
    }

    /// Launches one of the kernels whose parameters are (data, hi, lo, log_lo, count): a buffer
    /// of `count` scalars and a split power table (ntt_expand_powers, ntt_scale_by_powers,
    /// ntt_reverse_and_scale_by_powers).
    fn launch_with_powers(
        &self,
        kernel: &'static str,
        grid: u32,
        data: &GpuBuffer<Scalar>,
        powers: &PowerTables,
        count: usize,
    ) -> Result<()> {
        self.launch(
            kernel,
            grid,
            THREADS,
            &[
                KernelArg::Ptr(data.ptr(self)),
                KernelArg::Ptr(powers.hi.ptr(self)),
                KernelArg::Ptr(powers.lo.ptr(self)),
                KernelArg::U32(powers.log_lo),
                KernelArg::U32(count as u32),
            ],
        )
    }

    /// In place: the inverse of [`ntt_forward`](Self::ntt_forward) (coefficients from evaluations).
    pub fn ntt_inverse(&self, data: &mut GpuBuffer<Scalar>, log_n: u32) -> Result<()> {
        let n = check_size(self, data, log_n)?;
        let t = self.ntt_tables(log_n)?;
        self.inverse_with(data, n, log_n, &t)
    }

    /// In place: evaluations on the coset g·⟨ω⟩ from coefficients.
    pub fn ntt_coset_forward(&self, data: &mut GpuBuffer<Scalar>, log_n: u32) -> Result<()> {
        let n = check_size(self, data, log_n)?;
        let t = self.ntt_tables(log_n)?;
        self.scale_by(data, n, &t.coset)?;
        self.forward_with(data, n, log_n, &t)
    }

    /// In place: coefficients from evaluations on the coset g·⟨ω⟩.
    pub fn ntt_coset_inverse(&self, data: &mut GpuBuffer<Scalar>, log_n: u32) -> Result<()> {
        let n = check_size(self, data, log_n)?;
        let t = self.ntt_tables(log_n)?;
        self.inverse_scaled_with(data, n, log_n, &t, &t.coset_inv_over_n)
    }

    /// The quotient: `a`, `b`, `c` hold evaluations over the domain of 2^log_n; afterwards `a`
    /// holds h's coefficients (the first 2^log_n − 1 are h; the last is zero for a satisfied
    /// circuit). `b` and `c` are overwritten.
    pub fn quotient_h(
        &self,
        a: &mut GpuBuffer<Scalar>,
        b: &mut GpuBuffer<Scalar>,
        c: &mut GpuBuffer<Scalar>,
        log_n: u32,
    ) -> Result<()> {
        let n = check_size(self, a, log_n)?;
        check_size(self, b, log_n)?;
        check_size(self, c, log_n)?;
        let t = self.ntt_tables(log_n)?;
        // each: coefficients (inverse), shifted to the coset (× g^i, with the inverse's 1/n),
        // evaluated there (forward). From 2^3 up the inverse decimates in frequency and leaves
        // the coefficients in bit-reversed order, which the forward's DIT passes take as they
        // are: six passes over the data instead of nine (two bit reversals, and the inverse's
        // reversal and shift, left out).
        for x in [&*a, &*b, &*c] {
            if log_n >= LOG_SMALLEST_PASS {
                self.inverse_dif_scaled_with(x, n, log_n, &t, &t.coset_over_n)?;
                self.dit_passes(x, n, log_n, &t)?;
            } else {
                self.inverse_scaled_with(x, n, log_n, &t, &t.coset_over_n)?;
                self.forward_with(x, n, log_n, &t)?;
            }
        }
        self.launch(
            "ntt_quotient_pointwise",
            grid_for(n),
            THREADS,
            &[
                KernelArg::Ptr(a.ptr(self)),
                KernelArg::Ptr(b.ptr(self)),
                KernelArg::Ptr(c.ptr(self)),
                KernelArg::Ptr(t.z_inv.ptr(self)),
                KernelArg::U32(n as u32),
            ],
        )?;
        self.inverse_scaled_with(a, n, log_n, &t, &t.coset_inv_over_n)
    }
}
