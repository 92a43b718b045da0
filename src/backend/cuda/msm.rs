//! Pippenger MSMs on the GPU for G1 and G2, orchestrating kernels/msm/msm.cu: scalars out of
//! Montgomery form (0/1 fast path), signed digits counted and sorted into buckets (directly, or
//! through coarse bins: [`ScatterKind`]), the sorted
//! entries summed in equal chunks per thread (XYZZ accumulators) with a fix-up pass for buckets
//! that cross chunk ends, windows reduced on the device; the few window sums are combined on
//! the host. This file launches; the sizes and methods it launches with come from the plan
//! (`msm_plan.rs`), the kernels' names from the curve table (`msm_curves.rs`).

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::Group;

use super::affine_buckets::AffinePass;
use super::context::{GpuBuffer, GpuStream, KernelArg, TimedEvent};
use super::launch::{grid, CURVE_THREADS, THREADS};
use super::msm_curves::{MsmCurve, G1, G2};
use super::msm_plan::{
    bin_geometry, bin_stage_words, binned_scatter_bytes, bucket_method_for, chunk_for, log_segments_for,
    scatter_kind_for, scatter_windows_for, window_bin_geometry, window_bits_within_plan, BucketMethod, MsmOptions,
    ScatterKind, AFFINE_SLICE_ENTRIES, BIN_LOG_MAX, BIN_LOG_WIDTH_MAX, BIN_THREADS, BIN_TILE, MSM_PASS_POINTS,
    PLACE_THREADS, SCAN_TILE,
};
use crate::error::{Error, Result};

/// Block size of the reduce kernel (REDUCE_THREADS in msm.cu).
const REDUCE_GROUP: usize = 64;

/// With SNARKPIPE_MSM_PHASES=1, prints the device time of each MSM phase (event pairs).
struct PhaseTimer {
    marks: Option<Vec<(&'static str, TimedEvent)>>,
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

    /// The MSM for any curve of [`MsmCurve`], in passes of at most
    /// [`MsmOptions::pass_points`] points: each pass converts its scalars, sums the points whose
    /// scalar is 1, and sorts and adds the rest into buckets shared by all passes; the windows
    /// are reduced once at the end.
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
        let pass_len = opts.pass_points.unwrap_or(MSM_PASS_POINTS).clamp(1, len);
        self.msm_compacted::<C>(bases, scalars, len, pass_len, opts)
    }

    /// [`msm`](Self::msm) with compacted lists. Each pass of at most `pass_len` points appends
    /// the indices of its scalars equal to 1 to one list, and its other nonzero scalars (with
    /// their points' indices) to another (msm_prepare_compact); a pass is as long as the
    /// fuller list has room for. A list is emptied into the sums when less than a quarter of
    /// it is left, and at the end: the ones by a batch addition, the rest by sorting them into
    /// buckets shared by the whole MSM. A bits-profile MSM of 1.5·2^27 points, a tenth of them
    /// random, thus sorts its random scalars once instead of in six passes, each with its own
    /// sorting, fix-up and reads of every scalar, and its window needs no narrowing for them.
    fn msm_compacted<C: MsmCurve>(
        &self,
        bases: &GpuBuffer<C::Affine>,
        scalars: &GpuBuffer<Scalar>,
        len: usize,
        pass_len: usize,
        opts: MsmOptions,
    ) -> Result<C::Projective> {
        let canon = self.alloc::<Scalar>(pass_len)?;
        let index = self.alloc::<u32>(pass_len)?;
        let ones_list = self.alloc::<u32>(pass_len)?;
        // [0]: scalars appended to (canon, index) so far, [1]: to ones_list; never reset: a list
        // emptied at count k is refilled from the start with the kernel told its base k
        let counts = self.alloc_zeroed::<u32>(2)?;
        let counts_ptr = counts.ptr(self);
        let low = (pass_len / 4).max(1);
        let mut timer = PhaseTimer::new(self);
        let mut total = C::Projective::identity();
        let mut buckets: Option<Buckets> = None;
        let (mut dense_base, mut ones_base, mut dense, mut ones) = (0usize, 0usize, 0usize, 0usize);
        let (mut start, mut passes, mut lists) = (0usize, 0usize, 0usize);
        while start < len {
            let n = (pass_len - dense.max(ones)).min(len - start);
            let pass_scalars = scalars.ptr(self) + (start * std::mem::size_of::<Scalar>()) as u64;
            self.launch(
                "msm_prepare_compact",
                grid(n, THREADS),
                THREADS,
                &[
                    KernelArg::Ptr(pass_scalars),
                    KernelArg::U32(n as u32),
                    KernelArg::U32(start as u32),
                    KernelArg::U32(opts.ones_fast_path as u32),
                    KernelArg::U32(dense_base as u32),
                    KernelArg::U32(ones_base as u32),
                    KernelArg::Ptr(canon.ptr(self)),
                    KernelArg::Ptr(index.ptr(self)),
                    KernelArg::Ptr(ones_list.ptr(self)),
                    KernelArg::Ptr(counts_ptr),
                    KernelArg::Ptr(counts_ptr + 4),
                ],
            )?;
            let appended = self.download(&counts)?;
            (dense, ones) = (appended[0] as usize - dense_base, appended[1] as usize - ones_base);
            start += n;
            passes += 1;
            let last = start == len;
            if ones > 0 && (last || pass_len - ones < low) {
                total += self.sum_points::<C>(bases.ptr(self), &ones_list, ones)?;
                timer.mark(self, "ones");
                (ones_base, ones) = (ones_base + ones, 0);
            }
            if dense > 0 && (last || pass_len - dense < low) {
                // the window from the points read so far
                let shared = self.buckets_for::<C>(&mut buckets, &opts, (dense, start), len, pass_len)?;
                self.add_to_buckets::<C>(bases.ptr(self), &canon, &index, dense, &opts, shared, &mut timer)?;
                (dense_base, dense) = (dense_base + dense, 0);
                lists += 1;
            }
        }
        self.finish_buckets::<C>(buckets, total, &mut timer, format!("n={len} passes={passes} lists={lists}"))
    }

