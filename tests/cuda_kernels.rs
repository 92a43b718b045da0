//! The CUDA kernels against the CPU reference (blstrs and snarkpipe::math), on fresh random
//! inputs every run. Without a GPU every test prints why it skipped and passes.
//! One test drives all the checks in sequence so that the device-memory leak check at its end
//! sees no other test's buffers.

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve, Group};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use snarkpipe::backend::cuda::{BucketMethod, GpuContext, GpuStream, MsmOptions, ScatterKind};

mod common;
use snarkpipe::circuit::{Density, PackedDensity};
use snarkpipe::math::{domain::Domain, ntt, quotient};

fn rng() -> ChaCha8Rng {
    let seed = rand::random::<u64>();
    println!("seed {seed}");
    ChaCha8Rng::seed_from_u64(seed)
}

fn random_scalars(n: usize, rng: &mut ChaCha8Rng) -> Vec<Scalar> {
    (0..n).map(|_| Scalar::random(&mut *rng)).collect()
}

/// n distinct random points, cheaply: runs of P, P+Q, P+2Q, ... from random P and Q per chunk.
fn random_points<G: Group + Curve + Send + Sync>(n: usize, rng: &mut ChaCha8Rng) -> Vec<G::AffineRepr>
where
    G::AffineRepr: Send + Default + Copy,
{
    let seeds: Vec<u64> = (0..n.div_ceil(4096)).map(|_| rng.next_u64()).collect();
    let mut proj = vec![G::identity(); n];
    proj.par_chunks_mut(4096).zip(seeds).for_each(|(chunk, seed)| {
        let mut r = ChaCha8Rng::seed_from_u64(seed);
        let (mut p, q) = (G::random(&mut r), G::random(&mut r));
        for x in chunk.iter_mut() {
            *x = p;
            p += q;
        }
    });
    let mut out = vec![G::AffineRepr::default(); n];
    G::batch_normalize(&proj, &mut out);
    out
}

fn gpu() -> Option<(Arc<GpuContext>, GpuStream)> {
    if !common::have_gpu() {
        return None;
    }
    let ctx = GpuContext::open(0).expect("open GPU 0");
    println!("GPU 0: {} (kernels from {:?})", ctx.name(), ctx.kernel_source());
    let stream = ctx.new_stream().expect("stream");
    Some((ctx, stream))
}

#[test]
fn gpu_kernels_match_cpu_and_leak_nothing() {
    let Some((ctx, s)) = gpu() else { return };
    let mut rng = rng();
    // Warm-up: the first launches of the curve kernels make the driver reserve local memory
    // for their stack frames, which the context keeps; the baseline is taken after it.
    let pts = random_points::<G1Projective>(64, &mut rng);
    let pts2 = random_points::<G2Projective>(64, &mut rng);
    let sc = random_scalars(64, &mut rng);
    for fast in [false, true] {
        let opts = MsmOptions { ones_fast_path: fast, ..Default::default() };
        s.msm_g1(&s.upload(&pts).unwrap(), &s.upload(&sc).unwrap(), 64, opts).unwrap();
        s.msm_g2(&s.upload(&pts2).unwrap(), &s.upload(&sc).unwrap(), 64, opts).unwrap();
    }
    ctx.synchronize().unwrap();
    let (free_before, _) = ctx.memory_info().unwrap();
    check_ntt(&s, &mut rng);
    check_quotient(&s, &mut rng);
    check_msm_g1(&s, &mut rng);
    check_msm_g1_edges(&s, &mut rng);
    check_msm_g2(&s, &mut rng);
    check_bucket_edges(&s, &mut rng);
    check_msm_passes(&s, &mut rng);
    check_msm_scatters(&s, &mut rng);
    check_bucket_methods(&s, &mut rng);
    check_select(&s, &mut rng);
    check_first_unsatisfied(&s, &mut rng);
    check_errors(&s);
    ctx.clear_caches();
    ctx.synchronize().unwrap();
    let (free_after, _) = ctx.memory_info().unwrap();
    println!("device free memory before {free_before}, after {free_after}");
    assert_eq!(free_before, free_after, "device memory leaked");
}

fn check_ntt(s: &GpuStream, rng: &mut ChaCha8Rng) {
    for log_n in 1..=22u32 {
        let n = 1usize << log_n;
        let domain = Domain::from_log_n(log_n).unwrap();
        let v = random_scalars(n, rng);
        let mut buf = s.upload(&v).unwrap();
        type Op = (
            &'static str,
            fn(&GpuStream, &mut snarkpipe::backend::cuda::GpuBuffer<Scalar>, u32) -> snarkpipe::Result<()>,
            fn(&mut [Scalar], Domain),
        );
        let ops: [Op; 4] = [
            ("forward", |s, b, l| s.ntt_forward(b, l), ntt::ntt),
            ("inverse", |s, b, l| s.ntt_inverse(b, l), ntt::intt),
            ("coset forward", |s, b, l| s.ntt_coset_forward(b, l), ntt::coset_ntt),
            ("coset inverse", |s, b, l| s.ntt_coset_inverse(b, l), ntt::icoset_ntt),
        ];
        let mut want = v.clone();
        for (name, gpu_op, cpu_op) in ops {
            gpu_op(s, &mut buf, log_n).unwrap();
            cpu_op(&mut want, domain);
            let got = s.download(&buf).unwrap();
            assert!(got == want, "NTT {name} differs at 2^{log_n}");
            // negative twin: a changed input must change the output
            if log_n == 4 && name == "forward" {
                let mut w2 = v.clone();
                w2[3] += Scalar::ONE;
                cpu_op(&mut w2, domain);
                assert!(w2 != got);
            }
        }
        // back where we started: inverse ∘ forward and icoset ∘ coset are identities
        assert!(want.len() == n);
    }
    println!("NTT forward/inverse/coset 2^1..2^22: equal to the CPU");
}

