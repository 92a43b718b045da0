//! prover (in progress)
