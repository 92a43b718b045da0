//! Pippenger MSMs on the GPU for G1 and G2, orchestrating kernels/msm/msm.cu: scalars out of
//! Montgomery form (0/1 fast path), signed digits counted and sorted into buckets, buckets
//! summed, windows reduced on the device; the few window sums are combined on the host.

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::Group;

use super::context::{DeviceElement, G1Jacobian, G2Jacobian, GpuBuffer, GpuStream, KernelArg};
use crate::error::{Error, Result};

const THREADS: u32 = 256;
const CURVE_THREADS: u32 = 128;
const REDUCE_GROUP: usize = 128;
const SCAN_TILE: usize = 1024;
/// log2 of the buckets one thread folds in the window reduction.
const LOG_SEGMENT: u32 = 4;

/// How an MSM runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct MsmOptions {
    /// Window size in bits (2..=20); `None` picks one from the number of scalars.
    pub window_bits: Option<u32>,
    /// Adds the points whose scalar is 1 in a plain batch sum and runs Pippenger over the
    /// rest (zeros are always skipped). Pays off when most scalars are bits.
    pub ones_fast_path: bool,
}

/// The window size minimising ⌈256/c⌉·(n + 2^c) (bucket additions plus the reduction) plus a
/// penalty for the top window: scalars are < 2^255, so when few of its c bits lie below bit
/// 255 its points crowd into a few buckets, each summed serially by one thread (measured on an
/// H200: one serial addition costs about as much as 2^14 parallel ones).
pub fn window_bits_for(n: usize) -> u32 {
    let cost = |c: u32| {
        let windows = 256u64.div_ceil(c as u64);
        let top_bits = 255i64 - (c as i64) * (windows as i64 - 1);
        let serial_chain = if top_bits <= 0 { n as u64 } else { (n as u64) >> top_bits.min(63) };
        windows * (n as u64 + (1u64 << c)) + serial_chain * (1 << 14)
    };
    (4..=20u32).min_by_key(|&c| cost(c)).unwrap_or(16)
}

/// One curve's device types and kernels.
pub trait MsmCurve {
    type Affine: DeviceElement;
    type Jacobian: DeviceElement;
    type Projective: Group;
    const BUCKETS: &'static str;
    const SEGMENTS: &'static str;
    const REDUCE: &'static str;
    const SUM_FLAGGED: &'static str;
    fn to_projective(p: &Self::Jacobian) -> Self::Projective;
}

/// G1 of BLS12-381.
pub struct G1;
/// G2 of BLS12-381.
pub struct G2;

fn fp(limbs: &[u64]) -> Fp {
    Fp::from_raw_unchecked(limbs.try_into().expect("6 limbs"))
}

impl MsmCurve for G1 {
    type Affine = G1Affine;
    type Jacobian = G1Jacobian;
    type Projective = G1Projective;
    const BUCKETS: &'static str = "msm_g1_buckets";
    const SEGMENTS: &'static str = "msm_g1_window_segments";
    const REDUCE: &'static str = "msm_g1_reduce";
    const SUM_FLAGGED: &'static str = "msm_g1_sum_flagged";
    fn to_projective(p: &G1Jacobian) -> G1Projective {
        G1Projective::from_raw_unchecked(fp(&p.0[0..6]), fp(&p.0[6..12]), fp(&p.0[12..18]))
    }
}

impl MsmCurve for G2 {
    type Affine = G2Affine;
    type Jacobian = G2Jacobian;
    type Projective = G2Projective;
    const BUCKETS: &'static str = "msm_g2_buckets";
    const SEGMENTS: &'static str = "msm_g2_window_segments";
    const REDUCE: &'static str = "msm_g2_reduce";
    const SUM_FLAGGED: &'static str = "msm_g2_sum_flagged";
    fn to_projective(p: &G2Jacobian) -> G2Projective {
        let f2 = |i: usize| Fp2::new(fp(&p.0[i..i + 6]), fp(&p.0[i + 6..i + 12]));
        G2Projective::from_raw_unchecked(f2(0), f2(12), f2(24))
    }
}