fn check_quotient(s: &GpuStream, rng: &mut ChaCha8Rng) {
    // every pass plan shape: one launch of the radix-2 kernel (2^1, 2^2), one pass (up to 2^10),
    // two (2^13, 2^16, 2^20), three (2^21, 2^22)
    for log_n in [1u32, 2, 3, 4, 5, 10, 13, 16, 20, 21, 22] {
        let n = 1usize << log_n;
        let (a, b) = (random_scalars(n, rng), random_scalars(n, rng));
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
        let want = quotient::quotient_h(a.clone(), b.clone(), c.clone()).unwrap();
        let (mut da, mut db, mut dc) = (s.upload(&a).unwrap(), s.upload(&b).unwrap(), s.upload(&c).unwrap());
        s.quotient_h(&mut da, &mut db, &mut dc, log_n).unwrap();
        let got = s.download(&da).unwrap();
        assert!(got[..n - 1] == want[..], "quotient differs at 2^{log_n}");
        assert!(got[n - 1].is_zero_vartime(), "h's top coefficient is not zero at 2^{log_n}");
    }
    println!("quotient h 2^1..2^22: equal to the CPU");
}

fn msm_g1_both(
    s: &GpuStream,
    bases: &[G1Affine],
    scalars: &[Scalar],
    opts: MsmOptions,
) -> (G1Projective, G1Projective) {
    let (db, ds) = (s.upload(bases).unwrap(), s.upload(scalars).unwrap());
    let got = s.msm_g1(&db, &ds, scalars.len(), opts).unwrap();
    (got, snarkpipe::math::msm::msm_g1(bases, scalars))
}

/// Both ways of sorting the entries into buckets (MsmOptions::scatter); the default is the
/// direct one (`scatter_kind_for`), the binned one is kept correct for the bench's comparison.
const SCATTERS: [ScatterKind; 2] = [ScatterKind::Direct, ScatterKind::Binned];

fn check_msm_g1(s: &GpuStream, rng: &mut ChaCha8Rng) {
    let max = 1 << 22;
    let bases = random_points::<G1Projective>(max, rng);
    let scalars = random_scalars(max, rng);
    for n in [1usize, 2, 3, 7, 100, 1000, (1 << 12) + 3, 1 << 16, (1 << 18) - 1, 1 << 20, 1 << 22] {
        let (db, ds) = (s.upload(&bases[..n]).unwrap(), s.upload(&scalars[..n]).unwrap());
        let want = snarkpipe::math::msm::msm_g1(&bases[..n], &scalars[..n]);
        // the default scatter with and without the fast path, then each scatter forced
        let forced = SCATTERS.map(|kind| (false, Some(kind)));
        for (fast, scatter) in [(false, None), (true, None)].into_iter().chain(forced) {
            let opts = MsmOptions { ones_fast_path: fast, scatter, ..Default::default() };
            let got = s.msm_g1(&db, &ds, n, opts).unwrap();
            assert_eq!(got, want, "G1 MSM of {n} random terms (fast path {fast}, scatter {scatter:?})");
        }
    }
    // every window size on one input, with each scatter
    let n = 3000;
    let want = snarkpipe::math::msm::msm_g1(&bases[..n], &scalars[..n]);
    for c in 2..=20 {
        for scatter in SCATTERS {
            // every window size, and direct scatter launches of 1 to 7 windows
            let opts = MsmOptions {
                window_bits: Some(c),
                scatter_windows: Some(1 + c as usize % 7),
                scatter: Some(scatter),
                ..Default::default()
            };
            let (got, _) = msm_g1_both(s, &bases[..n], &scalars[..n], opts);
            assert_eq!(got, want, "G1 MSM with {c}-bit windows, {scatter:?} scatter");
        }
    }
    // negative twin
    let mut wrong = scalars[..1000].to_vec();
    wrong[17] += Scalar::ONE;
    let (got, _) = msm_g1_both(s, &bases[..1000], &wrong, MsmOptions::default());
    assert_ne!(got, snarkpipe::math::msm::msm_g1(&bases[..1000], &scalars[..1000]));
    println!("G1 MSM random 1..2^22, windows 2..20: equal to blstrs");
}

