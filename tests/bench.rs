//! `snarkpipe bench` as a library call: the warm-up, the streamed partitions and the
//! one-device comparison of `--scaling`, on the CPU backend with modelled devices; the
//! bellperson drop-in against the native path (`--api compat`); and the flags a Filecoin
//! `--circuit` cannot go without.

use clap::Parser;
use snarkpipe::bench::{self, BenchApi, BenchArgs, BenchReport};
use snarkpipe::Error;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

fn try_bench(flags: &str) -> snarkpipe::Result<BenchReport> {
    let seed: u64 = rand::random::<u32>() as u64;
    eprintln!("seed {seed}");
    let line = format!("bench --backend cpu --log-n 8 --seed {seed} {flags}");
    let cli = Cli::parse_from(line.split_whitespace());
    bench::run(&cli.args)
}

fn bench(flags: &str) -> BenchReport {
    try_bench(flags).expect("the bench runs")
}

/// The message of the `Error::Config` the bench fails with for `flags`.
fn config_error(flags: &str) -> String {
    match try_bench(flags) {
        Err(Error::Config(message)) => message,
        Err(other) => panic!("{flags}: not a configuration error: {other:?}"),
        Ok(_) => panic!("{flags}: the bench ran"),
    }
}

#[test]
fn a_streamed_run_verifies_every_partition_and_counts_each_on_the_timeline() {
    let report = bench("--partitions 7 --cpu-devices 2 --in-flight 2");
    assert_eq!((report.verified, report.failed), (7, 0), "{:?}", report.errors);
    // Each partition is its own request; the timeline must still tell them apart.
    let on_devices: usize = report.steady_state.devices.values().map(|d| d.partitions).sum();
    assert_eq!(on_devices, 7, "{:?}", report.steady_state);
    assert!(report.steady_state.devices.len() == 2, "both modelled devices should prove");
    assert_eq!((report.budget.leaked_bytes, report.pinned.leaked_bytes), (0, 0));
    assert!(report.budget.back_to_capacity);
}

/// The first proof is timed from the process's start, after every step before it (the prover's
/// start and the key at least); `--no-floors` leaves out the floors' microbenchmarks, which
/// the run measures otherwise.
#[test]
fn the_first_proof_is_timed_from_the_process_start_and_the_floors_can_be_left_out() {
    let before = snarkpipe::process_started().elapsed().as_secs_f64();
    let report = bench("--partitions 2");
    let first = report.seconds_to_first_proof.expect("no first proof time");
    let after = snarkpipe::process_started().elapsed().as_secs_f64();
    assert!(first > before + report.seconds_prover_start + report.seconds_key, "{first} s: {report:?}");
    assert!(first < after, "{first} s is later than the run's end ({after} s)");
    assert!(report.host_floors.is_some(), "the floors were not measured");
    let bare = bench("--partitions 2 --no-floors");
    assert!(bare.host_floors.is_none() && bare.device_floor.is_none());
    assert_eq!(bare.verified, 2);
}

#[test]
fn the_warm_up_pins_staging_for_every_partition_in_flight_and_no_warm_up_pins_none() {
    let warm = bench("--partitions 3 --in-flight 2 --staging copy");
    assert!(warm.warm_up_error.is_none(), "{:?}", warm.warm_up_error);
    // 2 partitions in flight × the copied a, b, c (a 2^8 domain) and aux: at least 8 × 32 bytes × 100.
    assert!(warm.staging_bytes_pinned >= 2 * 4 * 32 * 100, "{}", warm.staging_bytes_pinned);
    assert_eq!(warm.verified, 3);
    // Staging in place pools only the inputs (9 scalars, ONE included, per query and partition).
    let in_place = bench("--partitions 3 --in-flight 2 --staging in-place");
    assert_eq!(in_place.staging_bytes_pinned, 2 * 2 * 9 * 32);
    assert_eq!((in_place.verified, in_place.pinned.leaked_bytes), (3, 0));
    let cold = bench("--partitions 3 --in-flight 2 --no-warm-up");
    assert_eq!(cold.staging_bytes_pinned, 0);
    assert_eq!(cold.verified, 3);
    assert_eq!(cold.pinned.leaked_bytes, 0);
}

#[test]
fn scaling_runs_the_stream_on_one_device_too_and_compares() {
    let report = bench("--partitions 6 --cpu-devices 2 --scaling --in-flight 2");
    let scaling = report.scaling.as_ref().expect("--scaling reports the one-device run");
    assert_eq!((scaling.single_device_verified, scaling.single_device_failed), (6, 0));
    assert_eq!(report.verified, 6);
    assert_eq!(report.devices, 2);
    let expected = scaling.single_device_seconds_per_partition / report.seconds_per_partition;
    assert!((scaling.speedup - expected).abs() < 1e-9 * expected.max(1.0));
    // Without the flag there is no comparison.
    assert!(bench("--partitions 2").scaling.is_none());
}

