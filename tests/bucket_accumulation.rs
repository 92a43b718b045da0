//! The CPU model of bucket accumulation (`lab/bucket.rs`, compiled in here: it is no part of the
//! library): both accumulators, XYZZ
//! and batch-affine, give blst's MSM result byte for byte, through every special case of the
//! addition law; their operation counts are what the formulas promise; and the cost model picks
//! the accumulator the counts find cheaper.

use blstrs::{Fp, G1Affine, G1Projective, G2Affine, G2Projective};
use ff::Field;
use group::prime::{PrimeCurve, PrimeCurveAffine};
use group::Curve;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use snarkpipe::bench::floor::{G1_MADD, G2_MADD};
// The model's whole surface is compiled in; this file reads only part of it.
#[allow(dead_code)]
#[path = "../lab/bucket.rs"]
mod bucket;

use bucket::{
    accumulate_window, addition_estimates, choose_accumulation, msm, msm_chosen, Accumulation, AccumulationCosts,
    AccumulationStats, BucketCurve, Point,
};
use snarkpipe::math::{msm_g1, msm_g2};
use snarkpipe::Scalar;

fn fresh_rng(test: &str) -> ChaCha8Rng {
    let seed: u64 = rand::thread_rng().gen();
    eprintln!("{test}: seed {seed}");
    ChaCha8Rng::seed_from_u64(seed)
}

/// `n` independent random points, made affine in one batch. (Not a start stepped by a fixed
/// point: in such a progression a bucket holding `P_i − P_j + P_k` is `P_(i−j+k)`, and signed
/// digits bring doublings and cancellations into "random" input.)
fn points<G: PrimeCurve>(rng: &mut ChaCha8Rng, n: usize) -> Vec<G::Affine> {
    let projective: Vec<G> = (0..n).map(|_| G::random(&mut *rng)).collect();
    let mut affine = vec![G::Affine::identity(); n];
    G::batch_normalize(&projective, &mut affine);
    affine
}

fn random_scalars(rng: &mut ChaCha8Rng, n: usize) -> Vec<Scalar> {
    (0..n).map(|_| Scalar::random(&mut *rng)).collect()
}

/// Batch sizes of one (an inversion an addition), small (batches cut short by the size), and
/// larger than the buckets (batches cut short by conflicts).
const ACCUMULATIONS: [Accumulation; 5] = [
    Accumulation::Xyzz,
    Accumulation::BatchAffine { batch: 1 },
    Accumulation::BatchAffine { batch: 3 },
    Accumulation::BatchAffine { batch: 64 },
    Accumulation::BatchAffine { batch: 1024 },
];

/// Every accumulation gives `expected` (compressed affine bytes); returns their statistics.
fn check<C: BucketCurve + PrimeCurveAffine>(
    bases: &[C],
    scalars: &[Scalar],
    c: u32,
    expected: &[u8],
    label: &str,
) -> Vec<AccumulationStats>
where
    C::Repr: AsRef<[u8]>,
{
    ACCUMULATIONS
        .iter()
        .map(|&accumulation| {
            let run = msm(bases, scalars, c, accumulation);
            assert_eq!(run.result.to_bytes().as_ref(), expected, "{label}, c {c}, {accumulation:?}");
            run.accumulation
        })
        .collect()
}

fn check_g1(bases: &[G1Affine], scalars: &[Scalar], c: u32, label: &str) -> Vec<AccumulationStats> {
    let expected = msm_g1(bases, scalars).to_affine().to_compressed();
    check(bases, scalars, c, &expected, label)
}

fn check_g2(bases: &[G2Affine], scalars: &[Scalar], c: u32, label: &str) -> Vec<AccumulationStats> {
    let expected = msm_g2(bases, scalars).to_affine().to_compressed();
    check(bases, scalars, c, &expected, label)
}

