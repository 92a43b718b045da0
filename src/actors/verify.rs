//! The verification actor: checks each assembled proof with the key's verifying key and the
//! partition's public inputs before it leaves the prover. A proof that fails the pairing check
//! came from a device that computed wrongly (the inputs were checked at submit): it is a device
//! fault, retried elsewhere, and the device counts it towards being avoided.

use super::messages::PartitionJob;
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
        if verify(&job.key.prepared_vk(), proof, job.witness()?.public_inputs())? {
            Ok(())
        } else {
            job.proof = None;
            Err(Error::WrongResult { device: job.pipeline.ordinal })
        }
    }
}
