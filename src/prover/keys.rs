//! A prover's proving keys: the key cache (by parameter file, source or shape), the
//! constraint matrices kept beside a file, and residency on the devices (preload, warm-up,
//! eviction).

use super::*;

/// Where the constraint matrices of the `.params` file at `params` are kept: beside it.
pub fn matrices_path(params: &std::path::Path) -> std::path::PathBuf {
    let mut name = params.as_os_str().to_owned();
    name.push(".snarkpipe-matrices");
    std::path::PathBuf::from(name)
}

/// The stamp of the parameter file at `path`, for its key's identity.
pub(super) fn file_stamp(path: &std::path::Path) -> Result<FileStamp> {
    FileStamp::of(path).map_err(|e| Error::io(format!("reading the stamp of parameter file {}", path.display()), e))
}

impl Prover {
    /// Resident proving keys per device: (count, bytes).
    pub fn residency(&self) -> Vec<(usize, u64)> {
        self.pipelines.iter().map(|p| p.residency()).collect()
    }

    /// Drops every resident key on every device; returns how many went. Keys in use stay
    /// alive until their partitions finish.
    pub fn evict_all_keys(&self) -> usize {
        self.pipelines.iter().map(|p| p.evict_key(None)).sum()
    }

    /// Evicts, from every device, the resident keys that nobody outside the devices holds any
    /// more (no caller, request or key-cache entry): nothing could ask for them again, and
    /// their device memory and page-locked host vectors are better given back now than when
    /// the budget next runs short. Returns how many keys went.
    pub fn release_unheld_keys(&self) -> usize {
        let mut residents: Vec<Arc<ProvingKey>> =
            self.pipelines.iter().flat_map(|p| p.resident_proving_keys()).collect();
        residents.sort_by_key(|k| Arc::as_ptr(k) as usize);
        let unheld: Vec<Arc<ProvingKey>> = residents
            .chunk_by(Arc::ptr_eq)
            // A key resident on n devices is held n times by their entries and n times by
            // `residents`; any other holder makes the count larger. Nobody can take a new
            // handle on an unheld key meanwhile: only the devices have one.
            .filter(|same| Arc::strong_count(&same[0]) <= 2 * same.len())
            .map(|same| same[0].clone())
            .collect();
        drop(residents);
        for key in &unheld {
            self.pipelines.iter().for_each(|p| {
                p.evict_key(Some(key));
            });
        }
        unheld.len()
    }

    /// The proving key for the parameters `source` holds, cut for `shape`, from the prover's
    /// key cache: the same parameters (by verifying-key digest and shape, whichever `Arc` or
    /// `ParameterSource` carries them) give the same key for the life of the prover, resident
    /// and page-locked, and only a miss calls [`ProvingKey::from_source`] (for
    /// `MappedParameters`, a read of every point from the file).
    pub fn key_for_source<P: ParameterSource<Bls12>>(
        &self,
        source: P,
        shape: &WitnessShape,
    ) -> Result<Arc<ProvingKey>> {
        let identity = KeyIdentity::of(source.get_vk(shape.num_inputs)?, shape);
        self.cached_key(identity, || ProvingKey::from_source(source, shape))
    }

    /// [`Prover::key_for_source`] for a `.params` file opened by path: its identity also
    /// carries the file's stamp (path, length, modification time), so another file, or this
    /// one rewritten, is another key.
    pub fn key_for_file(&self, file: &ParamsFile, shape: &WitnessShape) -> Result<Arc<ProvingKey>> {
        self.key_for_file_with(file, shape, None)
    }

