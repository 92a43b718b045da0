//! a = A·w, b = B·w, c = C·w evaluated on a device from resident constraint matrices
//! (`DeviceStream::evaluate_constraints`) against the CPU reference,
//! `ConstraintMatrices::evaluate`, element by element: on the CPU model (in CI) and on a GPU
//! (skips without one; fails with `SNARKPIPE_REQUIRE_GPU=1`). Synthetic circuits of several
//! sizes, random circuits (random coefficients, empty rows, a row of many terms, inputs in every
//! matrix), a table of one entry; each with negative twins: a changed assignment and a changed
//! matrix give results the comparison catches, and wrongly sized or shared buffers are typed
//! errors.

use std::sync::Arc;

use bellperson::{Circuit, ConstraintSystem, LinearCombination, SynthesisError};
use ff::Field;
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::{
    open_devices, BackendKind, CpuModel, Device, DeviceBuffer, DeviceSelection, DeviceStream, FailureSlot,
    ResidentMatrices, WorkTag,
};
use snarkpipe::circuit::{witness_assignment, ConstraintMatrices};
use snarkpipe::plan::{resident_matrices_bytes, scalar_bytes, MatricesLayout};
use snarkpipe::synthetic::{KeyKind, SyntheticSpec, WitnessProfile};
use snarkpipe::timeline::TimelineRecorder;
use snarkpipe::{Error, Scalar, Stage};

mod common;
use common::fresh_rng;

/// The CPU model of one device, large enough for every case here.
fn cpu_device() -> Arc<dyn Device> {
    let model = CpuModel { devices: 1, device_bytes: 8 << 30 };
    open_devices(BackendKind::Cpu, &DeviceSelection::All, model).unwrap().1.remove(0)
}

/// GPU 0 behind the same seam, or None (and the test skips) without a GPU.
fn gpu_device() -> Option<Arc<dyn Device>> {
    if !common::have_gpu() {
        return None;
    }
    let model = CpuModel { devices: 1, device_bytes: 0 };
    Some(open_devices(BackendKind::Cuda, &DeviceSelection::Only(vec![0]), model).unwrap().1.remove(0))
}

/// One device, a stream on it and a failure slot: what a partition's stage has.
struct Bench {
    device: Arc<dyn Device>,
    stream: Arc<dyn DeviceStream>,
    failure: FailureSlot,
}

impl Bench {
    fn on(device: Arc<dyn Device>) -> Bench {
        let stream = device.new_stream("sparse", TimelineRecorder::new()).unwrap();
        Bench { device, stream, failure: FailureSlot::new() }
    }

    fn tag(&self) -> WorkTag {
        WorkTag::new(0, Stage::Htod, &self.failure)
    }

