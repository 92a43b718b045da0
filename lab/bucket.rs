//! The bucket method of an MSM, modelled on the CPU with every field operation counted, to
//! compare two ways of accumulating a window's buckets before either is written as a kernel.
//! A lab model, not the library's: `tests/bucket_accumulation.rs` compiles it in (`#[path]`).
//!
//! In each window of `c` bits a point goes into the bucket of its scalar's digit there; the
//! window's sum is then `Σ d · bucket_d` (a running sum over the buckets), and the windows are
//! combined by `c` doublings between them. Digits are signed, as the CUDA kernels take them
//! (`kernels/msm/buckets.cuh`): a window has `2^(c-1)` buckets and a negative digit adds the
//! negated point. Almost all the work is the accumulation, one addition per point per window,
//! and the two accumulators here differ only there:
//!
//! - [`Accumulation::Xyzz`] keeps buckets in XYZZ coordinates and adds each affine point with
//!   madd-2008-s, exactly as `kernels/ec/xyzz.cuh` does: 8 multiplications and 2 squarings of
//!   the base field (the device floor's `G1_MADD`), no inversion.
//! - [`Accumulation::BatchAffine`] keeps buckets affine. An affine addition `P + Q` needs the
//!   slope `λ = (y_Q − y_P)/(x_Q − x_P)`, then `x = λ² − x_P − x_Q`, `y = λ(x_P − x) − y_P`:
//!   2 multiplications and 1 squaring, plus a division. Divisions of a batch of independent
//!   additions share one inversion through Montgomery's trick ([`batch_invert`]): the running
//!   products of the denominators take one multiplication each, their product is inverted
//!   once, and walking back gives every inverse for two more multiplications each. So an
//!   addition costs 5 multiplications and 1 squaring, plus one inversion shared by the batch,
//!   against 10 operations for XYZZ; it wins once batches are full enough to spread the
//!   inversion thin.
//!
//! The additions of one batch must be independent: **a batch never holds two additions into
//! the same bucket**, since the second would start from the bucket's value before the first
//! landed, and one of the two points would be lost. A point whose bucket already has an
//! addition in the batch being gathered is deferred to a later batch, ahead of the points not
//! yet looked at. The special cases of the affine law are decided while gathering, before any
//! division: a point into an empty bucket is simply stored; `P + P` is a doubling, whose slope
//! `3x²/2y` joins the batch like any other; `P + (−P)` empties the bucket.
//!
//! Field operations are counted in Fp operations the way the device floor counts them
//! (`src/bench/floor.rs`): on G1 Fp multiplications and squarings; on G2 an Fp2 multiplication
//! is three Fp multiplications (Karatsuba), an Fp2 squaring two. Additions, subtractions and
//! doublings of field elements are not counted. [`choose_accumulation`] is
//! the matching cost model: expected operations per bucket addition for each accumulator,
//! given the window's number of points and buckets. It is meant per window ([`msm_chosen`]):
//! the top window holds only the scalars' last few bits, its points crowd into few buckets,
//! and batches there stay too thin to pay for their inversions.

use std::collections::VecDeque;
use std::ops::{Add, AddAssign};

use blstrs::{Fp, Fp2, G1Affine, G2Affine};
use ff::Field;
use group::prime::PrimeCurveAffine;

use blstrs::Scalar;

/// Field operations, counted in Fp operations (see the module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpCount {
    /// Fp multiplications.
    pub muls: u64,
    /// Fp squarings.
    pub sqrs: u64,
    /// Fp inversions.
    pub invs: u64,
}

impl OpCount {
    /// What these operations cost, in Fp multiplications, at `costs`.
    pub fn mul_equivalents(&self, costs: &AccumulationCosts) -> f64 {
        self.muls as f64 + self.sqrs as f64 * costs.sqr + self.invs as f64 * costs.inversion
    }

    fn charge(&mut self, cost: OpCount) {
        *self += cost;
    }

    fn mul<F: CountedField>(&mut self, a: F, b: F) -> F {
        self.charge(F::MUL);
        a * b
    }

    fn sqr<F: CountedField>(&mut self, a: F) -> F {
        self.charge(F::SQR);
        a.square()
    }

    /// `1/a`; `a` must not be zero.
    fn inv<F: CountedField>(&mut self, a: F) -> F {
        self.charge(F::INV);
        a.invert().expect("an inversion of zero in the bucket model")
    }
}

impl Add for OpCount {
    type Output = OpCount;
    fn add(self, other: OpCount) -> OpCount {
        OpCount { muls: self.muls + other.muls, sqrs: self.sqrs + other.sqrs, invs: self.invs + other.invs }
    }
}

impl AddAssign for OpCount {
    fn add_assign(&mut self, other: OpCount) {
        *self = *self + other;
    }
}

/// A base field with what its operations cost in Fp operations.
pub trait CountedField: Field {
    /// One multiplication.
    const MUL: OpCount;
    /// One squaring.
    const SQR: OpCount;
    /// One inversion.
    const INV: OpCount;
}

