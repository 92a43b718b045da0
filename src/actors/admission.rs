//! The admission actor: plans a partition's device memory and waits for the budget actor to
//! grant all of it (and room for the proving key if it is not resident) before any stage
//! starts. A plan that can never fit fails here, not mid-proof.
//!
//! Nothing here waits for memory that cannot come: a key is made resident only as its plan
//! (`plan::residency`) keeps it, with room for a partition of it beside it; a partition never
//! uses a resident key that leaves it no room (it streams the key instead, and the idle copy
//! is evicted while it waits); and matrices join a key only where a partition still fits.

use std::sync::Arc;

use super::job::PartitionJob;
use super::pipeline::ResidentKey;
use super::stage_actor::{StageLogic, Threads};
use crate::error::{Error, Result};
use crate::plan::{
    key_chunk_bytes, key_chunk_points, msm_pass_points, partition_plan_bytes, partition_plan_bytes_with_pass,
    resident_matrices_bytes, MIN_KEY_CHUNK_POINTS,
};
use crate::request::PartitionInput;
use crate::stage::Stage;

/// Admits partitions to one device.
#[derive(Default)]
pub struct Admission;

/// How a partition's key is held while it proves.
enum KeyHold {
    /// Resident as its plan keeps it (some vectors may stream through chunks of this size).
    Resident(Arc<ResidentKey>),
    /// Streamed whole through chunk buffers of this many points.
    Streamed(usize),
}

impl StageLogic for Admission {
    const STAGE: Stage = Stage::Admission;
    const THREADS: Threads = Threads::One;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let pipeline = job.pipeline.clone();
        let device = pipeline.device.as_ref();
        let shape = job.input.shape().ok_or_else(|| PartitionJob::missing("witness"))?;
        let capacity = pipeline.budget.capacity_bytes();
        let smallest_plan = partition_plan_bytes(device, &shape, job.log_n);
        // Partitions rank by priority on the device's budget, above every preload.
        let rank = 1 + job.request.priority as u8;
        let request = job.request.clone();
        let wait = |pending, needed, what: &str| {
            pipeline.wait_for_grant(pending, needed, what, || request.is_cancelled()).ok_or(Error::Cancelled)
        };

        let fits_beside = |r: &ResidentKey| r.bytes() + r.plan.partition_bytes(smallest_plan) <= capacity;
        let streamed_chunk = || {
            key_chunk_points(capacity.saturating_sub(smallest_plan), job.key.longest_query()).ok_or(
                Error::PlanExceedsDevice {
                    device: pipeline.ordinal,
                    needed_bytes: smallest_plan + key_chunk_bytes(MIN_KEY_CHUNK_POINTS),
                    capacity_bytes: capacity,
                },
            )
        };
        let hold = match pipeline.resident_key(&job.key) {
            Some(resident) if fits_beside(&resident) => KeyHold::Resident(resident),
            held => {
                let (plan, _) = pipeline.key_plan(&job.key, &shape, job.log_n)?;
                if held.is_some() || plan.resident.is_empty() {
                    // Streamed whole: also where the key is resident under a plan that leaves
                    // this partition no room (it goes once idle, while this one waits).
                    drop(held);
                    KeyHold::Streamed(streamed_chunk()?)
                } else {
                    let bytes = plan.resident_bytes(&job.key.vectors());
                    let needed = bytes + plan.partition_bytes(smallest_plan);
                    pipeline.evict_idle_keys_for(needed);
                    let grant = wait(pipeline.budget.request_ranked(bytes, rank)?, needed, "a proving key")?;
                    let resident = pipeline.make_resident(&job.key, plan, grant)?;
                    // A preload that won the race holds the key under its own plan.
                    match fits_beside(&resident) {
                        true => KeyHold::Resident(resident),
                        false => KeyHold::Streamed(streamed_chunk()?),
                    }
                }
            }
        };

        let resident = match hold {
            KeyHold::Streamed(chunk) => {
                let bytes = smallest_plan + key_chunk_bytes(chunk);
                tracing::debug!(plan_bytes = smallest_plan, chunk, "the key streams: waiting for the partition's grant");
                job.msm_pass_points = device.min_msm_pass_points();
                job.key_chunk_points = Some(chunk);
                // No room for matrices beside a streamed key: its a, b and c come from the host.
                evaluate_on_host(job)?;
                pipeline.evict_idle_keys_for(bytes);
                job.grant = Some(wait(pipeline.budget.request_ranked(bytes, rank)?, bytes, "a partition")?);
                job.admission = Some(pipeline.line.admit_ranked(job.request.priority as u8));
                return Ok(());
            }
            KeyHold::Resident(resident) => resident,
        };
        // Longer MSM passes where the room beside the key allows.
        let chunks = resident.plan.chunk_points.map_or(0, key_chunk_bytes);
        let room = capacity.saturating_sub(resident.bytes()).saturating_sub(chunks * resident.plan.partitions as u64);
        job.msm_pass_points = msm_pass_points(device, &shape, job.log_n, pipeline.max_in_flight(), room);
        let plan = partition_plan_bytes_with_pass(device, &shape, job.log_n, job.msm_pass_points) + chunks;
        job.key_chunk_points = resident.plan.chunk_points;
        if let PartitionInput::Assignment(assignment) = &job.input {
            let matrices = assignment.matrices().clone();
            job.matrices = match resident.matrices_for(&matrices) {
                Some(held) => Some(held),
                None => {
                    let bytes = resident_matrices_bytes(&matrices);
                    // Matrices join a wholly resident key only where a partition still fits
                    // beside both; otherwise the host evaluates.
                    let fits = resident.plan.resident.is_all() && resident.bytes() + bytes + plan <= capacity;
                    match fits {
                        true => {
                            pipeline.evict_idle_keys_for(bytes + plan);
                            let grant = wait(pipeline.budget.request_ranked(bytes, rank)?, bytes + plan, "constraint matrices")?;
                            Some(resident.attach_matrices(matrices, grant))
                        }
                        false => None,
                    }
                }
            };
            if job.matrices.is_none() {
                evaluate_on_host(job)?;
            }
        }
        tracing::debug!(
            plan_bytes = plan,
            resident = ?resident.plan.resident,
            msm_pass_points = job.msm_pass_points,
            "waiting for the partition's grant"
        );
        job.resident_key = Some(resident);
        job.grant = Some(wait(pipeline.budget.request_ranked(plan, rank)?, plan, "a partition")?);
        job.admission = Some(pipeline.line.admit_ranked(job.request.priority as u8));
        Ok(())
    }
}

/// Turns a partition synthesized witness-only into its whole witness, evaluated on the host,
/// for a device that cannot hold the matrices. It is not checked here: every partition's
/// a·b = c is checked on the device before its quotient (the ntt stage), and a failure there is
/// the input's fault, so a bad vanilla proof neither switches the key's witness-only synthesis
/// off nor costs a second pass over the constraints on the host.
fn evaluate_on_host(job: &mut PartitionJob) -> Result<()> {
    let PartitionInput::Assignment(assignment) = &job.input else { return Ok(()) };
    let witness = assignment.evaluate()?;
    job.input = PartitionInput::Witness(Arc::new(witness));
    Ok(())
}
