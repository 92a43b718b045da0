//! The one error type of snarkpipe. Every variant carries what a caller needs to act on it.

use crate::stage::Stage;

/// Everything that can go wrong while proving, with enough context to act on.
///
/// `Error` is `Clone` so that one failure can be reported to every handle that waits on it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The parameters were made for a different circuit shape.
    #[error(
        "parameters do not match the circuit: {what}: the parameters have {in_params}, the circuit needs {in_circuit}"
    )]
    ParamsMismatch { what: &'static str, in_params: usize, in_circuit: usize },

    /// A `.params` file could not be read or is malformed.
    #[error("parameter file {path}: {reason}")]
    ParamsFile { path: String, reason: String },

    /// A point in the parameters is not on the curve or not in the prime-order subgroup.
    #[error("invalid point in the parameters: {0}")]
    InvalidPoint(String),

    /// The verifying key has delta at infinity: the parameters are malformed or malicious.
    #[error("the verifying key's delta is the point at infinity; refusing to prove with subverted parameters")]
    UnexpectedIdentity,

    /// Circuit synthesis failed (missing assignment, division by zero, ...).
    #[error("circuit synthesis failed: {0}")]
    Synthesis(String),

    /// A proof assembled from a device's results failed its pairing check: the device
    /// computed wrongly. Retried on another device.
    #[error("device {device} computed a proof that fails verification (a device fault); retried elsewhere")]
    WrongResult { device: usize },

    /// An invariant of snarkpipe itself did not hold: a bug, not bad input.
    #[error("internal error (a bug in snarkpipe; please report it): {0}")]
    Internal(String),

    /// A circuit variable had no assigned value.
    #[error("a variable has no assignment: prove with a witness, not with a key-generation circuit")]
    MissingAssignment,

    /// A witness whose vectors disagree in length (built by hand or corrupted).
    #[error("malformed witness: {0}")]
    MalformedWitness(String),

    /// The circuit enforces no constraint and has no public input beyond ONE, so ONE's
    /// `input * 0 = 0` would be its only constraint, on a domain of one point (or a hand-built
    /// witness has fewer than two constraint evaluations). bellperson proves such a circuit,
    /// but the proof attests nothing and the device NTTs start at two points, so snarkpipe
    /// refuses it. A circuit of public inputs alone is not empty: it has their constraints.
    #[error(
        "the circuit is empty: it enforces no constraint and has no public input beyond ONE, so \
         there is nothing to prove; add a constraint or a public input"
    )]
    EmptyCircuit,

    /// The circuit needs a domain larger than BLS12-381's Fr supports (2^32).
    #[error("the circuit needs a domain of 2^{log_n}, larger than the 2^32 that Fr supports")]
    DomainTooLarge { log_n: u32 },

    /// The witness does not satisfy a constraint (only checked when the satisfaction check is on).
    #[error("the witness does not satisfy constraint {index}{}", name.as_ref().map(|n| format!(" ({n})")).unwrap_or_default())]
    Unsatisfied { index: usize, name: Option<String> },

    /// The device's check of every proof found a·b ≠ c at `constraint` (the first such), and
    /// the host's own values agree: the witness is wrong, as made from a wrong vanilla proof or
    /// public input, or by a wrong witness generator. The input's fault, never the device's:
    /// not retried, not counted against the device, and the key's witness-only synthesis
    /// stays on.
    #[error(
        "the witness does not satisfy constraint {constraint} (a·b ≠ c there, found before proving): the witness \
         is wrong, so the vanilla proof or public inputs it was made from, or the witness generator, are wrong; \
         no device is at fault and it is not retried. (A circuit whose constraints depend on its witness fails \
         this way too once its key's matrices are recorded: prove such a circuit with \
         ProverConfig::constraint_evaluation set to Host.)"
    )]
    UnsatisfiedWitness { constraint: usize },

    /// With the evaluation check on, the witness that recorded constraint matrices and
    /// witness-only synthesis give differs from full synthesis's. `what` says where: `"a"`,
    /// `"b"` or `"c"` of constraint `index`; `"input"` or `"aux"` variable `index`;
    /// `"a_aux_density"`, `"b_input_density"` or `"b_aux_density"` bit `index`; or a count
    /// (`"num_constraints"`, `"num_inputs"`, `"num_aux"`) that full synthesis has as `index`.
    #[error(
        "{detail}: the circuit's constraint structure depends on its witness, a gadget's \
         witness-only path allocates other variables, or the matrices were recorded for another \
         circuit shape; record them again from this circuit"
    )]
    MatricesMismatch { what: &'static str, index: usize, detail: String },

    /// The r and s vectors of a batch do not match the number of circuits.
    #[error("randomness of the wrong length: {circuits} circuits but {r} values of r and {s} of s")]
    RandomnessLength { circuits: usize, r: usize, s: usize },

    /// A proof request with no partitions.
    #[error("the proof request has no partitions")]
    EmptyRequest,

    /// A partition whose plan can never fit the device, refused at admission.
    #[error(
        "partition needs {needed_bytes} bytes of device memory but device {device} has only {capacity_bytes} bytes \
         for proving ({} bytes short, with the proving key streamed in the smallest chunks); use a larger GPU, a \
         higher device-memory cap or a smaller memory reserve, or a smaller partition",
        bytes_short(.needed_bytes, .capacity_bytes)
    )]
    PlanExceedsDevice { device: usize, needed_bytes: u64, capacity_bytes: u64 },

    /// A preload waited longer than the stage timeout for device memory that partitions in
    /// flight held; the key is made resident by its first partition instead.
    #[error(
        "preloading a proving key on device {device} waited {waited_ms} ms for {needed_bytes} bytes of device \
         memory while partitions in flight held {in_use_bytes}; the key's first partition will make it resident"
    )]
    PreloadWaited { device: usize, needed_bytes: u64, in_use_bytes: u64, waited_ms: u64 },

    /// A circuit's witness would take more host memory than the prover may give all the
    /// witnesses it synthesizes at once.
    #[error(
        "the witness of this circuit needs {needed_bytes} bytes of host memory, more than the synthesis budget of \
         {capacity_bytes} bytes: raise ProverConfig::synthesis_host_bytes"
    )]
    WitnessExceedsHostBudget { needed_bytes: u64, capacity_bytes: u64 },

    /// The device (real or modelled) could not allocate memory.
    #[error("device {device} is out of memory: asked for {requested_bytes} bytes")]
    OutOfMemory { device: usize, requested_bytes: u64 },

    /// A device operation failed (driver error, copy, launch, pinning).
    #[error("device {device}: {operation} failed: {message}")]
    Device { device: usize, operation: &'static str, message: String },

    /// A failure inside a pipeline stage, naming the stage and the partition.
    #[error("partition {partition}: stage {stage} failed: {cause}")]
    Stage { partition: usize, stage: Stage, cause: Box<Error> },

    /// A stage's handler panicked; the actor was restarted.
    #[error("a panic in the {stage} stage: {message}")]
    Panicked { stage: Stage, message: String },

    /// The request was cancelled by its owner.
    #[error("the request was cancelled")]
    Cancelled,

    /// The prover is shutting down or has shut down.
    #[error("the prover has shut down")]
    ShutDown,

    /// The requested backend is not available on this machine.
    #[error("backend unavailable: {0}")]
    BackendUnavailable(String),

    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),

    /// The config sets `key_cache_host_bytes` and `synthesis_host_bytes` so that they add up to
    /// more than the host's memory: with both budgets full the OS would kill the process
    /// instead of the key cache evicting or a synthesis waiting (`ProverConfig::validate`).
    #[error(
        "ProverConfig::key_cache_host_bytes ({key_cache_bytes} bytes) and ProverConfig::synthesis_host_bytes \
         ({synthesis_bytes} bytes) add up to more than the host's {host_bytes} bytes of memory: lower one or both, \
         leaving room for the OS and the page-locked staging buffers, or leave them at their defaults, which \
         share the host's memory (snarkpipe::prover::host_memory_shares)"
    )]
    HostMemoryOvercommitted { key_cache_bytes: u64, synthesis_bytes: u64, host_bytes: u64 },

    /// An I/O error, with the path or operation it came from.
    #[error("{context}: {message}")]
    Io { context: String, message: String },

    /// The device's context is unusable (an illegal address, a trap, a lost device): every
    /// later operation on it would fail too. The device is drained and its context re-created;
    /// the partition is retried.
    #[error("device {device} is broken and is being recovered: {message}")]
    DeviceBroken { device: usize, message: String },

    /// Device work did not complete within the stage's watchdog bound (a hung kernel). The
    /// device is treated as broken and recovered; the partition is retried.
    #[error("device {device}: the {stage} stage's work did not complete within {waited_ms} ms (a hung kernel); the device is being recovered")]
    DeviceHang { device: usize, stage: Stage, waited_ms: u64 },

    /// The upload of a proving key that several partitions share failed in the work of
    /// another partition; this one did nothing wrong and is requeued.
    #[error("the proving key's upload, queued by {queued_by}, failed: {cause}")]
    SharedKeyFailed { queued_by: String, cause: Box<Error> },

    /// A fault injected on purpose by the fault-injection wrapper.
    #[error("injected fault: {0}")]
    Injected(String),

    /// A vanilla-proof file that cannot be used: unreadable, truncated or garbled JSON, or of
    /// another proof kind, sector size or API version than asked for.
    #[error("vanilla proof {path}: {reason}")]
    Vanilla { path: String, reason: String },

    /// A parameter file a proof needs is missing from the parameter directory, or does not
    /// belong there (another sector size, a `.vk` that is not its `.params`' key).
    #[error("parameters for {what}: {reason} (expected {expected} in {dir})")]
    MissingParams { what: String, expected: String, dir: String, reason: String },

    /// filecoin-proofs refused an input or failed (building circuits, reading its types).
    #[error("filecoin-proofs: {0}")]
    Filecoin(String),

    /// A proof came out that filecoin-proofs' verifier rejects; it is not returned.
    #[error("the {kind} proof does not verify with filecoin-proofs' verifier; it was not returned")]
    ProofRejected { kind: &'static str },
}