impl CountedField for Fp {
    const MUL: OpCount = OpCount { muls: 1, sqrs: 0, invs: 0 };
    const SQR: OpCount = OpCount { muls: 0, sqrs: 1, invs: 0 };
    const INV: OpCount = OpCount { muls: 0, sqrs: 0, invs: 1 };
}

/// Karatsuba multiplication (three Fp multiplications) and complex squaring (two), as the
/// kernels' Fp2 does; `1/(a + bu) = (a − bu)/(a² + b²)`: two Fp squarings, one Fp inversion
/// and two Fp multiplications.
impl CountedField for Fp2 {
    const MUL: OpCount = OpCount { muls: 3, sqrs: 0, invs: 0 };
    const SQR: OpCount = OpCount { muls: 2, sqrs: 0, invs: 0 };
    const INV: OpCount = OpCount { muls: 2, sqrs: 2, invs: 1 };
}

/// An affine point other than the identity (the identity is `None` where it can occur).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point<F> {
    pub x: F,
    pub y: F,
}

impl<F: Field> Point<F> {
    fn neg(self) -> Self {
        Point { x: self.x, y: -self.y }
    }
}

/// An affine curve type the model runs on: G1 over Fp, G2 over Fp2.
pub trait BucketCurve: Copy {
    type Base: CountedField;
    /// The coordinates, `None` for the identity.
    fn coordinates(&self) -> Option<Point<Self::Base>>;
    /// The point with these coordinates (`None`: the identity); they must be on the curve.
    fn from_point(point: Option<Point<Self::Base>>) -> Self;
}

impl BucketCurve for G1Affine {
    type Base = Fp;
    fn coordinates(&self) -> Option<Point<Fp>> {
        (!bool::from(self.is_identity())).then(|| Point { x: self.x(), y: self.y() })
    }
    fn from_point(point: Option<Point<Fp>>) -> Self {
        point.map_or_else(G1Affine::identity, |p| G1Affine::from_raw_unchecked(p.x, p.y, false))
    }
}

impl BucketCurve for G2Affine {
    type Base = Fp2;
    fn coordinates(&self) -> Option<Point<Fp2>> {
        (!bool::from(self.is_identity())).then(|| Point { x: self.x(), y: self.y() })
    }
    fn from_point(point: Option<Point<Fp2>>) -> Self {
        point.map_or_else(G2Affine::identity, |p| G2Affine::from_raw_unchecked(p.x, p.y, false))
    }
}

/// How one point went into its bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Into an empty bucket: stored, no arithmetic.
    Placed,
    /// The general addition.
    Added,
    /// Into a bucket holding the same point.
    Doubled,
    /// Into a bucket holding its negation, which leaves the bucket empty.
    Cancelled,
}

/// A point in XYZZ coordinates: `(X, Y, ZZ, ZZZ)` stands for `(X/ZZ, Y/ZZZ)`, with
/// `ZZ³ = ZZZ²`; the identity has `ZZ = 0`. The formulas are the kernels'
/// (`kernels/ec/xyzz.cuh`), operation for operation, so they count the same.
#[derive(Debug, Clone, Copy)]
struct Xyzz<F> {
    x: F,
    y: F,
    zz: F,
    zzz: F,
}

impl<F: CountedField> Xyzz<F> {
    const IDENTITY: Self = Xyzz { x: F::ZERO, y: F::ZERO, zz: F::ZERO, zzz: F::ZERO };

    fn is_identity(&self) -> bool {
        self.zz.is_zero_vartime()
    }

    fn from_affine(p: Point<F>) -> Self {
        Xyzz { x: p.x, y: p.y, zz: F::ONE, zzz: F::ONE }
    }

    /// dbl-2008-s-1 (a = 0): 6M + 3S.
    fn dbl(self, ops: &mut OpCount) -> Self {
        if self.is_identity() || self.y.is_zero_vartime() {
            return Self::IDENTITY;
        }
        let u = self.y.double();
        let v = ops.sqr(u);
        let w = ops.mul(u, v);
        let s = ops.mul(self.x, v);
        let xx = ops.sqr(self.x);
        let m = xx.double() + xx;
        let x = ops.sqr(m) - s.double();
        let y = ops.mul(m, s - x) - ops.mul(w, self.y);
        Xyzz { x, y, zz: ops.mul(v, self.zz), zzz: ops.mul(w, self.zzz) }
    }

    /// `self + p`, madd-2008-s: 8M + 2S in the general case.
    fn add_affine(self, p: Point<F>, ops: &mut OpCount) -> (Self, Outcome) {
        if self.is_identity() {
            return (Self::from_affine(p), Outcome::Placed);
        }
        let pd = ops.mul(p.x, self.zz) - self.x;
        let r = ops.mul(p.y, self.zzz) - self.y;
        if pd.is_zero_vartime() {
            return if r.is_zero_vartime() {
                (Self::from_affine(p).dbl(ops), Outcome::Doubled)
            } else {
                (Self::IDENTITY, Outcome::Cancelled)
            };
        }
        let pp = ops.sqr(pd);
        let ppp = ops.mul(pd, pp);
        let q = ops.mul(self.x, pp);
        let x = ops.sqr(r) - ppp - q.double();
        let y = ops.mul(r, q - x) - ops.mul(self.y, ppp);
        (Xyzz { x, y, zz: ops.mul(self.zz, pp), zzz: ops.mul(self.zzz, ppp) }, Outcome::Added)
    }

