//! A node's parameter directory: the `.params`, `.vk` and `.meta` files of each circuit, named
//! as filecoin-proofs' parameter cache names them (`v28-<circuit>-<hash>.params`). Nothing is
//! downloaded; a file that is missing, truncated or belongs to another circuit is a typed error
//! naming it.

use std::fs::File;
use std::path::{Path, PathBuf};

use bellperson::groth16::VerifyingKey;
use blstrs::Bls12;
use storage_proofs_core::parameter_cache::{metadata_id, parameter_id, verifying_key_id, CacheEntryMetadata};

use super::sector_size_name;
use crate::{Error, Result};

/// Makes `dir` filecoin-proofs' parameter cache for this process (`FIL_PROOFS_PARAMETER_CACHE`),
/// so that its verifiers read their keys from where snarkpipe reads the parameters. Its
/// settings are read once per process: call this before any other filecoin-proofs call; it
/// fails if they already name another directory. Returns the directory as resolved.
pub fn use_parameter_dir(dir: &Path) -> Result<PathBuf> {
    let resolved =
        std::fs::canonicalize(dir).map_err(|e| Error::io(format!("the parameter directory {}", dir.display()), e))?;
    if std::env::var_os("FIL_PROOFS_PARAMETER_CACHE").is_none_or(|set| Path::new(&set) != resolved) {
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &resolved);
    }
    let settled = storage_proofs_core::parameter_cache::parameter_cache_dir();
    if std::fs::canonicalize(&settled).ok().as_deref() != Some(resolved.as_path()) {
        return Err(Error::Config(format!(
            "filecoin-proofs already reads its parameters from {} in this process, not {}",
            settled.display(),
            resolved.display()
        )));
    }
    Ok(resolved)
}

/// The three files of one circuit's parameters in a parameter directory.
#[derive(Debug, Clone)]
pub struct ParamFiles {
    /// What the parameters are for, in words (`PoRep 2 KiB`), for messages.
    pub what: String,
    pub dir: PathBuf,
    pub params: PathBuf,
    pub vk: PathBuf,
    pub meta: PathBuf,
    /// The sector size the circuit proves.
    pub sector_size: u64,
}

impl ParamFiles {
    /// The files of the circuit filecoin-proofs identifies as `cache_id` (its
    /// `CacheableParameters::cache_identifier`), in `dir`.
    pub fn new(what: String, dir: &Path, cache_id: &str, sector_size: u64) -> ParamFiles {
        ParamFiles {
            what,
            dir: dir.to_path_buf(),
            params: dir.join(parameter_id(cache_id)),
            vk: dir.join(verifying_key_id(cache_id)),
            meta: dir.join(metadata_id(cache_id)),
            sector_size,
        }
    }

    fn missing(&self, file: &Path, reason: impl Into<String>) -> Error {
        Error::MissingParams {
            what: self.what.clone(),
            expected: file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            dir: self.dir.display().to_string(),
            reason: reason.into(),
        }
    }

    /// Checks that the `.vk` is the verifying key the `.params` carries (`params_vk`).
    pub fn check(&self, params_vk: &VerifyingKey<Bls12>) -> Result<()> {
        let vk = self.read_vk()?;
        if &vk != params_vk {
            return Err(self.missing(
                &self.vk,
                format!(
                    "it is not the verifying key of {}: the two files come from different setups",
                    self.params.display()
                ),
            ));
        }
        Ok(())
    }

    /// Fails with a typed error naming the expected file unless the `.params` file exists and
    /// its `.meta` (when present) names this sector size.
    pub fn require_params(&self) -> Result<()> {
        match std::fs::metadata(&self.params) {
            Ok(meta) if meta.is_file() => self.check_meta(),
            Ok(_) => Err(self.missing(&self.params, "it is not a regular file")),
            Err(e) => Err(self.missing(&self.params, format!("cannot open it: {e}"))),
        }
    }

    fn check_meta(&self) -> Result<()> {
        let file = match File::open(&self.meta) {
            Ok(file) => file,
            // The published parameter set does not ship every `.meta`; the name already
            // encodes the sector size, and the key's shape check catches a misnamed file.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(self.missing(&self.meta, format!("cannot read it: {e}"))),
        };
        let meta: CacheEntryMetadata = serde_json::from_reader(file)
            .map_err(|e| self.missing(&self.meta, format!("it is not a parameter metadata file: {e}")))?;
        if meta.sector_size != self.sector_size {
            return Err(self.missing(
                &self.meta,
                format!(
                    "these parameters are for {} sectors, not {}",
                    sector_size_name(meta.sector_size),
                    sector_size_name(self.sector_size)
                ),
            ));
        }
        Ok(())
    }

    /// The `.vk` file's verifying key.
    pub fn read_vk(&self) -> Result<VerifyingKey<Bls12>> {
        let file = File::open(&self.vk).map_err(|e| self.missing(&self.vk, format!("cannot open it: {e}")))?;
        VerifyingKey::<Bls12>::read(std::io::BufReader::new(file))
            .map_err(|e| self.missing(&self.vk, format!("it is not a verifying key (truncated?): {e}")))
    }
}
