//! GPU figures for the kernels, each against a floor measured in the same run. Peers are not
//! typed in here: sppark's kernels race these in one process in `peers/supraseal-c2`
//! (`snarkpipe-vs-supraseal --kernels`, docs/peers.md). Prints a markdown table (and writes it to $OUT/bench.md when OUT is
//! set). Without a GPU it says so and exits 0. Env: SNARKPIPE_BENCH_MAX_LOG (MSM cap, 24),
//! SNARKPIPE_BENCH_MIN_LOG (the smallest NTT and MSM, 20 and 16), SNARKPIPE_BENCH_PARTS (which of
//! `ntt`, `quotient`, `sparse`, `g1`, `g2` run, comma-separated; all by default; the floors
//! always run), SNARKPIPE_BENCH_SPARSE_MAX_LOG (the largest sparse evaluation, 24).
//! The last two narrow a run to the kernels a profiler should see.

use std::time::Instant;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use snarkpipe::backend::cuda::{
    cuda_available, scatter_kind_for, window_bits_for, BucketMethod, GpuContext, GpuStream, MsmOptions, ProbeField,
    ScatterKind,
};
use snarkpipe::bench::floor;
use snarkpipe::circuit::{witness_assignment, ConstraintMatrices};
use snarkpipe::plan::{scalar_bytes, MatricesLayout};
use snarkpipe::synthetic::{KeyKind, SyntheticSpec, WitnessProfile};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn scalars(n: usize, bits: bool) -> Vec<Scalar> {
    (0..n)
        .into_par_iter()
        .chunks(1 << 16)
        .flat_map_iter(|chunk| {
            let mut r = ChaCha8Rng::seed_from_u64(rand::random());
            chunk.into_iter().map(move |_| {
                if !bits {
                    return Scalar::random(&mut r);
                }
                match r.next_u32() % 100 {
                    0..=44 => Scalar::ZERO,
                    45..=94 => Scalar::ONE,
                    _ => Scalar::random(&mut r),
                }
            })
        })
        .collect()
}

/// 2^20 distinct random points, repeated to n (the timing does not depend on distinctness).
fn points<G: Group + Curve>(n: usize) -> Vec<G::AffineRepr>
where
    G::AffineRepr: Default + Copy + Send + Sync,
{
    let distinct = n.min(1 << 20);
    let mut proj = vec![G::identity(); distinct];
    proj.par_chunks_mut(4096).for_each(|chunk| {
        let mut r = ChaCha8Rng::seed_from_u64(rand::random());
        let (mut p, q) = (G::random(&mut r), G::random(&mut r));
        for x in chunk.iter_mut() {
            *x = p;
            p += q;
        }
    });
    let mut aff = vec![G::AffineRepr::default(); distinct];
    G::batch_normalize(&proj, &mut aff);
    (0..n).map(|i| aff[i % distinct]).collect()
}

fn time_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm-up
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

/// Times each variant of one MSM (median of 3 after a warm-up) and gives its label with its figure,
/// which says so when the variant's result differs from the default's, or what failed when it
/// did not run. (tests/cuda_kernels.rs checks the variants' options against blstrs at smaller
/// sizes.)
fn time_variants<T: PartialEq>(
    variants: Vec<(String, MsmOptions)>,
    default_result: &Option<T>,
    mut run: impl FnMut(MsmOptions) -> Result<T, String>,
) -> Vec<(String, String)> {
    variants
        .into_iter()
        .map(|(what, variant)| {
            if let Err(e) = run(variant) {
                return (what, format!("not run: {e}"));
            }
            let mut result = None;
            let ms = time_ms(3, || result = run(variant).ok());
            let same = result == *default_result;
            (what, format!("{ms:.1} ms{}", if same { "" } else { " MISMATCH: differs from the default's result" }))
        })
        .collect()
}