    /// Waits for the stream and reports the first failure of its work.
    fn finish(&self) -> snarkpipe::Result<()> {
        self.stream.record_event()?.wait()?;
        match self.failure.failure() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    fn upload(&self, values: &[Scalar], len: usize) -> DeviceBuffer {
        let buffer = self.device.allocate(scalar_bytes(len)).unwrap();
        self.stream.copy_scalars_to_device(Arc::new(values.to_vec()), &buffer, &self.tag()).unwrap();
        buffer
    }

    fn resident(&self, matrices: &Arc<ConstraintMatrices>) -> ResidentMatrices {
        let resident = ResidentMatrices::upload(&*self.device, &*self.stream, matrices.clone(), &self.tag()).unwrap();
        assert_eq!(resident.buffer().bytes(), resident_matrices_bytes(matrices));
        resident
    }

    /// a, b and c of `resident` for the assignment on the device, read back with `padding`
    /// values past the last constraint, which must be zero although the outputs held other
    /// values before.
    fn evaluate(
        &self,
        resident: &ResidentMatrices,
        inputs: &[Scalar],
        aux: &[Scalar],
        padding: usize,
    ) -> snarkpipe::Result<[Vec<Scalar>; 3]> {
        let rows = resident.layout().num_constraints;
        let len = rows + padding;
        let (w_inputs, w_aux) = (self.upload(inputs, inputs.len().max(1)), self.upload(aux, aux.len().max(1)));
        let stale: Vec<Scalar> = (0..len as u64).map(|i| Scalar::from(i + 7)).collect();
        let outputs = [self.upload(&stale, len), self.upload(&stale, len), self.upload(&stale, len)];
        let [a, b, c] = &outputs;
        self.stream.evaluate_constraints(resident, &w_inputs, &w_aux, a, b, c, &self.tag())?;
        let pending = outputs.map(|out| self.stream.copy_scalars_to_host(&out, len, &self.tag()).unwrap());
        self.finish()?;
        let mut read = pending.map(|p| p.read().unwrap());
        for (name, values) in ["a", "b", "c"].iter().zip(&mut read) {
            let tail = values.split_off(rows);
            assert!(tail.iter().all(|v| v.is_zero_vartime()), "{name}: the padding past row {rows} is not zero");
        }
        Ok(read)
    }
}

/// The first (matrix, row) at which `ours` differs from `reference`: what every comparison
/// here asserts, so that the negative twins check the same comparison.
fn first_difference(ours: &[Vec<Scalar>; 3], reference: &(Vec<Scalar>, Vec<Scalar>, Vec<Scalar>)) -> Option<String> {
    let reference = [&reference.0, &reference.1, &reference.2];
    for (name, (ours, theirs)) in ["a", "b", "c"].iter().zip(ours.iter().zip(reference)) {
        if ours.len() != theirs.len() {
            return Some(format!("{name}: {} values, the reference {}", ours.len(), theirs.len()));
        }
        if let Some(row) = ours.iter().zip(theirs).position(|(x, y)| x != y) {
            return Some(format!("{name} row {row}"));
        }
    }
    None
}

fn synthetic(log_n: u32, num_inputs: usize, seed: u64) -> SyntheticSpec {
    SyntheticSpec { log_n, num_inputs, profile: WitnessProfile::Random, keys: KeyKind::Random, seed }
}

/// A random circuit: every variable allocated first, then rows whose A, B and C are drawn
/// terms over all variables (inputs, ONE included, and aux) with coefficients from a pool.
/// The values are random; the constraints need not hold (evaluation does not ask).
#[derive(Clone)]
struct RandomCircuit {
    inputs: Vec<Scalar>,
    aux: Vec<Scalar>,
    /// Per row, A, B and C as (variable, coefficient) with variable < inputs + aux (ONE is 0).
    rows: Vec<[Vec<(usize, Scalar)>; 3]>,
}

impl RandomCircuit {
    /// `num_rows` rows of 0 to `max_terms` terms each (some empty), one row of `long_row`
    /// terms, coefficients drawn from `pool` (ONE first).
    fn draw(
        rng: &mut ChaCha20Rng,
        num_inputs: usize,
        num_aux: usize,
        num_rows: usize,
        max_terms: usize,
        long_row: usize,
        pool: &[Scalar],
    ) -> RandomCircuit {
        let variables = 1 + num_inputs + num_aux;
        let term = |rng: &mut ChaCha20Rng| (rng.gen_range(0..variables), pool[rng.gen_range(0..pool.len())]);
        let mut rows: Vec<[Vec<(usize, Scalar)>; 3]> = (0..num_rows)
            .map(|_| {
                std::array::from_fn(|_| {
                    let n = if rng.gen_range(0..5) == 0 { 0 } else { rng.gen_range(1..=max_terms) };
                    distinct((0..n).map(|_| term(rng)).collect())
                })
            })
            .collect();
        if long_row > 0 {
            let at = rng.gen_range(0..num_rows);
            rows[at][rng.gen_range(0..3)] = distinct((0..long_row).map(|_| term(rng)).collect());
        }
        RandomCircuit {
            inputs: (0..num_inputs).map(|_| Scalar::random(&mut *rng)).collect(),
            aux: (0..num_aux).map(|_| Scalar::random(&mut *rng)).collect(),
            rows,
        }
    }
}

/// The terms with each variable once (its first term): a linear combination would merge a
/// repeat into one term of a new coefficient, and the table of a one-entry pool must stay one
/// entry long.
fn distinct(terms: Vec<(usize, Scalar)>) -> Vec<(usize, Scalar)> {
    let mut seen = std::collections::HashSet::new();
    terms.into_iter().filter(|(v, _)| seen.insert(*v)).collect()
}

impl Circuit<Scalar> for RandomCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut variables = vec![CS::one()];
        for (i, v) in self.inputs.iter().enumerate() {
            variables.push(cs.alloc_input(|| format!("input {i}"), || Ok(*v))?);
        }
        for (i, v) in self.aux.iter().enumerate() {
            variables.push(cs.alloc(|| format!("aux {i}"), || Ok(*v))?);
        }
        let lc = |terms: &[(usize, Scalar)]| {
            terms.iter().fold(LinearCombination::<Scalar>::zero(), |lc, &(v, k)| lc + (k, variables[v]))
        };
        for (r, [a, b, c]) in self.rows.iter().enumerate() {
            cs.enforce(|| format!("row {r}"), |_| lc(a), |_| lc(b), |_| lc(c));
        }
        Ok(())
    }
}

