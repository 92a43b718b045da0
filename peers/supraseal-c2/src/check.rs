//! `--check-only`: everything the race does except its GPU calls, at a small size on the CPU.
//!
//! 1. A real setup of the synthetic circuit (CPU), written with bellperson's
//!    `Parameters::write` and read back with `Parameters::read` (points checked): the same key.
//! 2. The file walked as supraseal's SRS reader walks it: its counts are the circuit's.
//! 3. Two witnesses packed for supraseal and checked against the key (what `supraseal::prove`
//!    checks before it hands over pointers).
//! 4. supraseal's C++ side called once, to open the SRS: without a GPU it must refuse with an
//!    error (proving the library is linked and its errors reach us), not abort.
//! 5. snarkpipe's CPU backend proves witness 0 with (r, s): the proof verifies against the
//!    re-read key with witness 0's inputs and equals snarkpipe's CPU reference prover's proof
//!    for the same r and s (what the race's identical-proof count rests on).
//! 6. The negative twin: witness 0 proved again with another r gives another proof, which
//!    verifies with witness 0's inputs and is rejected with witness 1's.

use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use bellperson::groth16::{prepare_verifying_key, verify_proof};
use blstrs::Scalar;
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use snarkpipe::backend::BackendKind;
use snarkpipe::params::ProvingKey;
use snarkpipe::prover::{Priority, ProofRequest, Prover, ProverConfig, Shutdown};

use crate::keys::{self, SrsHeader};
use crate::supraseal::Prepared;
use crate::Args;

#[derive(Debug, Serialize)]
struct CheckReport {
    check_only: bool,
    log_n: u32,
    params_file: SrsHeader,
    supraseal_srs_without_gpu: String,
    passed: Vec<String>,
}

