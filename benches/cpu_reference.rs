//! Criterion benches of the CPU reference, per stage: NTT, quotient h, MSM in G1 and G2, and
//! a whole proof, at 2^10 .. 2^16. Keys are random points ([`KeyKind::Random`]): the timings
//! do not depend on whether a proof verifies. Sample counts are small so `cargo bench`
//! finishes in minutes.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use snarkpipe::groth16::prove;
use snarkpipe::math::{msm_g1, msm_g2, ntt, quotient_h, Domain};
use snarkpipe::synthetic::{KeyKind, SyntheticSpec, WitnessProfile};
use snarkpipe::Scalar;

const LOG_SIZES: [u32; 4] = [10, 12, 14, 16];

fn spec(log_n: u32) -> SyntheticSpec {
    SyntheticSpec { log_n, profile: WitnessProfile::Random, keys: KeyKind::Random, seed: 7, ..SyntheticSpec::default() }
}

fn random_scalars(n: usize) -> Vec<Scalar> {
    let mut rng = ChaCha8Rng::seed_from_u64(n as u64);
    (0..n).map(|_| Scalar::random(&mut rng)).collect()
}

fn bench_ntt(c: &mut Criterion) {
    let mut group = c.benchmark_group("ntt");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    for log_n in LOG_SIZES {
        let domain = Domain::from_log_n(log_n).expect("valid domain");
        let values = random_scalars(domain.size());
        group.throughput(Throughput::Elements(domain.size() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(log_n), &values, |b, values| {
            b.iter_batched_ref(|| values.clone(), |v| ntt(v, domain), BatchSize::LargeInput)
        });
    }
    group.finish();
}

fn bench_quotient(c: &mut Criterion) {
    let mut group = c.benchmark_group("quotient_h");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    for log_n in LOG_SIZES {
        let witness = spec(log_n).witness(0).expect("synthetic witness");
        group.throughput(Throughput::Elements(1 << log_n));
        group.bench_function(BenchmarkId::from_parameter(log_n), |b| {
            b.iter_batched(
                || (witness.a.clone(), witness.b.clone(), witness.c.clone()),
                |(a, b, c)| quotient_h(a, b, c).expect("quotient"),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

fn bench_msm(c: &mut Criterion) {
    let mut g1 = c.benchmark_group("msm_g1");
    g1.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    for log_n in LOG_SIZES {
        let key = spec(log_n).proving_key().expect("random key");
        let scalars = random_scalars(key.h.len());
        g1.throughput(Throughput::Elements(key.h.len() as u64));
        g1.bench_function(BenchmarkId::from_parameter(log_n), |b| b.iter(|| msm_g1(&key.h, &scalars)));
    }
    g1.finish();

    let mut g2 = c.benchmark_group("msm_g2");
    g2.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    for log_n in LOG_SIZES {
        let key = spec(log_n).proving_key().expect("random key");
        let scalars = random_scalars(key.b_g2.len());
        g2.throughput(Throughput::Elements(key.b_g2.len() as u64));
        g2.bench_function(BenchmarkId::from_parameter(log_n), |b| b.iter(|| msm_g2(&key.b_g2, &scalars)));
    }
    g2.finish();
}

fn bench_proof(c: &mut Criterion) {
    let mut group = c.benchmark_group("proof");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(5));
    for log_n in LOG_SIZES {
        let spec = spec(log_n);
        let key = spec.proving_key().expect("random key");
        let witness = spec.witness(0).expect("synthetic witness");
        let (r, s) = (Scalar::from(3u64), Scalar::from(5u64));
        group.throughput(Throughput::Elements(1 << log_n));
        group.bench_function(BenchmarkId::from_parameter(log_n), |b| {
            b.iter(|| prove(&key, &witness, r, s).expect("proof"))
        });
    }
    group.finish();
}

criterion_group!(cpu_reference, bench_ntt, bench_quotient, bench_msm, bench_proof);
criterion_main!(cpu_reference);