/// The assignment of a random circuit as the matrices' columns see it: ONE, the inputs, the aux.
fn assignment(circuit: &RandomCircuit) -> (Vec<Scalar>, Vec<Scalar>) {
    let mut inputs = vec![Scalar::ONE];
    inputs.extend(&circuit.inputs);
    (inputs, circuit.aux.clone())
}

/// A pool of `n` coefficients: ONE, minus one, then random.
fn pool(rng: &mut ChaCha20Rng, n: usize) -> Vec<Scalar> {
    let mut pool = vec![Scalar::ONE, -Scalar::ONE];
    pool.extend((2..n).map(|_| Scalar::random(&mut *rng)));
    pool.truncate(n);
    pool
}

/// Synthetic circuits of 2^4..2^max_log (every other size) match the reference, with a
/// changed assignment as the negative twin.
fn synthetic_circuits_match(bench: &Bench, max_log: u32) {
    let mut rng = fresh_rng();
    for log_n in (4..=max_log).step_by(2) {
        let spec = synthetic(log_n, rng.gen_range(0..6), rng.gen());
        let matrices = Arc::new(ConstraintMatrices::record(spec.circuit(0)).unwrap());
        let resident = bench.resident(&matrices);
        let (inputs, aux) = witness_assignment(spec.circuit(1)).unwrap();
        let reference = matrices.evaluate(&inputs, &aux).unwrap();
        let ours = bench.evaluate(&resident, &inputs, &aux, 5).unwrap();
        assert_eq!(first_difference(&ours, &reference), None, "2^{log_n}: device against the reference");

        // The negative twin: another partition's assignment, or one aux value changed.
        let (inputs2, mut aux2) = witness_assignment(spec.circuit(2)).unwrap();
        let other = bench.evaluate(&resident, &inputs2, &aux2, 0).unwrap();
        assert!(first_difference(&other, &reference).is_some(), "2^{log_n}: another witness gave the same a, b, c");
        assert_eq!(first_difference(&other, &matrices.evaluate(&inputs2, &aux2).unwrap()), None);
        let at = rng.gen_range(0..aux2.len());
        aux2[at] += Scalar::ONE;
        let changed = bench.evaluate(&resident, &inputs2, &aux2, 0).unwrap();
        assert!(first_difference(&changed, &matrices.evaluate(&inputs2, &aux2).unwrap()).is_none());
        let other_as_reference = (other[0].clone(), other[1].clone(), other[2].clone());
        let unchanged = first_difference(&changed, &other_as_reference);
        assert!(unchanged.is_some(), "2^{log_n}: aux {at} changed, a, b, c did not");
        println!("2^{log_n} synthetic ({} terms) matches the reference", resident.layout().terms());
    }
}