fn check_msm_g1_edges(s: &GpuStream, rng: &mut ChaCha8Rng) {
    let n = 5000;
    let mut bases = random_points::<G1Projective>(n, rng);
    let mut scalars = random_scalars(n, rng);
    let minus_one = -Scalar::ONE;
    for i in 0..n {
        match i % 10 {
            0 => scalars[i] = Scalar::ZERO,
            1 => scalars[i] = Scalar::ONE,
            2 => scalars[i] = minus_one,
            3 => bases[i] = G1Affine::identity(),
            4 => bases[i] = -bases[i - 1], // P and −P, same scalar below: one bucket
            5 => bases[i] = bases[i - 1],  // repeated points
            _ => {}
        }
        if i % 10 == 4 || i % 10 == 5 {
            scalars[i] = scalars[i - 1];
        }
    }
    for fast in [false, true] {
        let (got, want) = msm_g1_both(s, &bases, &scalars, MsmOptions { ones_fast_path: fast, ..Default::default() });
        assert_eq!(got, want, "G1 MSM edge cases (fast path {fast})");
    }
    // all-equal scalars put every point in the same buckets
    let same = vec![scalars[7]; 777];
    let (got, want) = msm_g1_both(s, &bases[..777], &same, MsmOptions::default());
    assert_eq!(got, want, "G1 MSM with equal scalars");
    // bit-heavy profiles: 90% zeros and ones, the rest random
    // (2^21 + 5: about 2^20 ones, so the batch sum runs 2^17 threads, some of them past the list's end)
    for n in [10usize, 1000, 1 << 16, 1 << 20, (1 << 21) + 5] {
        let bases = random_points::<G1Projective>(n, rng);
        let scalars: Vec<Scalar> = (0..n)
            .map(|_| match rng.next_u32() % 10 {
                0..=3 => Scalar::ZERO,
                4..=8 => Scalar::ONE,
                _ => Scalar::random(&mut *rng),
            })
            .collect();
        for fast in [true, false] {
            if !fast && n > 1 << 16 {
                continue; // without the fast path the "1" bucket is one long serial sum
            }
            let (got, want) =
                msm_g1_both(s, &bases, &scalars, MsmOptions { ones_fast_path: fast, ..Default::default() });
            assert_eq!(got, want, "G1 MSM bits profile n={n} fast={fast}");
        }
    }
    // only zeros, only ones
    let zeros = vec![Scalar::ZERO; 100];
    assert_eq!(msm_g1_both(s, &bases[..100], &zeros, MsmOptions::default()).0, G1Projective::identity());
    let ones = vec![Scalar::ONE; 100];
    let (got, want) = msm_g1_both(s, &bases[..100], &ones, MsmOptions { ones_fast_path: true, ..Default::default() });
    assert_eq!(got, want, "G1 MSM all ones");
    println!("G1 MSM edge cases (0, 1, r−1, identity, P/−P, repeats, bits): equal to blstrs");
}

fn check_msm_g2(s: &GpuStream, rng: &mut ChaCha8Rng) {
    let max = 1 << 18;
    let mut bases = random_points::<G2Projective>(max, rng);
    let mut scalars = random_scalars(max, rng);
    for n in [1usize, 2, 5, 300, (1 << 12) + 1, 1 << 16, 1 << 18] {
        let (db, ds) = (s.upload(&bases[..n]).unwrap(), s.upload(&scalars[..n]).unwrap());
        let got = s.msm_g2(&db, &ds, n, MsmOptions::default()).unwrap();
        assert_eq!(got, snarkpipe::math::msm::msm_g2(&bases[..n], &scalars[..n]), "G2 MSM of {n} terms");
    }
    for i in 0..1000 {
        match i % 6 {
            0 => scalars[i] = Scalar::ZERO,
            1 => scalars[i] = Scalar::ONE,
            2 => scalars[i] = -Scalar::ONE,
            3 => bases[i] = G2Affine::identity(),
            4 => {
                bases[i] = -bases[i - 1];
                scalars[i] = scalars[i - 1];
            }
            _ => {}
        }
    }
    for fast in [false, true] {
        let (db, ds) = (s.upload(&bases[..1000]).unwrap(), s.upload(&scalars[..1000]).unwrap());
        let got = s.msm_g2(&db, &ds, 1000, MsmOptions { ones_fast_path: fast, ..Default::default() }).unwrap();
        assert_eq!(got, snarkpipe::math::msm::msm_g2(&bases[..1000], &scalars[..1000]), "G2 MSM edges fast={fast}");
    }
    println!("G2 MSM 1..2^18 and edge cases: equal to blstrs");
}

