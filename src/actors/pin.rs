//! The pinning actor: makes a partition's host vectors page-locked for the upload, and
//! page-locks the proving key's host vectors once (the registry makes a second pin a no-op).
//!
//! A partition the device evaluates (an assignment from witness-only synthesis) stages its
//! inputs and aux values only; a whole witness stages a, b and c too.
//!
//! The a, b, c evaluations and the aux assignment are either copied into reusable pinned
//! buffers from the pool ([`StagingMode::Copy`], the default) or registered where they are
//! ([`StagingMode::InPlace`]: no host copy). The A and B queries' scalars are never copied:
//! the pin stage packs their densities, and the device picks them out of the aux assignment
//! it receives.

use std::sync::Arc;

use super::job::{PartitionJob, StagedInputs, StagedVector, WitnessPart, WitnessVector};
use super::stage_actor::{StageLogic, Threads};
use crate::circuit::{Density, PackedDensity};
use crate::error::Result;
use crate::plan::StagingMode;
use crate::request::PartitionInput;
use crate::stage::Stage;
use crate::Scalar;

/// Page-locks what a partition is staged from.
#[derive(Default)]
pub struct Pin;

impl StageLogic for Pin {
    const STAGE: Stage = Stage::Pin;
    const THREADS: Threads = Threads::PerWorker;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let pipeline = job.pipeline.clone();
        let input = Arc::new(job.input.clone());
        let stage = |part: WitnessPart| -> Result<StagedVector> {
            let values = part.of(&input);
            match pipeline.staging {
                StagingMode::Copy => Ok(StagedVector::Pooled(pipeline.pool.stage(values)?)),
                StagingMode::InPlace => {
                    let lease = match values.is_empty() {
                        true => None,
                        // The lease owns the input, so the vector stays where it was pinned.
                        false => Some(pipeline.pool.registry().pin_part(input.clone(), |i| part.of(i))?),
                    };
                    let vector = Arc::new(WitnessVector { input: input.clone(), part });
                    Ok(StagedVector::InPlace { vector, _lease: lease })
                }
            }
        };
        let pool = &pipeline.pool;
        let (inputs, aux_len, densities): (&[Scalar], usize, [&Density; 3]) = match &*input {
            PartitionInput::Witness(w) => {
                (&w.input_assignment, w.aux_assignment.len(), [&w.a_aux_density, &w.b_input_density, &w.b_aux_density])
            }
            PartitionInput::Assignment(a) => (
                a.input_assignment(),
                a.aux_assignment().len(),
                [a.a_aux_density(), a.b_input_density(), a.b_aux_density()],
            ),
            PartitionInput::Circuit(_) => return Err(PartitionJob::missing("witness")),
        };
        let [a_aux_density, b_input_density, b_aux_density] = densities;
        // a, b and c are staged only when the host evaluated them; otherwise the device
        // evaluates them from the key's resident matrices and the assignment.
        let evaluations = match &*input {
            PartitionInput::Witness(_) => {
                Some([stage(WitnessPart::A)?, stage(WitnessPart::B)?, stage(WitnessPart::C)?])
            }
            _ => None,
        };
        job.staged = Some(StagedInputs {
            evaluations,
            aux: stage(WitnessPart::Aux)?,
            a_query_inputs: pool.stage(inputs)?,
            b_query_inputs: pool
                .stage_with(b_input_density.total(), |room| room.extend(b_input_density.select(inputs)))?,
            a_aux_selection: Arc::new(PackedDensity::pack(a_aux_density, aux_len)?),
            b_aux_selection: Arc::new(PackedDensity::pack(b_aux_density, aux_len)?),
        });
        if let Some(resident) = &job.resident_key {
            job.pipeline.pin_key_host(resident, &job.key)?;
        } else if job.key_chunk_points.is_some() {
            // A streamed key is copied chunk by chunk for every partition: keep it
            // page-locked while this partition uses it (the registry pins a range once).
            job.key_pins = job.pipeline.pin_key_ranges(&job.key)?;
        }
        Ok(())
    }
}
