//! The constraint matrices of one proving key's circuit shape, recorded by the first partition
//! synthesized for the key and used by every later one: witness-only synthesis and one sparse
//! product per matrix ([`ConstraintMatrices`]) instead of a `LinearCombination` per term.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::matrices::{witness_assignment_sized, ConstraintMatrices};
use super::{Assignment, ConstraintEvaluation, SatisfactionCheck, Synthesized, Witness, WitnessShape};
use crate::{Error, Result, Scalar};

/// A key's recorded matrices, or where their recording stands.
#[derive(Debug, Default)]
pub struct ShapeRecording {
    state: Mutex<RecordingState>,
    /// Where a recording made here is written, tied to its key's digest (see
    /// [`ShapeRecording::load_or_persist`]).
    file: OnceLock<(PathBuf, [u8; 32])>,
}

/// What [`ShapeRecording::load_or_persist`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatricesFile {
    /// The file held this key's matrices: no partition needs to record them.
    Loaded,
    /// There was no file: the first recording is written to it.
    WillWrite,
    /// The file could not be used (the typed error's message: another key's, another format
    /// version, damaged): the first recording replaces it.
    Replacing(String),
    /// Matrices were recorded or loaded already; the file was not read.
    AlreadyRecorded,
}

#[derive(Debug, Default)]
enum RecordingState {
    /// Nothing recorded yet: the next synthesis records.
    #[default]
    Empty,
    /// A synthesis is recording now; others synthesize in full meanwhile (none waits).
    Recording,
    Ready(Arc<ConstraintMatrices>),
    /// A witness from the matrices did not satisfy them: this circuit's structure depends on
    /// its witness, so every synthesis is a full one from now on.
    Unusable,
}

/// What one synthesis does, decided under the lock.
enum Plan {
    Record,
    UseMatrices(Arc<ConstraintMatrices>),
    Full,
}

/// Puts the state back to `Empty` if a recording ends without matrices (an error, a panic),
/// so that a later synthesis records again.
struct RecordingClaim<'a> {
    recording: &'a ShapeRecording,
    done: bool,
}

impl Drop for RecordingClaim<'_> {
    fn drop(&mut self) {
        if !self.done {
            let mut state = self.recording.state.lock();
            if matches!(*state, RecordingState::Recording) {
                *state = RecordingState::Empty;
            }
        }
    }
}

impl ShapeRecording {
    /// The recorded matrices, once there are.
    pub fn matrices(&self) -> Option<Arc<ConstraintMatrices>> {
        match &*self.state.lock() {
            RecordingState::Ready(matrices) => Some(matrices.clone()),
            _ => None,
        }
    }

    /// Keeps the matrices on disk at `path`, for the proving key whose digest is `key_digest`
    /// and whose circuits have `shape`:
    /// reads them from there if the file holds this key's (so no partition records them
    /// again, a full synthesis saved per process start); otherwise the first recording made
    /// here is written there, in the background, through a temporary file renamed into place.
    /// A file that cannot be used is never trusted: its typed error is returned in
    /// [`MatricesFile::Replacing`] and the matrices are recorded afresh.
    pub fn load_or_persist(&self, path: &Path, key_digest: [u8; 32], shape: &WitnessShape) -> MatricesFile {
        if !matches!(*self.state.lock(), RecordingState::Empty) {
            return MatricesFile::AlreadyRecorded;
        }
        let _ = self.file.set((path.to_path_buf(), key_digest));
        if !path.exists() {
            return MatricesFile::WillWrite;
        }
        match ConstraintMatrices::read_file(path, key_digest) {
            Ok(matrices) if matrices.shape() != *shape => MatricesFile::Replacing(format!(
                "constraint matrices {} are of the shape {:?}, not the key's {shape:?}",
                path.display(),
                matrices.shape()
            )),
            Ok(matrices) => {
                let mut state = self.state.lock();
                if matches!(*state, RecordingState::Empty) {
                    *state = RecordingState::Ready(Arc::new(matrices));
                }
                MatricesFile::Loaded
            }
            Err(err) => MatricesFile::Replacing(err.to_string()),
        }
    }

