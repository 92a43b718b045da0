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

use std::sync::Arc;

use super::messages::PartitionJob;
use super::stage_actor::{StageLogic, Threads};
use crate::error::{Error, Result};
use crate::plan::witness_host_bytes;
use crate::request::PartitionInput;
use crate::stage::Stage;

/// Synthesizes circuits on the host.
#[derive(Default)]
pub struct Synthesize;

impl StageLogic for Synthesize {
    const STAGE: Stage = Stage::Synthesize;
    const THREADS: Threads = Threads::PerPartitionInFlight;

    fn inputs_ready(&mut self, job: &mut PartitionJob) -> Result<()> {
        if job.input.witness().is_some() {
            return Ok(());
        }
        let request = job.request.clone();
        let key = &job.key;
        // The key's h query has a point for every point of the domain but the last.
        let bytes = witness_host_bytes(key.h.len() + 1, key.vk.ic.len(), key.l.len());
        // Ranked by priority: a critical partition's witness is granted before the waiting
        // witnesses of lower priority, whenever they were queued.
        let pending = job.pipeline.host_budget.request_ranked(bytes, job.request.priority as u8)?;
        job.host_grant = Some(pending.wait_unless(|| request.is_cancelled()).ok_or(Error::Cancelled)?);
        Ok(())
    }

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let PartitionInput::Circuit(circuit) = &job.input else { return Ok(()) };
        let witness = circuit.synthesize()?;
        // The witness's own rules, then the key's shape: what submit checks for a witness.
        job.key.check_shape(&witness.shape())?;
        job.log_n = witness.domain()?.log_n();
        job.input = PartitionInput::Witness(Arc::new(witness));
        Ok(())
    }
}