/// The same MSM with each bucket method forced (MsmOptions::bucket_method), so that one run
/// times batch-affine against XYZZ on both curves; batch-affine without its fallback, so that a
/// figure is never XYZZ's under the other's name. For large random MSMs also with 16-bit
/// windows, where G2's buckets are fewer and larger.
fn bucket_method_variants(bits: bool, n: usize, opts: MsmOptions) -> Vec<(String, MsmOptions)> {
    let affine = MsmOptions { bucket_method: Some(BucketMethod::BatchAffine), affine_without_fallback: true, ..opts };
    let xyzz = MsmOptions { bucket_method: Some(BucketMethod::Xyzz), ..opts };
    let mut variants = vec![("batch-affine buckets".to_string(), affine), ("XYZZ buckets".to_string(), xyzz)];
    if !bits && n >= 1 << 22 {
        for (label, method) in [("batch-affine", affine), ("XYZZ", xyzz)] {
            variants.push((format!("{label} buckets, 16-bit windows"), MsmOptions { window_bits: Some(16), ..method }));
        }
    }
    variants
}

/// For a bits-profile MSM in passes, the same MSM with 20-bit windows: what the 2^27 partition's
/// bits MSMs (10% random scalars) took before the window model counted what recurs every pass.
fn wide_window_variant(bits: bool, n: usize, opts: MsmOptions) -> Vec<(String, MsmOptions)> {
    if !bits || n <= snarkpipe::backend::cuda::MSM_PASS_POINTS {
        return Vec::new();
    }
    let label = "20-bit windows forced (as the 2^27 partition's bits MSMs took before)";
    vec![(label.to_string(), MsmOptions { window_bits: Some(20), ..opts })]
}

/// The same MSM with the scatter its default did not take (MsmOptions::scatter), so that one
/// run times the direct scatter against the binned one in one process. A random MSM's window
/// is the single-pass one (`window_bits_for`); a bits-profile MSM picks its window from the
/// scalars it finds, so it gets both kinds forced, one of them the default's.
fn scatter_variants(bits: bool, n: usize, opts: MsmOptions) -> Vec<(String, MsmOptions)> {
    let kinds = if bits {
        vec![ScatterKind::Direct, ScatterKind::Binned]
    } else {
        match scatter_kind_for(window_bits_for(n)) {
            ScatterKind::Binned => vec![ScatterKind::Direct],
            ScatterKind::Direct => vec![ScatterKind::Binned],
        }
    };
    let label = |kind| match kind {
        ScatterKind::Direct => "direct scatter",
        ScatterKind::Binned => "binned scatter",
    };
    kinds.into_iter().map(|kind| (label(kind).to_string(), MsmOptions { scatter: Some(kind), ..opts })).collect()
}

fn ntt_ms(s: &GpuStream, log_n: u32) -> f64 {
    let base = scalars(1 << 20, false);
    let v: Vec<Scalar> = (0..1usize << log_n).map(|i| base[i % base.len()]).collect();
    let mut buf = s.upload(&v).unwrap();
    drop(v);
    s.ntt_forward(&mut buf, log_n).unwrap();
    s.synchronize().unwrap();
    median(
        (0..5)
            .map(|_| {
                let a = s.record().unwrap();
                s.ntt_forward(&mut buf, log_n).unwrap();
                let b = s.record().unwrap();
                s.elapsed_ms(&a, &b).unwrap() as f64
            })
            .collect(),
    )
}

/// The quotient h = (a·b − c)/Z from evaluations: three interpolations, three coset
/// evaluations, the pointwise step and the last interpolation (median of 3).
fn quotient_ms(s: &GpuStream, log_n: u32) -> f64 {
    let base = scalars(1 << 20, false);
    let v: Vec<Scalar> = (0..1usize << log_n).map(|i| base[i % base.len()]).collect();
    let mut bufs = [s.upload(&v).unwrap(), s.upload(&v).unwrap(), s.upload(&v).unwrap()];
    drop(v);
    let [a, b, c] = &mut bufs;
    s.quotient_h(a, b, c, log_n).unwrap();
    s.synchronize().unwrap();
    median(
        (0..3)
            .map(|_| {
                let start = s.record().unwrap();
                s.quotient_h(a, b, c, log_n).unwrap();
                let end = s.record().unwrap();
                s.elapsed_ms(&start, &end).unwrap() as f64
            })
            .collect(),
    )
}

