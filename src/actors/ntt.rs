//! The NTT actor: queues the quotient polynomial h = (a·b − c)/Z on the partition's worker
//! stream, after its uploads; for a partition the device evaluates, a, b and c are computed
//! first, on the same stream, from the key's resident constraint matrices.
//!
//! Every partition's a, b and c are checked on the device to satisfy a·b = c before the
//! quotient overwrites them, wherever they came from (uploaded from the host's witness, or
//! evaluated there). A witness that fails is the input's fault (a wrong vanilla proof, a wrong
//! witness generator): its partition fails with [`crate::Error::UnsatisfiedWitness`] naming the
//! first failing constraint, which is not retried, not counted against the device, and leaves
//! the key's witness-only synthesis on. A device whose answer the host's own values contradict
//! at that constraint fails with a device error instead.

use super::job::PartitionJob;
use super::stage_actor::{StageLogic, Threads};
use crate::backend::HostConstraints;
use crate::circuit::{Assignment, SparseMatrix};
use crate::error::Result;
use crate::plan::scalar_bytes;
use crate::request::PartitionInput;
use crate::stage::Stage;
use crate::Scalar;

/// Computes h on the device.
#[derive(Default)]
pub struct Ntt;

impl StageLogic for Ntt {
    const STAGE: Stage = Stage::Ntt;
    const THREADS: Threads = Threads::PerWorker;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let stream = job.pipeline.compute[job.worker].clone();
        job.used(&stream);
        stream.wait_event(job.htod_done.as_ref().ok_or_else(|| PartitionJob::missing("upload event"))?)?;
        let buffers = job.buffers.as_ref().ok_or_else(|| PartitionJob::missing("device buffers"))?;
        if let Some(matrices) = &job.matrices {
            // a, b and c from the key's resident matrices and the uploaded assignment: the
            // inputs are the first scalars of the A query (every input is in it, ONE first).
            let resident = matrices.uploaded().ok_or_else(|| PartitionJob::missing("uploaded constraint matrices"))?;
            let tag =
                job.tag(Stage::Ntt).with("what", "constraint evaluation").with("terms", resident.layout().terms());
            stream.evaluate_constraints(
                &resident,
                &buffers.a_query,
                &buffers.aux,
                &buffers.a,
                &buffers.b,
                &buffers.c,
                &tag,
            )?;
        }
        let constraints = job.input.shape().ok_or_else(|| PartitionJob::missing("witness"))?.num_constraints;
        let host = std::sync::Arc::new(InputConstraints(job.input.clone()));
        let tag = job.tag(Stage::Ntt).with("what", "satisfaction check").with("constraints", constraints);
        stream.check_satisfied(&buffers.a, &buffers.b, &buffers.c, constraints, host, &tag)?;
        let tag = job.tag(Stage::Ntt).with("log_n", job.log_n).with("bytes", 3 * scalar_bytes(1usize << job.log_n));
        stream.quotient(&buffers.a, &buffers.b, &buffers.c, job.log_n, &tag)?;
        job.ntt_done = Some(stream.record_event()?);
        Ok(())
    }
}

/// A partition's constraints by the host's own values, asked only about the constraint the
/// device found failing: a whole witness's own a, b and c there; an assignment's rows of its
/// key's matrices, evaluated for that one constraint (microseconds, where evaluating them all
/// would cost what the device saved).
struct InputConstraints(PartitionInput);

impl HostConstraints for InputConstraints {
    fn holds(&self, constraint: usize) -> bool {
        match &self.0 {
            PartitionInput::Witness(w) => match (w.a.get(constraint), w.b.get(constraint), w.c.get(constraint)) {
                (Some(a), Some(b), Some(c)) => a * b == *c,
                // Nothing to judge by: the device named a constraint the witness does not have.
                _ => true,
            },
            PartitionInput::Assignment(assignment) => {
                let m = assignment.matrices();
                let [a, b, c] = [m.a(), m.b(), m.c()].map(|matrix| row_value(assignment, matrix, constraint));
                a * b == c
            }
            // Not synthesized, so never on a device.
            PartitionInput::Circuit(_) => true,
        }
    }
}

/// Row `r` of `matrix` at the assignment w = inputs ‖ aux (the CPU evaluation's sum, for one
/// row). The assignment's invariant (it has the matrices' counts of variables) keeps every
/// column within it.
fn row_value(assignment: &Assignment, matrix: &SparseMatrix, r: usize) -> Scalar {
    let (inputs, aux) = (assignment.input_assignment(), assignment.aux_assignment());
    let table = assignment.matrices().coefficient_table();
    matrix
        .row(r)
        .map(|(column, coefficient)| {
            let column = column as usize;
            let value = if column < inputs.len() { inputs[column] } else { aux[column - inputs.len()] };
            table[coefficient as usize] * value
        })
        .sum()
}