/// The bucket phase against blstrs: G1 and G2, random sizes, forced windows, and the edge cases
/// that reach the special branches of the additions (identities, P and −P in one bucket,
/// repeated points, scalars 0, 1, r−1); a twin with one changed scalar must differ.
fn check_bucket_edges(s: &GpuStream, rng: &mut ChaCha8Rng) {
    let n_max = 1 << 18;
    let mut g1 = random_points::<G1Projective>(n_max, rng);
    let mut g2 = random_points::<G2Projective>(1 << 14, rng);
    let mut scalars = random_scalars(n_max, rng);
    for i in 0..2000 {
        match i % 7 {
            0 => scalars[i] = Scalar::ZERO,
            1 => scalars[i] = Scalar::ONE,
            2 => scalars[i] = -Scalar::ONE,
            3 => {
                g1[i] = G1Affine::identity();
                g2[i] = G2Affine::identity();
            }
            4 => {
                g1[i] = -g1[i - 1];
                g2[i] = -g2[i - 1];
                scalars[i] = scalars[i - 1];
            }
            5 => {
                // the same point with the same scalar (1) as four entries back: P + P in a bucket
                g1[i] = g1[i - 4];
                g2[i] = g2[i - 4];
                scalars[i] = scalars[i - 4];
            }
            _ => {}
        }
    }
    for n in [1usize, 3, 100, 2000, (1 << 12) + 3, 1 << 16, 1 << 18] {
        let (got, want) = msm_g1_both(s, &g1[..n], &scalars[..n], MsmOptions::default());
        assert_eq!(got, want, "G1 MSM of {n} terms");
    }
    for c in [2u32, 7, 13, 16] {
        let opts = MsmOptions { window_bits: Some(c), ..Default::default() };
        let (got, want) = msm_g1_both(s, &g1[..3000], &scalars[..3000], opts);
        assert_eq!(got, want, "G1 MSM with {c}-bit windows");
    }
    for n in [5usize, 2000, 1 << 14] {
        let (db, ds) = (s.upload(&g2[..n]).unwrap(), s.upload(&scalars[..n]).unwrap());
        let got = s.msm_g2(&db, &ds, n, MsmOptions::default()).unwrap();
        let want = snarkpipe::math::msm::msm_g2(&g2[..n], &scalars[..n]);
        assert_eq!(got, want, "G2 MSM of {n} terms");
    }
    let mut twin = scalars[..2000].to_vec();
    twin[1234] += Scalar::ONE;
    let (got, _) = msm_g1_both(s, &g1[..2000], &twin, MsmOptions::default());
    assert_ne!(got, snarkpipe::math::msm::msm_g1(&g1[..2000], &scalars[..2000]), "a changed scalar must show");
    println!("G1 and G2 MSMs with the bucket phase's edge cases: equal to blstrs");
}

/// An MSM longer than a pass runs in passes into shared buckets (later passes add to what is
/// there): many passes over few points, on G1 and G2, random, bits and edge-case scalars,
/// passes that end inside a bucket's run, a first pass with nothing but zeros (so the buckets
/// start at a later pass), against blstrs; and a twin whose last pass differs must differ.
fn check_msm_passes(s: &GpuStream, rng: &mut ChaCha8Rng) {
    let n = 100_003;
    let bases = random_points::<G1Projective>(n, rng);
    let bases2 = random_points::<G2Projective>(n, rng);
    let mut scalars: Vec<Scalar> = (0..n)
        .map(|i| match (i % 10, rng.next_u32() % 4) {
            (0, _) => Scalar::ZERO,
            (1, _) => Scalar::ONE,
            (2, _) => -Scalar::ONE,
            (_, 0) => Scalar::ONE,
            _ => Scalar::random(&mut *rng),
        })
        .collect();
    scalars[..20_000].iter_mut().for_each(|x| *x = Scalar::ZERO);
    let want = snarkpipe::math::msm::msm_g1(&bases, &scalars);
    let (db, ds) = (s.upload(&bases).unwrap(), s.upload(&scalars).unwrap());
    for (pass, window) in [(20_000, None), (7_919, None), (33_334, Some(11)), (1 << 16, None), (n - 1, Some(20))] {
        for fast in [false, true] {
            for scatter in SCATTERS {
                let opts = MsmOptions {
                    window_bits: window,
                    ones_fast_path: fast,
                    pass_points: Some(pass),
                    scatter_windows: Some(1 + pass % 5),
                    scatter: Some(scatter),
                    ..Default::default()
                };
                let got = s.msm_g1(&db, &ds, n, opts).unwrap();
                assert_eq!(
                    got, want,
                    "G1 MSM of {n} terms in passes of {pass} (window {window:?}, fast path {fast}, {scatter:?} scatter)"
                );
            }
        }
    }
    drop((db, ds));
    let mut twin = scalars.clone();
    twin[n - 2] += Scalar::ONE;
    let opts = MsmOptions { pass_points: Some(7_919), ..Default::default() };
    assert_ne!(msm_g1_both(s, &bases, &twin, opts).0, want, "a changed scalar in the last pass must show");

    let m = 30_011;
    let (db, ds) = (s.upload(&bases2[..m]).unwrap(), s.upload(&scalars[n - m..]).unwrap());
    let want2 = snarkpipe::math::msm::msm_g2(&bases2[..m], &scalars[n - m..]);
    for fast in [false, true] {
        let opts = MsmOptions { ones_fast_path: fast, pass_points: Some(4_099), ..Default::default() };
        assert_eq!(s.msm_g2(&db, &ds, m, opts).unwrap(), want2, "G2 MSM in passes of 4099 (fast path {fast})");
    }
    println!("MSM in passes (G1, G2; random, bits, edges, a first pass of zeros): equal to blstrs");
}