    /// `self + q`, add-2008-s: 12M + 2S in the general case.
    fn add(self, q: Self, ops: &mut OpCount) -> Self {
        if q.is_identity() {
            return self;
        }
        if self.is_identity() {
            return q;
        }
        let u1 = ops.mul(self.x, q.zz);
        let u2 = ops.mul(q.x, self.zz);
        let s1 = ops.mul(self.y, q.zzz);
        let s2 = ops.mul(q.y, self.zzz);
        let pd = u2 - u1;
        let r = s2 - s1;
        if pd.is_zero_vartime() {
            return if r.is_zero_vartime() { self.dbl(ops) } else { Self::IDENTITY };
        }
        let pp = ops.sqr(pd);
        let ppp = ops.mul(pd, pp);
        let qq = ops.mul(u1, pp);
        let x = ops.sqr(r) - ppp - qq.double();
        let y = ops.mul(r, qq - x) - ops.mul(s1, ppp);
        let zz = ops.mul(self.zz, q.zz);
        let zzz = ops.mul(self.zzz, q.zzz);
        let (zz, zzz) = (ops.mul(zz, pp), ops.mul(zzz, ppp));
        Xyzz { x, y, zz, zzz }
    }

    /// The affine point, given `1/ZZZ`: `1/Z = ZZ/ZZZ` (as `ZZ³ = ZZZ²`), so one inversion
    /// serves both coordinates: 3M + 1S.
    fn to_affine_with(self, zzz_inverse: F, ops: &mut OpCount) -> Point<F> {
        let z_inverse = ops.mul(self.zz, zzz_inverse);
        let zz_inverse = ops.sqr(z_inverse);
        Point { x: ops.mul(self.x, zz_inverse), y: ops.mul(self.y, zzz_inverse) }
    }
}

/// `values[i] ← 1/values[i]` with one inversion (Montgomery's trick): with the prefix products
/// `p_i = v_0 ⋯ v_i`, `1/v_i = p_(i−1) · (1/p_i)` and `1/p_(i−1) = v_i · (1/p_i)`, so after
/// inverting `p_(n−1)` a walk back gives every inverse. 3(n − 1) multiplications and one
/// inversion; no value may be zero.
pub fn batch_invert<F: CountedField>(values: &mut [F], ops: &mut OpCount) {
    let Some((&first, rest)) = values.split_first() else { return };
    let mut prefix = Vec::with_capacity(values.len());
    prefix.push(first);
    for &v in rest {
        let last = *prefix.last().expect("the first value is there");
        prefix.push(ops.mul(last, v));
    }
    let mut inverse = ops.inv(*prefix.last().expect("the first value is there"));
    for i in (1..values.len()).rev() {
        let v = values[i];
        values[i] = ops.mul(inverse, prefix[i - 1]);
        inverse = ops.mul(inverse, v);
    }
    values[0] = inverse;
}

/// How a window's buckets are accumulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accumulation {
    /// XYZZ buckets, one madd-2008-s per point.
    Xyzz,
    /// Affine buckets, additions in batches of at most `batch` sharing one inversion.
    BatchAffine { batch: usize },
}

/// What an accumulation did, summed over the windows it ran on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccumulationStats {
    /// Every field operation of putting points into buckets.
    pub ops: OpCount,
    /// Turning the XYZZ buckets affine at the end (one batch inversion a window; nothing for
    /// batch-affine, whose buckets are affine already).
    pub finish: OpCount,
    /// Points stored into an empty bucket, without arithmetic.
    pub placements: u64,
    /// General additions into a nonempty bucket.
    pub additions: u64,
    /// Points added into a bucket holding the same point.
    pub doublings: u64,
    /// Points added into a bucket holding their negation.
    pub cancellations: u64,
    /// Batch-affine: batches (one inversion each).
    pub rounds: u64,
    /// Batch-affine: times a point was put back for a later batch because its bucket was
    /// taken in the batch being gathered.
    pub deferrals: u64,
}

impl AccumulationStats {
    /// Points that went into a nonempty bucket: what one "bucket addition" is below.
    pub fn bucket_additions(&self) -> u64 {
        self.additions + self.doublings + self.cancellations
    }

    /// The accumulation's operations per bucket addition, in Fp multiplications at `costs`.
    pub fn per_addition(&self, costs: &AccumulationCosts) -> f64 {
        self.ops.mul_equivalents(costs) / self.bucket_additions().max(1) as f64
    }

    /// Batch-affine: the mean number of divisions a batch shared.
    pub fn mean_batch(&self) -> f64 {
        (self.additions + self.doublings) as f64 / self.rounds.max(1) as f64
    }