    /// [`Prover::key_for_file`], with the circuit's matrices when they are in hand already
    /// (read from beside the parameters by [`Prover::key_from_kept_matrices`]), so that a
    /// key built now takes them instead of reading the file again.
    fn key_for_file_with(
        &self,
        file: &ParamsFile,
        shape: &WitnessShape,
        matrices: Option<Arc<ConstraintMatrices>>,
    ) -> Result<Arc<ProvingKey>> {
        let identity = KeyIdentity::of(file.verifying_key(), shape).from_file(file_stamp(file.path())?);
        let digest = *identity.vk_digest.bytes();
        self.cached_key(identity, || {
            let key = ProvingKey::from_source(file, shape)?;
            if let Some(matrices) = matrices {
                key.recording.adopt(matrices);
            }
            if self.config.constraint_matrices_beside_params {
                let path = matrices_path(file.path());
                match key.recording.load_or_persist(&path, digest, shape) {
                    MatricesFile::Replacing(why) => {
                        tracing::warn!(%why, "recorded constraint matrices not used; recording them again")
                    }
                    done => tracing::debug!(path = %path.display(), ?done, "constraint matrices beside the parameters"),
                }
            }
            Ok(key)
        })
    }

    /// The key of the `.params` file at `path`, cut for the shape of the constraint matrices
    /// an earlier process kept beside it, with those matrices: the first proof of a circuit in
    /// a new process then learns its shape without synthesizing a partition first, and
    /// synthesizes every partition witness-only. None when the prover keeps no matrices
    /// beside parameters, or there is no such file, or it is not this key's (logged; the first
    /// partition then records them again, as [`Prover::key_for_file`] says).
    pub fn key_from_kept_matrices(
        &self,
        path: impl AsRef<std::path::Path>,
        check: PointCheck,
    ) -> Result<Option<Arc<ProvingKey>>> {
        let path = path.as_ref();
        let kept = matrices_path(path);
        if !self.config.constraint_matrices_beside_params || !kept.exists() {
            return Ok(None);
        }
        let file = ParamsFile::open(path, check)?;
        let matrices = match ConstraintMatrices::read_file(&kept, *VkDigest::of(file.verifying_key()).bytes()) {
            Ok(matrices) => Arc::new(matrices),
            Err(err) => {
                tracing::warn!(%err, "constraint matrices beside the parameters not used");
                return Ok(None);
            }
        };
        let shape = matrices.shape();
        if let Some(key) = self.key_cache.lock().get_file(&file_stamp(path)?, &shape) {
            return Ok(Some(key));
        }
        self.key_for_file_with(&file, &shape, Some(matrices)).map(Some)
    }

    /// [`Prover::key_for_file`] for the `.params` file at `path`, which is opened (and its
    /// points checked as `check` says) only when the cache holds no key for the file as it
    /// stands now (same path, length and modification time) and `shape`.
    pub fn key_for_path(
        &self,
        path: impl AsRef<std::path::Path>,
        check: PointCheck,
        shape: &WitnessShape,
    ) -> Result<Arc<ProvingKey>> {
        let path = path.as_ref();
        if let Some(key) = self.key_cache.lock().get_file(&file_stamp(path)?, shape) {
            return Ok(key);
        }
        self.key_for_file(&ParamsFile::open(path, check)?, shape)
    }

    /// The key the cache holds for the `.params` file at `path` as it stands now (same path,
    /// length and modification time), with the shape it was cut for, when it holds exactly
    /// one: a caller proving that file's circuit again need not synthesize a partition first
    /// to find its key (`KeyFor::Shape`). A key cached for another shape of the same file
    /// makes the answer None rather than a guess.
    pub fn cached_key_for_path(
        &self,
        path: impl AsRef<std::path::Path>,
    ) -> Result<Option<(Arc<ProvingKey>, WitnessShape)>> {
        let stamp = file_stamp(path.as_ref())?;
        Ok(self.key_cache.lock().get_file_only(&stamp))
    }