/// 2^k as a scalar.
fn two_to(k: u32) -> Scalar {
    Scalar::from(2u64).pow_vartime([k as u64])
}

/// `n` scalars whose signed `c`-bit digits reach the sort's edges, mixed with random ones:
/// 0 and 1, r − 1, 2^(c−1) (the largest digit: the last bucket of the last bin), 2^(c−1) + 1
/// and 2^c − 1 (negative digits with carries), 2^top − 1 (a carry through every window up to
/// the top one), values with only the top window nonzero (where that window can hold any),
/// and ±2^(c−1) moved to a random window.
fn digit_edge_scalars(c: u32, n: usize, rng: &mut ChaCha8Rng) -> Vec<Scalar> {
    let windows = 256u32.div_ceil(c);
    let top = c * (windows - 1);
    let half = two_to(c - 1);
    (0..n)
        .map(|i| match i % 12 {
            0 => Scalar::ZERO,
            1 => Scalar::ONE,
            2 => -Scalar::ONE,
            3 => half,
            4 => half + Scalar::ONE,
            5 => two_to(c) - Scalar::ONE,
            6 => two_to(top) - Scalar::ONE,
            // d·2^top < 2^254 < r
            7 if top < 254 => Scalar::from(1 + rng.next_u64() % ((1u64 << (254 - top)) - 1).max(1)) * two_to(top),
            8 => half * two_to(c * (rng.next_u32() % windows)),
            9 => -(half * two_to(c * (rng.next_u32() % windows))),
            _ => Scalar::random(&mut *rng),
        })
        .collect()
}

/// The two scatters (MsmOptions::scatter) against each other and blstrs, on G1 and G2: random
/// scalars at sizes of one and of many of the binned scatter's tiles (4096 scalars) and not a
/// multiple of one, wide windows (c = 20: 512 bins of 1024 buckets; 17, 16, 12) and narrow ones
/// whose bins hold a bucket or two (11, 5); digit edge cases (zeros, ones, r − 1,
/// the largest digit, negative digits and carries, only the top window nonzero); all scalars
/// equal (every entry of a window in one bucket, so one bin holds them all); windows with no
/// entries at all (only the top window nonzero, all ones); MSMs in several passes; and a
/// twin with one scalar changed, which must differ.
fn check_msm_scatters(s: &GpuStream, rng: &mut ChaCha8Rng) {
    let large = (1 << 18) + 77;
    let bases = random_points::<G1Projective>(large, rng);
    let db = s.upload(&bases).unwrap();
    let small = 3 * 4096 + 1234;
    // every scatter, at every window given, with the options given, equals blstrs
    let check = |what: &str, scalars: &[Scalar], windows: &[Option<u32>], extra: MsmOptions| {
        let want = snarkpipe::math::msm::msm_g1(&bases[..scalars.len()], scalars);
        let ds = s.upload(scalars).unwrap();
        for &window_bits in windows {
            for scatter in SCATTERS {
                let opts = MsmOptions { window_bits, scatter: Some(scatter), ..extra };
                let got = s.msm_g1(&db, &ds, scalars.len(), opts).unwrap();
                assert_eq!(got, want, "G1 MSM, {what}: {scatter:?} scatter, window {window_bits:?}, {extra:?}");
            }
        }
        want
    };
    let plain = MsmOptions::default();
    let random = random_scalars(large, rng);
    let windows = [Some(20), Some(17), Some(16), Some(12), Some(11), Some(5), None];
    let want = check("random", &random[..small], &windows, plain);
    check("random, 2^18 + 77", &random, &[None, Some(20), Some(17)], plain);
    for c in [20u32, 17, 16, 12, 7] {
        let edges = digit_edge_scalars(c, small, rng);
        for fast in [false, true] {
            check("digit edges", &edges, &[Some(c)], MsmOptions { ones_fast_path: fast, ..plain });
        }
        // several passes into the same buckets, a pass ending inside a tile
        let passes = MsmOptions { pass_points: Some(4099), ..plain };
        check("digit edges in passes of 4099", &edges, &[Some(c)], passes);
    }
    let equal = vec![random[5]; 20_000];
    check("all scalars equal", &equal, &[Some(20), Some(17), None], plain);
    for c in [20u32, 16] {
        let top = c * (256u32.div_ceil(c) - 1);
        let top_only: Vec<Scalar> =
            (0..small).map(|_| Scalar::from(1 + rng.next_u64() % ((1 << (254 - top)) - 1)) * two_to(top)).collect();
        check("only the top window nonzero", &top_only, &[Some(c)], plain);
    }
    let ones = vec![Scalar::ONE; small];
    check("all ones, no fast path", &ones, &[Some(20), Some(12)], plain);
    // the negative twin: one scalar changed must change the sum
    let mut twin = random[..small].to_vec();
    twin[small - 3] += Scalar::ONE;
    let dt = s.upload(&twin).unwrap();
    for scatter in SCATTERS {
        let opts = MsmOptions { window_bits: Some(20), scatter: Some(scatter), ..plain };
        assert_ne!(s.msm_g1(&db, &dt, small, opts).unwrap(), want, "{scatter:?} scatter: a changed scalar must show");
    }
    drop((db, dt));

    let n2 = 5003;
    let bases2 = random_points::<G2Projective>(n2, rng);
    let db2 = s.upload(&bases2).unwrap();
    let check_g2 = |what: &str, scalars: &[Scalar], windows: &[Option<u32>]| {
        let want = snarkpipe::math::msm::msm_g2(&bases2, scalars);
        let ds = s.upload(scalars).unwrap();
        for &window_bits in windows {
            for scatter in SCATTERS {
                let opts = MsmOptions { window_bits, scatter: Some(scatter), ..plain };
                let got = s.msm_g2(&db2, &ds, n2, opts).unwrap();
                assert_eq!(got, want, "G2 MSM, {what}: {scatter:?} scatter, window {window_bits:?}");
            }
        }
    };
    check_g2("random", &random[..n2], &[Some(20), Some(17), None]);
    check_g2("digit edges", &digit_edge_scalars(20, n2, rng), &[Some(20)]);
    check_g2("all equal", &vec![random[9]; n2], &[Some(20)]);
    println!("MSM scatters (direct, binned) on G1 and G2: random, digit edges, equal scalars, empty windows, passes: equal to blstrs");
}

