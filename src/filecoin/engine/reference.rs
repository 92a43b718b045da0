//! bellperson's own prover on the same circuits: the reference snarkpipe's proofs are
//! compared with byte for byte.

use super::*;

impl<'p> FilecoinProver<'p> {
    /// The reference path of [`Self::bellperson_reference`]: the same circuits, bellperson's
    /// prover.
    pub(super) fn prove_with_bellperson<'a, S, C, P>(
        &self,
        kind: ProofKind,
        files: &ParamFiles,
        public_inputs: &S::PublicInputs,
        vanilla_proofs: Vec<S::Proof>,
        public_params: &S::PublicParams,
    ) -> Result<ProvenKind>
    where
        S: ProofScheme<'a>,
        S::Proof: Sync + Send,
        S::PublicParams: ParameterSetMetadata + Sync + Send,
        S::PublicInputs: Clone + Sync,
        C: Circuit<Scalar> + CircuitComponent + Send,
        P: CompoundProof<'a, S, C>,
    {
        let mut timings = ProofTimings::default();
        let loading = Instant::now();
        let params = bellperson::groth16::Parameters::<Bls12>::build_mapped_parameters(files.params.clone(), false)
            .map_err(|e| Error::io(format!("mapping {}", files.params.display()), e))?;
        files.check(&params.vk)?;
        timings.key_load = loading.elapsed().as_secs_f64();
        let circuits = vanilla_proofs
            .par_iter()
            .enumerate()
            .map(|(k, vanilla)| partition_circuit::<S, C, P>(public_inputs, vanilla, public_params, k))
            .collect::<Result<Vec<C>>>()?;
        let partitions = circuits.len();
        let (r, s) = self.blinding(partitions);
        let proving = Instant::now();
        let proofs = bellperson::groth16::create_proof_batch(circuits, &params, r, s)?;
        timings.gpu = proving.elapsed().as_secs_f64();
        Ok(ProvenKind {
            kind,
            bytes: proofs_to_bytes(&proofs),
            partitions,
            constraints: 0,
            timings,
            synthesis: None,
            key: None,
        })
    }
}