    /// The key cached for `identity`, or the one `build` makes, cached and page-locked. Keys
    /// the cache evicts to stay within its host bytes are evicted from the devices too.
    fn cached_key(
        &self,
        identity: KeyIdentity,
        build: impl FnOnce() -> Result<Arc<ProvingKey>>,
    ) -> Result<Arc<ProvingKey>> {
        if self.stopping.load(Ordering::SeqCst) {
            return Err(Error::ShutDown);
        }
        if let Some(key) = self.key_cache.lock().get(&identity) {
            return Ok(key);
        }
        let slot = self.key_builds.lock().entry(identity.clone()).or_default().clone();
        let built = {
            let _building = slot.lock();
            let cached = self.key_cache.lock().get(&identity);
            match cached {
                // Built by the caller this one waited for.
                Some(key) => Ok(key),
                None => build().map(|key| {
                    let pins = pin_key_vectors(&self.key_pins, &key).unwrap_or_else(|err| {
                        tracing::warn!(%err, "a cached proving key stays pageable: page-locking it failed");
                        Vec::new()
                    });
                    let Inserted { key, evicted } = self.key_cache.lock().insert(identity.clone(), key, pins);
                    for old in &evicted {
                        self.pipelines.iter().for_each(|p| {
                            p.evict_key(Some(old));
                        });
                    }
                    key
                }),
            }
        };
        // Only this build's slot: a later miss (after an eviction) may have made a new one.
        let mut builds = self.key_builds.lock();
        if builds.get(&identity).is_some_and(|current| Arc::ptr_eq(current, &slot)) {
            builds.remove(&identity);
        }
        built
    }

    /// The key cache: each entry's identity, host bytes, tier (hot: resident on a device;
    /// warm: in host memory; cold: evicted from the host cache), hits and loads.
    pub fn key_cache_status(&self) -> KeyCacheStatus {
        self.key_cache
            .lock()
            .status(|key| self.pipelines.iter().filter(|p| p.holds_key(key)).map(|p| p.ordinal).collect())
    }

    /// Drops every key from the key cache and from the devices (partitions in flight keep
    /// theirs until they finish); returns how many keys the cache held.
    pub fn evict_cached_keys(&self) -> usize {
        let keys = self.key_cache.lock().clear();
        for key in &keys {
            self.pipelines.iter().for_each(|p| {
                p.evict_key(Some(key));
            });
        }
        keys.len()
    }

    fn selected(&self, devices: Option<&[usize]>) -> Vec<&Arc<DevicePipeline>> {
        self.pipelines.iter().filter(|p| devices.is_none_or(|d| d.contains(&p.ordinal))).collect()
    }

    /// Makes `key` resident on `devices` (None: all) now, so the first partition does not wait
    /// for its upload. A key is never copied twice to one device.
    pub fn preload(&self, key: &Arc<ProvingKey>, devices: Option<&[usize]>) -> Result<()> {
        self.selected(devices).into_iter().try_for_each(|p| p.preload(key))
    }

    /// Gets `devices` (None: all) ready to stream partitions of `key`: preloads the key and
    /// pins staging buffers for `in_flight` partitions of its shape, all devices at once, so
    /// the first partitions do not wait on page-locking fresh host memory. Returns the host
    /// bytes newly pinned for staging.
    pub fn warm_up(&self, key: &Arc<ProvingKey>, devices: Option<&[usize]>) -> Result<u64> {
        let selected = self.selected(devices);
        std::thread::scope(|scope| {
            let warming: Vec<_> = selected
                .iter()
                .map(|p| scope.spawn(move || p.preload(key).and_then(|()| p.warm_staging(key))))
                .collect();
            warming
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        Err(Error::Panicked { stage: Stage::Pin, message: "warming up a device panicked".into() })
                    })
                })
                .sum()
        })
    }

    /// Drops `key` from `devices` (None: all); returns on how many devices it was resident.
    pub fn evict(&self, key: &Arc<ProvingKey>, devices: Option<&[usize]>) -> usize {
        self.selected(devices).into_iter().map(|p| p.evict_key(Some(key))).sum()
    }

    /// Whether `key` is resident on device `ordinal`.
    pub fn is_resident(&self, key: &Arc<ProvingKey>, ordinal: usize) -> bool {
        self.pipelines.iter().any(|p| p.ordinal == ordinal && p.holds_key(key))
    }
}
