//! The health monitor: a thread that brings devices back. A broken device (a sticky error, a
//! hung kernel) is recovered once its partitions have drained; a quarantined one (it failed
//! partitions in a row) is probed now and then with a small known proof, and takes work again
//! when the proof comes out right.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::Scalar;
use crossbeam_channel::Sender;
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::actors::DevicePipeline;
use crate::circuit::Witness;
use crate::error::Result;
use crate::params::ProvingKey;
use crate::request::{PartitionInput, Priority, ProofHandle, RequestState, Ticket};
use crate::synthetic::{KeyKind, SyntheticSpec, WitnessProfile};

/// How often the monitor looks at the devices.
const TICK: Duration = Duration::from_millis(20);

/// Request ids of probes count down from the top, so that they never shift the ids (and the
/// fault draws) of the node's own requests.
const FIRST_PROBE_ID: u64 = u64::MAX;

/// The known proof a quarantined device is probed with: small, with a key from a setup, so
/// that its result can be verified.
struct Probe {
    key: Arc<ProvingKey>,
    witness: Arc<Witness>,
    inputs: Vec<Scalar>,
}

impl Probe {
    fn build() -> Result<Probe> {
        let spec =
            SyntheticSpec { log_n: 4, num_inputs: 2, profile: WitnessProfile::Random, keys: KeyKind::Setup, seed: 19 };
        let witness = spec.witness(0)?;
        let inputs = witness.input_assignment[1..].to_vec();
        Ok(Probe { key: spec.proving_key()?, witness: Arc::new(witness), inputs })
    }

    fn verifies(&self, proof: &bellperson::groth16::Proof<blstrs::Bls12>) -> bool {
        let pvk = self.key.prepared_vk();
        bellperson::groth16::verify_proof(&pvk, proof, &self.inputs).unwrap_or(false)
    }
}

/// One device's probe in flight.
struct Probing {
    device: usize,
    handle: ProofHandle,
}

pub(crate) struct HealthMonitor {
    pub pipelines: Vec<Arc<DevicePipeline>>,
    pub stopping: Arc<AtomicBool>,
    pub submit: Sender<Ticket>,
    pub probe_interval: Duration,
}

impl HealthMonitor {
    pub fn run(self) {
        let mut probe: Option<Probe> = None;
        let mut probing: Vec<Probing> = Vec::new();
        let mut next_id = FIRST_PROBE_ID;
        // When each device was last seen healthy or last probed: a quarantined device is
        // probed once the interval has passed since then.
        let mut since: Vec<Instant> = vec![Instant::now(); self.pipelines.len()];
        let mut rng = ChaCha8Rng::seed_from_u64(19);
        while !self.stopping.load(Ordering::SeqCst) {
            for (i, pipeline) in self.pipelines.iter().enumerate() {
                if pipeline.is_broken() {
                    pipeline.recover_when_idle();
                    since[i] = Instant::now();
                    continue;
                }
                let busy = probing.iter().any(|p| p.device == pipeline.ordinal);
                if !pipeline.is_failing() || !pipeline.takes_work() {
                    since[i] = Instant::now();
                    continue;
                }
                if busy || since[i].elapsed() < self.probe_interval {
                    continue;
                }
                if probe.is_none() {
                    match Probe::build() {
                        Ok(built) => probe = Some(built),
                        Err(err) => {
                            tracing::error!(%err, "building the probe proof failed: quarantines stay");
                            return;
                        }
                    }
                }
                let known = probe.as_ref().expect("built just above");
                let state = RequestState::new(
                    next_id,
                    known.key.clone(),
                    vec![Scalar::random(&mut rng)],
                    vec![Scalar::random(&mut rng)],
                    Priority::Critical,
                    Some(vec![pipeline.ordinal]),
                    0,
                    self.submit.clone(),
                );
                next_id -= 1;
                let ticket = Ticket {
                    request: state.clone(),
                    index: 0,
                    input: PartitionInput::Witness(known.witness.clone()),
                    attempt: 0,
                    avoid: Vec::new(),
                    requeues: 0,
                    not_before: None,
                };
                if self.submit.send(ticket).is_err() {
                    return;
                }
                tracing::info!(device = pipeline.ordinal, "probing a quarantined device with a known proof");
                probing.push(Probing { device: pipeline.ordinal, handle: ProofHandle { state } });
                since[i] = Instant::now();
            }
            probing.retain(|p| {
                if !p.handle.status().finished {
                    return true;
                }
                let Some(pipeline) = self.pipelines.iter().find(|q| q.ordinal == p.device) else { return false };
                let known = probe.as_ref().expect("a probe in flight was built");
                match p.handle.wait() {
                    Ok(proofs) if proofs.first().is_some_and(|proof| known.verifies(proof)) => {
                        tracing::info!(device = p.device, "the probe proved: the quarantine is lifted");
                        pipeline.record_probe_passed();
                    }
                    outcome => {
                        tracing::warn!(device = p.device, failed = ?outcome.err(), "the probe failed: the device stays quarantined");
                        pipeline.record_probe_failed();
                    }
                }
                false
            });
            std::thread::sleep(TICK);
        }
    }
}
