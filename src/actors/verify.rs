//! The verification actor: checks each assembled proof with the key's verifying key and the
//! partition's public inputs before it leaves the prover. A proof that fails the pairing check
//! came from a device that computed wrongly: it is a device fault, retried elsewhere, and the
//! device counts it towards being avoided. The input cannot be at fault here: its shape was
//! checked at submit, and every partition's a, b and c were checked on the device to satisfy
//! a·b = c before its quotient (`actors/ntt.rs`), so a witness that does not satisfy its
//! constraints failed there, as its own fault, before it came to a proof.

use super::job::PartitionJob;
use super::stage_actor::{StageLogic, Threads};
use crate::error::{Error, Result};
use crate::groth16::verify;
use crate::stage::Stage;

/// Verifies proofs on the host.
#[derive(Default)]
pub struct Verify;

impl StageLogic for Verify {
    const STAGE: Stage = Stage::Verify;
    const THREADS: Threads = Threads::PerWorker;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        if !job.verify {
            return Ok(());
        }
        let proof = job.proof.as_ref().ok_or_else(|| PartitionJob::missing("proof"))?;
        let inputs = job.input.public_inputs().ok_or_else(|| PartitionJob::missing("witness"))?;
        if verify(&job.key.prepared_vk(), proof, inputs)? {
            return Ok(());
        }
        job.proof = None;
        Err(Error::WrongResult { device: job.pipeline.ordinal })
    }
}
