//! One partition on its way through the stages, with everything it holds. Dropping a job
//! releases all of it. The actors pass it in an [`Advance`](super::pipeline::Advance).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bellperson::groth16::Proof;
use blstrs::{Bls12, Scalar};

use super::budget::Grant;
use super::pipeline::{DeviceMatrices, DevicePipeline, ResidentKey, Uploader};
use crate::backend::faults::{FaultInjector, FaultScope};
use crate::backend::{
    AdmissionTicket, DeviceBuffer, DeviceStream, FailureSlot, HostScalars, PendingResults, Seniority, StageEvent,
    WorkTag,
};
use crate::circuit::{ConstraintEvaluation, PackedDensity, Witness};
use crate::error::{Error, Result};
use crate::memory::{PinLease, PinnedScalars};
use crate::params::ProvingKey;
use crate::request::{InFlightToken, PartitionInput, RequestState};
use crate::stage::Stage;
use crate::timeline::TimelineRecorder;

/// What a partition is uploaded from, all of it page-locked.
pub struct StagedInputs {
    /// a, b and c when the host evaluated them; none when the device evaluates them from the
    /// key's resident matrices ([`PartitionJob::matrices`]).
    pub evaluations: Option<[StagedVector; 3]>,
    pub aux: StagedVector,
    /// The inputs' part of the A query (every input) and of the B query (the inputs B uses);
    /// the aux part of each is picked out of `aux` on the device with these selections.
    pub a_query_inputs: PinnedScalars,
    pub b_query_inputs: PinnedScalars,
    pub a_aux_selection: Arc<PackedDensity>,
    pub b_aux_selection: Arc<PackedDensity>,
}

impl StagedInputs {
    /// Scalars of the A query: the inputs, then the aux variables A uses.
    pub fn a_query_len(&self) -> usize {
        self.a_query_inputs.len() + self.a_aux_selection.taken()
    }

    /// Scalars of the B queries.
    pub fn b_query_len(&self) -> usize {
        self.b_query_inputs.len() + self.b_aux_selection.taken()
    }
}

/// One of a partition's large host vectors, page-locked one way or the other.
pub enum StagedVector {
    /// The witness's own vector, page-locked where it is while the lease lives (none for an
    /// empty vector). The lease owns the witness too, so the vector cannot be freed while its
    /// range is registered.
    InPlace { vector: Arc<WitnessVector>, _lease: Option<PinLease> },
    /// A copy in a pooled page-locked buffer.
    Pooled(PinnedScalars),
}