/// With SNARKPIPE_MSM_PHASES=1, prints the device time of each MSM phase (event pairs).
struct PhaseTimer {
    marks: Option<Vec<(&'static str, super::context::TimedEvent)>>,
}

impl PhaseTimer {
    fn new(stream: &GpuStream) -> PhaseTimer {
        let on = std::env::var("SNARKPIPE_MSM_PHASES").is_ok_and(|v| v == "1");
        let mut t = PhaseTimer { marks: on.then(Vec::new) };
        t.mark(stream, "start");
        t
    }
    fn mark(&mut self, stream: &GpuStream, name: &'static str) {
        if let Some(m) = &mut self.marks {
            if let Ok(e) = stream.record() {
                m.push((name, e));
            }
        }
    }
    fn report(&self, stream: &GpuStream, what: String) {
        if let Some(m) = &self.marks {
            let parts: Vec<String> = m
                .windows(2)
                .map(|w| format!("{} {:.2}", w[1].0, stream.elapsed_ms(&w[0].1, &w[1].1).unwrap_or(f32::NAN)))
                .collect();
            eprintln!("msm phases (ms) {what}: {}", parts.join(", "));
        }
    }
}

fn grid(n: usize, threads: u32) -> u32 {
    n.div_ceil(threads as usize).clamp(1, 1 << 20) as u32
}

impl GpuStream {
    /// Σ scalars[i]·bases[i] over the first `len` elements on G1. Waits for the stream.
    pub fn msm_g1(
        &self,
        bases: &GpuBuffer<G1Affine>,
        scalars: &GpuBuffer<Scalar>,
        len: usize,
        opts: MsmOptions,
    ) -> Result<G1Projective> {
        self.msm::<G1>(bases, scalars, len, opts)
    }

    /// Σ scalars[i]·bases[i] over the first `len` elements on G2. Waits for the stream.
    pub fn msm_g2(
        &self,
        bases: &GpuBuffer<G2Affine>,
        scalars: &GpuBuffer<Scalar>,
        len: usize,
        opts: MsmOptions,
    ) -> Result<G2Projective> {
        self.msm::<G2>(bases, scalars, len, opts)
    }

    /// The MSM for any curve of [`MsmCurve`].
    pub fn msm<C: MsmCurve>(
        &self,
        bases: &GpuBuffer<C::Affine>,
        scalars: &GpuBuffer<Scalar>,
        len: usize,
        opts: MsmOptions,
    ) -> Result<C::Projective> {
        if len > bases.len() || len > scalars.len() || len >= (1 << 31) {
            return Err(Error::Device {
                device: self.gpu().ordinal(),
                operation: "msm",
                message: format!("{len} terms with {} bases and {} scalars", bases.len(), scalars.len()),
            });
        }
        if len == 0 {
            return Ok(C::Projective::identity());
        }
        let p = |b: &dyn PtrOf| KernelArg::Ptr(b.ptr_on(self));
        let canon = self.alloc::<Scalar>(len)?;
        let is_one = self.alloc::<u32>(len)?;
        let mut rest = self.alloc_zeroed::<u32>(1)?;
        self.fill_u32(&mut rest, 0)?;
        self.launch(
            "msm_prepare_scalars",
            grid(len, THREADS),
            THREADS,
            &[
                p(scalars),
                p(&canon),
                p(&is_one),
                KernelArg::U32(len as u32),
                KernelArg::U32(opts.ones_fast_path as u32),
                p(&rest),
            ],
        )?;
        let rest = self.download(&rest)?[0] as usize;
        let mut timer = PhaseTimer::new(self);

        let mut total = C::Projective::identity();
        if opts.ones_fast_path {
            total += self.sum_flagged::<C>(bases, &is_one, len)?;
            timer.mark(self, "ones");
        }
        if rest > 0 {
            let c = opts.window_bits.unwrap_or_else(|| window_bits_for(rest)).clamp(2, 20);
            let windows = 256usize.div_ceil(c as usize);
            // Horner over the windows, highest first: acc ← acc·2^c + S_w.
            let mut acc = C::Projective::identity();
            let sums = self.window_sums::<C>(bases, &canon, len, c, windows, &mut timer)?;
            timer.report(self, format!("n={len} rest={rest} c={c}"));
            for s in sums.iter().rev() {
                for _ in 0..c {
                    acc = acc.double();
                }
                acc += C::to_projective(s);
            }
            total += acc;
        }
        Ok(total)
    }

    fn sum_flagged<C: MsmCurve>(
        &self,
        bases: &GpuBuffer<C::Affine>,
        flags: &GpuBuffer<u32>,
        len: usize,
    ) -> Result<C::Projective> {
        let blocks = len.div_ceil(CURVE_THREADS as usize).next_power_of_two().clamp(1, 1024);
        let partials = self.alloc::<C::Jacobian>(blocks)?;
        self.launch(
            C::SUM_FLAGGED,
            blocks as u32,
            CURVE_THREADS,
            &[
                KernelArg::Ptr(bases.ptr(self)),
                KernelArg::Ptr(flags.ptr(self)),
                KernelArg::U32(len as u32),
                KernelArg::Ptr(partials.ptr(self)),
            ],
        )?;
        let sums = self.reduce_groups::<C>(partials, 1, blocks)?;
        Ok(C::to_projective(&sums[0]))
    }

