//! A prover that runs for months: no request waits for ever, and nothing is left held, when
//! the pipeline itself loses work.

use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::BackendKind;
use snarkpipe::circuit::Witness;
use snarkpipe::prover::{FaultInjection, ProofRequest, Prover, ProverConfig, Shutdown};
use snarkpipe::synthetic::SyntheticSpec;
use snarkpipe::{Error, Stage};

mod common;
use common::{fresh_seed, wait_each_within};

fn cpu_config(retries: usize) -> ProverConfig {
    ProverConfig {
        backend: BackendKind::Cpu,
        workers_per_device: 2,
        in_flight: 3,
        memory_reserve_bytes: 0,
        retries,
        ..ProverConfig::default()
    }
}

/// Every job reaching the actor of `stage` is dropped without an outcome, as a message sent to
/// a stopped actor is: each partition fails with a typed error naming that stage, within a
/// bound, and releases what it held. Before the jobs reported their own loss, the handle
/// waited for ever.
#[test]
fn a_job_dropped_without_an_outcome_fails_its_partition_instead_of_hanging() {
    let spec = SyntheticSpec { log_n: 6, seed: fresh_seed(), ..SyntheticSpec::default() };
    let key = spec.proving_key().unwrap();
    let witnesses: Vec<Arc<Witness>> = (0..3).map(|i| Arc::new(spec.witness(i).unwrap())).collect();
    for stage in [Stage::Admission, Stage::Htod, Stage::Msm, Stage::Assemble] {
        let injected = FaultInjection { lose_jobs_at: Some(stage), ..FaultInjection::default() };
        let prover = Prover::with_fault_injection(cpu_config(1), injected).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(fresh_seed());
        let handle = prover.submit(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
        let outcomes = wait_each_within(&handle, Duration::from_secs(60));
        for (i, outcome) in outcomes.iter().enumerate() {
            match outcome {
                Err(Error::Stage { partition, stage: at, cause }) => {
                    assert_eq!((*partition, *at), (i, stage), "{outcome:?}");
                    assert!(matches!(**cause, Error::Internal(_)), "{cause:?}");
                }
                other => panic!("partition {i}, jobs lost at {stage}: {other:?}"),
            }
        }
        // Two attempts each (one retry), both lost.
        assert_eq!(prover.faults().injected(), 6, "jobs lost at {stage}");
        let held = prover.held().unwrap();
        assert!(!held.leaked(), "jobs lost at {stage} left {held:?}");
        prover.shutdown(Shutdown::Drain);
        assert!(prover.held().unwrap().is_nothing(), "after shutdown: {:?}", prover.held());
    }
    // The negative twin: the same prover without the fault proves.
    let prover = Prover::new(cpu_config(1)).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(fresh_seed());
    let proofs = prover.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
    assert_eq!(proofs.len(), 3);
}