    fn record(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Placed => self.placements += 1,
            Outcome::Added => self.additions += 1,
            Outcome::Doubled => self.doublings += 1,
            Outcome::Cancelled => self.cancellations += 1,
        }
    }
}

/// The buckets of one window: `entries` are (bucket index, point) in the order they arrive;
/// the result holds each bucket's sum, affine, `None` where it is the identity.
pub fn accumulate_window<F: CountedField>(
    entries: &[(usize, Point<F>)],
    buckets: usize,
    accumulation: Accumulation,
    stats: &mut AccumulationStats,
) -> Vec<Option<Point<F>>> {
    match accumulation {
        Accumulation::Xyzz => accumulate_xyzz(entries, buckets, stats),
        Accumulation::BatchAffine { batch } => {
            accumulate_batch_affine(entries, buckets, batch, Conflicts::Defer, stats)
        }
    }
}

fn accumulate_xyzz<F: CountedField>(
    entries: &[(usize, Point<F>)],
    buckets: usize,
    stats: &mut AccumulationStats,
) -> Vec<Option<Point<F>>> {
    let mut sums = vec![Xyzz::<F>::IDENTITY; buckets];
    for &(bucket, point) in entries {
        let (sum, outcome) = sums[bucket].add_affine(point, &mut stats.ops);
        sums[bucket] = sum;
        stats.record(outcome);
    }
    // One inversion for all the window's buckets: their ZZZs inverted together.
    let filled: Vec<usize> = (0..buckets).filter(|&b| !sums[b].is_identity()).collect();
    let mut inverses: Vec<F> = filled.iter().map(|&b| sums[b].zzz).collect();
    batch_invert(&mut inverses, &mut stats.finish);
    let mut out = vec![None; buckets];
    for (&b, inverse) in filled.iter().zip(inverses) {
        out[b] = Some(sums[b].to_affine_with(inverse, &mut stats.finish));
    }
    out
}

/// What batch-affine does with a point whose bucket is already in the batch being gathered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conflicts {
    /// Put it back for a later batch: the correct thing.
    Defer,
    /// Add it anyway, from the bucket's stale value: the bug deferral prevents, kept for the
    /// negative test.
    #[cfg(test)]
    Ignore,
}

/// One division of a batch: bucket ← `(x1, y1) + (x2, ·)` with slope `numerator/denominator`.
struct Division<F> {
    bucket: usize,
    x1: F,
    y1: F,
    x2: F,
    numerator: F,
}

fn accumulate_batch_affine<F: CountedField>(
    entries: &[(usize, Point<F>)],
    buckets: usize,
    batch: usize,
    conflicts: Conflicts,
    stats: &mut AccumulationStats,
) -> Vec<Option<Point<F>>> {
    assert!(batch >= 1, "a batch holds at least one addition");
    let mut sums: Vec<Option<Point<F>>> = vec![None; buckets];
    // `busy[b]`: bucket b has a division in the batch being gathered.
    let mut busy = vec![false; buckets];
    let mut queue: VecDeque<(usize, Point<F>)> = entries.iter().copied().collect();
    let mut divisions: Vec<Division<F>> = Vec::with_capacity(batch);
    let mut denominators: Vec<F> = Vec::with_capacity(batch);
    let mut deferred = Vec::new();
    while !queue.is_empty() {
        // Gather: every case but a division is settled at once, so an empty bucket, a
        // cancellation or a point into a bucket that was just filled never waits a batch.
        while divisions.len() < batch {
            let Some((bucket, p)) = queue.pop_front() else { break };
            if busy[bucket] && conflicts == Conflicts::Defer {
                deferred.push((bucket, p));
                stats.deferrals += 1;
                continue;
            }
            let outcome = match sums[bucket] {
                None => {
                    sums[bucket] = Some(p);
                    Outcome::Placed
                }
                Some(q) if q.x == p.x && (q.y != p.y || q.y.is_zero_vartime()) => {
                    sums[bucket] = None;
                    Outcome::Cancelled
                }
                Some(q) if q.x == p.x => {
                    // P + P: the tangent's slope 3x²/2y.
                    let xx = stats.ops.sqr(q.x);
                    divisions.push(Division { bucket, x1: q.x, y1: q.y, x2: q.x, numerator: xx.double() + xx });
                    denominators.push(q.y.double());
                    Outcome::Doubled
                }
                Some(q) => {
                    divisions.push(Division { bucket, x1: q.x, y1: q.y, x2: p.x, numerator: p.y - q.y });
                    denominators.push(p.x - q.x);
                    Outcome::Added
                }
            };
            if matches!(outcome, Outcome::Added | Outcome::Doubled) {
                busy[bucket] = true;
            }
            stats.record(outcome);
        }
        // The deferred points go first next time, in the order they came.
        for item in deferred.drain(..).rev() {
            queue.push_front(item);
        }
        if divisions.is_empty() {
            continue;
        }
        // Divide: one inversion for the whole batch, then 2M + 1S an addition.
        batch_invert(&mut denominators, &mut stats.ops);
        for (d, inverse) in divisions.drain(..).zip(denominators.drain(..)) {
            let lambda = stats.ops.mul(d.numerator, inverse);
            let x = stats.ops.sqr(lambda) - d.x1 - d.x2;
            let y = stats.ops.mul(lambda, d.x1 - x) - d.y1;
            sums[d.bucket] = Some(Point { x, y });
            busy[d.bucket] = false;
        }
        stats.rounds += 1;
    }
    sums
}