/// The batch-affine bucket phase (MsmOptions::bucket_method) against blstrs and the XYZZ
/// one, on G1 and G2. Narrow windows over many scalars give buckets of hundreds of entries, so
/// the rounds run (it refuses to fall back: `affine_without_fallback`); slices of 7 to all
/// the entries cut buckets into many slices, whose spills the fix-up adds. Edge cases reach
/// every kind of pair: identities, P and −P with equal scalars (the identity in a round's
/// output), the same point with the same scalar (doublings), a run of equal scalars (one
/// bucket a window crossing slices); also passes into shared buckets, the fallback of a
/// slice too sparse for its buffers (an error when refused), and a twin with one scalar
/// changed, which must differ.
fn check_bucket_methods(s: &GpuStream, rng: &mut ChaCha8Rng) {
    let n = 20_011;
    let mut g1 = random_points::<G1Projective>(n, rng);
    let mut g2 = random_points::<G2Projective>(n, rng);
    let mut scalars = random_scalars(n, rng);
    for i in 0..6000 {
        match i % 8 {
            0 => {
                g1[i] = G1Affine::identity();
                g2[i] = G2Affine::identity();
            }
            1 => {
                g1[i] = -g1[i - 1];
                g2[i] = -g2[i - 1];
                scalars[i] = scalars[i - 1];
            }
            2 | 3 => {
                g1[i] = g1[i - 2];
                g2[i] = g2[i - 2];
                scalars[i] = scalars[i - 2];
            }
            _ => {}
        }
    }
    let run = scalars[7000];
    scalars[7000..9000].iter_mut().for_each(|x| *x = run);
    let (d1, d2, ds) = (s.upload(&g1).unwrap(), s.upload(&g2).unwrap(), s.upload(&scalars).unwrap());
    let want1 = snarkpipe::math::msm::msm_g1(&g1, &scalars);
    let want2 = snarkpipe::math::msm::msm_g2(&g2, &scalars);
    let strict = MsmOptions {
        bucket_method: Some(BucketMethod::BatchAffine),
        affine_without_fallback: true,
        ..Default::default()
    };
    for (c, slice) in [(8, None), (8, Some(1000)), (8, Some(7)), (6, Some(4099)), (10, Some(1 << 15)), (4, Some(333))] {
        for pass_points in [None, Some(6007)] {
            let opts = MsmOptions { window_bits: Some(c), affine_slice_entries: slice, pass_points, ..strict };
            let what = format!("{c}-bit windows, slices of {slice:?}, passes of {pass_points:?}");
            assert_eq!(s.msm_g1(&d1, &ds, n, opts).unwrap(), want1, "G1 batch-affine, {what}");
            assert_eq!(s.msm_g2(&d2, &ds, n, opts).unwrap(), want2, "G2 batch-affine, {what}");
        }
    }
    // the XYZZ phase on the same inputs
    let xyzz = MsmOptions { window_bits: Some(8), bucket_method: Some(BucketMethod::Xyzz), ..Default::default() };
    assert_eq!(s.msm_g2(&d2, &ds, n, xyzz).unwrap(), want2, "G2 XYZZ");
    // wide windows over few scalars: buckets of one or two entries, too sparse for the rounds'
    // buffers; the pass falls back to XYZZ, or fails when told not to
    let sparse = MsmOptions { window_bits: Some(20), ..strict };
    let err = s.msm_g2(&d2, &ds, n, sparse).expect_err("a slice too sparse for its buffers must be refused");
    assert!(err.to_string().contains("fell back"), "{err}");
    let fallback = MsmOptions { affine_without_fallback: false, ..sparse };
    assert_eq!(s.msm_g2(&d2, &ds, n, fallback).unwrap(), want2, "G2, batch-affine falling back to XYZZ");
    // the twin
    let mut twin = scalars.clone();
    twin[n - 5] += Scalar::ONE;
    let dt = s.upload(&twin).unwrap();
    let opts = MsmOptions { window_bits: Some(8), affine_slice_entries: Some(1000), ..strict };
    assert_ne!(s.msm_g2(&d2, &dt, n, opts).unwrap(), want2, "G2 batch-affine: a changed scalar must show");
    assert_ne!(s.msm_g1(&d1, &dt, n, opts).unwrap(), want1, "G1 batch-affine: a changed scalar must show");
    println!("batch-affine bucket phase on G1 and G2: slices, edge cases, passes, fallback: equal to blstrs");
}

