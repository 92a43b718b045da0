//! The synthesis actor: turns a partition submitted as a circuit into its witness, upstream
//! of admission and pin, so that while partition k proves on the device, partition k+1 is
//! synthesized (as far ahead as the device's in-flight partitions allow). A partition
//! submitted as a witness passes through.
//!
//! Before synthesizing it takes a grant from the prover-wide host-memory budget for the
//! witness the circuit will make (by priority, then first come first served; given back when
//! the job ends), so partitions in
//! flight on every device together never hold more witness memory than the budget. A witness
//! that can never fit fails at once. A circuit that fails or panics fails its own partition
//! with a typed error, never retried; the others go on.
//!
//! A circuit whose key's constraint matrices are recorded is synthesized witness-only; where
//! the device evaluates the matrices (`ProverConfig::constraint_evaluation`), the partition
//! goes on as its assignment alone (`PartitionInput::Assignment`), and its a, b and c are
//! computed on the device (`actors/ntt.rs`).

use std::sync::Arc;

use super::job::PartitionJob;
use super::stage_actor::{StageLogic, Threads};
use crate::error::{Error, Result};
use crate::circuit::{ConstraintEvaluation, Synthesized};
use crate::plan::{assignment_host_bytes, witness_host_bytes};
use crate::request::PartitionInput;
use crate::stage::Stage;

/// Synthesizes circuits on the host.
#[derive(Default)]
pub struct Synthesize;

impl StageLogic for Synthesize {
    const STAGE: Stage = Stage::Synthesize;
    const THREADS: Threads = Threads::PerPartitionInFlight;

    fn inputs_ready(&mut self, job: &mut PartitionJob) -> Result<()> {
        if job.input.is_synthesized() {
            return Ok(());
        }
        let request = job.request.clone();
        let key = &job.key;
        // What the synthesis will hold: the assignment alone when the key's matrices are
        // recorded and the device evaluates them (a recording only ever becomes unusable
        // after it was ready, once per key, so this is the bound but for that one partition);
        // otherwise the whole witness. The key's h query has a point for every point of the
        // domain but the last.
        let bytes = match (job.evaluation, key.recording.matrices()) {
            (ConstraintEvaluation::Device, Some(matrices)) => {
                assignment_host_bytes(matrices.num_inputs(), matrices.num_aux())
            }
            _ => witness_host_bytes(key.h.len() + 1, key.vk.ic.len(), key.l.len()),
        };
        // Ranked by priority: a critical partition's witness is granted before the waiting
        // witnesses of lower priority, whenever they were queued.
        let pending = job.pipeline.host_budget.request_ranked(bytes, job.request.priority as u8)?;
        job.host_grant = Some(pending.wait_unless(|| request.is_cancelled()).ok_or(Error::Cancelled)?);
        Ok(())
    }

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let PartitionInput::Circuit(circuit) = &job.input else { return Ok(()) };
        // The witness's own rules, then the key's shape: what submit checks for a witness.
        job.input = match circuit.synthesize(job.evaluation)? {
            Synthesized::Witness(witness) => {
                job.key.check_shape(&witness.shape())?;
                job.log_n = witness.domain()?.log_n();
                PartitionInput::Witness(Arc::new(witness))
            }
            Synthesized::Assignment(assignment) => {
                job.key.check_shape(&assignment.shape())?;
                job.log_n = assignment.domain()?.log_n();
                PartitionInput::Assignment(Arc::new(assignment))
            }
        };
        Ok(())
    }
}
