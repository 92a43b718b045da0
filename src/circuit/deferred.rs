//! Circuits whose synthesis is deferred to the pipeline's synthesis stage, so that partition
//! k+1 is synthesized while partition k proves.
//!
//! A [`DeferredCircuit`] is synthesized exactly once. It is either a `'static` circuit the
//! stage synthesizes on its own thread, or a turn taken from a caller's synthesis pool: the
//! circuits of bellperson's and filecoin-proofs' calls borrow their public parameters, so they
//! cannot move to the stage's thread, and the caller synthesizes them when the stage asks
//! (see [`SynthesisPool`]).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;

use super::{ConstraintEvaluation, ConstraintMatrices, SatisfactionCheck, ShapeRecording, Synthesized, Witness};
use crate::{Error, Result, Scalar};

type Synthesis = Box<dyn FnOnce(ConstraintEvaluation) -> Result<Synthesized> + Send>;

/// A circuit waiting for the synthesis stage.
pub struct DeferredCircuit {
    synthesis: Mutex<Option<Synthesis>>,
}

impl std::fmt::Debug for DeferredCircuit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = if self.synthesis.lock().is_some() { "waiting" } else { "synthesized" };
        write!(f, "DeferredCircuit({state})")
    }
}

impl DeferredCircuit {
    /// A circuit the synthesis stage synthesizes on its own thread, with its key's recorded
    /// constraint matrices ([`ShapeRecording::synthesize_for`]).
    pub fn new<C: bellperson::Circuit<Scalar> + Send + 'static>(circuit: C, recording: Arc<ShapeRecording>) -> Self {
        DeferredCircuit::from_synthesis(move |evaluation| recording.synthesize_for(circuit, evaluation))
    }

    /// Any synthesis that yields a witness.
    pub fn from_fn(synthesis: impl FnOnce() -> Result<Witness> + Send + 'static) -> Self {
        DeferredCircuit::from_synthesis(move |_| synthesis().map(Synthesized::Witness))
    }

    fn from_synthesis(synthesis: impl FnOnce(ConstraintEvaluation) -> Result<Synthesized> + Send + 'static) -> Self {
        DeferredCircuit { synthesis: Mutex::new(Some(Box::new(synthesis))) }
    }

    /// Runs the synthesis: once. With [`ConstraintEvaluation::Device`], a circuit synthesized
    /// from its key's recorded matrices yields its assignment only. A circuit that fails or
    /// panics is a typed [`Error::Synthesis`], which is the partition's own and is not retried
    /// (the same circuit fails again).
    pub fn synthesize(&self, evaluation: ConstraintEvaluation) -> Result<Synthesized> {
        let synthesis = self
            .synthesis
            .lock()
            .take()
            .ok_or_else(|| Error::Internal("a deferred circuit was synthesized twice".into()))?;
        as_synthesis_error(catch_unwind(AssertUnwindSafe(|| synthesis(evaluation))))
    }
}

/// Synthesizes `circuit` (with the recorded matrices when there are), a panic included, into a
/// witness or the partition's own typed error.
fn synthesize_caught<C: bellperson::Circuit<Scalar>>(
    circuit: C,
    recording: Option<&ShapeRecording>,
    check: SatisfactionCheck,
    evaluation: ConstraintEvaluation,
) -> Result<Synthesized> {
    as_synthesis_error(catch_unwind(AssertUnwindSafe(|| match recording {
        Some(recording) => recording.synthesize_for(circuit, evaluation),
        None => Witness::synthesize(circuit, check).map(Synthesized::Witness),
    })))
}

