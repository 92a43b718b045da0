//! The verification actor: checks each assembled proof with the key's verifying key and the
//! partition's public inputs before it leaves the prover. A proof that fails the pairing check
//! came from a device that computed wrongly (the inputs were checked at submit): it is a device
//! fault, retried elsewhere, and the device counts it towards being avoided, unless the
//! partition's a, b and c were evaluated on the device from an assignment that does not satisfy
//! its key's recorded matrices: then the circuit is at fault.

use super::messages::PartitionJob;
use super::stage_actor::{StageLogic, Threads};
use crate::error::{Error, Result};
use crate::groth16::verify;
use crate::request::PartitionInput;
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
        // An assignment evaluated on the device is checked here, on this failure path only:
        // one that does not satisfy the key's recorded matrices is the circuit's doing (its
        // structure follows its witness), not the device's.
        if let PartitionInput::Assignment(assignment) = &job.input {
            if let Err(err @ Error::MatricesMismatch { .. }) = assignment.evaluate_checked() {
                job.key.recording.mark_unusable();
                return Err(err);
            }
        }
        Err(Error::WrongResult { device: job.pipeline.ordinal })
    }
}
