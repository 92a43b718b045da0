//! Where a proof's key comes from: the parameter directory's files by filecoin-proofs' cache
//! names, the prover's key cache, the matrices kept beside a file, or a key held in memory.

use super::*;

/// A key found without a circuit ([`FilecoinProver::known_key`]), with its circuit's
/// constraint count.
pub(super) struct KnownKey {
    pub(super) key: Arc<ProvingKey>,
    pub(super) constraints: usize,
}

/// filecoin-proofs' identifier of a compound proof's circuit, which names its parameter files.
pub(super) fn cache_id<P, C, PP>(public_params: &PP) -> String
where
    P: CacheableParameters<C, PP>,
    C: Circuit<Scalar>,
    PP: ParameterSetMetadata,
{
    P::cache_identifier(public_params)
}

impl<'p> FilecoinProver<'p> {
    /// Proves the circuit whose `.params` file would be `params` with `key`, held in memory,
    /// instead of reading the file (which need not exist): a test setup's key
    /// ([`super::sparse::test_key`]), too large for the disk at 32 GiB. The `.vk` beside that
    /// path must still be the key's, since filecoin-proofs' verifier reads it by name; the
    /// key's shape is checked against each proof's circuits as a file's is. Proofs of such a
    /// key are proven on the pipeline only (not on bellperson's reference path).
    pub fn with_held_key(mut self, params: PathBuf, key: Arc<ProvingKey>) -> Self {
        self.held.retain(|(path, _)| path != &params);
        self.held.push((params, key));
        self
    }

    pub(super) fn held_key(&self, files: &ParamFiles) -> Option<&Arc<ProvingKey>> {
        self.held.iter().find(|(path, _)| path == &files.params).map(|(_, key)| key)
    }

