//! A test setup of the real PoRep circuit: a Groth16 key for filecoin-proofs' PoRep circuit
//! of a sector size, made with known toxic waste (`groth16::setup`), held in memory, and only
//! its `.vk` and `.meta` written under filecoin-proofs' cache names, so that `verify_seal`
//! (which reads the `.vk` by name) judges proofs made with it.
//!
//! Anyone who knows the waste can forge proofs: such keys are for tests and benchmarks. The
//! files go only into a directory whose name says so ([`TEST_KEY_DIR_MARK`]), never into a
//! node's parameter directory, and no `.params` is written (at 32 GiB it would not fit the
//! device machine's disk).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bellperson::groth16::Parameters;
use blstrs::Bls12;
use filecoin_proofs::{DefaultPieceHasher, PoRepConfig};
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::{CacheEntryMetadata, CacheableParameters};
use storage_proofs_porep::stacked::{StackedCircuit, StackedCompound};

use crate::backend::Device;
use crate::circuit::ConstraintMatrices;
use crate::filecoin::params::ParamFiles;
use crate::filecoin::{filecoin_error, sector_size_name};
use crate::groth16::setup::{setup_on, ToxicWaste};
use crate::params::ProvingKey;
use crate::{Error, Result};

/// What the name of a test key's directory must contain.
pub const TEST_KEY_DIR_MARK: &str = "test-setup-known-toxic-waste";

/// A PoRep key from a test setup: the parameters in memory, and the files written beside
/// them (`files.params` names the `.params` a published key would have; it is not written).
pub struct PorepTestKey {
    pub params: Parameters<Bls12>,
    pub files: ParamFiles,
}

/// Makes the test key of `config`'s PoRep circuit with `waste`, its fixed-base
/// multiplications on `device` (the host's cores when `None`), and writes its `.vk` and
/// `.meta` into `dir`, whose name must contain [`TEST_KEY_DIR_MARK`].
pub fn porep_test_key<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    waste: &ToxicWaste,
    device: Option<&dyn Device>,
    dir: &Path,
) -> Result<PorepTestKey> {
    check_test_key_dir(dir)?;
    let (files, circuit) = porep_files_and_blank::<Tree>(config, dir)?;
    let params = setup_on(circuit, waste, device)?;

    std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let io = |path: &Path, e: std::io::Error| Error::io(format!("writing {}", path.display()), e);
    let mut vk = BufWriter::new(File::create(&files.vk).map_err(|e| io(&files.vk, e))?);
    params.vk.write(&mut vk).and_then(|()| vk.flush()).map_err(|e| io(&files.vk, e))?;
    let meta = File::create(&files.meta).map_err(|e| io(&files.meta, e))?;
    serde_json::to_writer(meta, &CacheEntryMetadata { sector_size: files.sector_size })
        .map_err(|e| Error::Filecoin(format!("writing {}: {e}", files.meta.display())))?;
    Ok(PorepTestKey { params, files })
}

/// Fails unless `dir`'s name marks it as a test-key directory ([`TEST_KEY_DIR_MARK`]): a key
/// with known toxic waste must never reach a node's parameter directory.
pub fn check_test_key_dir(dir: &Path) -> Result<()> {
    let marked = dir.file_name().is_some_and(|name| name.to_string_lossy().contains(TEST_KEY_DIR_MARK));
    if marked {
        return Ok(());
    }
    Err(Error::Config(format!(
        "{} is not a test-key directory: a key with known toxic waste goes only into a directory of its own whose \
         name contains {TEST_KEY_DIR_MARK:?}, never a node's parameter directory",
        dir.display()
    )))
}

/// A test key as the prover holds it: the proving key with its circuit's constraint
/// matrices (so that every partition, the first included, is synthesized witness-only), and
/// the files written for it.
pub struct HeldTestKey {
    pub key: Arc<ProvingKey>,
    pub files: ParamFiles,
    /// Wall seconds of the setup, and of recording the matrices (which ran beside it).
    pub setup_seconds: f64,
    pub record_seconds: f64,
}

/// [`porep_test_key`] as a [`ProvingKey`] the prover proves with in memory
/// (`FilecoinProver::with_held_key`), with the constraint matrices recorded from the blank
/// circuit while the setup runs (the setup's own synthesis is sequential, so the two share
/// the cores well). The key's shape is checked against the matrices' before it is returned.
pub fn held_porep_test_key<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    waste: &ToxicWaste,
    device: Option<&dyn Device>,
    dir: &Path,
) -> Result<HeldTestKey> {
    let (_, blank) = porep_files_and_blank::<Tree>(config, dir)?;
    let started = Instant::now();
    let (made, recorded) = rayon::join(
        || porep_test_key::<Tree>(config, waste, device, dir).map(|made| (made, started.elapsed())),
        || {
            let recording = Instant::now();
            ConstraintMatrices::record(blank).map(|matrices| (matrices, recording.elapsed()))
        },
    );
    let ((made, setup), (matrices, record)) = (made?, recorded?);
    tracing::info!(
        setup_seconds = setup.as_secs_f64(),
        record_seconds = record.as_secs_f64(),
        constraints = matrices.num_constraints(),
        "test key made"
    );
    // The key shares the parameters' vectors: no copy of the points.
    let key = ProvingKey::from_parameters(&made.params);
    drop(made.params);
    key.check_shape(&matrices.shape())?;
    key.recording.adopt(Arc::new(matrices));
    Ok(HeldTestKey { key, files: made.files, setup_seconds: setup.as_secs_f64(), record_seconds: record.as_secs_f64() })
}

/// The files of `config`'s PoRep key in `dir`, by filecoin-proofs' cache names (the `.params`
/// named need not exist).
pub fn porep_param_files<Tree: 'static + MerkleTreeTrait>(config: &PoRepConfig, dir: &Path) -> Result<ParamFiles> {
    porep_files_and_blank::<Tree>(config, dir).map(|(files, _)| files)
}

/// [`porep_param_files`], and the blank circuit the key is made for.
fn porep_files_and_blank<Tree: 'static + MerkleTreeTrait>(
    config: &PoRepConfig,
    dir: &Path,
) -> Result<(ParamFiles, StackedCircuit<Tree, DefaultPieceHasher>)> {
    let setup = compound_proof::SetupParams {
        vanilla_params: filecoin_proofs::parameters::setup_params(config)
            .map_err(|e| filecoin_error("PoRep setup", e))?,
        partitions: Some(usize::from(config.partitions)),
        priority: false,
    };
    let public_params = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<_, _>>::setup(&setup)
        .map_err(|e| filecoin_error("PoRep compound setup", e))?;
    let cache_id = <StackedCompound<Tree, DefaultPieceHasher> as CacheableParameters<
        StackedCircuit<Tree, DefaultPieceHasher>,
        _,
    >>::cache_identifier(&public_params.vanilla_params);
    let sector_size = u64::from(config.sector_size);
    let files =
        ParamFiles::new(format!("PoRep {} (test setup)", sector_size_name(sector_size)), dir, &cache_id, sector_size);
    let blank = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<_, _>>::blank_circuit(
        &public_params.vanilla_params,
    );
    Ok((files, blank))
}