#[test]
fn both_accumulators_match_msm_g1() {
    let mut rng = fresh_rng("both_accumulators_match_msm_g1");
    for (n, windows) in [(1, &[1, 2, 4, 9][..]), (2, &[1, 3, 8]), (7, &[2, 4, 13]), (100, &[3, 7]), (1000, &[5, 8, 11])]
    {
        for &c in windows {
            let bases = points::<G1Projective>(&mut rng, n);
            let scalars = random_scalars(&mut rng, n);
            check_g1(&bases, &scalars, c, &format!("n {n}"));
        }
    }
    // Nothing at all is the identity.
    check_g1(&[], &[], 4, "empty");
}

#[test]
fn both_accumulators_match_msm_g2() {
    let mut rng = fresh_rng("both_accumulators_match_msm_g2");
    for (n, c) in [(1, 2), (2, 5), (7, 3), (100, 4), (300, 7)] {
        let bases = points::<G2Projective>(&mut rng, n);
        let scalars = random_scalars(&mut rng, n);
        check_g2(&bases, &scalars, c, &format!("n {n}"));
    }
}

/// Special cases first, so that each meets its buckets fresh in every window: a point beside
/// its negation with the same scalar (its bucket meets `P + (−P)`), then a point repeated with
/// one scalar (its bucket doubles); then random points with scalars 0, 1 and −1 among them, a
/// point and its negation under different scalars, and identity bases.
fn edge_inputs<G: PrimeCurve>(rng: &mut ChaCha8Rng) -> (Vec<G::Affine>, Vec<Scalar>) {
    let fresh = points::<G>(rng, 30);
    let (mut bases, mut scalars) = (Vec::new(), Vec::new());
    let s = Scalar::random(&mut *rng);
    bases.extend([fresh[0], -fresh[0]]);
    scalars.extend([s, s]);
    let s = Scalar::random(&mut *rng);
    bases.extend([fresh[1]; 6]);
    scalars.extend([s; 6]);
    bases.extend(&fresh[2..]);
    scalars.extend(random_scalars(rng, fresh.len() - 2));
    let n = scalars.len();
    scalars[n - 1] = Scalar::ZERO;
    scalars[n - 2] = Scalar::ONE;
    scalars[n - 3] = -Scalar::ONE;
    bases.push(-fresh[5]);
    scalars.push(Scalar::random(&mut *rng));
    for _ in 0..3 {
        bases.push(G::Affine::identity());
        scalars.push(Scalar::random(&mut *rng));
    }
    (bases, scalars)
}

#[test]
fn edge_cases_match_msm_g1_and_msm_g2() {
    let mut rng = fresh_rng("edge_cases_match_msm_g1_and_msm_g2");
    for c in [1, 4, 7] {
        let (bases, scalars) = edge_inputs::<G1Projective>(&mut rng);
        for (stats, accumulation) in check_g1(&bases, &scalars, c, "edges").iter().zip(ACCUMULATIONS) {
            // The inputs did reach the special cases, in every accumulator.
            assert!(stats.doublings > 0 && stats.cancellations > 0, "c {c}, {accumulation:?}: {stats:?}");
        }
        let (bases, scalars) = edge_inputs::<G2Projective>(&mut rng);
        check_g2(&bases, &scalars, c, "edges");
    }
    // Scalars 0 and 1 alone; zero scalars give the identity.
    let bases = points::<G1Projective>(&mut rng, 20);
    let bits: Vec<Scalar> = (0..20).map(|i| if i % 3 == 0 { Scalar::ONE } else { Scalar::ZERO }).collect();
    check_g1(&bases, &bits, 5, "bits");
    let zeros = vec![Scalar::ZERO; 20];
    check_g1(&bases, &zeros, 5, "zeros");
    assert!(bool::from(msm(&bases, &zeros, 5, Accumulation::BatchAffine { batch: 8 }).result.is_identity()));
    // Identity bases only.
    let identities = vec![G1Affine::identity(); 10];
    check_g1(&identities, &random_scalars(&mut rng, 10), 3, "identities");
}