#[test]
fn one_witness_shared_by_every_partition_in_flight_proves_them_all_in_place() {
    // --witnesses 1: all partitions in flight, on two modelled devices, page-lock the same
    // host ranges at once; each is still its own proof (own r, s) and must verify.
    let report = bench("--partitions 6 --cpu-devices 2 --in-flight 3 --witnesses 1 --staging in-place");
    assert_eq!((report.verified, report.failed), (6, 0), "{:?}", report.errors);
    assert_eq!((report.budget.leaked_bytes, report.pinned.leaked_bytes), (0, 0));
    assert!(report.budget.back_to_capacity);
}

#[test]
fn prepinned_witnesses_prove_in_place_and_are_released_after_the_run() {
    let report = bench("--partitions 4 --in-flight 2 --witnesses 2 --staging in-place --prepin-witnesses");
    assert!(report.witnesses_prepinned);
    assert_eq!((report.verified, report.failed), (4, 0), "{:?}", report.errors);
    // The leases taken before the clock are returned before the leak check: nothing is left.
    assert_eq!(report.pinned.leaked_bytes, 0);
    // The flag means nothing without in-place staging, and the report says so.
    let copied = bench("--partitions 2 --staging copy --prepin-witnesses");
    assert!(!copied.witnesses_prepinned);
    assert_eq!(copied.verified, 2);
}

#[test]
fn compat_calls_load_the_key_once_and_every_proof_verifies() {
    let report = bench("--api compat --partitions 4 --compat-batch 1");
    assert_eq!(report.api, BenchApi::Compat);
    let compat = report.compat.as_ref().expect("--api compat reports the calls");
    assert_eq!((compat.verified, compat.failed), (4, 0), "{:?}", report.errors);
    assert_eq!(compat.calls.len(), 4, "one circuit a call");
    // One mapped file for every call: the first call builds the key, the rest and the native
    // path's lookup find it.
    assert_eq!(compat.key_misses, 1, "{compat:?}");
    assert_eq!(compat.first_call_key_misses, 1);
    assert!(compat.calls[1..].iter().all(|call| call.key_misses == 0), "{:?}", compat.calls);
    assert!(compat.key_hits >= 4, "{compat:?}");
    for ratio in [compat.ratio, compat.ratio_to_native_proving] {
        assert!(ratio.is_finite() && ratio > 0.0, "{compat:?}");
    }
    // The native stream of the same circuits verified too, and the counts add both up.
    assert_eq!((report.verified, report.failed), (8, 0), "{:?}", report.errors);
    assert_eq!((report.budget.leaked_bytes, report.pinned.leaked_bytes), (0, 0));
    assert!(bench::describe(&report).contains("compat"));

    // By default a call takes as many circuits as the prover keeps in flight (4 on one
    // device), but at most half of them: 5 circuits make calls of 2, 2 and 1.
    let batched = bench("--api compat --partitions 5");
    let compat = batched.compat.as_ref().expect("compat figures");
    assert_eq!(compat.calls.iter().map(|c| c.circuits).collect::<Vec<_>>(), [2, 2, 1]);
    assert_eq!((compat.verified, compat.key_misses), (5, 1), "{compat:?}");
}

#[test]
fn compat_needs_two_calls_and_a_real_setup() {
    assert!(config_error("--api compat --partitions 1").contains("two calls"));
    assert!(config_error("--api compat --partitions 4 --compat-batch 4").contains("two calls"));
    assert!(config_error("--api compat --partitions 2 --keys random").contains("--keys setup"));
}

#[test]
fn a_filecoin_circuit_without_its_job_or_parameters_is_refused_by_name() {
    let neither = config_error("--circuit porep");
    assert!(neither.contains("--job") && neither.contains("needs --job"), "{neither}");
    assert!(neither.contains("--params-dir DIR (its parameter directory)"), "{neither}");
    let no_job = config_error("--circuit window-post --params-dir /nonexistent");
    assert!(no_job.contains("needs --job") && !no_job.contains("(its parameter directory)"), "{no_job}");
    let no_params = config_error("--circuit snap --job /nonexistent.json");
    assert!(no_params.contains("needs --params-dir") && !no_params.contains("--job FILE"), "{no_params}");
    // The drop-in proves synthetic circuits only.
    assert!(config_error("--circuit porep --api compat").contains("synthetic"));
}