/// A synthesis's outcome as the partition's own error: the circuit's errors as they are, and
/// anything else (a panic, a failure of the caller's pool) as [`Error::Synthesis`].
fn as_synthesis_error(outcome: std::thread::Result<Result<Synthesized>>) -> Result<Synthesized> {
    match outcome {
        Ok(Ok(synthesized)) => Ok(synthesized),
        Ok(Err(
            err @ (Error::Synthesis(_)
            | Error::MissingAssignment
            | Error::Unsatisfied { .. }
            | Error::EmptyCircuit
            | Error::MatricesMismatch { .. }),
        )) => Err(err),
        Ok(Err(err)) => Err(Error::Synthesis(err.to_string())),
        Err(panic) => Err(Error::Synthesis(format!("the circuit panicked: {}", panic_text(&panic)))),
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// The synthesis stage's ask for one circuit of a pool, and where to send what it yields.
struct Ask {
    index: usize,
    evaluation: ConstraintEvaluation,
    reply: Sender<Result<Synthesized>>,
}

/// The caller's side of circuits that cannot leave its scope: [`SynthesisPool::defer`] makes
/// a `'static` [`DeferredCircuit`] per circuit that, when the synthesis stage runs it, asks
/// the pool for that circuit's witness and waits for it; [`SynthesisPool::serve`], run on the
/// caller's threads inside a scope that outlives the request, synthesizes what is asked.
///
/// Nothing waits for ever: once the pool is dropped, a stage that asks gets an error at once,
/// and so does a stage whose ask was still queued (its reply goes with the queue).
pub struct SynthesisPool<C> {
    circuits: Vec<Mutex<Option<C>>>,
    check: SatisfactionCheck,
    asks: Receiver<Ask>,
    ask: Sender<Ask>,
    closed: AtomicBool,
    /// Nanoseconds spent synthesizing, summed over the circuits.
    busy_nanos: AtomicU64,
    /// The key's recorded matrices, once the key is known (full synthesis before).
    recording: OnceLock<Arc<ShapeRecording>>,
}

impl<C: bellperson::Circuit<Scalar> + Send> SynthesisPool<C> {
    pub fn new(circuits: Vec<C>, check: SatisfactionCheck) -> Self {
        let (ask, asks) = unbounded();
        SynthesisPool {
            circuits: circuits.into_iter().map(|c| Mutex::new(Some(c))).collect(),
            check,
            asks,
            ask,
            closed: AtomicBool::new(false),
            busy_nanos: AtomicU64::new(0),
            recording: OnceLock::new(),
        }
    }

    /// Synthesizes with the key's recorded matrices from now on.
    pub fn use_recording(&self, recording: Arc<ShapeRecording>) {
        let _ = self.recording.set(recording);
    }

    /// Synthesizes circuit `index` now, on the calling thread (e.g. the first one, whose
    /// shape picks the key); its deferred circuit must not be submitted.
    ///
    /// Before the key is known (no recording in use) and with the check off, the circuit's
    /// constraint matrices are recorded with its witness and returned beside it, for the key
    /// found by its shape to adopt: otherwise a request of one partition, or a process that
    /// proves once and exits, never records them, and every process pays a full synthesis for
    /// every partition.
    pub fn synthesize_now(&self, index: usize) -> Result<(Witness, Option<Arc<ConstraintMatrices>>)> {
        let circuit = self.circuits.get(index).and_then(|slot| slot.lock().take());
        let circuit = circuit.ok_or_else(|| Error::Internal(format!("circuit {index} was asked for twice")))?;
        let started = Instant::now();
        let fresh = match (self.recording.get(), self.check) {
            (None, SatisfactionCheck::Off) => Some(ShapeRecording::default()),
            _ => None,
        };
        let recording = self.recording.get().map(|r| &**r).or(fresh.as_ref());
        let outcome = synthesize_caught(circuit, recording, self.check, ConstraintEvaluation::Host);
        self.busy_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::SeqCst);
        let witness = match outcome? {
            Synthesized::Witness(witness) => witness,
            Synthesized::Assignment(assignment) => assignment.evaluate()?,
        };
        Ok((witness, fresh.and_then(|recorded| recorded.matrices())))
    }

    /// Time spent synthesizing so far, summed over the circuits (they overlap each other and
    /// the proving).
    pub fn synthesis_time(&self) -> Duration {
        Duration::from_nanos(self.busy_nanos.load(Ordering::SeqCst))
    }

    pub fn len(&self) -> usize {
        self.circuits.len()
    }

    pub fn is_empty(&self) -> bool {
        self.circuits.is_empty()
    }

    /// One `'static` deferred circuit per circuit, in order.
    pub fn defer(&self) -> Vec<DeferredCircuit> {
        (0..self.circuits.len())
            .map(|index| {
                let ask = self.ask.clone();
                DeferredCircuit::from_synthesis(move |evaluation| {
                    let gone =
                        || Error::Synthesis("the caller's synthesis pool closed before this circuit's turn".into());
                    let (reply, answer) = bounded(1);
                    ask.send(Ask { index, evaluation, reply }).map_err(|_| gone())?;
                    answer.recv().map_err(|_| gone())?
                })
            })
            .collect()
    }

    /// Synthesizes the circuits the stage asks for until the pool is closed; run it on as
    /// many of the caller's threads as should synthesize at once.
    pub fn serve(&self) {
        loop {
            match self.asks.recv_timeout(Duration::from_millis(20)) {
                Ok(Ask { index, evaluation, reply }) => {
                    let circuit = self.circuits.get(index).and_then(|slot| slot.lock().take());
                    let started = Instant::now();
                    let recording = self.recording.get().map(|r| &**r);
                    let synthesized = match circuit {
                        Some(circuit) => synthesize_caught(circuit, recording, self.check, evaluation),
                        None => Err(Error::Internal(format!("circuit {index} was asked for twice"))),
                    };
                    self.busy_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::SeqCst);
                    let _ = reply.send(synthesized);
                }
                Err(RecvTimeoutError::Timeout) if !self.closed.load(Ordering::SeqCst) => {}
                Err(_) => return,
            }
        }
    }

    /// Stops the servers (after the ask each is answering). Asks already queued are dropped,
    /// and their stages fail at once.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

impl<C> Drop for SynthesisPool<C> {
    fn drop(&mut self) {
        // Queued asks go with the receiver; their reply senders drop, failing the stages
        // that wait on them.
        while let Ok(ask) = self.asks.try_recv() {
            drop(ask.reply);
        }
    }
}