    /// Takes matrices recorded elsewhere (from the circuit's blank twin, say) as this key's,
    /// when none are recorded, loaded or being recorded, and writes them beside the
    /// parameters as a recording made here would be. Returns whether they were taken.
    /// The caller vouches that they are the key's circuit's: a witness that does not satisfy
    /// them is still caught, as for any recording.
    pub fn adopt(&self, matrices: Arc<ConstraintMatrices>) -> bool {
        {
            let mut state = self.state.lock();
            if !matches!(*state, RecordingState::Empty) {
                return false;
            }
            *state = RecordingState::Ready(matrices.clone());
        }
        self.persist(&matrices);
        true
    }

    /// Writes freshly recorded matrices to the file given to `load_or_persist`, if any, on a
    /// thread of its own (a partition does not wait for a disk). A failure is only logged: the
    /// matrices are in memory, and the next process records them again.
    fn persist(&self, matrices: &Arc<ConstraintMatrices>) {
        let Some((path, digest)) = self.file.get().cloned() else { return };
        let matrices = matrices.clone();
        let writing = WriteInFlight::start();
        let spawned = std::thread::Builder::new().name("snarkpipe-matrices-write".into()).spawn(move || {
            match matrices.write_file(&path, digest) {
                Ok(()) => tracing::info!(path = %path.display(), "constraint matrices written beside the parameters"),
                Err(err) => {
                    tracing::warn!(%err, "constraint matrices not written; the next process records them again")
                }
            }
            drop(writing);
        });
        if let Err(err) = spawned {
            tracing::warn!(%err, "constraint matrices not written: no thread to write them");
        }
    }

    /// Whether a witness from the matrices failed them, so that synthesis is full from now on.
    pub fn is_unusable(&self) -> bool {
        matches!(*self.state.lock(), RecordingState::Unusable)
    }

    /// Synthesizes `circuit`: recording the matrices with its witness when none are recorded
    /// (and no other synthesis is recording them), from the matrices when they are, in full
    /// otherwise. Equal to [`Witness::synthesize`] with the check off for a circuit whose
    /// constraints do not depend on its witness.
    ///
    /// A witness from the matrices is checked to satisfy them (a·b = c at every constraint,
    /// in parallel: far cheaper than the synthesis it replaces). One that does not means the
    /// circuit's structure depends on its witness: the partition fails with
    /// [`Error::MatricesMismatch`] and every later synthesis of this key is a full one.
    pub fn synthesize<C: bellperson::Circuit<Scalar>>(&self, circuit: C) -> Result<Witness> {
        match self.synthesize_for(circuit, ConstraintEvaluation::Host)? {
            Synthesized::Witness(witness) => Ok(witness),
            Synthesized::Assignment(assignment) => assignment.evaluate(),
        }
    }

