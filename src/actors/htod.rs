//! The host-to-device actor: allocates the partition's device buffers under its grant and
//! queues the copies on the device's upload stream (the proving key's too, once per device;
//! a key too large to stay resident gets two chunk buffers instead, filled by the MSM stage).
//! A partition the device evaluates uploads its assignment only, and the key's constraint
//! matrices once per device.

use super::job::{PartitionBuffers, PartitionJob};
use super::stage_actor::{StageLogic, Threads};
use crate::backend::Device;
use crate::plan::{g2_bytes, scalar_bytes, MSM_RESULTS_BYTES};
use crate::circuit::PackedDensity;
use crate::error::Result;
use crate::stage::Stage;

/// Stages a partition onto the device.
#[derive(Default)]
pub struct Htod;

impl StageLogic for Htod {
    const STAGE: Stage = Stage::Htod;
    const THREADS: Threads = Threads::One;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let pipeline = job.pipeline.clone();
        let stream = pipeline.copy_in.clone();
        job.used(&stream);
        match (&job.resident_key, job.key_chunk_points) {
            (Some(resident), _) => resident.upload_once(&job.key, &stream, Some(job.uploader()), job.seniority())?,
            (None, Some(_)) => {}
            (None, None) => return Err(PartitionJob::missing("resident key")),
        }

        let device: &dyn Device = pipeline.device.as_ref();
        let staged = job.staged.as_ref().ok_or_else(|| PartitionJob::missing("pinned inputs"))?;
        let domain = 1usize << job.log_n;
        let scalars = |n: usize| device.allocate(scalar_bytes(n.max(1)));
        let buffers = PartitionBuffers {
            a: scalars(domain)?,
            b: scalars(domain)?,
            c: scalars(domain)?,
            aux: scalars(staged.aux.len())?,
            a_query: scalars(staged.a_query_len())?,
            b_query: scalars(staged.b_query_len())?,
            a_selection: device.allocate(PackedDensity::device_bytes(staged.a_aux_selection.len()).max(8))?,
            b_selection: device.allocate(PackedDensity::device_bytes(staged.b_aux_selection.len()).max(8))?,
            results: device.allocate(MSM_RESULTS_BYTES)?,
            key_chunks: match job.key_chunk_points {
                Some(chunk) => vec![device.allocate(g2_bytes(chunk))?, device.allocate(g2_bytes(chunk))?],
                None => Vec::new(),
            },
        };
        // The key's constraint matrices, the first time a partition evaluated on this device
        // needs them: queued on this stream before the partition's own copies, so that its
        // evaluation (and every later partition's) runs after them.
        if let Some(matrices) = &job.matrices {
            matrices.upload_once(device, &stream, job.uploader(), job.seniority())?;
        }
        let mut copies = vec![
            (staged.aux.source(), &buffers.aux),
            (staged.a_query_inputs.shared(), &buffers.a_query),
            (staged.b_query_inputs.shared(), &buffers.b_query),
        ];
        if let Some([a, b, c]) = &staged.evaluations {
            copies.extend([(a.source(), &buffers.a), (b.source(), &buffers.b), (c.source(), &buffers.c)]);
        }
        for (src, dst) in copies {
            let tag = job.tag(Stage::Htod).with("bytes", scalar_bytes((*src).as_ref().len()));
            stream.copy_scalars_to_device(src, dst, &tag)?;
        }
        // The queries' aux part, picked out of the aux assignment just uploaded.
        for (selection, packed, dst, inputs) in [
            (&staged.a_aux_selection, &buffers.a_selection, &buffers.a_query, staged.a_query_inputs.len()),
            (&staged.b_aux_selection, &buffers.b_selection, &buffers.b_query, staged.b_query_inputs.len()),
        ] {
            let tag = job.tag(Stage::Htod).with("selected", selection.taken());
            stream.select_scalars(&buffers.aux, selection.clone(), packed, dst, inputs, &tag)?;
        }
        job.buffers = Some(buffers);
        job.htod_done = Some(stream.record_event()?);
        Ok(())
    }
}