/// The device's query selection against the host's, at fresh densities and sizes that are
/// not multiples of a word, written behind a prefix the selection must leave alone.
fn check_select(s: &GpuStream, rng: &mut ChaCha8Rng) {
    for (len, used_per_256) in [(1usize, 256u64), (31, 128), (33, 0), (1000, 77), (1 << 16, 250), ((1 << 20) + 7, 128)]
    {
        let values = random_scalars(len, rng);
        let bits: Vec<bool> = (0..len).map(|_| rng.next_u64() % 256 < used_per_256).collect();
        let density = Density::from_bits(bits);
        let packed = PackedDensity::pack(&density, len).unwrap();
        let prefix = [Scalar::from(7u64), Scalar::from(9u64)];
        let mut expected = prefix.to_vec();
        expected.extend(density.select(&values));

        let src = s.upload(&values).unwrap();
        let mut out = s.upload(&vec![Scalar::ZERO; expected.len().max(1)]).unwrap();
        s.upload_into(&prefix[..expected.len().min(2)], &mut out).unwrap();
        let mut scratch = s.alloc::<u32>(2 * packed.words().len()).unwrap();
        s.select_scalars(&src, &packed, &mut scratch, &mut out, 2).unwrap();
        let got = s.download(&out).unwrap();
        assert_eq!(&got[..expected.len()], &expected[..], "selection of {len} differs from the host's");
        // The negative twin: a density with one bit flipped selects something else.
        if len >= 33 {
            let mut flipped = density.bits().to_vec();
            flipped[len / 2] = !flipped[len / 2];
            let other = PackedDensity::pack(&Density::from_bits(flipped), len).unwrap();
            let mut out2 = s.upload(&vec![Scalar::ZERO; other.taken() + 2]).unwrap();
            s.select_scalars(&src, &other, &mut scratch, &mut out2, 2).unwrap();
            assert_ne!(s.download(&out2).unwrap()[2..], expected[2..], "a flipped bit selected the same");
        }
    }
    // Too little room is an error, not a write past the end.
    let packed = PackedDensity::pack(&Density::from_bits(vec![true; 64]), 64).unwrap();
    let src = s.upload(&[Scalar::ONE; 64]).unwrap();
    let mut small = s.alloc::<Scalar>(63).unwrap();
    let mut scratch = s.alloc::<u32>(4).unwrap();
    assert!(s.select_scalars(&src, &packed, &mut scratch, &mut small, 0).is_err());
}

/// Random satisfied evaluations (c = a·b), n of them, drawn in parallel (a chunk's seed from
/// `rng`), so that a real partition's 2^27 take seconds.
fn satisfied_evaluations(n: usize, rng: &mut ChaCha8Rng) -> [Vec<Scalar>; 3] {
    const CHUNK: usize = 1 << 14;
    let seeds: Vec<u64> = (0..n.div_ceil(CHUNK)).map(|_| rng.next_u64()).collect();
    let (mut a, mut b) = (vec![Scalar::ZERO; n], vec![Scalar::ZERO; n]);
    a.par_chunks_mut(CHUNK).zip(b.par_chunks_mut(CHUNK)).zip(seeds).for_each(|((a, b), seed)| {
        let mut r = ChaCha8Rng::seed_from_u64(seed);
        for (x, y) in a.iter_mut().zip(b) {
            (*x, *y) = (Scalar::random(&mut r), Scalar::random(&mut r));
        }
    });
    let c = a.par_iter().zip(&b).map(|(x, y)| x * y).collect();
    [a, b, c]
}