    /// As [`ShapeRecording::synthesize`], but with [`ConstraintEvaluation::Device`] a partition
    /// synthesized from the matrices is returned as its [`Assignment`], not evaluated: its
    /// satisfaction is then judged by its proof's verification ([`ShapeRecording::mark_unusable`]
    /// when it fails for that reason).
    pub fn synthesize_for<C: bellperson::Circuit<Scalar>>(
        &self,
        circuit: C,
        evaluation: ConstraintEvaluation,
    ) -> Result<Synthesized> {
        let plan = {
            let mut state = self.state.lock();
            match &*state {
                RecordingState::Empty => {
                    *state = RecordingState::Recording;
                    Plan::Record
                }
                RecordingState::Ready(matrices) => Plan::UseMatrices(matrices.clone()),
                RecordingState::Recording | RecordingState::Unusable => Plan::Full,
            }
        };
        match plan {
            Plan::Full => Witness::synthesize(circuit, SatisfactionCheck::Off).map(Synthesized::Witness),
            Plan::Record => {
                let mut claim = RecordingClaim { recording: self, done: false };
                let (matrices, witness) = ConstraintMatrices::record_with_witness(circuit)?;
                let matrices = Arc::new(matrices);
                *self.state.lock() = RecordingState::Ready(matrices.clone());
                claim.done = true;
                self.persist(&matrices);
                Ok(Synthesized::Witness(witness))
            }
            Plan::UseMatrices(matrices) => {
                let (inputs, aux) = witness_assignment_sized(circuit, matrices.num_inputs(), matrices.num_aux())?;
                let assignment = match Assignment::new(matrices, inputs, aux) {
                    Ok(assignment) => assignment,
                    Err(err) => {
                        // Other counts of variables than the recording's.
                        *self.state.lock() = RecordingState::Unusable;
                        return Err(Error::MatricesMismatch { what: "assignment", index: 0, detail: err.to_string() });
                    }
                };
                if evaluation == ConstraintEvaluation::Device {
                    return Ok(Synthesized::Assignment(assignment));
                }
                let witness = assignment.evaluate_checked().inspect_err(|err| {
                    if matches!(err, Error::MatricesMismatch { .. }) {
                        self.mark_unusable();
                    }
                })?;
                Ok(Synthesized::Witness(witness))
            }
        }
    }

    /// Every later synthesis of this key is a full one: an assignment from the matrices was
    /// found not to satisfy them after its device evaluation.
    pub fn mark_unusable(&self) {
        *self.state.lock() = RecordingState::Unusable;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellperson::{ConstraintSystem, SynthesisError};

    /// y = x·x when x is odd and y = x + x when it is even: the same counts of variables and
    /// constraints, wired differently by the witness.
    struct Branching {
        x: u64,
    }

    impl bellperson::Circuit<Scalar> for Branching {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let x = Scalar::from(self.x);
            let odd = self.x % 2 == 1;
            let xv = cs.alloc(|| "x", || Ok(x))?;
            let yv = cs.alloc_input(|| "y", || Ok(if odd { x * x } else { x + x }))?;
            if odd {
                cs.enforce(|| "x * x = y", |lc| lc + xv, |lc| lc + xv, |lc| lc + yv);
            } else {
                cs.enforce(|| "(x + x) * 1 = y", |lc| lc + xv + xv, |lc| lc + CS::one(), |lc| lc + yv);
            }
            Ok(())
        }
    }

    fn same(a: &Witness, b: &Witness) -> bool {
        a.a == b.a
            && a.b == b.b
            && a.c == b.c
            && a.input_assignment == b.input_assignment
            && a.aux_assignment == b.aux_assignment
    }

    #[test]
    fn records_once_then_synthesizes_from_the_matrices() {
        let recording = ShapeRecording::default();
        for x in [3u64, 5, 7, 9] {
            let witness = recording.synthesize(Branching { x }).unwrap();
            let full = Witness::synthesize(Branching { x }, SatisfactionCheck::On).unwrap();
            assert!(same(&witness, &full), "x = {x}");
            assert!(recording.matrices().is_some());
        }
    }

    #[test]
    fn a_structure_that_depends_on_the_witness_is_caught_and_synthesis_goes_full() {
        let recording = ShapeRecording::default();
        recording.synthesize(Branching { x: 3 }).unwrap(); // records the odd shape
        let err = recording.synthesize(Branching { x: 4 }).unwrap_err();
        assert!(matches!(err, Error::MatricesMismatch { what: "satisfaction", .. }), "{err}");
        assert!(recording.is_unusable());
        // From then on, full synthesis: right witnesses for either shape.
        let witness = recording.synthesize(Branching { x: 4 }).unwrap();
        assert!(same(&witness, &Witness::synthesize(Branching { x: 4 }, SatisfactionCheck::On).unwrap()));
    }

    /// x·x = y for each value, synthesized in a sub-system joined with `extend` when the
    /// constraint system is extensible, as filecoin-proofs' PoSt circuits do (with a "temp
    /// ONE" input of its own).
    struct Extendable {
        values: Vec<u64>,
    }