/// Random circuits with random coefficients, empty rows, a long row and a table of one entry
/// match the reference; a changed coefficient (the matrix perturbed) is caught.
fn random_circuits_match(bench: &Bench, sizes: &[usize]) {
    let mut rng = fresh_rng();
    for &rows in sizes {
        for (pool_len, long_row) in [(1, 0), (2, 3000), (40, 700)] {
            let coefficients = pool(&mut rng, pool_len);
            let (num_inputs, num_aux) = (rng.gen_range(0..5), rng.gen_range(1..rows.max(2)));
            let circuit = RandomCircuit::draw(&mut rng, num_inputs, num_aux, rows, 6, long_row, &coefficients);
            let matrices = Arc::new(ConstraintMatrices::record(circuit.clone()).unwrap());
            assert!(matrices.coefficient_table().len() <= pool_len);
            if pool_len == 1 {
                assert_eq!(matrices.coefficient_table(), &[Scalar::ONE], "the edge case of a table of one entry");
            }
            let context = format!("{rows} rows, {num_inputs} inputs, {pool_len} coefficients, a row of {long_row}");
            let resident = bench.resident(&matrices);
            let (inputs, aux) = assignment(&circuit);
            let reference = matrices.evaluate(&inputs, &aux).unwrap();
            let ours = bench.evaluate(&resident, &inputs, &aux, 3).unwrap();
            assert_eq!(first_difference(&ours, &reference), None, "{context}");

            // The negative twin: the same circuit with one term's coefficient changed records
            // other matrices, whose evaluation the comparison tells from the reference.
            let mut perturbed = circuit.clone();
            let (r, m) = (0..)
                .map(|_| (rng.gen_range(0..rows), rng.gen_range(0..3)))
                .find(|&(r, m)| !perturbed.rows[r][m].is_empty())
                .unwrap();
            perturbed.rows[r][m][0].1 += Scalar::from(3u64);
            let twin = Arc::new(ConstraintMatrices::record(perturbed).unwrap());
            let theirs = bench.evaluate(&bench.resident(&twin), &inputs, &aux, 0).unwrap();
            // (A changed term can cancel against a repeat of its variable; the reference says.)
            let expected_differs = twin.evaluate(&inputs, &aux).unwrap() != reference;
            assert_eq!(first_difference(&theirs, &reference).is_some(), expected_differs, "{context}: twin row {r}");
            assert_eq!(first_difference(&theirs, &twin.evaluate(&inputs, &aux).unwrap()), None, "{context}: twin");
        }
        println!("random circuits of {rows} rows match the reference");
    }
}

/// Wrongly sized, shared or misplaced buffers are typed errors before anything runs; the
/// same call with right buffers works (the positive twin).
fn wrong_buffers_are_typed_errors(bench: &Bench) {
    let mut rng = fresh_rng();
    let coefficients = pool(&mut rng, 3);
    let circuit = RandomCircuit::draw(&mut rng, 2, 20, 16, 4, 0, &coefficients);
    let matrices = Arc::new(ConstraintMatrices::record(circuit.clone()).unwrap());
    let resident = bench.resident(&matrices);
    let (inputs, aux) = assignment(&circuit);
    let (ni, na, rows) = (inputs.len(), aux.len(), matrices.num_constraints());
    let buffer = |len: usize| bench.upload(&vec![Scalar::ONE; len], len);
    let run = |w_inputs: &DeviceBuffer, w_aux: &DeviceBuffer, out: [&DeviceBuffer; 3]| {
        bench.stream.evaluate_constraints(&resident, w_inputs, w_aux, out[0], out[1], out[2], &bench.tag())
    };
    let (good_inputs, good_aux) = (bench.upload(&inputs, ni), bench.upload(&aux, na));
    let outs = [buffer(rows), buffer(rows), buffer(rows)];
    run(&good_inputs, &good_aux, [&outs[0], &outs[1], &outs[2]]).unwrap();
    bench.finish().unwrap();

    let refused = |outcome: snarkpipe::Result<()>, says: &str| match outcome {
        Err(Error::Device { operation: "evaluate constraints", message, .. }) => {
            assert!(message.contains(says), "{message} (expected to mention {says:?})")
        }
        other => panic!("expected a typed error mentioning {says:?}, got {other:?}"),
    };
    refused(run(&buffer(ni - 1), &good_aux, [&outs[0], &outs[1], &outs[2]]), "inputs buffer");
    refused(run(&good_inputs, &buffer(na - 1), [&outs[0], &outs[1], &outs[2]]), "aux buffer");
    refused(run(&good_inputs, &good_aux, [&outs[0], &buffer(rows - 1), &outs[2]]), "b buffer");
    refused(run(&good_inputs, &good_aux, [&outs[0], &outs[0], &outs[2]]), "b buffer is also the a buffer");
    refused(run(&good_inputs, &good_aux, [&outs[0], &outs[1], &good_aux]), "c buffer is also the aux buffer");
    bench.finish().unwrap();

    // A buffer too small for the matrices themselves.
    let short = bench.device.allocate(MatricesLayout::of(&matrices).bytes - 1).unwrap();
    let copied = bench.stream.copy_matrices_to_device(matrices.clone(), &short, &bench.tag());
    assert!(copied.is_err() || bench.finish().is_err(), "matrices copied into a buffer too small for them");
}