/// Negative twin: a base whose sign flips on its way into the buckets (the mistake a wrong
/// digit sign would make) gives another result, for both accumulators; so the comparisons
/// above can fail.
#[test]
fn a_flipped_sign_is_detected() {
    let mut rng = fresh_rng("a_flipped_sign_is_detected");
    let bases = points::<G1Projective>(&mut rng, 100);
    let scalars = random_scalars(&mut rng, 100);
    let expected = msm_g1(&bases, &scalars).to_affine().to_compressed();
    let mut corrupted = bases.clone();
    corrupted[57] = -corrupted[57];
    for accumulation in ACCUMULATIONS {
        let good = msm(&bases, &scalars, 6, accumulation).result.to_compressed();
        let bad = msm(&corrupted, &scalars, 6, accumulation).result.to_compressed();
        assert_eq!(good, expected, "{accumulation:?}");
        assert_ne!(bad, expected, "{accumulation:?}");
    }
}

/// What each accumulator performs per bucket addition (a point into a nonempty bucket), over
/// a whole MSM of 2^14 random points in 8-bit windows (32 windows of 128 buckets). Random
/// points meet no doubling or cancellation, so the counts are exact:
/// - XYZZ: every addition is one madd-2008-s, 8M + 2S ([`G1_MADD`]), and nothing else;
/// - batch-affine: per addition 2M + 1S (slope times inverse, λ², λ(x1 − x3)) and the trick's
///   3M; per batch one inversion and 3M fewer (a batch of k divisions takes 3(k − 1)M):
///   `muls = 5·additions − 3·batches`, `sqrs = additions`, `invs = batches`.
///
/// A batch here holds at most one addition per bucket, so it is at most 128 full; the mean is
/// lower in each window's tail, when only the fullest buckets still have points.
#[test]
fn operations_per_bucket_addition() {
    let mut rng = fresh_rng("operations_per_bucket_addition");
    let costs = AccumulationCosts::default();
    let n = 1 << 14;
    let bases = points::<G1Projective>(&mut rng, n);
    let scalars = random_scalars(&mut rng, n);
    let expected = msm_g1(&bases, &scalars).to_affine().to_compressed();
    let c = 8;

    let xyzz = msm(&bases, &scalars, c, Accumulation::Xyzz);
    assert_eq!(xyzz.result.to_compressed(), expected);
    let x = xyzz.accumulation;
    assert_eq!((x.doublings, x.cancellations), (0, 0));
    assert_eq!(x.ops.muls, x.additions * G1_MADD.muls as u64);
    assert_eq!(x.ops.sqrs, x.additions * G1_MADD.sqrs as u64);
    assert_eq!(x.ops.invs, 0);
    assert_eq!(x.per_addition(&costs), 10.0);

    for batch in [256, 1024] {
        let run = msm(&bases, &scalars, c, Accumulation::BatchAffine { batch });
        assert_eq!(run.result.to_compressed(), expected);
        let b = run.accumulation;
        assert_eq!((b.doublings, b.cancellations), (0, 0));
        // The same points went in: as many additions as XYZZ's, and as many placements.
        assert_eq!((b.additions, b.placements), (x.additions, x.placements));
        assert_eq!(b.ops.muls, 5 * b.additions - 3 * b.rounds);
        assert_eq!(b.ops.sqrs, b.additions);
        assert_eq!(b.ops.invs, b.rounds);
        let without_inversions = (b.ops.muls + b.ops.sqrs) as f64 / b.additions as f64;
        let inversions = b.ops.invs as f64 / b.additions as f64;
        let total = b.per_addition(&costs);
        let estimate =
            addition_estimates::<G1Affine>(n, 1 << (c - 1), &AccumulationCosts { max_batch: batch, ..costs });
        println!(
            "G1 n 2^14 c {c}: xyzz {:.3} M/add ({} additions); batch-affine batch {batch}: {:.4} M+S/add, \
             {:.5} inversions/add (mean batch {:.1}, {} batches, {} deferrals), {:.3} M/add at inversion = {} M; \
             model {:.3} (fill {:.1})",
            x.per_addition(&costs),
            x.additions,
            without_inversions,
            inversions,
            b.mean_batch(),
            b.rounds,
            b.deferrals,
            total,
            costs.inversion,
            estimate.batch_affine,
            estimate.fill,
        );
        // 5M + 1S an addition, less 3M a batch of at least 64: within [6 − 3/64, 6].
        assert!((6.0 - 3.0 / 64.0..=6.0).contains(&without_inversions), "{without_inversions}");
        assert!(b.mean_batch() >= 64.0, "{b:?}");
        // So with an inversion at 100 multiplications: at most 6 + 100/64 ≈ 7.6, well below 10.
        assert!(total > 6.0 && total <= 6.0 + costs.inversion / 64.0, "{total}");
        // The model's estimate is within a tenth of what was counted.
        assert!((estimate.batch_affine / total - 1.0).abs() < 0.1, "model {estimate:?}, counted {total}");
    }

    // One full window where batches can reach their cap: 2^14 points into 2048 buckets (a
    // 12-bit window), batches of 256. Eight points a bucket leave a short tail, so batches are
    // nearly full and the inversion costs well under one multiplication an addition.
    let window: Vec<(usize, Point<Fp>)> = bases
        .iter()
        .map(|p| (rng.gen_range(0..2048), p.coordinates().expect("random points are not the identity")))
        .collect();
    let mut x = AccumulationStats::default();
    let by_xyzz = accumulate_window(&window, 2048, Accumulation::Xyzz, &mut x);
    let mut b = AccumulationStats::default();
    let by_batches = accumulate_window(&window, 2048, Accumulation::BatchAffine { batch: 256 }, &mut b);
    assert_eq!(by_batches, by_xyzz);
    assert_eq!((b.doublings, b.cancellations, x.doublings, x.cancellations), (0, 0, 0, 0));
    assert_eq!((b.ops.muls, b.ops.sqrs, b.ops.invs), (5 * b.additions - 3 * b.rounds, b.additions, b.rounds));
    assert_eq!(x.per_addition(&costs), 10.0);
    let total = b.per_addition(&costs);
    let estimate = addition_estimates::<G1Affine>(n, 2048, &costs);
    println!(
        "G1 one window, 2^14 points, 2048 buckets, batch 256: {:.4} M+S/add, mean batch {:.1} ({} batches), \
         {:.3} M/add at inversion = {} M; model {:.3} (fill {:.1})",
        (b.ops.muls + b.ops.sqrs) as f64 / b.additions as f64,
        b.mean_batch(),
        b.rounds,
        total,
        costs.inversion,
        estimate.batch_affine,
        estimate.fill,
    );
    // Batches of at least 200: within [6, 6 + 100/200].
    assert!(b.mean_batch() >= 200.0, "{b:?}");
    assert!(total > 6.0 && total <= 6.0 + costs.inversion / 200.0, "{total}");

    // G2, smaller: XYZZ is 28 Fp multiplications an addition ([`G2_MADD`]); batch-affine
    // 2·3 + 2 + 3·3 = 17 an addition, less 9 a batch, plus the Fp2 inversion's 2M + 2S and
    // one Fp inversion a batch.
    let n2 = 1 << 10;
    let bases = points::<G2Projective>(&mut rng, n2);
    let scalars = random_scalars(&mut rng, n2);
    let x = msm(&bases, &scalars, 5, Accumulation::Xyzz).accumulation;
    assert_eq!((x.ops.muls, x.ops.sqrs), (x.additions * G2_MADD.muls as u64, 0));
    let b = msm(&bases, &scalars, 5, Accumulation::BatchAffine { batch: 256 }).accumulation;
    assert_eq!(b.ops.muls, 17 * b.additions - 9 * b.rounds + 2 * b.rounds);
    assert_eq!((b.ops.sqrs, b.ops.invs), (2 * b.rounds, b.rounds));
    println!(
        "G2 n 2^10 c 5: xyzz {:.3} M/add; batch-affine {:.3} M/add (mean batch {:.1})",
        x.per_addition(&costs),
        b.per_addition(&costs),
        b.mean_batch()
    );
}