impl StagedVector {
    /// The values, shared with the copies that read them.
    pub fn source(&self) -> HostScalars {
        match self {
            StagedVector::InPlace { vector, .. } => vector.clone(),
            StagedVector::Pooled(buffer) => buffer.shared(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            StagedVector::InPlace { vector, .. } => vector.values().len(),
            StagedVector::Pooled(buffer) => buffer.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Which of a witness's large vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WitnessPart {
    A,
    B,
    C,
    Aux,
}

/// One vector of a partition's shared input, readable by the copies queued from it.
pub struct WitnessVector {
    pub input: Arc<PartitionInput>,
    pub part: WitnessPart,
}

impl WitnessPart {
    /// This vector of `input`: empty where it has none (a circuit not yet synthesized, or the
    /// a, b and c of an assignment, which the device evaluates).
    pub fn of(self, input: &PartitionInput) -> &[Scalar] {
        match (input, self) {
            (PartitionInput::Witness(w), part) => part.of_witness(w),
            (PartitionInput::Assignment(a), WitnessPart::Aux) => a.aux_assignment(),
            _ => &[],
        }
    }

    /// This vector of a whole witness.
    pub fn of_witness(self, witness: &Witness) -> &[Scalar] {
        match self {
            WitnessPart::A => &witness.a,
            WitnessPart::B => &witness.b,
            WitnessPart::C => &witness.c,
            WitnessPart::Aux => &witness.aux_assignment,
        }
    }
}

impl WitnessVector {
    pub fn values(&self) -> &[Scalar] {
        self.part.of(&self.input)
    }
}

impl AsRef<[Scalar]> for WitnessVector {
    fn as_ref(&self) -> &[Scalar] {
        self.values()
    }
}

/// The device memory of one partition, allocated under its grant.
pub struct PartitionBuffers {
    pub a: DeviceBuffer,
    pub b: DeviceBuffer,
    pub c: DeviceBuffer,
    pub aux: DeviceBuffer,
    pub a_query: DeviceBuffer,
    pub b_query: DeviceBuffer,
    /// Scratch for the packed A and B densities the device selects the queries' aux part with.
    pub a_selection: DeviceBuffer,
    pub b_selection: DeviceBuffer,
    pub results: DeviceBuffer,
    /// With a streamed key: the two chunk buffers its points pass through (empty otherwise).
    pub key_chunks: Vec<DeviceBuffer>,
}

/// One partition in flight.
pub struct PartitionJob {
    pub request: Arc<RequestState>,
    /// The partition's index within its request.
    pub index: usize,
    /// A number unique within the prover, used on the timeline.
    pub partition_id: usize,
    /// A witness, or until the synthesis stage has run, a circuit.
    pub input: PartitionInput,
    pub key: Arc<ProvingKey>,
    pub r: Scalar,
    pub s: Scalar,
    /// The domain's size; for a circuit, the key's until the synthesis stage has run.
    pub log_n: u32,
    pub pipeline: Arc<DevicePipeline>,
    /// Which compute stream (worker) of the device runs its NTT and MSM.
    pub worker: usize,
    pub failure: FailureSlot,
    pub faults: Arc<FaultInjector>,
    pub timeline: TimelineRecorder,
    pub attempt: usize,
    /// Times the partition went round again for others' failures (see `request::MAX_REQUEUES`).
    pub requeues: usize,
    /// Devices this partition already failed on (a retry goes elsewhere when it can).
    pub avoid: Vec<usize>,

    // Held while in flight, released (in this order) when the job is dropped.
    pub pending_results: Option<PendingResults>,
    pub buffers: Option<PartitionBuffers>,
    pub staged: Option<StagedInputs>,
    pub resident_key: Option<Arc<ResidentKey>>,
    /// The key's constraint matrices on this device, when the device evaluates a, b and c
    /// (held like the key: the device memory and its grant outlive every job using them).
    pub matrices: Option<Arc<DeviceMatrices>>,
    /// Set when the key does not fit on the device beside the partition: its points stream
    /// through two chunk buffers of this many points (see `actors/msm.rs`).
    pub key_chunk_points: Option<usize>,
    /// Points per MSM pass, set by the admission with the memory plan it sized (see
    /// [`crate::plan::msm_pass_points`]).
    pub msm_pass_points: usize,
    /// The key's host vectors, page-locked while a streamed key's chunks are copied.
    pub key_pins: Vec<PinLease>,
    pub grant: Option<Grant>,
    /// The host-memory budget's grant for the witness this job synthesized.
    pub host_grant: Option<Grant>,
    /// The partition's place among those in flight on its device (the oldest runs first).
    pub admission: Option<AdmissionTicket>,
    pub streams_used: Vec<Arc<dyn DeviceStream>>,
    pub htod_done: Option<StageEvent>,
    pub ntt_done: Option<StageEvent>,
    pub msm_done: Option<StageEvent>,
    pub dtoh_done: Option<StageEvent>,
    pub proof: Option<Proof<Bls12>>,
    pub(crate) _token: Option<InFlightToken>,
    /// The stage the job last entered.
    pub stage: Stage,
    /// Whether the proof is verified before it is returned.
    pub verify: bool,
    /// Where the synthesis stage leaves a, b and c of a partition synthesized from its key's
    /// recorded matrices (the device only when `verify` is on).
    pub evaluation: ConstraintEvaluation,
    /// Set once the outcome is on its way to the request: a job dropped before then reports
    /// its own failure (see `Drop`).
    pub(crate) finished: bool,
}

impl PartitionJob {
    /// The partition's place among those in flight on its device, for its work's tags.
    pub fn seniority(&self) -> Seniority {
        self.admission.as_ref().map(AdmissionTicket::seniority).unwrap_or_default()
    }

    /// The partition's witness: there is one from the synthesis stage on.
    pub fn witness(&self) -> Result<&Arc<Witness>> {
        self.input.witness().ok_or_else(|| PartitionJob::missing("witness"))
    }

    /// Memory the partition holds on the host while it is in flight: its witness, once
    /// synthesized here, under the host-memory budget's grant.
    pub fn host_grant_bytes(&self) -> u64 {
        self.host_grant.as_ref().map_or(0, |g| g.bytes())
    }

    /// This partition as the uploader of a key.
    pub fn uploader(&self) -> Uploader {
        Uploader { request: self.request.id, index: self.index, partition_id: self.partition_id }
    }

    /// Whose work this attempt is, for the faults drawn into it.
    pub fn fault_scope(&self) -> FaultScope {
        FaultScope { request: self.request.id, partition: self.index, attempt: self.attempt }
    }

    /// A tag for device work of this partition in `stage`.
    pub fn tag(&self, stage: Stage) -> WorkTag {
        WorkTag::new(self.index, stage, &self.failure)
            .drawn_as(self.partition_id)
            .ranked(self.seniority())
            .with("partition", self.partition_id)
            .with("request", self.request.id)
    }

    /// Details of a stage for the timeline.
    pub fn stage_args(&self, stage: Stage) -> BTreeMap<String, serde_json::Value> {
        let mut args = BTreeMap::new();
        args.insert("partition".into(), self.partition_id.into());
        args.insert("request".into(), self.request.id.into());
        args.insert("log_n".into(), self.log_n.into());
        args.insert("worker".into(), self.worker.into());
        if stage == Stage::Admission {
            args.insert("bytes".into(), self.grant.as_ref().map_or(0, |g| g.bytes()).into());
        }
        if stage == Stage::Synthesize {
            args.insert("host_bytes".into(), self.host_grant_bytes().into());
        }
        args
    }

    /// The error for a stage that finds an earlier stage's output missing: a broken invariant
    /// of the pipeline, never bad input.
    pub fn missing(what: &str) -> Error {
        Error::Internal(format!("the partition reached a stage without its {what}"))
    }

    /// Remembers a stream this job queued work on, so a failure can wait for it to drain.
    pub fn used(&mut self, stream: &Arc<dyn DeviceStream>) {
        if !self.streams_used.iter().any(|s| Arc::ptr_eq(s, stream)) {
            self.streams_used.push(stream.clone());
        }
    }

    /// Lets the device work this failed job queued drain (it is skipped, as the failure slot
    /// is set) before what it reads and writes is released. Work that does not drain within
    /// the stage timeout hangs: the device is marked broken, and what the job holds is kept
    /// by the device until it is recovered (never released under work that may still run).
    fn drain_or_strand(&mut self) {
        let streams = std::mem::take(&mut self.streams_used);
        let deadline = Instant::now() + self.pipeline.stage_timeout;
        let mut drained = !self.pipeline.is_broken();
        for stream in &streams {
            if !drained {
                break;
            }
            drained = match stream.record_event() {
                Ok(event) => event.wait_within(deadline.saturating_duration_since(Instant::now())).unwrap_or(false),
                Err(_) => false,
            };
        }
        if drained || streams.is_empty() {
            return;
        }
        let hang = Error::DeviceHang {
            device: self.pipeline.ordinal,
            stage: self.stage,
            waited_ms: self.pipeline.stage_timeout.as_millis() as u64,
        };
        self.pipeline.mark_broken(&hang);
        let held = (
            self.pending_results.take(),
            self.buffers.take(),
            self.staged.take(),
            self.resident_key.take(),
            self.matrices.take(),
            std::mem::take(&mut self.key_pins),
            self.grant.take(),
            self.host_grant.take(),
        );
        self.pipeline.strand(Box::new(held));
    }

    /// Sends the job to the actor of the stage after `stage`; after the last stage, finishes
    /// it with its proof.
    pub fn forward_after(mut self: Box<Self>, stage: Stage) {
        match stage.next() {
            Some(next) => {
                let pipeline = self.pipeline.clone();
                pipeline.send_to(next, self);
            }
            None => {
                let proof =
                    self.proof.take().ok_or_else(|| Error::Internal(format!("no proof after the {stage} stage")));
                self.finish(proof);
            }
        }
    }

    /// Ends the job: on failure first lets queued device work drain (it is skipped, as the
    /// failure slot is set), then releases buffers, pinned memory and the grant, and only
    /// then reports the outcome, so a caller who sees the result sees everything released.
    pub fn finish(mut self: Box<Self>, outcome: Result<Proof<Bls12>>) {
        self.finished = true;
        if let Err(err) = &outcome {
            self.failure.fail(err.clone());
            if err.breaks_device() {
                self.pipeline.mark_broken(err);
            }
            self.drain_or_strand();
        }
        // An out-of-memory the budget did not foresee is pressure from another process on the
        // device, not a sign the device is failing: it is retried, and does not quarantine.
        let device_failure = outcome.as_ref().err().is_some_and(|e| {
            matches!(
                e.root_cause(),
                Error::Device { .. }
                    | Error::Injected(_)
                    | Error::WrongResult { .. }
                    | Error::DeviceBroken { .. }
                    | Error::DeviceHang { .. }
            )
        });
        self.pipeline.record_outcome(device_failure);
        let (request, index, attempt, requeues) = (self.request.clone(), self.index, self.attempt, self.requeues);
        let (input, device) = (self.input.clone(), self.pipeline.ordinal);
        let mut avoid = std::mem::take(&mut self.avoid);
        if outcome.is_err() {
            avoid.push(device);
        }
        // Fields drop in declaration order: results, buffers, pinned inputs, key, grant, token.
        drop(self);
        request.complete(index, attempt, requeues, input, avoid, outcome);
    }
}

/// A job dropped without an outcome (sent to an actor that had stopped, or lost to a panic no
/// stage caught) fails its partition instead of leaving the request's handle waiting for ever.
/// As in `finish`, queued device work drains and everything the job holds is released before
/// the failure is reported.
impl Drop for PartitionJob {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let err = Error::Internal("the partition's job was dropped before it finished".into())
            .in_stage(self.index, self.stage);
        tracing::error!(%err, "a job was lost");
        self.failure.fail(err.clone());
        self.drain_or_strand();
        // In the order `finish` releases them.
        drop(self.pending_results.take());
        drop(self.buffers.take());
        drop(self.staged.take());
        drop(self.resident_key.take());
        drop(self.matrices.take());
        self.key_pins.clear();
        drop(self.grant.take());
        drop(self.host_grant.take());
        drop(self.admission.take());
        drop(self._token.take());
        let mut avoid = std::mem::take(&mut self.avoid);
        avoid.push(self.pipeline.ordinal);
        self.request.complete(self.index, self.attempt, self.requeues, self.input.clone(), avoid, Err(err));
    }
}
