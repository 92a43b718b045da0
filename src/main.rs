//! The `snarkpipe` command line: `snarkpipe bench` streams synthetic partitions through the
//! prover and reports throughput, verification, overlap and leaks.

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

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
}

fn main() {
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
