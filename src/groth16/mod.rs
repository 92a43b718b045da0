//! groth16 (in progress)
