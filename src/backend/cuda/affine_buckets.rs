//! The batch-affine bucket phase of an MSM pass (kernels/msm/batch_affine.cuh): the sorted
//! entries taken in slices of consecutive entries, each slice's buckets halved round after
//! round by affine additions of pairs that share one inversion a round, the last few points of
//! each bucket summed in XYZZ. It leaves the buckets and spills that the XYZZ bucket phase
//! leaves with chunks one slice long, so the same fix-up completes them.

use super::context::{GpuBuffer, GpuStream, KernelArg};
use super::launch::{grid, CURVE_THREADS, THREADS};
use super::msm_curves::MsmCurve;
use super::msm_plan::{
    affine_outputs_per_thread, affine_round_capacities, affine_scratch_bytes, affine_tree_elements, affine_tree_levels,
    AFFINE_FINISH_POINTS, AFFINE_TREE_GROUP, SCAN_TILE,
};
use crate::error::Result;

/// One pass's sorted entries and where their bucket sums go.
pub(super) struct AffinePass<'a> {
    /// The bases (device pointer), a whole allocation (16-byte aligned).
    pub bases: u64,
    /// Point indices sorted by bucket, the sign in bit 31.
    pub entries: &'a GpuBuffer<u32>,
    /// Each bucket's inclusive end in `entries`.
    pub ends: &'a GpuBuffer<u32>,
    /// Buckets (all windows).
    pub buckets: usize,
    /// Sorted entries (> 0).
    pub total: usize,
    /// Entries a slice (> 0).
    pub slice: usize,
    /// The pass's bucket sums are written here (the MSM's buckets, or a later pass's scratch
    /// array), as by the XYZZ bucket kernel: empty buckets are not written.
    pub pass: u64,
}

/// Device pointer `base` advanced by `elements` of `bytes` bytes.
fn at(base: u64, elements: usize, bytes: usize) -> u64 {
    base + (elements * bytes) as u64
}