    /// The MSM's buckets, made zero on first use with the window for the whole MSM's scalars
    /// that are neither 0 nor 1, estimated from `rest` such scalars among the `read` points
    /// read so far, within the scratch `msm_scratch_bytes(len, pass_len)` planned for
    /// ([`window_bits_within_plan`]), unless `opts` forces one.
    fn buckets_for<'a, C: MsmCurve>(
        &self,
        buckets: &'a mut Option<Buckets>,
        opts: &MsmOptions,
        (rest, read): (usize, usize),
        len: usize,
        pass_len: usize,
    ) -> Result<&'a mut Buckets> {
        if let Some(shared) = buckets {
            return Ok(shared);
        }
        let expected_rest = (rest as u128 * len as u128 / read.max(1) as u128) as usize;
        let chosen = || window_bits_within_plan(expected_rest, len, pass_len);
        let c = opts.window_bits.unwrap_or_else(chosen).clamp(2, 20);
        Ok(buckets.insert(Buckets::zeroed::<C>(self, c)?))
    }

    /// `total` plus the MSM's buckets, if any: their windows reduced on the device and
    /// combined on the host.
    fn finish_buckets<C: MsmCurve>(
        &self,
        buckets: Option<Buckets>,
        mut total: C::Projective,
        timer: &mut PhaseTimer,
        what: String,
    ) -> Result<C::Projective> {
        if let Some(buckets) = buckets {
            let c = buckets.c;
            let sums = self.window_sums::<C>(buckets, timer)?;
            timer.report(self, format!("{what} c={c}"));
            // Horner over the windows, highest first: acc ← acc·2^c + S_w.
            let mut acc = C::Projective::identity();
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

    /// Σ bases[list[k]] over k < count: equal runs of the list per thread, then a tree. Up to
    /// 2^17 threads: about two waves of G1's at four blocks of 128 an SM on a 132-SM GPU.
    fn sum_points<C: MsmCurve>(&self, bases: u64, list: &GpuBuffer<u32>, count: usize) -> Result<C::Projective> {
        let per = count.div_ceil(1 << 17).max(8);
        let threads = count.div_ceil(per).next_power_of_two();
        let partials = self.alloc::<u32>(threads * C::XYZZ_WORDS)?;
        self.launch(
            C::SUM_POINTS,
            grid(threads, CURVE_THREADS),
            CURVE_THREADS,
            &[
                KernelArg::Ptr(bases),
                KernelArg::Ptr(list.ptr(self)),
                KernelArg::U32(count as u32),
                KernelArg::U32(per as u32),
                KernelArg::U32(threads as u32),
                KernelArg::Ptr(partials.ptr(self)),
            ],
        )?;
        let sums = self.reduce_groups::<C>(partials, 1, threads)?;
        Ok(C::to_projective(&sums[0]))
    }

    /// Reduces `groups` runs of `per_group` (a power of two) XYZZ points to one point each,
    /// returned in Jacobian coordinates.
    fn reduce_groups<C: MsmCurve>(
        &self,
        mut points: GpuBuffer<u32>,
        groups: usize,
        mut per_group: usize,
    ) -> Result<Vec<C::Jacobian>> {
        while per_group > 1 {
            let g = per_group.min(REDUCE_GROUP);
            let blocks = groups * per_group / g;
            let out = self.alloc::<u32>(blocks * C::XYZZ_WORDS)?;
            self.launch(
                C::REDUCE,
                blocks as u32,
                g as u32,
                &[KernelArg::Ptr(points.ptr(self)), KernelArg::Ptr(out.ptr(self))],
            )?;
            points = out;
            per_group /= g;
        }
        let jacobian = self.alloc::<C::Jacobian>(groups)?;
        self.launch(
            C::TO_JACOBIAN,
            grid(groups, CURVE_THREADS),
            CURVE_THREADS,
            &[KernelArg::Ptr(points.ptr(self)), KernelArg::U32(groups as u32), KernelArg::Ptr(jacobian.ptr(self))],
        )?;
        self.download(&jacobian)
    }

    /// Sorts the signed digits of `n` nonzero canonical scalars by bucket and adds their points
    /// into `buckets`: scalar i's point is bases[index[i]].
    #[allow(clippy::too_many_arguments)]
    fn add_to_buckets<C: MsmCurve>(
        &self,
        bases: u64,
        canon: &GpuBuffer<Scalar>,
        index: &GpuBuffer<u32>,
        n: usize,
        opts: &MsmOptions,
        buckets: &mut Buckets,
        timer: &mut PhaseTimer,
    ) -> Result<()> {
        let (c, windows) = (buckets.c, buckets.windows);
        let total = windows << (c - 1);
        let (nu, cu, wu) = (KernelArg::U32(n as u32), KernelArg::U32(c), KernelArg::U32(windows as u32));

        let mut counts = self.alloc_zeroed::<u32>(total)?;
        self.fill_u32(&mut counts, 0)?;
        self.launch(
            "msm_digit_histogram",
            grid(n, THREADS),
            THREADS,
            &[KernelArg::Ptr(canon.ptr(self)), nu, cu, wu, KernelArg::Ptr(counts.ptr(self))],
        )?;

        // offsets = exclusive prefix sum of counts (in place)
        let sums = self.alloc::<u32>(total.div_ceil(SCAN_TILE))?;
        let grand_total = self.alloc::<u32>(1)?;
        self.scan_exclusive(counts.ptr(self), total, &sums, &grand_total)?;
        drop(sums);
        timer.mark(self, "histogram+scan");
        // The scatter advances each bucket's offset (in counts) to its end: counts become ends.
        let max_entries = n * windows;
        if max_entries > u32::MAX as usize - 64 {
            return Err(Error::Device {
                device: self.gpu().ordinal(),
                operation: "msm",
                message: format!("{n} nonzero scalars × {windows} windows overflow the 32-bit entry indices"),
            });
        }
        let entries = self.alloc::<u32>(max_entries)?;
        match opts.scatter.unwrap_or_else(|| scatter_kind_for(c)) {
            ScatterKind::Direct => {
                let group = opts.scatter_windows.unwrap_or_else(|| scatter_windows_for(c)).clamp(1, windows);
                for w_lo in (0..windows).step_by(group) {
                    let args = [
                        KernelArg::Ptr(canon.ptr(self)),
                        KernelArg::Ptr(index.ptr(self)),
                        nu,
                        cu,
                        wu,
                        KernelArg::U32(w_lo as u32),
                        KernelArg::U32((w_lo + group).min(windows) as u32),
                        KernelArg::Ptr(counts.ptr(self)),
                        KernelArg::Ptr(entries.ptr(self)),
                    ];
                    self.launch("msm_scatter_indexed", grid(n, THREADS), THREADS, &args)?;
                }
            }
            ScatterKind::Binned => self.scatter_binned(canon, index, n, c, windows, &counts, &entries)?,
        }
        let total_entries = self.download(&grand_total)?[0] as usize;

        timer.mark(self, "scatter");
        if total_entries == 0 {
            return Ok(());
        }
        let (ends, nb) = (KernelArg::Ptr(counts.ptr(self)), KernelArg::U32(total as u32));
        let out = KernelArg::Ptr(buckets.points.ptr(self));
        // The first pass sums straight into the buckets; later ones into a scratch array that
        // the fix-up adds into them (every bucket the pass touched is written there first).
        let accumulate = buckets.filled;
        let pass_ptr = if accumulate {
            if buckets.scratch.is_none() {
                buckets.scratch = Some(self.alloc::<u32>(buckets.points.len())?);
            }
            buckets.scratch.as_ref().expect("allocated above").ptr(self)
        } else {
            buckets.points.ptr(self)
        };
        let pass = KernelArg::Ptr(pass_ptr);
        let method =
            opts.bucket_method.unwrap_or_else(|| bucket_method_for(C::BATCH_AFFINE_WINS, c, total_entries, total));
        if method == BucketMethod::BatchAffine {
            let slice = opts.affine_slice_entries.unwrap_or(AFFINE_SLICE_ENTRIES).clamp(1, total_entries);
            let affine = AffinePass {
                bases,
                entries: &entries,
                ends: &counts,
                buckets: total,
                total: total_entries,
                slice,
                pass: pass_ptr,
            };
            match self.affine_buckets::<C>(&affine)? {
                Some(spills) => {
                    timer.mark(self, "buckets");
                    let spill = KernelArg::Ptr(spills.ptr(self));
                    // the slices are the chunks whose spills the fix-up adds
                    let chunk = KernelArg::U32(slice as u32);
                    let args = [ends, nb, chunk, KernelArg::U32(accumulate as u32), pass, out, spill];
                    self.launch(C::FIXUP, grid(total, CURVE_THREADS), CURVE_THREADS, &args)?;
                    timer.mark(self, "fixup");
                    buckets.filled = true;
                    return Ok(());
                }
                None if opts.affine_without_fallback => {
                    return Err(Error::Device {
                        device: self.gpu().ordinal(),
                        operation: "msm",
                        message: format!(
                            "the batch-affine bucket phase fell back: a slice of {slice} of {total_entries} entries \
                             over {total} buckets was too sparse for its round buffers"
                        ),
                    });
                }
                // a slice too sparse for the round buffers: XYZZ below rewrites every bucket
                None => {}
            }
        }
        let chunk = chunk_for(total_entries);
        let chunks = total_entries.div_ceil(chunk as usize);
        let spills = self.alloc::<u32>(chunks * C::XYZZ_WORDS)?;
        let spill = KernelArg::Ptr(spills.ptr(self));
        let args = [
            KernelArg::Ptr(bases),
            KernelArg::Ptr(entries.ptr(self)),
            ends,
            nb,
            KernelArg::U32(total_entries as u32),
            KernelArg::U32(chunk),
            pass,
            spill,
        ];
        self.launch(C::BUCKETS, grid(chunks, CURVE_THREADS), CURVE_THREADS, &args)?;
        timer.mark(self, "buckets");
        // one thread per bucket
        let args = [ends, nb, KernelArg::U32(chunk), KernelArg::U32(accumulate as u32), pass, out, spill];
        self.launch(C::FIXUP, grid(total, CURVE_THREADS), CURVE_THREADS, &args)?;
        timer.mark(self, "fixup");
        buckets.filled = true;
        Ok(())
    }

    /// The binned scatter ([`ScatterKind::Binned`], kernels/msm/msm.cu): the entries of `n`
    /// nonzero canonical scalars sorted by bucket into `entries`, window by window, and
    /// `counts` (the scanned offsets of every window's buckets) turned into the buckets' ends,
    /// as the direct scatter leaves them. Each window runs phase A over tiles of [`BIN_TILE`]
    /// scalars, then phase B with a block per bin and its stage in dynamic shared memory
    /// ([`bin_stage_words`], beside the window's bin width of cursors); the bin cursors are set
    /// up for all windows first, while `counts` still holds offsets.
    #[allow(clippy::too_many_arguments)]
    fn scatter_binned(
        &self,
        canon: &GpuBuffer<Scalar>,
        index: &GpuBuffer<u32>,
        n: usize,
        c: u32,
        windows: usize,
        counts: &GpuBuffer<u32>,
        entries: &GpuBuffer<u32>,
    ) -> Result<()> {
        // 2^11 bins of at most 2^8 buckets (the kernels' shared arrays) cover windows of up to
        // 20 bits, and the (sign, bucket, rank) words of phase A hold buckets below 2^19
        if !(2..=20).contains(&c) {
            return Err(Error::Device {
                device: self.gpu().ordinal(),
                operation: "msm",
                message: format!("the binned scatter takes windows of 2 to 20 bits, not {c}"),
            });
        }
        let (log_bins, log_width) = bin_geometry(c);
        debug_assert!(log_bins <= BIN_LOG_MAX && log_width <= BIN_LOG_WIDTH_MAX);
        let bins = 1usize << log_bins;
        // relative to each window's first offset: at most n entries a window, u32 as the entries
        let bin_cursors = self.alloc::<u32>(windows * bins)?;
        let temp = self.alloc::<u64>(n)?;
        debug_assert_eq!((4 * bin_cursors.len() + 8 * temp.len()) as u64, binned_scatter_bytes(c, n as u64));
        let (cu, lb) = (KernelArg::U32(c), KernelArg::U32(log_bins));
        self.launch(
            "msm_bin_cursors",
            grid(windows * bins, THREADS),
            THREADS,
            &[
                KernelArg::Ptr(counts.ptr(self)),
                cu,
                lb,
                KernelArg::U32(windows as u32),
                KernelArg::Ptr(bin_cursors.ptr(self)),
            ],
        )?;
        let tiles = n.div_ceil(BIN_TILE) as u32;
        let stage = bin_stage_words(c, n as u64, self.max_dynamic_shared_bytes()?);
        for w in 0..windows as u32 {
            let args = [
                KernelArg::Ptr(canon.ptr(self)),
                KernelArg::Ptr(index.ptr(self)),
                KernelArg::U32(n as u32),
                cu,
                KernelArg::U32(w),
                lb,
                KernelArg::Ptr(bin_cursors.ptr(self)),
                KernelArg::Ptr(temp.ptr(self)),
            ];
            self.launch("msm_bin_scatter", tiles, BIN_THREADS, &args)?;
            let args = [
                KernelArg::Ptr(temp.ptr(self)),
                KernelArg::U32(n as u32),
                KernelArg::Ptr(bin_cursors.ptr(self)),
                cu,
                KernelArg::U32(w),
                lb,
                KernelArg::U32(stage),
                KernelArg::Ptr(counts.ptr(self)),
                KernelArg::U32(entries.len() as u32),
                KernelArg::Ptr(entries.ptr(self)),
            ];
            // the window's cursors, then the stage (msm_bin_place's dynamic shared memory)
            let (window_log_bins, window_log_width) = window_bin_geometry(c, w);
            let shared = 4 * ((1 << window_log_width) + stage);
            self.launch_with_shared("msm_bin_place", 1 << window_log_bins, PLACE_THREADS, shared, &args)?;
        }
        Ok(())
    }

    /// Σ_b b·bucket_b for each window, lowest window first.
    fn window_sums<C: MsmCurve>(&self, buckets: Buckets, timer: &mut PhaseTimer) -> Result<Vec<C::Jacobian>> {
        let (c, windows) = (buckets.c, buckets.windows);
        let log_buckets = c - 1;
        let log_segs = log_segments_for(windows, log_buckets);
        let segs = 1usize << log_segs;
        let partials = self.alloc::<u32>(windows * segs * C::XYZZ_WORDS)?;
        self.launch(
            C::SEGMENTS,
            grid(windows * segs, CURVE_THREADS),
            CURVE_THREADS,
            &[
                KernelArg::Ptr(buckets.points.ptr(self)),
                KernelArg::U32(log_buckets),
                KernelArg::U32(log_segs),
                KernelArg::U32(windows as u32),
                KernelArg::Ptr(partials.ptr(self)),
            ],
        )?;
        drop(buckets);
        timer.mark(self, "segments");
        let sums = self.reduce_groups::<C>(partials, windows, segs)?;
        timer.mark(self, "reduce");
        Ok(sums)
    }
}

/// The buckets of one MSM, shared by its passes: 2^(c-1) XYZZ points per window.
struct Buckets {
    c: u32,
    windows: usize,
    points: GpuBuffer<u32>,
    /// Whether a pass has added to them (later passes add to what is there).
    filled: bool,
    /// Where the passes after the first sum their buckets before the fix-up adds them in.
    scratch: Option<GpuBuffer<u32>>,
}

impl Buckets {
    fn zeroed<C: MsmCurve>(stream: &GpuStream, c: u32) -> Result<Buckets> {
        let windows = 256usize.div_ceil(c as usize);
        // Zero bytes are the XYZZ identity: buckets without entries are never written.
        let points = stream.alloc_zeroed::<u32>((windows << (c - 1)) * C::XYZZ_WORDS)?;
        Ok(Buckets { c, windows, points, filled: false, scratch: None })
    }
}
