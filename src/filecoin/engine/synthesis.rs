//! One partition's synthesis measured four ways ([`SynthesisFigures`]).

use super::*;

/// One partition's synthesis measured four ways on the same circuit and cores, with the
/// check that the new way gives exactly the old way's witness (`bench --circuit`'s
/// `synthesis` figures). Seconds of one run each.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SynthesisFigures {
    pub constraints: usize,
    /// Threads the evaluation's rayon pool has (each synthesis itself runs on one).
    pub threads: usize,
    /// bellperson's way (its `ProvingAssignment`, which `Witness::synthesize` mirrors): a
    /// `LinearCombination` built and evaluated for every term of every constraint.
    pub full_seconds: f64,
    /// Recording the constraint matrices with the witness: once per key.
    pub record_seconds: f64,
    /// Witness-only synthesis: bellperson's `WitnessCS`, no linear combination.
    pub witness_only_seconds: f64,
    /// a, b and c from the recorded matrices on the CPU (rayon).
    pub evaluate_seconds: f64,
    /// Witness-only synthesis and evaluation together, as a partition after the first pays.
    pub per_proof_seconds: f64,
    /// `full_seconds` over `per_proof_seconds`.
    pub speedup: f64,
    /// Whether witness-only synthesis and evaluation gave exactly the full synthesis's witness.
    pub witnesses_equal: bool,
    /// Terms of A, B and C together, and the matrices' host bytes.
    pub terms: usize,
    pub matrices_bytes: u64,
    /// Host-to-device bytes a partition stages with a, b and c evaluated on the host (today's
    /// pipeline), and with them evaluated on the device from resident matrices (inputs and aux
    /// only): `plan::staged_bytes_per_partition`.
    pub staged_bytes_host_evaluated: u64,
    pub staged_bytes_device_evaluated: u64,
    /// Host bytes the synthesis stage grants a partition of this key for its witness.
    pub witness_host_bytes: u64,
}

/// Synthesizes the circuit `circuit()` builds four ways (see [`SynthesisFigures`]), each on a
/// fresh copy, and compares the witnesses.
pub(super) fn measure_synthesis<C: Circuit<Scalar>>(circuit: impl Fn() -> Result<C>) -> Result<SynthesisFigures> {
    let timed = |started: Instant| started.elapsed().as_secs_f64();
    let started = Instant::now();
    let full = Witness::synthesize(circuit()?, SatisfactionCheck::Off)?;
    let full_seconds = timed(started);
    let started = Instant::now();
    let (matrices, _) = ConstraintMatrices::record_with_witness(circuit()?)?;
    let record_seconds = timed(started);
    let started = Instant::now();
    let (inputs, aux) = witness_assignment_sized(circuit()?, matrices.num_inputs(), matrices.num_aux())?;
    let witness_only_seconds = timed(started);
    let started = Instant::now();
    let (a, b, c) = matrices.evaluate(&inputs, &aux)?;
    let evaluate_seconds = timed(started);
    let witnesses_equal =
        a == full.a && b == full.b && c == full.c && inputs == full.input_assignment && aux == full.aux_assignment;
    let per_proof_seconds = witness_only_seconds + evaluate_seconds;
    let staged = staged_bytes_per_partition(&full.shape());
    let domain = full.a.len().next_power_of_two();
    Ok(SynthesisFigures {
        constraints: full.a.len(),
        threads: rayon::current_num_threads(),
        full_seconds,
        record_seconds,
        witness_only_seconds,
        evaluate_seconds,
        per_proof_seconds,
        speedup: if per_proof_seconds > 0.0 { full_seconds / per_proof_seconds } else { 0.0 },
        witnesses_equal,
        terms: matrices.a().num_terms() + matrices.b().num_terms() + matrices.c().num_terms(),
        matrices_bytes: matrices.bytes(),
        staged_bytes_host_evaluated: staged.host_evaluated,
        staged_bytes_device_evaluated: staged.device_evaluated,
        witness_host_bytes: witness_host_bytes(domain, full.input_assignment.len(), full.aux_assignment.len()),
    })
}