/// The cost model picks XYZZ for a tiny MSM and batch-affine for a long one, and in both the
/// pick is the accumulator whose counted operations per addition are fewer.
#[test]
fn the_cost_model_picks_what_the_counts_find_cheaper() {
    let mut rng = fresh_rng("the_cost_model_picks_what_the_counts_find_cheaper");
    let costs = AccumulationCosts::default();
    for (n, c, expected) in [(12, 4, Accumulation::Xyzz), (1 << 13, 8, Accumulation::BatchAffine { batch: 128 })] {
        let buckets = 1 << (c - 1);
        let chosen = choose_accumulation::<G1Affine>(n, buckets, &costs);
        assert_eq!(chosen, expected, "n {n}, c {c}");
        let bases = points::<G1Projective>(&mut rng, n);
        let scalars = random_scalars(&mut rng, n);
        let xyzz = msm(&bases, &scalars, c, Accumulation::Xyzz).accumulation.per_addition(&costs);
        let batch = costs.max_batch.min(buckets);
        let affine = msm(&bases, &scalars, c, Accumulation::BatchAffine { batch }).accumulation.per_addition(&costs);
        let estimates = addition_estimates::<G1Affine>(n, buckets, &costs);
        println!("n {n} c {c}: counted xyzz {xyzz:.3} batch-affine {affine:.3}; model {estimates:?}");
        assert_eq!(chosen == Accumulation::Xyzz, xyzz <= affine, "n {n}, c {c}");
    }
    // G2's inversion is dearer but so is its XYZZ addition: the same split.
    assert_eq!(choose_accumulation::<G2Affine>(12, 8, &costs), Accumulation::Xyzz);
    assert_eq!(choose_accumulation::<G2Affine>(1 << 13, 128, &costs), Accumulation::BatchAffine { batch: 128 });
}

