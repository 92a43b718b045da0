//! The admission actor: plans a partition's device memory and waits for the budget actor to
//! grant all of it (and room for the proving key if it is not resident) before any stage
//! starts. A plan that can never fit fails here, not mid-proof.

use super::messages::PartitionJob;
use super::stage_actor::StageLogic;
use crate::backend::{scalar_bytes, Device, MSM_RESULTS_BYTES};
use crate::circuit::WitnessShape;
use crate::error::{Error, Result};
use crate::stage::Stage;

/// Admits partitions to one device.
pub struct Admission;

/// Device bytes one partition needs beside its proving key: the a, b, c evaluations over the
/// domain (h is computed in place of a), the scalars of the l, a and b MSMs, scratch, results.
pub fn partition_plan_bytes(device: &dyn Device, shape: &WitnessShape, log_n: u32) -> u64 {
    let domain = 1usize << log_n;
    let a_query = shape.num_inputs + shape.a_aux_total;
    let b_query = shape.b_input_total + shape.b_aux_total;
    let largest_msm = (domain - 1).max(shape.num_aux).max(a_query).max(b_query);
    3 * scalar_bytes(domain)
        + scalar_bytes(shape.num_aux.max(1))
        + scalar_bytes(a_query.max(1))
        + scalar_bytes(b_query.max(1))
        + device.workspace_bytes(log_n, largest_msm)
        + MSM_RESULTS_BYTES
}

impl StageLogic for Admission {
    const STAGE: Stage = Stage::Budget;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let pipeline = job.pipeline.clone();
        let plan = partition_plan_bytes(pipeline.device.as_ref(), &job.witness.shape(), job.log_n);
        let resident = pipeline.resident_key(&job.key);
        let key_bytes = if resident.is_some() { 0 } else { job.key.device_bytes() };
        let capacity = pipeline.budget.capacity_bytes();
        if plan + key_bytes > capacity {
            return Err(Error::PlanExceedsDevice {
                device: pipeline.ordinal,
                needed_bytes: plan + key_bytes,
                capacity_bytes: capacity,
            });
        }
        let request = job.request.clone();
        let cancelled = move || request.is_cancelled();
        let resident = match resident {
            Some(resident) => resident,
            None => {
                pipeline.evict_idle_keys_for(plan + key_bytes);
                let grant = pipeline.budget.request(key_bytes)?.wait_unless(&cancelled).ok_or(Error::Cancelled)?;
                pipeline.make_resident(&job.key, grant)?
            }
        };
        job.resident_key = Some(resident);
        tracing::debug!(plan_bytes = plan, key_bytes, "waiting for the partition's grant");
        job.grant = Some(pipeline.budget.request(plan)?.wait_unless(&cancelled).ok_or(Error::Cancelled)?);
        Ok(())
    }
}
