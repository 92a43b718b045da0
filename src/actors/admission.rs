//! The admission actor: plans a partition's device memory and waits for the budget actor to
//! grant all of it (and room for the proving key if it is not resident) before any stage
//! starts. A plan that can never fit fails here, not mid-proof.

use std::sync::Arc;

use super::messages::PartitionJob;
use super::stage_actor::{StageLogic, Threads};
use crate::plan::{key_chunk_bytes, key_chunk_points, msm_pass_points, partition_plan_bytes, partition_plan_bytes_with_pass, MIN_KEY_CHUNK_POINTS};
use crate::error::{Error, Result};
use crate::plan::resident_matrices_bytes;
use crate::request::PartitionInput;
use crate::stage::Stage;

/// Admits partitions to one device.
#[derive(Default)]
pub struct Admission;

impl StageLogic for Admission {
    const STAGE: Stage = Stage::Admission;
    const THREADS: Threads = Threads::One;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let pipeline = job.pipeline.clone();
        let device = pipeline.device.as_ref();
        let shape = job.input.shape().ok_or_else(|| PartitionJob::missing("witness"))?;
        let plan = partition_plan_bytes(device, &shape, job.log_n);
        job.msm_pass_points = device.min_msm_pass_points();
        let resident = pipeline.resident_key(&job.key);
        let key_bytes = if resident.is_some() { 0 } else { job.key.device_bytes() };
        let capacity = pipeline.budget.capacity_bytes();
        let request = job.request.clone();
        // While a partition waits for room, idle keys are evicted whenever they stand in its
        // way, not only once before it waits: a key whose last partition finished after this
        // one began to wait would otherwise hold the room for ever, and stop the device.
        let waiting_for = |bytes: u64| {
            let (pipeline, request) = (pipeline.clone(), request.clone());
            move || {
                pipeline.evict_idle_keys_for(bytes);
                request.is_cancelled()
            }
        };
        if plan + key_bytes > capacity {
            // The key does not fit beside the partition: stream it through two chunk buffers.
            let longest = job.key.longest_query();
            let chunk = key_chunk_points(capacity.saturating_sub(plan), longest).ok_or(Error::PlanExceedsDevice {
                device: pipeline.ordinal,
                needed_bytes: plan + key_chunk_bytes(MIN_KEY_CHUNK_POINTS),
                capacity_bytes: capacity,
            })?;
            let bytes = plan + key_chunk_bytes(chunk);
            pipeline.evict_idle_keys_for(bytes);
            tracing::debug!(plan_bytes = plan, chunk, "the key streams: waiting for the partition's grant");
            job.key_chunk_points = Some(chunk);
            // No room for matrices beside a streamed key: its a, b and c come from the host.
            evaluate_on_host(job)?;
            job.grant = Some(pipeline.budget.request(bytes)?.wait_unless(waiting_for(bytes)).ok_or(Error::Cancelled)?);
            job.admission = Some(pipeline.line.admit());
            return Ok(());
        }
        // The key stays resident: longer MSM passes where the room beside it allows.
        let room = capacity.saturating_sub(job.key.device_bytes());
        job.msm_pass_points = msm_pass_points(device, &shape, job.log_n, pipeline.max_in_flight(), room);
        let plan = partition_plan_bytes_with_pass(device, &shape, job.log_n, job.msm_pass_points);
        let resident = match resident {
            Some(resident) => resident,
            None => {
                pipeline.evict_idle_keys_for(plan + key_bytes);
                let grant = pipeline
                    .budget
                    .request(key_bytes)?
                    .wait_unless(waiting_for(plan + key_bytes))
                    .ok_or(Error::Cancelled)?;
                pipeline.make_resident(&job.key, grant)?
            }
        };
        if let PartitionInput::Assignment(assignment) = &job.input {
            let matrices = assignment.matrices().clone();
            job.matrices = match resident.matrices_for(&matrices) {
                Some(held) => Some(held),
                None => {
                    let bytes = resident_matrices_bytes(&matrices);
                    pipeline.evict_idle_keys_for(bytes + plan);
                    match pipeline.budget.request(bytes) {
                        Ok(pending) => {
                            let grant = pending.wait_unless(waiting_for(bytes + plan)).ok_or(Error::Cancelled)?;
                            Some(resident.attach_matrices(matrices, grant))
                        }
                        // Matrices that can never fit this device: the host evaluates.
                        Err(Error::PlanExceedsDevice { .. }) => None,
                        Err(err) => return Err(err),
                    }
                }
            };
            if job.matrices.is_none() {
                evaluate_on_host(job)?;
            }
        }
        job.resident_key = Some(resident);
        tracing::debug!(
            plan_bytes = plan,
            key_bytes,
            msm_pass_points = job.msm_pass_points,
            "waiting for the partition's grant"
        );
        job.grant = Some(pipeline.budget.request(plan)?.wait_unless(waiting_for(plan)).ok_or(Error::Cancelled)?);
        job.admission = Some(pipeline.line.admit());
        Ok(())
    }
}

/// Turns a partition synthesized witness-only into its whole witness, evaluated on the host
/// and checked to satisfy its matrices, for a device that cannot hold the matrices. A witness
/// that does not satisfy them shows that the circuit's structure follows its witness: the
/// partition fails with [`Error::MatricesMismatch`], and the key's later partitions are
/// synthesized in full.
fn evaluate_on_host(job: &mut PartitionJob) -> Result<()> {
    let PartitionInput::Assignment(assignment) = &job.input else { return Ok(()) };
    let witness = assignment.evaluate_checked().inspect_err(|err| {
        if matches!(err, Error::MatricesMismatch { .. }) {
            job.key.recording.mark_unusable();
        }
    })?;
    job.input = PartitionInput::Witness(Arc::new(witness));
    Ok(())
}
