//! What a caller submits: a key and witnesses ([`ProofRequest`]), or circuits
//! ([`CircuitRequest`], [`KeyFor`]), and the checks every request meets before it is queued.

use super::*;

/// A request: one proving key and the partitions to prove with it.
pub struct ProofRequest {
    pub key: Arc<ProvingKey>,
    pub partitions: Vec<Arc<Witness>>,
    /// One (r, s) per partition.
    pub r: Vec<Scalar>,
    pub s: Vec<Scalar>,
    pub priority: Priority,
    /// Devices this request may run on (None: any).
    pub devices: Option<Vec<usize>>,
}

/// The key of a batch of circuits: known, or found from the first circuit's shape.
pub enum KeyFor<'a> {
    Known(Arc<ProvingKey>),
    Shape(Box<dyn FnOnce(&WitnessShape) -> Result<Arc<ProvingKey>> + 'a>),
}

/// What [`Prover::prove_circuits`] returns.
pub struct CircuitBatch {
    pub proofs: Vec<bellperson::groth16::Proof<Bls12>>,
    pub handle: ProofHandle,
    pub key: Arc<ProvingKey>,
    /// Finding the key (zero when it was known).
    pub key_time: std::time::Duration,
    /// From the call to the submission: the first circuit's synthesis and the key, when the
    /// key came from the shape.
    pub before_proving: std::time::Duration,
    /// Synthesis time summed over the circuits; it overlaps the proving.
    pub synthesis_time: std::time::Duration,
}

/// A request of partitions given as circuits, synthesized by the pipeline (see
/// [`Prover::submit_circuits`]).
pub struct CircuitRequest {
    pub key: Arc<ProvingKey>,
    pub circuits: Vec<DeferredCircuit>,
    pub r: Vec<Scalar>,
    pub s: Vec<Scalar>,
    pub priority: Priority,
    pub devices: Option<Vec<usize>>,
}

impl CircuitRequest {
    /// `'static` circuits with r and s drawn from `rng` (every r, then every s), at normal
    /// priority on any device.
    pub fn new<C, R>(key: Arc<ProvingKey>, circuits: Vec<C>, rng: &mut R) -> CircuitRequest
    where
        C: bellperson::Circuit<Scalar> + Send + 'static,
        R: rand_core::RngCore,
    {
        use ff::Field;
        let r = circuits.iter().map(|_| Scalar::random(&mut *rng)).collect();
        let s = circuits.iter().map(|_| Scalar::random(&mut *rng)).collect();
        let circuits = circuits.into_iter().map(|c| DeferredCircuit::new(c, key.recording.clone())).collect();
        CircuitRequest { key, circuits, r, s, priority: Priority::default(), devices: None }
    }
}

impl ProofRequest {
    /// A request with fresh random r and s for each partition.
    pub fn new(key: Arc<ProvingKey>, partitions: Vec<Arc<Witness>>, rng: &mut impl rand_core::RngCore) -> ProofRequest {
        use ff::Field;
        let r = partitions.iter().map(|_| Scalar::random(&mut *rng)).collect();
        let s = partitions.iter().map(|_| Scalar::random(&mut *rng)).collect();
        ProofRequest { key, partitions, r, s, priority: Priority::Normal, devices: None }
    }
}

/// A request's partitions, r and s agree in number, and there is at least one partition.
pub(super) fn check_request_shape(partitions: usize, r: &[Scalar], s: &[Scalar]) -> Result<()> {
    if partitions == 0 {
        return Err(Error::EmptyRequest);
    }
    if r.len() != partitions || s.len() != partitions {
        return Err(Error::RandomnessLength { circuits: partitions, r: r.len(), s: s.len() });
    }
    Ok(())
}

/// A witness's vectors must agree with each other before its shape is compared with a key.
pub(super) fn check_witness_lengths(w: &Witness) -> Result<()> {
    let bad = |what: String| Err(Error::MalformedWitness(what));
    if w.a.len() != w.b.len() || w.a.len() != w.c.len() {
        return bad(format!("a, b and c have {}, {} and {} evaluations", w.a.len(), w.b.len(), w.c.len()));
    }
    if w.input_assignment.is_empty() || w.input_assignment.len() != w.b_input_density.len() {
        return bad(format!(
            "{} inputs (ONE included) but a B-input density of {}",
            w.input_assignment.len(),
            w.b_input_density.len()
        ));
    }
    if w.aux_assignment.len() != w.a_aux_density.len() || w.aux_assignment.len() != w.b_aux_density.len() {
        return bad(format!(
            "{} aux values but A and B aux densities of {} and {}",
            w.aux_assignment.len(),
            w.a_aux_density.len(),
            w.b_aux_density.len()
        ));
    }
    Ok(())
}