/// a, b and c of a synthetic circuit of 2^log_n constraints from its matrices resident on the
/// device (median of 5, by events), beside the CPU reference's `ConstraintMatrices::evaluate`
/// on this machine's cores in the same run (median of 3), and a bandwidth floor: the bytes the
/// kernel must move (row starts, columns and coefficient indices once, the assignment once, a,
/// b and c written) at the device-to-device copy rate measured in this run. The device's
/// result is compared with the reference's. None when the sizes do not fit the free memory.
fn sparse_figures(ctx: &GpuContext, s: &GpuStream, log_n: u32, dtod: f64) -> Option<(String, String, String)> {
    let spec = SyntheticSpec {
        log_n,
        num_inputs: 8,
        profile: WitnessProfile::Bits,
        keys: KeyKind::Random,
        seed: rand::random(),
    };
    let matrices = ConstraintMatrices::record(spec.circuit(0)).ok()?;
    let (inputs, aux) = witness_assignment(spec.circuit(0)).ok()?;
    let layout = MatricesLayout::of(&matrices);
    let rows = matrices.num_constraints();
    let needed = layout.bytes + scalar_bytes(inputs.len() + aux.len()) + 3 * scalar_bytes(rows);
    let (free, _) = ctx.memory_info().ok()?;
    if needed + (1 << 30) > free as u64 {
        return None;
    }
    let mut resident = s.alloc::<u8>(layout.bytes as usize).ok()?;
    s.upload_matrices(&matrices, &layout, &mut resident).unwrap();
    let (w_inputs, w_aux) = (s.upload(&inputs).unwrap(), s.upload(&aux).unwrap());
    let mut outputs =
        [s.alloc::<Scalar>(rows).unwrap(), s.alloc::<Scalar>(rows).unwrap(), s.alloc::<Scalar>(rows).unwrap()];
    let evaluate = |outputs: &mut [snarkpipe::backend::cuda::GpuBuffer<Scalar>; 3]| {
        let [a, b, c] = outputs;
        s.evaluate_constraints(&resident, &layout, &w_inputs, &w_aux, [a, b, c]).unwrap();
    };
    evaluate(&mut outputs);
    let ms = median(
        (0..5)
            .map(|_| {
                let start = s.record().unwrap();
                evaluate(&mut outputs);
                let end = s.record().unwrap();
                s.elapsed_ms(&start, &end).unwrap() as f64
            })
            .collect(),
    );
    let mut reference = None;
    let cpu_ms = time_ms(3, || reference = Some(matrices.evaluate(&inputs, &aux).unwrap()));
    let (ra, rb, rc) = reference.unwrap();
    let same = [ra, rb, rc].iter().zip(&outputs).all(|(r, out)| s.download(out).unwrap() == *r);
    let moved = layout.evaluation_read_bytes() + 3 * scalar_bytes(rows);
    let floor = moved as f64 / dtod * 1e3;
    Some((
        format!("sparse a, b, c 2^{log_n} ({} terms, table of {})", layout.terms(), layout.table_len),
        format!(
            "{ms:.2} ms; CPU reference {cpu_ms:.0} ms ({} threads){}",
            rayon::current_num_threads(),
            if same { "" } else { " MISMATCH: differs from the CPU reference" }
        ),
        format!("{floor:.2} ms ({:.2} GB at DtoD)", moved as f64 / 1e9),
    ))
}