/// Resident matrices overwritten by other work fail the evaluation with a typed error (and a
/// GPU's context survives it); matrices uploaded again evaluate right (the twin).
fn overwritten_matrices_are_refused(device: Arc<dyn Device>) {
    let bench = Bench::on(device);
    let mut rng = fresh_rng();
    let coefficients = pool(&mut rng, 4);
    let circuit = RandomCircuit::draw(&mut rng, 1, 300, 200, 5, 0, &coefficients);
    let matrices = Arc::new(ConstraintMatrices::record(circuit.clone()).unwrap());
    let resident = bench.resident(&matrices);
    let (inputs, aux) = assignment(&circuit);
    let junk: Vec<Scalar> = (0..resident.buffer().bytes() / 32).map(|_| Scalar::random(&mut rng)).collect();
    bench.stream.copy_scalars_to_device(Arc::new(junk), resident.buffer(), &bench.tag()).unwrap();
    match bench.evaluate(&resident, &inputs, &aux, 0).map_err(|err| err.root_cause().clone()) {
        Err(Error::Device { message, .. }) => println!("overwritten matrices refused: {message}"),
        other => panic!("overwritten matrices evaluated: {other:?}"),
    }
    let bench = Bench::on(bench.device.clone());
    let again = bench.resident(&matrices);
    let ours = bench.evaluate(&again, &inputs, &aux, 0).unwrap();
    assert_eq!(first_difference(&ours, &matrices.evaluate(&inputs, &aux).unwrap()), None);
}

#[test]
fn cpu_synthetic_circuits_match_the_reference() {
    synthetic_circuits_match(&Bench::on(cpu_device()), 16);
}

#[test]
fn cpu_random_circuits_match_the_reference() {
    random_circuits_match(&Bench::on(cpu_device()), &[2, 17, 300, 4000]);
}

#[test]
fn cpu_wrong_buffers_are_typed_errors() {
    wrong_buffers_are_typed_errors(&Bench::on(cpu_device()));
}

#[test]
fn cpu_overwritten_matrices_are_refused() {
    overwritten_matrices_are_refused(cpu_device());
}

#[test]
fn cpu_leaves_nothing_allocated() {
    let device = cpu_device();
    {
        let bench = Bench::on(device.clone());
        let mut rng = fresh_rng();
        let coefficients = pool(&mut rng, 3);
        let circuit = RandomCircuit::draw(&mut rng, 3, 50, 64, 4, 0, &coefficients);
        let matrices = Arc::new(ConstraintMatrices::record(circuit.clone()).unwrap());
        let (inputs, aux) = assignment(&circuit);
        let resident = bench.resident(&matrices);
        bench.evaluate(&resident, &inputs, &aux, 1).unwrap();
        assert!(device.allocated_bytes() > 0, "nothing was counted while the buffers were held");
    }
    assert_eq!(device.allocated_bytes(), 0);
}

#[test]
fn gpu_synthetic_circuits_match_the_reference() {
    let Some(device) = gpu_device() else { return };
    synthetic_circuits_match(&Bench::on(device), 20);
}

#[test]
fn gpu_random_circuits_match_the_reference() {
    let Some(device) = gpu_device() else { return };
    random_circuits_match(&Bench::on(device), &[2, 17, 300, 4000, 70_000]);
}

#[test]
fn gpu_wrong_buffers_are_typed_errors() {
    let Some(device) = gpu_device() else { return };
    wrong_buffers_are_typed_errors(&Bench::on(device));
}

#[test]
fn gpu_overwritten_matrices_are_refused() {
    let Some(device) = gpu_device() else { return };
    overwritten_matrices_are_refused(device.clone());
    // The context survived: a fresh evaluation on the same device is right.
    random_circuits_match(&Bench::on(device), &[50]);
}