/// The witness check's kernel against the CPU model's reference (`first_unsatisfied`): none
/// changed, one value changed (anywhere, and at either end), two changed (the first is
/// named), across block boundaries; values past the length checked are not looked at, and a
/// length past a buffer is an error.
fn check_first_unsatisfied(s: &GpuStream, rng: &mut ChaCha8Rng) {
    use snarkpipe::backend::cpu::first_unsatisfied;
    for n in [1usize, 2, 255, 256, 257, 1000, 1 << 16, (1 << 20) + 3] {
        let satisfied = satisfied_evaluations(n, rng);
        let gpu = |v: &[Vec<Scalar>; 3], len: usize| {
            let [a, b, c] = [&v[0], &v[1], &v[2]].map(|x| s.upload(x).unwrap());
            s.first_unsatisfied(&a, &b, &c, len).unwrap()
        };
        assert_eq!(gpu(&satisfied, n), None, "{n} satisfied constraints: the kernel found one failing");
        let mut cases = vec![0, n - 1, rng.next_u64() as usize % n];
        cases.dedup();
        for j in cases {
            let mut changed = satisfied.clone();
            changed[rng.next_u64() as usize % 3][j] += Scalar::ONE;
            let want = first_unsatisfied(&changed[0], &changed[1], &changed[2]);
            assert_eq!(want, Some(j));
            assert_eq!(gpu(&changed, n), want, "{n} constraints, {j} changed");
            if j + 1 < n {
                // A second failure after the first, and one before it that the length leaves out.
                let later = j + 1 + rng.next_u64() as usize % (n - j - 1);
                changed[rng.next_u64() as usize % 3][later] += Scalar::ONE;
                assert_eq!(gpu(&changed, n), Some(j), "{n} constraints, {j} and {later} changed");
                assert_eq!(gpu(&changed, j), None, "only the first {j} of {n} are checked");
            }
        }
    }
    let short = s.upload(&[Scalar::ONE; 4]).unwrap();
    let long = s.upload(&[Scalar::ONE; 8]).unwrap();
    assert!(s.first_unsatisfied(&long, &long, &short, 5).is_err(), "a length past a buffer must fail");
    println!("witness check: the first unsatisfied constraint as the CPU model finds it");
}

/// The witness check's cost at the sizes of real partitions (2^LOG_NS, default 24 26 27 on a
/// GPU with room for three vectors of 2^27), beside the quotient it precedes: run by
/// scripts/gpu-witness-check.sh. Each size: satisfied evaluations, one warm-up, then the median
/// and range of ROUNDS (default 7) checks, each the whole call (fill, launch, read back).
#[test]
#[ignore = "a GPU measurement of minutes: scripts/gpu-witness-check.sh runs it"]
fn witness_check_cost() {
    let Some((_ctx, s)) = gpu() else { return };
    let mut rng = rng();
    let log_ns: Vec<u32> = std::env::var("LOG_NS")
        .unwrap_or_else(|_| "24 26 27".into())
        .split_whitespace()
        .map(|k| k.parse().expect("LOG_NS: powers of two, as exponents"))
        .collect();
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(7);
    for log_n in log_ns {
        let n = 1usize << log_n;
        let v = satisfied_evaluations(n, &mut rng);
        let [mut a, mut b, mut c] = [&v[0], &v[1], &v[2]].map(|x| s.upload(x).unwrap());
        drop(v);
        let median = |mut t: Vec<f64>| {
            t.sort_by(f64::total_cmp);
            (t[t.len() / 2], t[0], t[t.len() - 1])
        };
        assert_eq!(s.first_unsatisfied(&a, &b, &c, n).unwrap(), None);
        let mut check = Vec::new();
        for _ in 0..rounds {
            let started = std::time::Instant::now();
            assert_eq!(s.first_unsatisfied(&a, &b, &c, n).unwrap(), None);
            check.push(started.elapsed().as_secs_f64() * 1e3);
        }
        let (check_ms, lo, hi) = median(check);
        // The quotient overwrites a: once, for scale (its own figures are the NTT benches').
        s.synchronize().unwrap();
        let started = std::time::Instant::now();
        s.quotient_h(&mut a, &mut b, &mut c, log_n).unwrap();
        s.synchronize().unwrap();
        let quotient_ms = started.elapsed().as_secs_f64() * 1e3;
        let gbps = 3.0 * 32.0 * n as f64 / (check_ms * 1e-3) / 1e9;
        println!(
            "witness check 2^{log_n}: median {check_ms:.3} ms (min {lo:.3}, max {hi:.3}, {rounds} rounds, {gbps:.0} GB/s \
             read), {:.2} ns a constraint; the quotient after it {quotient_ms:.3} ms",
            check_ms * 1e6 / n as f64
        );
    }
}

fn check_errors(s: &GpuStream) {
    let buf = s.upload(&[Scalar::ONE; 4]).unwrap();
    let pts = s.upload(&[G1Affine::identity(); 2]).unwrap();
    assert!(s.msm_g1(&pts, &buf, 3, MsmOptions::default()).is_err(), "MSM longer than its bases must fail");
    let mut b2 = s.upload(&[Scalar::ONE; 4]).unwrap();
    assert!(s.ntt_forward(&mut b2, 3).is_err(), "NTT larger than its buffer must fail");
}

#[test]
fn the_cuda_probe_agrees_with_opening_a_gpu() {
    // Must hold on machines without a driver (CI) as well as with one: the probe never panics,
    // and a GPU it reports opens while one past the count does not.
    let n = snarkpipe::backend::cuda::device_count();
    assert!(n > 0 || !common::gpu_required(), "SNARKPIPE_REQUIRE_GPU=1 but the probe found no GPU");
    match n {
        0 => assert!(GpuContext::open(0).is_err(), "no GPU reported, yet GPU 0 opened"),
        _ => assert!(GpuContext::open(0).is_ok(), "{n} GPUs reported, yet GPU 0 did not open"),
    }
    assert!(GpuContext::open(n).is_err(), "GPU {n} opened past the {n} reported");
}
