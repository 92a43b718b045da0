//! snarkpipe: a GPU Groth16 prover for BLS12-381, built as a pipeline of actors.
//!
//! One partition (one circuit's witness) flows through these stages, each run by its own actor
//! (the stage list is in [`stage`]; `actors.md` has the messages, ownership and failure paths):
//!
//! ```text
//!  request ─► synthesize ─► admission ─► pin ─► htod ─► ntt ─► msm ─► dtoh ─► assemble ─► verify ─► proof
//!             (circuit →    (device      (page- (copy   (quo-  (G1,   (copy   (A, B, C)   (pairing)
//!             witness)      memory)      lock)  in)     tient) G2)    out)
//! ```
//!
//! The actors reach the GPU through one seam, [`backend::Device`], implemented by a CPU
//! backend that models a device (memory capacity, in-order streams, events) and by CUDA.
//! The CPU reference maths in [`math`] and [`groth16`] is what every device result is
//! checked against, and [`compat`] offers drop-in versions of bellperson's proving calls.
//! `daemon` serves Filecoin proofs over gRPC to nodes written in other languages.
#![deny(unsafe_code)]

pub mod actors;
pub mod backend;
pub mod bench;
pub mod circuit;
pub mod compat;
/// The gRPC proving daemon (`snarkpipe serve`), on top of the prover and the Filecoin kinds.
#[cfg(feature = "filecoin")]
pub mod daemon;
pub mod error;
#[cfg(feature = "filecoin")]
pub mod filecoin;
pub mod groth16;
pub mod math;
pub mod memory;
pub mod params;
pub mod plan;
pub mod prover;
pub mod request;
pub mod stage;
pub mod synthetic;
pub mod timeline;

pub use error::{Error, Result};

/// The instant this process started, as far as snarkpipe knows: fixed by the first call. The
/// `snarkpipe` binary calls it first thing in `main`, so that figures like the bench's
/// `seconds_to_first_proof` count from the process's start.
pub fn process_started() -> std::time::Instant {
    static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *STARTED.get_or_init(std::time::Instant::now)
}
pub use stage::Stage;

/// The scalar field of BLS12-381.
pub use blstrs::Scalar;