impl GpuStream {
    /// Sums the pass's entries into `pass.pass` (buckets beginning in a slice) and the
    /// returned spills (one XYZZ point a slice: the partial sum of the bucket the slice began
    /// inside), which `msm_gX_bucket_fixup` with chunks of `pass.slice` entries completes.
    /// `None` when a slice's buckets were too sparse for the round buffers (a round writing
    /// more outputs than [`affine_round_capacities`]): the caller then runs the XYZZ phase,
    /// which rewrites every bucket this one wrote.
    pub(super) fn affine_buckets<C: MsmCurve>(&self, pass: &AffinePass) -> Result<Option<GpuBuffer<u32>>> {
        let k = &C::AFFINE;
        let fb = C::FIELD_BYTES;
        let slices = pass.total.div_ceil(pass.slice);
        // each slice's first and last bucket
        let bounds = self.alloc::<u32>(2 * slices)?;
        self.launch(
            "msm_affine_slice_buckets",
            grid(slices, THREADS),
            THREADS,
            &[
                KernelArg::Ptr(pass.ends.ptr(self)),
                KernelArg::U32(pass.buckets as u32),
                KernelArg::U32(pass.total as u32),
                KernelArg::U32(pass.slice as u32),
                KernelArg::U32(slices as u32),
                KernelArg::Ptr(bounds.ptr(self)),
            ],
        )?;
        let bounds = {
            let on_device = bounds;
            self.download(&on_device)?
        };
        let widest = (0..slices).map(|s| (bounds[2 * s + 1] - bounds[2 * s]) as usize + 1).max().unwrap_or(1);

        let (even_cap, odd_cap) = affine_round_capacities(pass.slice);
        let products = even_cap / 4 + 1;
        let (tree_pre, tree_up) = affine_tree_elements(products);
        // field elements, one allocation: x and y of the even rounds' outputs, of the odd
        // rounds', the running products, the threads' products, the tree's levels
        let x = [0, 2 * even_cap];
        let y = [even_cap, 2 * even_cap + odd_cap];
        let prefix = 2 * even_cap + 2 * odd_cap;
        let prod = prefix + even_cap + 32;
        let pre = prod + products;
        let up = pre + tree_pre;
        let elements = up + tree_up;
        let field = self.alloc::<u32>(elements * fb / 4)?;
        let ends = [self.alloc::<u32>(widest)?, self.alloc::<u32>(widest)?];
        let sums = self.alloc::<u32>(widest.div_ceil(SCAN_TILE))?;
        let mut counter = self.alloc::<u32>(1)?;
        let spills = self.alloc_zeroed::<u32>(slices * 4 * fb / 4)?;
        let words = field.len() + ends[0].len() + ends[1].len() + sums.len() + counter.len() + spills.len();
        debug_assert_eq!(4 * words as u64, affine_scratch_bytes(fb, pass.slice, widest, pass.total));
        let f = |element: usize| at(field.ptr(self), element, fb);

        for s in 0..slices {
            let (b_lo, b_hi) = (bounds[2 * s], bounds[2 * s + 1]);
            let nb = (b_hi - b_lo) as usize + 1;
            let e0 = s * pass.slice;
            let e1 = (e0 + pass.slice).min(pass.total);
            let nbu = KernelArg::U32(nb as u32);
            self.fill_u32(&mut counter, 0)?;
            // round 0's buckets (the slice's, clipped) in ends[0], their halves in ends[1]
            self.launch(
                "msm_affine_clip",
                grid(nb, THREADS),
                THREADS,
                &[
                    KernelArg::Ptr(pass.ends.ptr(self)),
                    KernelArg::U32(b_lo),
                    nbu,
                    KernelArg::U32(e0 as u32),
                    KernelArg::U32(e1 as u32),
                    KernelArg::Ptr(ends[0].ptr(self)),
                    KernelArg::Ptr(ends[1].ptr(self)),
                    KernelArg::Ptr(counter.ptr(self)),
                ],
            )?;
            let mut most = self.download(&counter)?[0];
            let entries = at(pass.entries.ptr(self), e0, 4);
            let mut round = 0usize;
            while most > AFFINE_FINISH_POINTS {
                let (ends_in, ends_out) = (&ends[round & 1], &ends[(round + 1) & 1]);
                if round > 0 {
                    self.launch(
                        "msm_affine_halve",
                        grid(nb, THREADS),
                        THREADS,
                        &[KernelArg::Ptr(ends_in.ptr(self)), nbu, KernelArg::Ptr(ends_out.ptr(self))],
                    )?;
                }
                self.scan_exclusive(ends_out.ptr(self), nb, &sums, &counter)?;
                self.launch(
                    "msm_affine_ends",
                    grid(nb, THREADS),
                    THREADS,
                    &[KernelArg::Ptr(ends_in.ptr(self)), nbu, KernelArg::Ptr(ends_out.ptr(self))],
                )?;
                let items = self.download(&counter)?[0] as usize;
                if items > if round & 1 == 0 { even_cap } else { odd_cap } {
                    return Ok(None);
                }
                let per = affine_outputs_per_thread(items);
                let threads = items.div_ceil(per);
                let mut args = if round == 0 {
                    vec![KernelArg::Ptr(pass.bases), KernelArg::Ptr(entries)]
                } else {
                    let prev = (round + 1) & 1;
                    vec![KernelArg::Ptr(f(x[prev])), KernelArg::Ptr(f(y[prev]))]
                };
                args.extend([
                    KernelArg::Ptr(ends_in.ptr(self)),
                    KernelArg::Ptr(ends_out.ptr(self)),
                    nbu,
                    KernelArg::U32(items as u32),
                    KernelArg::U32(per as u32),
                    KernelArg::U32(threads as u32),
                    KernelArg::Ptr(f(prefix)),
                    KernelArg::Ptr(f(prod)),
                ]);
                let (forward, backward) = if round == 0 {
                    (k.forward_entries, k.backward_entries)
                } else {
                    (k.forward_points, k.backward_points)
                };
                self.launch(forward, grid(threads, CURVE_THREADS), CURVE_THREADS, &args)?;
                self.invert_in_place::<C>(f(prod), threads, f(pre), f(up))?;
                let out = round & 1;
                args.extend([KernelArg::Ptr(f(x[out])), KernelArg::Ptr(f(y[out]))]);
                self.launch(backward, grid(threads, CURVE_THREADS), CURVE_THREADS, &args)?;
                most = most.div_ceil(2);
                round += 1;
            }
            // the remaining points of each bucket, in XYZZ
            let mut args = if round == 0 {
                vec![KernelArg::Ptr(pass.bases), KernelArg::Ptr(entries)]
            } else {
                let last = (round + 1) & 1;
                vec![KernelArg::Ptr(f(x[last])), KernelArg::Ptr(f(y[last]))]
            };
            args.extend([
                KernelArg::Ptr(ends[round & 1].ptr(self)),
                nbu,
                KernelArg::Ptr(pass.ends.ptr(self)),
                KernelArg::U32(b_lo),
                KernelArg::U32(e0 as u32),
                KernelArg::Ptr(pass.pass),
                KernelArg::Ptr(at(spills.ptr(self), s, 4 * fb)),
            ]);
            let finish = if round == 0 { k.finish_entries } else { k.finish_points };
            self.launch(finish, grid(nb, CURVE_THREADS), CURVE_THREADS, &args)?;
        }
        Ok(Some(spills))
    }

    /// v[i] ← 1/v[i] for the `n` field elements at `v` (none zero), as a tree: groups of
    /// [`AFFINE_TREE_GROUP`] values a thread multiplied up level by level
    /// ([`affine_tree_levels`]), one inversion of the top level's product on one thread, and
    /// back down. `pre` and `up` hold [`affine_tree_elements`]`(n)` elements.
    fn invert_in_place<C: MsmCurve>(&self, v: u64, n: usize, pre: u64, up: u64) -> Result<()> {
        let (k, fb, g) = (&C::AFFINE, C::FIELD_BYTES, AFFINE_TREE_GROUP);
        let levels = affine_tree_levels(n);
        // a level's values: the values to invert, then the level below's group products
        let values = |i: usize| if i == 0 { v } else { at(up, levels[i - 1].up_at, fb) };
        let args = |i: usize| {
            let l = levels[i];
            [
                KernelArg::Ptr(values(i)),
                KernelArg::U32(l.count as u32),
                KernelArg::U32(g as u32),
                KernelArg::Ptr(at(pre, l.pre_at, fb)),
                KernelArg::Ptr(at(up, l.up_at, fb)),
            ]
        };
        let top = levels.len() - 1;
        for (i, level) in levels[..top].iter().enumerate() {
            self.launch(k.tree_up, grid(level.count.div_ceil(g), CURVE_THREADS), CURVE_THREADS, &args(i))?;
        }
        self.launch(k.tree_top, 1, 32, &args(top))?;
        for (i, level) in levels[..top].iter().enumerate().rev() {
            self.launch(k.tree_down, grid(level.count.div_ceil(g), CURVE_THREADS), CURVE_THREADS, &args(i))?;
        }
        Ok(())
    }
}