impl Error {
    /// Wraps a cause with the stage and partition it happened in.
    pub fn in_stage(self, partition: usize, stage: Stage) -> Error {
        match self {
            already @ Error::Stage { .. } => already,
            cause => Error::Stage { partition, stage, cause: Box::new(cause) },
        }
    }

    /// The innermost cause, unwrapping stage context.
    pub fn root_cause(&self) -> &Error {
        match self {
            Error::Stage { cause, .. } => cause.root_cause(),
            other => other,
        }
    }

    /// Whether the failure says the device as a whole is unusable until it is recovered.
    pub fn breaks_device(&self) -> bool {
        matches!(self.root_cause(), Error::DeviceBroken { .. } | Error::DeviceHang { .. })
    }

    /// Whether this failure (or its cause) was injected on purpose.
    pub fn is_injected(&self) -> bool {
        matches!(self.root_cause(), Error::Injected(_))
            || matches!(self.root_cause(), Error::Panicked { message, .. } if message.contains("injected"))
    }

    pub(crate) fn io(context: impl Into<String>, err: std::io::Error) -> Error {
        Error::Io { context: context.into(), message: err.to_string() }
    }
}

impl From<bellperson::SynthesisError> for Error {
    fn from(err: bellperson::SynthesisError) -> Error {
        use bellperson::SynthesisError as S;
        match err {
            S::AssignmentMissing => Error::MissingAssignment,
            S::UnexpectedIdentity => Error::UnexpectedIdentity,
            S::PolynomialDegreeTooLarge => Error::DomainTooLarge { log_n: 33 },
            S::IoError(e) => Error::io("reading parameters", e),
            other => Error::Synthesis(other.to_string()),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How many bytes a plan lacks (for [`Error::PlanExceedsDevice`]'s message).
fn bytes_short(needed: &u64, capacity: &u64) -> u64 {
    needed.saturating_sub(*capacity)
}
