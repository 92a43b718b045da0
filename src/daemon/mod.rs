//! The proving daemon, `snarkpipe serve`: a gRPC service (proto/snarkpipe.proto) through which
//! nodes not written in Rust prove Filecoin's kinds from vanilla proofs on one long-lived
//! [`Prover`](crate::prover::Prover), so that keys stay loaded between proofs.
//!
//! ```text
//! gRPC calls ─▶ service ─▶ jobs (table, priority queue) ─▶ worker threads ─▶ FilecoinProver ─▶ Prover
//! ```
//!
//! - [`jobs`]: idempotency, states, cancellation, the bounds on what is kept;
//! - [`worker`]: the threads that prove, and the keys `PreloadSRS`/`EvictSRS` act on;
//! - [`service`]: request checks and typed statuses;
//! - [`metrics`]: the Prometheus text of `GetMetrics` and `/metrics`;
//! - [`http`]: `--metrics-listen`, the HTTP `/metrics` and `/status` an operator scrapes;
//! - [`restart`]: replacing the process when a GPU breaks, its jobs carried over;
//! - [`serve`]: the process: listener, signals, bounded shutdown.
//!
//! It sits on top: it uses the prover and the Filecoin module, and nothing uses it.

pub mod authority;
pub mod cuzk;
pub mod http;
pub mod jobs;
pub mod metrics;
pub mod restart;
pub mod serve;
pub mod service;
pub mod worker;

/// The code tonic generates from proto/snarkpipe.proto: messages, server and client.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("snarkpipe.v1");
}

/// The code tonic generates from proto/cuzk.proto: the contract Curio speaks ([`cuzk`]).
#[allow(clippy::all, missing_docs)]
pub mod cuzk_pb {
    tonic::include_proto!("cuzk.v1");
}

pub use serve::{serve, ServeArgs, ShutdownSummary};