    /// PoRep's public parameters for `porep_config` (its published partitions, or the
    /// configuration's), and the parameter files they name.
    pub(super) fn porep_setup<Tree: 'static + MerkleTreeTrait>(
        &self,
        porep_config: &PoRepConfig,
    ) -> Result<(
        compound_proof::PublicParams<'static, stacked::StackedDrg<'static, Tree, DefaultPieceHasher>>,
        ParamFiles,
    )> {
        let setup = compound_proof::SetupParams {
            vanilla_params: filecoin_proofs::parameters::setup_params(porep_config)
                .map_err(|e| filecoin_error("PoRep setup", e))?,
            partitions: Some(usize::from(porep_config.partitions)),
            priority: false,
        };
        let public_params = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<_, _>>::setup(&setup)
            .map_err(|e| filecoin_error("PoRep public parameters", e))?;
        let id = cache_id::<
            StackedCompound<Tree, DefaultPieceHasher>,
            stacked::StackedCircuit<Tree, DefaultPieceHasher>,
            _,
        >(&public_params.vanilla_params);
        let files = self.files("PoRep", u64::from(porep_config.sector_size), id)?;
        Ok((public_params, files))
    }

    /// Window or Winning PoSt's public parameters for `post_config` and `partitions` (None:
    /// one), and the parameter files they name. The files are looked up before any vanilla
    /// proof is checked: a missing file is the cheaper and the clearer error.
    pub(super) fn post_setup<Tree: 'static + MerkleTreeTrait>(
        &self,
        post_config: &PoStConfig,
        partitions: Option<usize>,
    ) -> Result<(compound_proof::PublicParams<'static, fallback::FallbackPoSt<'static, Tree>>, ParamFiles)> {
        let (what, vanilla_params) = match post_config.typ {
            PoStType::Window => ("Window PoSt", filecoin_proofs::parameters::window_post_setup_params(post_config)),
            PoStType::Winning => (
                "Winning PoSt",
                filecoin_proofs::parameters::winning_post_setup_params(post_config)
                    .map_err(|e| filecoin_error("Winning PoSt setup", e))?,
            ),
        };
        let setup = compound_proof::SetupParams { vanilla_params, partitions, priority: post_config.priority };
        let public_params = <FallbackPoStCompound<Tree> as CompoundProof<_, _>>::setup(&setup)
            .map_err(|e| filecoin_error("PoSt public parameters", e))?;
        let id = cache_id::<FallbackPoStCompound<Tree>, fallback::FallbackPoStCircuit<Tree>, _>(
            &public_params.vanilla_params,
        );
        let files = self.files(what, u64::from(post_config.sector_size), id)?;
        Ok((public_params, files))
    }

    /// SnapDeals' public parameters for an update of `config`, and the parameter files they
    /// name.
    pub(super) fn snap_setup<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        &self,
        config: &SectorUpdateConfig,
    ) -> Result<(compound_proof::PublicParams<'static, storage_proofs_update::EmptySectorUpdate<Tree>>, ParamFiles)>
    {
        let setup = compound_proof::SetupParams {
            vanilla_params: storage_proofs_update::SetupParams { sector_bytes: u64::from(config.sector_size) },
            partitions: Some(usize::from(config.update_partitions)),
            priority: false,
        };
        let public_params =
            <EmptySectorUpdateCompound<Tree> as CompoundProof<_, EmptySectorUpdateCircuit<Tree>>>::setup(&setup)
                .map_err(|e| filecoin_error("SnapDeals public parameters", e))?;
        let id = cache_id::<EmptySectorUpdateCompound<Tree>, EmptySectorUpdateCircuit<Tree>, _>(
            &public_params.vanilla_params,
        );
        let files = self.files("SnapDeals", u64::from(config.sector_size), id)?;
        Ok((public_params, files))
    }

    /// Loads the proving key of `kind` at `sector_size` from the parameter directory into the
    /// prover's key cache, with its constraint matrices, without a proof: the shape the key is
    /// cut for, and the matrices, are recorded from the compound proof's blank circuit (the
    /// circuit filecoin-proofs generated the parameters from; no witness, so no value is
    /// computed). A later proof of the kind finds the key cached and its partitions, the first
    /// included, synthesized witness-only. What `snarkpipe serve --preload` does per name.
    ///
    /// A key the prover has cached, or whose matrices an earlier process kept beside the
    /// parameters, is taken as it is, without recording the blank circuit. PoRep and SnapDeals
    /// take the published partition count of the size; PoSt keys do not depend on it.
    pub fn load_key(&self, kind: ProofKind, sector_size: u64) -> Result<Arc<ProvingKey>> {
        let api_version = ApiVersion::V1_2_0;
        with_sector_shape!(sector_size, Tree => match kind {
            ProofKind::Porep => {
                let config = porep_config(sector_size, [0; 32], api_version, None)?;
                let (public_params, files) = self.porep_setup::<Tree>(&config)?;
                self.blank_key(&files, StackedCompound::<Tree, DefaultPieceHasher>::blank_circuit(&public_params.vanilla_params))
            }
            ProofKind::Snap => {
                let config = SectorUpdateConfig::from_porep_config(&porep_config(sector_size, [0; 32], api_version, None)?);
                let (public_params, files) = self.snap_setup::<Tree>(&config)?;
                self.blank_key(&files, EmptySectorUpdateCompound::<Tree>::blank_circuit(&public_params.vanilla_params))
            }
            ProofKind::WindowPost | ProofKind::WinningPost => {
                let typ = if kind == ProofKind::WindowPost { PoStType::Window } else { PoStType::Winning };
                let config = post_config(typ, sector_size, api_version)?;
                let (public_params, files) = self.post_setup::<Tree>(&config, None)?;
                self.blank_key(&files, FallbackPoStCompound::<Tree>::blank_circuit(&public_params.vanilla_params))
            }
        })
    }

    /// The key of `files` for the shape of `blank`, with the matrices recorded from it, unless
    /// the key is known without a circuit ([`Self::known_key`]): recording a 32 GiB PoRep's
    /// blank circuit is a core-minute, reading the kept matrices is not.
    pub(super) fn blank_key<C: Circuit<Scalar>>(&self, files: &ParamFiles, blank: C) -> Result<Arc<ProvingKey>> {
        if let (Some(known), _) = self.known_key(files)? {
            return Ok(known.key);
        }
        let matrices = ConstraintMatrices::record(blank)?;
        let key = self.key(files, &matrices.shape())?;
        key.recording.adopt(Arc::new(matrices));
        Ok(key)
    }

    /// The key of `files` when no circuit is needed to find it, with its circuit's constraint
    /// count: the one the prover's key cache holds for the file, else the one the constraint
    /// matrices an earlier process kept beside the file give (their shape, their matrices).
    /// Also the seconds spent reading those matrices and the file (zero on a cache hit).
    pub(super) fn known_key(&self, files: &ParamFiles) -> Result<(Option<KnownKey>, f64)> {
        if let Some(key) = self.held_key(files) {
            files.check(&key.vk)?;
            // A held key without recorded matrices is found by the first partition's shape.
            if let Some(constraints) = key.recording.matrices().map(|m| m.num_constraints()) {
                return Ok((Some(KnownKey { key: key.clone(), constraints }), 0.0));
            }
            return Ok((None, 0.0));
        }
        if let Some((key, shape)) = self.prover.cached_key_for_path(&files.params)? {
            files.check(&key.vk)?;
            return Ok((Some(KnownKey { key, constraints: shape.num_constraints }), 0.0));
        }
        let loading = Instant::now();
        let kept = self.prover.key_from_kept_matrices(&files.params, self.point_check)?;
        let known = kept.and_then(|key| {
            let constraints = key.recording.matrices()?.num_constraints();
            Some(KnownKey { key, constraints })
        });
        if let Some(known) = &known {
            files.check(&known.key.vk)?;
        }
        Ok((known, loading.elapsed().as_secs_f64()))
    }

    pub(super) fn files(&self, what: &str, sector_size: u64, cache_id: String) -> Result<ParamFiles> {
        let files = ParamFiles::new(
            format!("{what} {}", sector_size_name(sector_size)),
            &self.params_dir,
            &cache_id,
            sector_size,
        );
        if self.held_key(&files).is_none() {
            files.require_params()?;
        }
        Ok(files)
    }

    /// The key of `files` for circuits of `shape`, from the prover's key cache: the file is
    /// opened and decoded the first time only. The `.meta` and `.vk` beside it are checked
    /// every time (they are small), so a replaced `.vk` is noticed.
    pub(super) fn key(&self, files: &ParamFiles, shape: &WitnessShape) -> Result<Arc<ProvingKey>> {
        if let Some(key) = self.held_key(files) {
            key.check_shape(shape)?;
            files.check(&key.vk)?;
            return Ok(key.clone());
        }
        let key = self.prover.key_for_path(&files.params, self.point_check, shape)?;
        files.check(&key.vk)?;
        Ok(key)
    }
}