    fn squares<CS: ConstraintSystem<Scalar>>(cs: &mut CS, values: &[u64]) -> Result<(), SynthesisError> {
        for &v in values {
            let x = Scalar::from(v);
            let xv = cs.alloc(|| "x", || Ok(x))?;
            let yv = cs.alloc_input(|| "y", || Ok(x * x))?;
            cs.enforce(|| "x * x = y", |lc| lc + xv, |lc| lc + xv, |lc| lc + yv);
        }
        Ok(())
    }

    impl bellperson::Circuit<Scalar> for Extendable {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            if CS::is_extensible() {
                let mut sub = CS::new();
                sub.alloc_input(|| "temp ONE", || Ok(Scalar::from(1u64)))?;
                squares(&mut sub, &self.values)?;
                cs.extend(&sub);
                return Ok(());
            }
            squares(cs, &self.values)
        }
    }

    /// bellperson's `WitnessCS` is extensible, and through that path such a circuit allocates
    /// one input more than the recording saw (this failed with `MatricesMismatch` before the
    /// witness-only synthesis took the default path): the witness from the matrices must equal
    /// the full synthesis's.
    #[test]
    fn a_circuit_with_an_extensible_path_synthesizes_from_the_matrices() {
        let recording = ShapeRecording::default();
        for first in [2u64, 5, 11] {
            let values = vec![first, first + 1, first + 2];
            let witness = recording.synthesize(Extendable { values: values.clone() }).unwrap();
            let full = Witness::synthesize(Extendable { values }, SatisfactionCheck::On).unwrap();
            assert!(same(&witness, &full), "first value {first}");
        }
        assert!(recording.matrices().is_some() && !recording.is_unusable());
    }

    #[test]
    fn a_failed_recording_is_retried_by_the_next_synthesis() {
        struct Fails;
        impl bellperson::Circuit<Scalar> for Fails {
            fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
                cs.alloc(|| "x", || Err(SynthesisError::AssignmentMissing))?;
                Ok(())
            }
        }
        let recording = ShapeRecording::default();
        assert!(recording.synthesize(Fails).is_err());
        assert!(recording.matrices().is_none() && !recording.is_unusable());
        recording.synthesize(Branching { x: 2 }).unwrap();
        assert!(recording.matrices().is_some(), "the next synthesis did not record");
    }
}

/// Matrices writes still running in this process. A process that exits while one runs
/// (`snarkpipe prove` exits right after its proof) loses it, so the next process records the
/// matrices again: [`finish_matrices_writes`] lets the prover's shutdown wait for them.
static WRITES_IN_FLIGHT: (parking_lot::Mutex<usize>, parking_lot::Condvar) =
    (parking_lot::Mutex::new(0), parking_lot::Condvar::new());

/// One write counted in [`WRITES_IN_FLIGHT`] until it is dropped (the write's thread drops it
/// when it ends, however it ends; a thread that could not start drops it at once).
struct WriteInFlight;

impl WriteInFlight {
    fn start() -> WriteInFlight {
        *WRITES_IN_FLIGHT.0.lock() += 1;
        WriteInFlight
    }
}

impl Drop for WriteInFlight {
    fn drop(&mut self) {
        let mut count = WRITES_IN_FLIGHT.0.lock();
        *count -= 1;
        WRITES_IN_FLIGHT.1.notify_all();
    }
}

/// Waits up to `within` for the matrices writes in flight to end; returns how many are still
/// running then (their temporary files are left behind and the next process records again).
pub fn finish_matrices_writes(within: std::time::Duration) -> usize {
    let deadline = std::time::Instant::now() + within;
    let mut count = WRITES_IN_FLIGHT.0.lock();
    while *count > 0 {
        if WRITES_IN_FLIGHT.1.wait_until(&mut count, deadline).timed_out() {
            break;
        }
    }
    *count
}