pub fn run(args: &Args) -> Result<bool> {
    let log_n = args.check_log_n;
    let mut passed = Vec::new();
    let mut pass = |step: String| {
        println!("ok: {step}");
        passed.push(step);
    };
    let spec = crate::race::synthetic_spec(args, log_n);
    let shape = spec.shape()?;

    // 1. Setup, write, read back.
    let started = std::time::Instant::now();
    let params = keys::setup_params(&spec, None)?;
    let setup_seconds = started.elapsed().as_secs_f64();
    let dir = args.params_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("check-2^{log_n}-seed{}-{}.params", args.seed, std::process::id()));
    let started = std::time::Instant::now();
    let bytes = keys::write_params(&params, &path)?;
    let write_seconds = started.elapsed().as_secs_f64();
    let parallel_path = path.with_extension("parallel.params");
    let parallel = keys::write_params_parallel(&params, &parallel_path)
        .and_then(|_| Ok(std::fs::read(&path)? == std::fs::read(&parallel_path)?));
    let _ = std::fs::remove_file(&parallel_path);
    let reread = keys::read_params(&path);
    let header = SrsHeader::read(&path);
    let srs = crate::supraseal::open_srs(&path);
    if !args.keep_params {
        let _ = std::fs::remove_file(&path);
    }
    let reread = reread?;
    ensure!(keys::same_params(&params, &reread), "the parameters read back differ from those written");
    pass(format!(
        "2^{log_n} setup ({} constraints, {} aux; {setup_seconds:.2} s) written with Parameters::write \
         ({bytes} bytes, {write_seconds:.2} s) and read back with Parameters::read (points checked): the same key",
        shape.num_constraints, shape.num_aux
    ));

    ensure!(parallel?, "the parallel writer's file differs from bellperson's Parameters::write");
    pass("the parallel writer (--params-writer parallel) writes the same bytes as Parameters::write".into());

    // 2. The file as supraseal reads it.
    let header = header?;
    header.check_shape(&shape, log_n)?;
    pass(format!(
        "the file walked as supraseal's SRS reader walks it: ic {}, h {}, l {}, a {}, b_g1 {}, b_g2 {}, {} bytes, as the circuit needs",
        header.ic, header.h, header.l, header.a, header.b_g1, header.b_g2, header.bytes
    ));

    // 3. supraseal's inputs.
    let key = ProvingKey::from_parameters(&reread);
    key.check_shape(&shape)?;
    let witnesses = [Arc::new(spec.witness(0)?), Arc::new(spec.witness(1)?)];
    for (i, w) in witnesses.iter().enumerate() {
        let prepared = Prepared::new(w)?;
        prepared.check_against(&key)?;
        for (name, density, packed) in [
            ("A aux", &w.a_aux_density, &prepared.a_aux),
            ("B input", &w.b_input_density, &prepared.b_input),
            ("B aux", &w.b_aux_density, &prepared.b_aux),
        ] {
            ensure!(
                (0..density.len() + 64).all(|j| density.get(j) == packed.get(j)) && packed.popcount == density.total(),
                "witness {i}'s packed {name} density differs from its bits"
            );
        }
    }
    pass("both witnesses packed for supraseal (densities as 64-bit words, least significant bit first) and checked against the key".into());

    // 4. supraseal's C++ side, without a GPU.
    let supraseal_srs_without_gpu = match srs {
        Err(err) => format!("refused: {err:#}"),
        Ok(_) => "opened: this machine has a GPU".into(),
    };
    pass(format!("supraseal's SRS::try_new answered without aborting: {supraseal_srs_without_gpu}"));

    // 5. A snarkpipe proof on the CPU backend.
    let prover = Prover::new(ProverConfig {
        backend: BackendKind::Cpu,
        cpu_devices: 1,
        memory_reserve_bytes: 0,
        retries: 0,
        ..ProverConfig::default()
    })?;
    let pvk = prepare_verifying_key(&reread.vk);
    let mut rng = ChaCha20Rng::seed_from_u64(args.seed ^ 0xc4ec);
    let (r, s, r_twin) = (Scalar::random(&mut rng), Scalar::random(&mut rng), Scalar::random(&mut rng));
    let prove = |r: Scalar| -> Result<bellperson::groth16::Proof<blstrs::Bls12>> {
        let request = ProofRequest {
            key: key.clone(),
            partitions: vec![witnesses[0].clone()],
            r: vec![r],
            s: vec![s],
            priority: Priority::Normal,
            devices: None,
        };
        let mut proofs = prover.prove(request).context("snarkpipe's CPU backend failed to prove witness 0")?;
        proofs.pop().context("snarkpipe returned no proof")
    };
    let proof = prove(r)?;
    let (inputs0, inputs1) = (witnesses[0].public_inputs(), witnesses[1].public_inputs());
    ensure!(inputs0 != inputs1, "witnesses 0 and 1 have the same public inputs: the negative twin would prove nothing");
    ensure!(verify_proof(&pvk, &proof, inputs0)?, "snarkpipe's proof of witness 0 did not verify");
    let reference = snarkpipe::groth16::prove(&key, &witnesses[0], r, s)?;
    ensure!(proof == reference, "snarkpipe's pipeline and its CPU reference prover differ for the same r and s");
    pass("snarkpipe (CPU backend) proved witness 0; the proof verifies against the re-read key and equals the reference prover's for the same r and s".into());

    // 6. The negative twin.
    let twin = prove(r_twin)?;
    ensure!(twin != proof, "another r gave the same proof");
    ensure!(verify_proof(&pvk, &twin, inputs0)?, "witness 0's proof with another r did not verify");
    ensure!(!verify_proof(&pvk, &twin, inputs1)?, "a proof of witness 0 verified with witness 1's public inputs");
    ensure!(!verify_proof(&pvk, &proof, inputs1)?, "a proof of witness 0 verified with witness 1's public inputs");
    pass(
        "negative twin: witness 0 proved with another r verifies with its own inputs and is rejected with witness 1's"
            .into(),
    );
    let shutdown = prover.shutdown(Shutdown::Drain);
    ensure!(shutdown.failed == 0, "snarkpipe's shutdown found {} failed partitions", shutdown.failed);

    if let Some(out) = &args.out {
        let report = CheckReport { check_only: true, log_n, params_file: header, supraseal_srs_without_gpu, passed };
        std::fs::write(out, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    println!("check-only passed at 2^{log_n}");
    Ok(true)
}
