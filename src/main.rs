//! The `snarkpipe` command line: `snarkpipe bench` streams synthetic partitions through the
//! prover and reports throughput, verification, overlap and leaks; `snarkpipe prove` proves one
//! Filecoin proof from its vanilla proofs and the node's parameters; `snarkpipe serve` serves
//! Filecoin proofs over gRPC.

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// mimalloc, not glibc's malloc: the daemon hands buffers from thread to thread for months,
/// and glibc gives each contending thread an arena of its own (up to eight per core) that keeps
/// the pages freed into it: under the soak's load on 16 cores the resident memory kept growing
/// past the soak's bound, and on mimalloc it did not (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "snarkpipe", version, about = "A GPU Groth16 prover for BLS12-381, built as a pipeline of actors")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prove synthetic partitions and report time per partition, verification and the timeline.
    Bench(snarkpipe::bench::BenchArgs),
    /// Prove one Filecoin proof (PoRep C2, SnapDeals, Window or Winning PoSt) from a vanilla
    /// file, verify it with filecoin-proofs and write its bytes.
    #[cfg(feature = "filecoin")]
    Prove(snarkpipe::filecoin::cli::ProveArgs),
    /// Make real 2 KiB Filecoin inputs with filecoin-proofs: parameters, sealed sectors and a
    /// vanilla job file per kind (for tests and benches).
    #[cfg(feature = "filecoin")]
    Fixtures(snarkpipe::filecoin::cli::FixturesArgs),
    /// Make a sparse sector's PoRep job without sealing (any size, 32 GiB included), for tests
    /// and benches: a C1 output storage-proofs' vanilla verifier accepts.
    #[cfg(feature = "filecoin")]
    SparseSector(snarkpipe::filecoin::sparse::cli::SparseSectorArgs),
    /// Serve Filecoin proofs over gRPC (proto/snarkpipe.proto) until SIGTERM. The service has
    /// no authentication: it listens on a Unix socket or loopback unless --allow-remote.
    #[cfg(feature = "filecoin")]
    Serve(snarkpipe::daemon::ServeArgs),
}

fn main() {
    snarkpipe::process_started();
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_env("SNARKPIPE_LOG").unwrap_or_else(|_| EnvFilter::new("warn")))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Bench(args) => snarkpipe::bench::run(&args).map(|report| {
            if args.json {
                println!("{}", serde_json::to_string(&report).expect("the report serializes"));
            } else {
                print!("{}", snarkpipe::bench::describe(&report));
            }
            report.failed == 0 || args.inject_faults > 0.0
        }),
        #[cfg(feature = "filecoin")]
        Command::Prove(args) => snarkpipe::filecoin::cli::prove(&args).map(|report| {
            if args.json {
                println!("{}", serde_json::to_string(&report).expect("the report serializes"));
            } else {
                print!("{}", snarkpipe::filecoin::cli::describe(&report));
            }
            true
        }),
        #[cfg(feature = "filecoin")]
        Command::Fixtures(args) => snarkpipe::filecoin::cli::make_fixtures(&args).map(|made| {
            println!("{}", serde_json::to_string_pretty(&made).expect("the list serializes"));
            true
        }),
        #[cfg(feature = "filecoin")]
        Command::SparseSector(args) => snarkpipe::filecoin::sparse::cli::make_sparse_sector(&args).map(|made| {
            println!("{}", serde_json::to_string_pretty(&made).expect("the summary serializes"));
            true
        }),
        #[cfg(feature = "filecoin")]
        Command::Serve(args) => snarkpipe::daemon::serve(&args).map(|summary| {
            // The last line a supervisor sees: what the shutdown finished and cancelled.
            println!(
                "snarkpipe serve: shut down in {:.1} s; finished {:?}; cancelled {:?}; still running {:?}",
                summary.seconds, summary.finished, summary.cancelled, summary.unfinished
            );
            true
        }),
    };
    match outcome {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(err) => {
            eprintln!("snarkpipe: {err}");
            std::process::exit(2);
        }
    }
}