/// The signed `c`-bit digits of `scalar`, lowest window first: `scalar = Σ d_w · 2^(c·w)` with
/// `−2^(c−1) ≤ d_w ≤ 2^(c−1)`, in ⌈256/c⌉ windows (enough, as scalars are below 2^255, for the
/// top window to absorb the last carry).
pub fn signed_digits(scalar: &Scalar, c: u32) -> Vec<i64> {
    assert!((1..=24).contains(&c), "window bits {c} outside 1..=24");
    let bytes = scalar.to_bytes_le();
    let bit = |i: u32| -> i64 { ((bytes[(i / 8) as usize] >> (i % 8)) & 1) as i64 };
    let half = 1i64 << (c - 1);
    let mut carry = 0;
    let digits = (0..256u32.div_ceil(c))
        .map(|w| {
            let raw: i64 = (0..c).map(|j| w * c + j).filter(|&i| i < 256).map(|i| bit(i) << (i - w * c)).sum();
            let value = raw + carry;
            carry = (value > half) as i64;
            value - (carry << c)
        })
        .collect();
    debug_assert_eq!(carry, 0, "a carry out of the top window");
    digits
}

/// An MSM computed by the model, with what its parts cost.
#[derive(Debug, Clone)]
pub struct MsmRun<C> {
    /// `Σ scalars[i] · bases[i]`.
    pub result: C,
    /// The accumulator each window used, lowest window first.
    pub chosen: Vec<Accumulation>,
    /// The bucket accumulation of every window.
    pub accumulation: AccumulationStats,
    /// The rest, the same for both accumulators: each window's running sum over its buckets
    /// (XYZZ, buckets added with madd-2008-s and partial sums with add-2008-s), the windows'
    /// combination by doublings, the final conversion to affine.
    pub reduction: OpCount,
}

/// The buckets window `window` of `c` bits can use: 2^(c−1), except in the top window, which
/// holds only the scalars' bits below 2^255 and the carry (a digit at most 2^t with t such
/// bits), and so can be much smaller: where points crowd into few buckets, batches stay thin.
pub fn window_buckets(c: u32, window: usize) -> usize {
    let windows = 256u32.div_ceil(c) as usize;
    let full = 1usize << (c - 1);
    if window + 1 < windows {
        return full;
    }
    let top_bits = 255 - c * (windows as u32 - 1);
    full.min(1 << top_bits)
}

/// `Σ scalars[i] · bases[i]` by the bucket method with `c`-bit signed windows, every window
/// accumulated the same way. The lengths must match; identity bases are allowed.
pub fn msm<C: BucketCurve>(bases: &[C], scalars: &[Scalar], c: u32, accumulation: Accumulation) -> MsmRun<C> {
    msm_per_window(bases, scalars, c, |_, _| accumulation)
}

/// [`msm`] with each window's accumulator picked by the cost model ([`choose_accumulation`])
/// from the window's own number of points and usable buckets ([`window_buckets`]): a window
/// whose batches would be thin, the top one above all, keeps XYZZ.
pub fn msm_chosen<C: BucketCurve>(bases: &[C], scalars: &[Scalar], c: u32, costs: &AccumulationCosts) -> MsmRun<C> {
    msm_per_window(bases, scalars, c, |points, buckets| choose_accumulation::<C>(points, buckets, costs))
}

/// The bucket method, with `choose(points, usable buckets)` giving each window's accumulator.
fn msm_per_window<C: BucketCurve>(
    bases: &[C],
    scalars: &[Scalar],
    c: u32,
    choose: impl Fn(usize, usize) -> Accumulation,
) -> MsmRun<C> {
    assert_eq!(bases.len(), scalars.len(), "bases and scalars differ in length");
    let points: Vec<Option<Point<C::Base>>> = bases.iter().map(C::coordinates).collect();
    let digits: Vec<Vec<i64>> = scalars.iter().map(|s| signed_digits(s, c)).collect();
    let windows = 256u32.div_ceil(c) as usize;
    let buckets = 1usize << (c - 1);
    let mut stats = AccumulationStats::default();
    let mut reduction = OpCount::default();
    let mut chosen = Vec::with_capacity(windows);
    let mut window_sums = Vec::with_capacity(windows);
    for w in 0..windows {
        let entries: Vec<(usize, Point<C::Base>)> = points
            .iter()
            .zip(&digits)
            .filter_map(|(point, digits)| {
                let point = (*point)?;
                let d = digits[w];
                match d.signum() {
                    1 => Some((d as usize - 1, point)),
                    -1 => Some(((-d) as usize - 1, point.neg())),
                    _ => None,
                }
            })
            .collect();
        let accumulation = choose(entries.len(), window_buckets(c, w));
        let sums = accumulate_window(&entries, buckets, accumulation, &mut stats);
        chosen.push(accumulation);
        window_sums.push(running_sum(&sums, &mut reduction));
    }
    let mut total = Xyzz::IDENTITY;
    for &sum in window_sums.iter().rev() {
        for _ in 0..c {
            total = total.dbl(&mut reduction);
        }
        total = total.add(sum, &mut reduction);
    }
    let result = (!total.is_identity()).then(|| {
        let zzz_inverse = reduction.inv(total.zzz);
        total.to_affine_with(zzz_inverse, &mut reduction)
    });
    MsmRun { result: C::from_point(result), chosen, accumulation: stats, reduction }
}