    /// Reduces `groups` runs of `per_group` (a power of two) points to one point each.
    fn reduce_groups<C: MsmCurve>(
        &self,
        mut points: GpuBuffer<C::Jacobian>,
        groups: usize,
        mut per_group: usize,
    ) -> Result<Vec<C::Jacobian>> {
        while per_group > 1 {
            let g = per_group.min(REDUCE_GROUP);
            let blocks = groups * per_group / g;
            let out = self.alloc::<C::Jacobian>(blocks)?;
            self.launch(
                C::REDUCE,
                blocks as u32,
                g as u32,
                &[KernelArg::Ptr(points.ptr(self)), KernelArg::Ptr(out.ptr(self))],
            )?;
            points = out;
            per_group /= g;
        }
        self.download(&points)
    }

    /// Σ_b b·bucket_b for each window, lowest window first.
    #[allow(clippy::too_many_arguments)]
    fn window_sums<C: MsmCurve>(
        &self,
        bases: &GpuBuffer<C::Affine>,
        canon: &GpuBuffer<Scalar>,
        len: usize,
        c: u32,
        windows: usize,
        timer: &mut PhaseTimer,
    ) -> Result<Vec<C::Jacobian>> {
        let buckets_per_window = 1usize << (c - 1);
        let total = windows * buckets_per_window;
        let (n, cu, wu) = (KernelArg::U32(len as u32), KernelArg::U32(c), KernelArg::U32(windows as u32));

        let mut counts = self.alloc_zeroed::<u32>(total)?;
        self.fill_u32(&mut counts, 0)?;
        self.launch(
            "msm_digit_histogram",
            grid(len, THREADS),
            THREADS,
            &[KernelArg::Ptr(canon.ptr(self)), n, cu, wu, KernelArg::Ptr(counts.ptr(self))],
        )?;

        // offsets = exclusive prefix sum of counts (in place)
        let tiles = total.div_ceil(SCAN_TILE);
        let sums = self.alloc::<u32>(tiles)?;
        let m = KernelArg::U32(total as u32);
        self.launch(
            "msm_scan_tiles",
            tiles as u32,
            256,
            &[KernelArg::Ptr(counts.ptr(self)), m, KernelArg::Ptr(sums.ptr(self))],
        )?;
        self.launch("msm_scan_totals", 1, 256, &[KernelArg::Ptr(sums.ptr(self)), KernelArg::U32(tiles as u32)])?;
        self.launch(
            "msm_scan_add",
            grid(total, THREADS),
            THREADS,
            &[KernelArg::Ptr(counts.ptr(self)), m, KernelArg::Ptr(sums.ptr(self))],
        )?;
        let starts = counts;
        let mut ends = self.alloc::<u32>(total)?;
        self.copy(&starts, &mut ends)?;

        timer.mark(self, "histogram+scan");
        let entries = self.alloc::<u32>(len * windows)?;
        self.launch(
            "msm_scatter",
            grid(len, THREADS),
            THREADS,
            &[
                KernelArg::Ptr(canon.ptr(self)),
                n,
                cu,
                wu,
                KernelArg::Ptr(ends.ptr(self)),
                KernelArg::Ptr(entries.ptr(self)),
            ],
        )?;

        timer.mark(self, "scatter");
        let buckets = self.alloc::<C::Jacobian>(total)?;
        self.launch(
            C::BUCKETS,
            grid(total, CURVE_THREADS),
            CURVE_THREADS,
            &[
                KernelArg::Ptr(bases.ptr(self)),
                KernelArg::Ptr(entries.ptr(self)),
                KernelArg::Ptr(starts.ptr(self)),
                KernelArg::Ptr(ends.ptr(self)),
                KernelArg::U32(total as u32),
                KernelArg::Ptr(buckets.ptr(self)),
            ],
        )?;

        timer.mark(self, "buckets");
        let log_buckets = c - 1;
        let log_segs = log_buckets - LOG_SEGMENT.min(log_buckets);
        let segs = 1usize << log_segs;
        let partials = self.alloc::<C::Jacobian>(windows * segs)?;
        self.launch(
            C::SEGMENTS,
            grid(windows * segs, CURVE_THREADS),
            CURVE_THREADS,
            &[
                KernelArg::Ptr(buckets.ptr(self)),
                KernelArg::U32(log_buckets),
                KernelArg::U32(log_segs),
                wu,
                KernelArg::Ptr(partials.ptr(self)),
            ],
        )?;
        timer.mark(self, "segments");
        let sums = self.reduce_groups::<C>(partials, windows, segs)?;
        timer.mark(self, "reduce");
        Ok(sums)
    }
}

/// A buffer's device address on a stream, whatever its element type.
trait PtrOf {
    fn ptr_on(&self, stream: &GpuStream) -> u64;
}
impl<T: DeviceElement> PtrOf for GpuBuffer<T> {
    fn ptr_on(&self, stream: &GpuStream) -> u64 {
        self.ptr(stream)
    }
}