fn main() {
    if !cuda_available() {
        println!("cuda_kernels bench: no CUDA driver or GPU on this machine; nothing to measure");
        return;
    }
    let env_log = |name: &str, default: u32| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let max_g1 = env_log("SNARKPIPE_BENCH_MAX_LOG", 24);
    let min_log = env_log("SNARKPIPE_BENCH_MIN_LOG", 16);
    let max_sparse = env_log("SNARKPIPE_BENCH_SPARSE_MAX_LOG", 24);
    let parts = std::env::var("SNARKPIPE_BENCH_PARTS").unwrap_or_else(|_| "ntt,quotient,sparse,g1,g2".into());
    let part = |name: &str| parts.split(',').any(|p| p.trim() == name);
    let ctx = GpuContext::open(0).expect("open GPU");
    let s = ctx.new_stream().unwrap();
    let mut rows: Vec<String> = Vec::new();
    let mut row = |what: String, figure: String, floor: String| {
        println!("{what}: {figure} (floor {floor})");
        rows.push(format!("| {what} | {figure} | {floor} |"));
    };

    let htod = s.pinned_htod_bandwidth(1 << 30).unwrap();
    let dtod = s.dtod_bandwidth(1 << 31).unwrap();
    let fr_rate = s.field_mul_rate(ProbeField::Fr, 132 * 2048 * 4, 2000).unwrap();
    let fp_rate = s.field_mul_rate(ProbeField::Fp, 132 * 2048 * 2, 1000).unwrap();
    let fp_sqr_rate = s.field_mul_rate(ProbeField::FpSquaring, 132 * 2048 * 2, 1000).unwrap();
    // An addition's cost as the kernels' formulas perform it (tests/floor_counts.rs), each
    // operation at the rate measured just above.
    let rates =
        snarkpipe::backend::ArithmeticRates { fr_mul_per_s: fr_rate, fp_mul_per_s: fp_rate, fp_sqr_per_s: fp_sqr_rate };
    let (g1_add_s, g2_add_s) = (floor::G1_MADD.seconds(&rates), floor::G2_MADD.seconds(&rates));
    row("pinned HtoD".into(), format!("{:.1} GB/s", htod / 1e9), "–".into());
    row("DtoD copy (r+w)".into(), format!("{:.0} GB/s", dtod / 1e9), "–".into());
    row("Fr mul rate".into(), format!("{:.1} G/s", fr_rate / 1e9), "–".into());
    row("Fp mul rate".into(), format!("{:.1} G/s", fp_rate / 1e9), "–".into());
    row("Fp sqr rate".into(), format!("{:.1} G/s", fp_sqr_rate / 1e9), "–".into());
    let fp_sqr_rate = s.field_mul_rate(ProbeField::FpSquaring, 132 * 2048 * 2, 1000).unwrap();
    row("Fp squaring rate".into(), format!("{:.1} G/s", fp_sqr_rate / 1e9), "–".into());

    for log_n in (min_log.max(20)..=27u32).filter(|_| part("ntt")) {
        let ms = ntt_ms(&s, log_n);
        // Floor: (n/2)·log n Fr multiplications at the measured rate, or four read+write
        // passes over the data at the measured DtoD rate, whichever is longer.
        let n = (1u64 << log_n) as f64;
        let compute = n / 2.0 * log_n as f64 / fr_rate * 1e3;
        let memory = 4.0 * 2.0 * 32.0 * n / dtod * 1e3;
        row(format!("NTT 2^{log_n}"), format!("{ms:.2} ms"), format!("{:.2} ms", compute.max(memory)));
    }
    // the quotient: its floor is its seven transforms at the NTT's own figure in this run
    for log_n in [24u32, 26, 27].into_iter().filter(|_| part("quotient")) {
        let ntt = ntt_ms(&s, log_n);
        let ms = quotient_ms(&s, log_n);
        row(format!("quotient h 2^{log_n}"), format!("{ms:.1} ms"), format!("{:.1} ms (7 NTTs)", 7.0 * ntt));
    }
    ctx.clear_caches();
    for log_n in (20..=max_sparse).step_by(2).filter(|_| part("sparse")) {
        match sparse_figures(&ctx, &s, log_n, dtod) {
            Some((what, figure, floor)) => row(what, figure, floor),
            None => row(format!("sparse a, b, c 2^{log_n}"), "skipped: does not fit".into(), "–".into()),
        }
    }

    let g1_all = points::<G1Projective>(if part("g1") { 1 << max_g1 } else { 1 });
    let g1_bases = s.upload(&g1_all).unwrap();
    let mut cpu_note = String::new();
    for log_n in (min_log..=max_g1).step_by(2).filter(|_| part("g1")) {
        let n = 1usize << log_n;
        for bits in [false, true] {
            let sc = scalars(n, bits);
            let ds = s.upload(&sc).unwrap();
            let opts = MsmOptions { ones_fast_path: bits, ..Default::default() };
            let mut default_result = None;
            let ms = time_ms(3, || {
                default_result = Some(s.msm_g1(&g1_bases, &ds, n, opts).unwrap());
            });
            let c = window_bits_for(n) as f64;
            let adds = n as f64 * (256.0 / c).ceil() * if bits { 0.05 } else { 1.0 };
            let floor = adds * g1_add_s * 1e3;
            let profile = if bits { "bits" } else { "random" };
            row(format!("G1 MSM 2^{log_n} {profile}"), format!("{ms:.1} ms"), format!("{floor:.1} ms"));
            // Variants of the same MSM: the other scatter, the direct scatter's window groups
            // (its default is scatter_windows_for(c)), one pass where the default runs several
            // (what the bounded scratch of passes costs), the wide window for bits in passes.
            let mut variants = wide_window_variant(bits, n, opts);
            variants.extend(scatter_variants(bits, n, opts));
            if !bits && log_n >= 22 {
                for group in [2usize, 4, 13] {
                    let grouped =
                        MsmOptions { scatter: Some(ScatterKind::Direct), scatter_windows: Some(group), ..opts };
                    variants.push((format!("direct scatter {group} windows a launch"), grouped));
                }
            }
            if !bits && n > snarkpipe::backend::cuda::MSM_PASS_POINTS {
                variants.push(("one pass".to_string(), MsmOptions { pass_points: Some(n), ..opts }));
            }
            variants.extend(bucket_method_variants(bits, n, opts));
            let run = |variant| s.msm_g1(&g1_bases, &ds, n, variant).map_err(|e| e.to_string());
            for (what, figure) in time_variants(variants, &default_result, run) {
                row(format!("G1 MSM 2^{log_n} {profile}, {what}"), figure, format!("{floor:.1} ms"));
            }
            if log_n == 20 && !bits {
                let t = Instant::now();
                let cpu = G1Projective::multi_exp(&g1_all[..n].iter().map(G1Projective::from).collect::<Vec<_>>(), &sc);
                cpu_note =
                    format!("CPU (blstrs multi_exp, this machine) G1 2^20: {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
                let _: G1Affine = cpu.to_affine();
            }
        }
    }
    drop(g1_bases);
    let max_g2 = max_g1;
    let g2_all = points::<G2Projective>(if part("g2") { 1 << max_g2 } else { 1 });
    let g2_bases = s.upload(&g2_all).unwrap();
    for log_n in (min_log..=max_g2).step_by(2).filter(|_| part("g2")) {
        let n = 1usize << log_n;
        for bits in [false, true] {
            let sc = scalars(n, bits);
            let ds = s.upload(&sc).unwrap();
            let opts = MsmOptions { ones_fast_path: bits, ..Default::default() };
            let mut default_result = None;
            let ms = time_ms(3, || {
                default_result = Some(s.msm_g2(&g2_bases, &ds, n, opts).unwrap());
            });
            let c = window_bits_for(n) as f64;
            let adds = n as f64 * (256.0 / c).ceil() * if bits { 0.05 } else { 1.0 };
            let floor = adds * g2_add_s * 1e3;
            let profile = if bits { "bits" } else { "random" };
            row(format!("G2 MSM 2^{log_n} {profile}"), format!("{ms:.1} ms"), format!("{floor:.1} ms"));
            let mut variants = wide_window_variant(bits, n, opts);
            variants.extend(scatter_variants(bits, n, opts));
            variants.extend(bucket_method_variants(bits, n, opts));
            let run = |variant| s.msm_g2(&g2_bases, &ds, n, variant).map_err(|e| e.to_string());
            for (what, figure) in time_variants(variants, &default_result, run) {
                row(format!("G2 MSM 2^{log_n} {profile}, {what}"), figure, format!("{floor:.1} ms"));
            }
        }
    }
    let _: Vec<G2Affine> = Vec::new();

    let mut table = format!(
        "GPU: {} (kernels from {:?})\n\n| what | figure | floor |\n| --- | --- | --- |\n",
        ctx.name(),
        ctx.kernel_source()
    );
    table += &rows.join("\n");
    table += &format!("\n\n{cpu_note}\n");
    println!("\n{table}");
    if let Ok(out) = std::env::var("OUT") {
        let _ = std::fs::write(format!("{out}/bench.md"), &table);
    }
}