/// `Σ (b + 1) · buckets[b]`: from the top bucket down, a running sum of the buckets, summed.
fn running_sum<F: CountedField>(buckets: &[Option<Point<F>>], ops: &mut OpCount) -> Xyzz<F> {
    let (mut running, mut sum) = (Xyzz::IDENTITY, Xyzz::IDENTITY);
    for bucket in buckets.iter().rev() {
        if let Some(p) = bucket {
            running = running.add_affine(*p, ops).0;
        }
        sum = sum.add(running, ops);
    }
    sum
}

/// What the cost model charges, in Fp multiplications (one Fp multiplication is the unit).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AccumulationCosts {
    /// One Fp squaring.
    pub sqr: f64,
    /// One Fp inversion. The default, 100, is a parameter, not a measurement: it is the order
    /// of a binary extended-Euclid or safegcd inversion on one thread. An inversion by
    /// Fermat's little theorem (`a^(p−2)`, left-to-right square-and-multiply over the 381 bits
    /// of `p − 2`, 229 of them set) costs 380 squarings and 228 multiplications, six times more,
    /// and moves the crossover to fuller batches.
    pub inversion: f64,
    /// The most additions one batch may hold (what the scratch for a batch's denominators and
    /// prefix products allows).
    pub max_batch: usize,
}

impl Default for AccumulationCosts {
    fn default() -> Self {
        AccumulationCosts { sqr: 1.0, inversion: 100.0, max_batch: 256 }
    }
}

/// The cost model's expected operations per bucket addition of a window, in Fp
/// multiplications.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdditionEstimates {
    /// XYZZ: one madd-2008-s, 8M + 2S of the base field.
    pub xyzz: f64,
    /// Batch-affine with batches of `batch`: 2M + 1S, the trick's 3M less 3M a batch, and an
    /// inversion a batch.
    pub batch_affine: f64,
    /// The batch size batch-affine would use: the cap, or the bucket count when smaller (a
    /// batch never holds two additions into one bucket).
    pub batch: usize,
    /// Expected additions per batch.
    pub fill: f64,
}

/// Expected operations per bucket addition for each accumulator, for a window of `points`
/// nonzero digits spread uniformly over `buckets` buckets, on curve `C`.
///
/// The additions are the points that find their bucket nonempty: `points` less the expected
/// number of occupied buckets. Batches are at most `batch` full, and since every bucket takes
/// one addition per batch, there are at least as many batches as the fullest bucket has
/// additions (estimated as mean load + √(2 · mean · ln buckets)). A batch's inversion and its
/// first element's saved multiplications are spread over its expected fill.
pub fn addition_estimates<C: BucketCurve>(
    points: usize,
    buckets: usize,
    costs: &AccumulationCosts,
) -> AdditionEstimates {
    let buckets = buckets.max(1);
    let m = <C::Base as CountedField>::MUL.mul_equivalents(costs);
    let s = <C::Base as CountedField>::SQR.mul_equivalents(costs);
    let inv = <C::Base as CountedField>::INV.mul_equivalents(costs);
    let batch = costs.max_batch.min(buckets).max(1);
    let (n, b) = (points as f64, buckets as f64);
    let occupied = b * (1.0 - (1.0 - 1.0 / b).powf(n));
    let additions = (n - occupied).max(0.0);
    let load = n / b;
    let fullest = load + (2.0 * load * b.ln()).sqrt();
    let rounds = (additions / batch as f64).max(fullest - 1.0).max(1.0);
    let fill = (additions / rounds).max(1.0);
    AdditionEstimates {
        xyzz: 8.0 * m + 2.0 * s,
        batch_affine: 2.0 * m + s + 3.0 * m * (1.0 - 1.0 / fill) + inv / fill,
        batch,
        fill,
    }
}