/// The choice per window: with 12-bit windows the top one holds the scalars' last 3 bits, so
/// its points crowd into 8 buckets and batches there hold at most 8 additions; the cost model
/// keeps XYZZ for it and batch-affine (capped at 256) for the others, and that mix counts
/// fewer operations per addition than either accumulator throughout.
#[test]
fn the_cost_model_keeps_xyzz_for_a_crowded_top_window() {
    let mut rng = fresh_rng("the_cost_model_keeps_xyzz_for_a_crowded_top_window");
    let costs = AccumulationCosts::default();
    let (n, c) = (1 << 13, 12);
    let bases = points::<G1Projective>(&mut rng, n);
    let scalars = random_scalars(&mut rng, n);
    let expected = msm_g1(&bases, &scalars).to_affine().to_compressed();
    let run = msm_chosen(&bases, &scalars, c, &costs);
    assert_eq!(run.result.to_compressed(), expected);
    let (top, rest) = run.chosen.split_last().unwrap();
    assert_eq!(*top, Accumulation::Xyzz);
    assert!(rest.iter().all(|&a| a == Accumulation::BatchAffine { batch: 256 }), "{:?}", run.chosen);
    let mixed = run.accumulation.per_addition(&costs);
    let xyzz = msm(&bases, &scalars, c, Accumulation::Xyzz).accumulation.per_addition(&costs);
    let affine = msm(&bases, &scalars, c, Accumulation::BatchAffine { batch: 256 }).accumulation.per_addition(&costs);
    println!("n 2^13 c 12: counted xyzz {xyzz:.3}, batch-affine {affine:.3}, chosen per window {mixed:.3} M/add");
    assert!(mixed < affine && mixed < xyzz, "{mixed} {affine} {xyzz}");
}