/// The accumulator the cost model expects to be cheaper for such a window: XYZZ when batches
/// would be too thin to spread an inversion (short MSMs, few points a bucket, the tail of a
/// window), batch-affine otherwise.
pub fn choose_accumulation<C: BucketCurve>(points: usize, buckets: usize, costs: &AccumulationCosts) -> Accumulation {
    let estimates = addition_estimates::<C>(points, buckets, costs);
    if estimates.batch_affine < estimates.xyzz {
        Accumulation::BatchAffine { batch: estimates.batch }
    } else {
        Accumulation::Xyzz
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::{Curve, Group};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// A fresh RNG, its seed printed so that a failure can be replayed.
    fn fresh_rng(test: &str) -> ChaCha8Rng {
        let seed: u64 = rand::thread_rng().gen();
        eprintln!("{test}: seed {seed}");
        ChaCha8Rng::seed_from_u64(seed)
    }

    fn random_point<C: BucketCurve + PrimeCurveAffine>(rng: &mut ChaCha8Rng) -> Point<C::Base> {
        C::Curve::random(rng).to_affine().coordinates().expect("a random point is not the identity")
    }

    #[test]
    fn signed_digits_recompose_the_scalar() {
        let mut rng = fresh_rng("signed_digits_recompose_the_scalar");
        let scalars = [Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::random(&mut rng), Scalar::random(&mut rng)];
        for c in 1..=17 {
            for s in &scalars {
                let digits = signed_digits(s, c);
                assert_eq!(digits.len(), 256u32.div_ceil(c) as usize);
                let half = 1i64 << (c - 1);
                assert!(digits.iter().all(|d| (-half..=half).contains(d)), "c {c}: {digits:?}");
                let shift = Scalar::from(2u64).pow_vartime([c as u64]);
                let back = digits.iter().rev().fold(Scalar::ZERO, |acc, &d| {
                    let digit = Scalar::from(d.unsigned_abs());
                    acc * shift + if d < 0 { -digit } else { digit }
                });
                assert_eq!(back, *s, "c {c}");
            }
        }
    }

    #[test]
    fn the_top_window_uses_only_its_buckets() {
        let mut rng = fresh_rng("the_top_window_uses_only_its_buckets");
        assert_eq!((window_buckets(8, 31), window_buckets(12, 20), window_buckets(12, 21)), (128, 2048, 8));
        assert_eq!((window_buckets(1, 255), window_buckets(16, 15), window_buckets(15, 17)), (1, 1 << 15, 1));
        // The largest scalar, r − 1, and random ones: no digit beyond its window's buckets.
        let scalars = [-Scalar::ONE, Scalar::random(&mut rng), Scalar::random(&mut rng)];
        for c in 1..=20 {
            for s in &scalars {
                for (w, d) in signed_digits(s, c).iter().enumerate() {
                    assert!(d.unsigned_abs() as usize <= window_buckets(c, w), "c {c}, window {w}: {d}");
                }
            }
        }
    }

    #[test]
    fn batch_invert_inverts_with_one_inversion() {
        let mut rng = fresh_rng("batch_invert_inverts_with_one_inversion");
        for n in [0usize, 1, 2, 9] {
            let values: Vec<Fp> = (0..n).map(|_| Fp::random(&mut rng)).collect();
            let mut inverses = values.clone();
            let mut ops = OpCount::default();
            batch_invert(&mut inverses, &mut ops);
            for (v, i) in values.iter().zip(&inverses) {
                assert_eq!(*v * i, Fp::ONE);
            }
            let expected = n.saturating_sub(1) as u64;
            assert_eq!(ops, OpCount { muls: 3 * expected, sqrs: 0, invs: (n > 0) as u64 });
        }
    }

    /// The XYZZ formulas count what the kernels' formulas count (the floor's constants and
    /// the EFD's figures), and compute the right points.
    #[test]
    fn xyzz_formulas_count_as_the_kernels() {
        let mut rng = fresh_rng("xyzz_formulas_count_as_the_kernels");
        let (p, q) = (random_point::<G1Affine>(&mut rng), random_point::<G1Affine>(&mut rng));
        let expected = |a: Point<Fp>, b: Point<Fp>| {
            (G1Affine::from_point(Some(a)).to_curve() + G1Affine::from_point(Some(b))).to_affine()
        };
        let affine = |x: Xyzz<Fp>| {
            let mut ops = OpCount::default();
            let inverse = ops.inv(x.zzz);
            G1Affine::from_point(Some(x.to_affine_with(inverse, &mut ops)))
        };
        // Start from a bucket with ZZ ≠ 1 so the formulas are exercised in general.
        let mut ops = OpCount::default();
        let (start, _) = Xyzz::from_affine(p).add_affine(q, &mut ops);
        // madd-2008-s; `tests/bucket_accumulation.rs` ties the counts to the floor's constants.
        assert_eq!(ops, OpCount { muls: 8, sqrs: 2, invs: 0 });
        let pq = affine(start).coordinates().unwrap();
        assert_eq!(G1Affine::from_point(Some(pq)), expected(p, q));
        let r = random_point::<G1Affine>(&mut rng);
        let mut ops = OpCount::default();
        let (sum, outcome) = start.add_affine(r, &mut ops);
        assert_eq!((outcome, ops), (Outcome::Added, OpCount { muls: 8, sqrs: 2, invs: 0 }));
        assert_eq!(affine(sum), expected(pq, r));
        let mut ops = OpCount::default();
        assert_eq!(affine(start.dbl(&mut ops)), expected(pq, pq));
        assert_eq!(ops, OpCount { muls: 6, sqrs: 3, invs: 0 });
        let mut ops = OpCount::default();
        let other = Xyzz::from_affine(r).dbl(&mut OpCount::default());
        assert_eq!(affine(start.add(other, &mut ops)), expected(pq, affine(other).coordinates().unwrap()));
        assert_eq!(ops, OpCount { muls: 12, sqrs: 2, invs: 0 });
        // The exceptional cases: P + P doubles, P + (−P) is the identity.
        let (doubled, outcome) = start.add_affine(pq, &mut OpCount::default());
        assert_eq!((outcome, affine(doubled)), (Outcome::Doubled, expected(pq, pq)));
        let (cancelled, outcome) = start.add_affine(pq.neg(), &mut OpCount::default());
        assert!(outcome == Outcome::Cancelled && cancelled.is_identity());
        // G2: the same formula is 28 Fp multiplications.
        let (p2, q2) = (random_point::<G2Affine>(&mut rng), random_point::<G2Affine>(&mut rng));
        let mut ops = OpCount::default();
        Xyzz::from_affine(p2).add_affine(q2, &mut OpCount::default()).0.add_affine(p2, &mut ops);
        assert_eq!(ops, OpCount { muls: 28, sqrs: 0, invs: 0 });
    }

    /// Negative twin of the deferral invariant: gathering a batch without deferring conflicts
    /// (two additions into one bucket, the second from the bucket's stale value) loses points,
    /// and the window's buckets come out wrong; with deferral they match XYZZ's.
    #[test]
    fn skipping_the_deferral_is_detected() {
        let mut rng = fresh_rng("skipping_the_deferral_is_detected");
        let buckets = 4;
        let entries: Vec<(usize, Point<Fp>)> =
            (0..40).map(|i| (i % buckets, random_point::<G1Affine>(&mut rng))).collect();
        let xyzz = accumulate_window(&entries, buckets, Accumulation::Xyzz, &mut AccumulationStats::default());
        let mut stats = AccumulationStats::default();
        let deferred = accumulate_batch_affine(&entries, buckets, 16, Conflicts::Defer, &mut stats);
        assert_eq!(deferred, xyzz);
        assert!(stats.deferrals > 0, "the input forces conflicts");
        let ignored =
            accumulate_batch_affine(&entries, buckets, 16, Conflicts::Ignore, &mut AccumulationStats::default());
        assert_ne!(ignored, xyzz);
    }

    #[test]
    fn batch_affine_handles_every_special_case_in_one_window() {
        let mut rng = fresh_rng("batch_affine_handles_every_special_case_in_one_window");
        let (p, q) = (random_point::<G1Affine>(&mut rng), random_point::<G1Affine>(&mut rng));
        // Bucket 0: P, then P (a doubling: 2P), −P (2P − P = P), −P (P − P: empty), Q into the
        // emptied bucket. Bucket 1: Q, −Q (empty), Q. Both end at Q.
        let entries = vec![(0, p), (1, q), (0, p), (1, q.neg()), (0, p.neg()), (1, q), (0, p.neg()), (0, q)];
        let xyzz = accumulate_window(&entries, 2, Accumulation::Xyzz, &mut AccumulationStats::default());
        assert_eq!(xyzz, vec![Some(q), Some(q)]);
        for batch in [1, 2, 8] {
            let mut stats = AccumulationStats::default();
            let affine = accumulate_window(&entries, 2, Accumulation::BatchAffine { batch }, &mut stats);
            assert_eq!(affine, xyzz, "batch {batch}");
            assert_eq!((stats.doublings, stats.cancellations), (1, 2), "batch {batch}");
        }
    }

    #[test]
    fn the_cost_model_prefers_xyzz_for_thin_batches() {
        let costs = AccumulationCosts::default();
        // A handful of points: batches of one or two cannot pay for an inversion.
        assert_eq!(choose_accumulation::<G1Affine>(8, 8, &costs), Accumulation::Xyzz);
        assert_eq!(choose_accumulation::<G2Affine>(8, 8, &costs), Accumulation::Xyzz);
        // Many points a bucket over many buckets: full batches.
        let big = choose_accumulation::<G1Affine>(1 << 20, 1 << 15, &costs);
        assert_eq!(big, Accumulation::BatchAffine { batch: 256 });
        let e = addition_estimates::<G1Affine>(1 << 20, 1 << 15, &costs);
        assert_eq!(e.xyzz, 10.0);
        assert!(e.batch_affine > 6.0 && e.batch_affine < 6.5, "{e:?}");
        let e2 = addition_estimates::<G2Affine>(1 << 20, 1 << 15, &costs);
        assert_eq!(e2.xyzz, 28.0);
        // An inversion by Fermat's theorem moves the crossover: the same tiny window stays
        // XYZZ, and a middling one flips.
        let fermat = AccumulationCosts { inversion: 380.0 + 228.0, ..costs };
        assert_eq!(choose_accumulation::<G1Affine>(2048, 128, &costs), Accumulation::BatchAffine { batch: 128 });
        assert_eq!(choose_accumulation::<G1Affine>(2048, 128, &fermat), Accumulation::Xyzz);
    }
}
