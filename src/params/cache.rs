//! The prover's cache of proving keys: one key per parameter set, for the life of the prover.
//!
//! A key is found by what it *is*, not by which `Arc` a caller happens to hold: a
//! [`KeyIdentity`] is a digest of the verifying key, the circuit shape the key was cut for and,
//! for a `.params` file opened by path, the file's stamp (path, length, modification time). So
//! the same in-memory `Parameters`, or the same `MappedParameters` file, passed again gives the
//! key built the first time, already resident and page-locked, and nothing is read again.
//!
//! This module is data and policy only: which key an identity names, which entries go when
//! the host bytes exceed the limit (least recently used first; the most recent entry always
//! stays), and what became of each (hits, loads, evictions). The prover builds keys on a miss,
//! page-locks them, evicts from its devices what this cache lets go, and says which devices
//! hold each key when it reports the tiers.

use std::collections::VecDeque;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use bellperson::groth16::VerifyingKey;
use blstrs::Bls12;
use serde::{Serialize, Serializer};

use super::ProvingKey;
use crate::circuit::WitnessShape;
use crate::memory::PinLease;

/// Evicted entries remembered (as cold records, without their keys) for the status report.
pub const COLD_RECORDS: usize = 64;

/// A collision-resistant digest of a verifying key as bellperson serializes it
/// (`VerifyingKey::write`): alpha, beta, gamma, delta and every `ic` point.
///
/// It is SHA-256 of those bytes: two parameter sets share a digest only if their verifying
/// keys are equal, and a verifying key carries the setup's delta, random per setup.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct VkDigest([u8; 32]);

impl VkDigest {
    pub fn of(vk: &VerifyingKey<Bls12>) -> VkDigest {
        let mut bytes = Vec::with_capacity(4 + (5 + vk.ic.len()) * 192);
        vk.write(&mut bytes).expect("writing into a Vec does not fail");
        VkDigest::of_bytes(&bytes)
    }

    fn of_bytes(bytes: &[u8]) -> VkDigest {
        use sha2::Digest;
        VkDigest(sha2::Sha256::digest(bytes).into())
    }

    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Debug for VkDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VkDigest({})", self.to_hex())
    }
}

impl Serialize for VkDigest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

/// Which file a key was read from, as the file system saw it when it was opened: a file
/// rewritten in place (another length or modification time) is another key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct FileStamp {
    /// The canonical path where it resolves, else the path as given.
    pub path: PathBuf,
    pub len: u64,
    /// `None` where the file system keeps no modification time.
    pub modified: Option<SystemTime>,
}

impl FileStamp {
    pub fn of(path: &Path) -> std::io::Result<FileStamp> {
        let metadata = std::fs::metadata(path)?;
        Ok(FileStamp {
            path: std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
            len: metadata.len(),
            modified: metadata.modified().ok(),
        })
    }
}

/// What a cached key is: the setup (its verifying key's digest), the circuit shape it was cut
/// for, and, for a key read from a file by path, that file's stamp.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct KeyIdentity {
    pub vk_digest: VkDigest,
    pub shape: WitnessShape,
    pub file: Option<FileStamp>,
}

impl KeyIdentity {
    /// The identity of parameters known only as a source (in-memory or mapped `Parameters`).
    pub fn of(vk: &VerifyingKey<Bls12>, shape: &WitnessShape) -> KeyIdentity {
        KeyIdentity { vk_digest: VkDigest::of(vk), shape: *shape, file: None }
    }

    /// The same identity, for a key read from the file `stamp` describes.
    pub fn from_file(self, stamp: FileStamp) -> KeyIdentity {
        KeyIdentity { file: Some(stamp), ..self }
    }
}

/// Where a cached key stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyTier {
    /// Resident on at least one device: a partition starts without uploading it.
    Hot,
    /// In host memory (page-locked unless pinning failed): an upload away from hot.
    Warm,
    /// Evicted from the host cache: the next use builds it from its parameters again.
    Cold,
}

/// One entry of [`KeyCacheStatus`].
#[derive(Clone, Debug, Serialize)]
pub struct KeyCacheEntryStatus {
    pub identity: KeyIdentity,
    /// Host bytes of the key's query vectors.
    pub bytes: u64,
    pub tier: KeyTier,
    /// Devices it is resident on (empty unless hot).
    pub devices: Vec<usize>,
    /// Whether the cache holds its host vectors page-locked.
    pub page_locked: bool,
    /// Lookups it answered without building the key.
    pub hits: u64,
    /// Times it was built (more than one after an eviction).
    pub loads: u64,
}

/// The cache as a whole, entries most recently used first, then the cold records.
#[derive(Clone, Debug, Serialize)]
pub struct KeyCacheStatus {
    pub host_limit_bytes: u64,
    /// Host bytes of the keys the cache holds now.
    pub host_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub entries: Vec<KeyCacheEntryStatus>,
}

struct CachedKey {
    identity: KeyIdentity,
    key: Arc<ProvingKey>,
    /// Host bytes of the key's vectors (its recorded constraint matrices come on top, once
    /// recorded: see `held_bytes`).
    bytes: u64,
    /// The key's host vectors, page-locked for as long as it is cached.
    pins: Vec<PinLease>,
    last_used: u64,
    hits: u64,
    loads: u64,
}

impl CachedKey {
    /// Host bytes the entry holds: the key's vectors and its recorded matrices.
    fn held_bytes(&self) -> u64 {
        self.bytes + self.key.recording.matrices().map_or(0, |m| m.bytes())
    }
}

struct ColdKey {
    identity: KeyIdentity,
    bytes: u64,
    hits: u64,
    loads: u64,
}

/// What [`KeyCache::insert`] did.
pub struct Inserted {
    /// The cached key for the identity (an entry already there wins over the new key).
    pub key: Arc<ProvingKey>,
    /// Keys dropped from the host cache to respect the byte limit, least recently used first;
    /// whoever holds them on a device should let them go too.
    pub evicted: Vec<Arc<ProvingKey>>,
}

/// Proving keys by identity, bounded by their host bytes.
pub struct KeyCache {
    host_limit_bytes: u64,
    entries: Vec<CachedKey>,
    cold: VecDeque<ColdKey>,
    /// Counts lookups and inserts: the order entries were last used in.
    clock: u64,
    hits: u64,
    misses: u64,
}

impl KeyCache {
    /// A cache holding at most `host_limit_bytes` of keys, except that the most recently used
    /// key always stays, however large.
    pub fn new(host_limit_bytes: u64) -> KeyCache {
        KeyCache { host_limit_bytes, entries: Vec::new(), cold: VecDeque::new(), clock: 0, hits: 0, misses: 0 }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The key cached for `identity`, counted as a hit and as the most recently used; `None`
    /// (not counted) when the caller must build it.
    pub fn get(&mut self, identity: &KeyIdentity) -> Option<Arc<ProvingKey>> {
        let now = self.tick();
        let entry = self.entries.iter_mut().find(|e| &e.identity == identity)?;
        entry.last_used = now;
        entry.hits += 1;
        self.hits += 1;
        Some(entry.key.clone())
    }

    /// The key cached for the file `stamp` describes, cut for `shape`, counted as [`get`]
    /// counts; so a file named by path is found without reading it for its verifying key.
    ///
    /// [`get`]: KeyCache::get
    pub fn get_file(&mut self, stamp: &FileStamp, shape: &WitnessShape) -> Option<Arc<ProvingKey>> {
        let identity = self
            .entries
            .iter()
            .find(|e| e.identity.file.as_ref() == Some(stamp) && &e.identity.shape == shape)?
            .identity
            .clone();
        self.get(&identity)
    }

    /// The one key cached for the file `stamp` describes, with the shape it was cut for,
    /// counted as [`get`] counts; None when there is none, or more than one (the file's
    /// circuit is then not known from the file alone).
    ///
    /// [`get`]: KeyCache::get
    pub fn get_file_only(&mut self, stamp: &FileStamp) -> Option<(Arc<ProvingKey>, WitnessShape)> {
        let mut of_file = self.entries.iter().filter(|e| e.identity.file.as_ref() == Some(stamp));
        let identity = of_file.next()?.identity.clone();
        if of_file.next().is_some() {
            return None;
        }
        let key = self.get(&identity)?;
        Some((key, identity.shape))
    }

    /// Caches `key`, built for `identity` after a miss, with the leases that page-lock its
    /// host vectors; then evicts least recently used entries until the host bytes are within
    /// the limit again (never the one just inserted).
    pub fn insert(&mut self, identity: KeyIdentity, key: Arc<ProvingKey>, pins: Vec<PinLease>) -> Inserted {
        if let Some(existing) = self.get(&identity) {
            return Inserted { key: existing, evicted: Vec::new() };
        }
        self.misses += 1;
        let now = self.tick();
        let (hits, loads) = match self.cold.iter().position(|c| c.identity == identity) {
            Some(i) => self.cold.remove(i).map_or((0, 0), |c| (c.hits, c.loads)),
            None => (0, 0),
        };
        let bytes = key.host_bytes();
        self.entries.push(CachedKey {
            identity,
            key: key.clone(),
            bytes,
            pins,
            last_used: now,
            hits,
            loads: loads + 1,
        });
        let mut evicted = Vec::new();
        while self.host_bytes() > self.host_limit_bytes && self.entries.len() > 1 {
            let oldest = (0..self.entries.len()).min_by_key(|&i| self.entries[i].last_used).expect("non-empty");
            evicted.push(self.retire(oldest));
        }
        Inserted { key, evicted }
    }

    /// Drops entry `i` from the host cache (its pins go with it), keeping a cold record.
    fn retire(&mut self, i: usize) -> Arc<ProvingKey> {
        let CachedKey { identity, key, bytes, pins, hits, loads, .. } = self.entries.remove(i);
        drop(pins);
        self.cold.push_front(ColdKey { identity, bytes, hits, loads });
        self.cold.truncate(COLD_RECORDS);
        key
    }

    /// Drops every entry from the host cache; returns their keys, for the devices to let go.
    pub fn clear(&mut self) -> Vec<Arc<ProvingKey>> {
        // Oldest first, so the most recently used ends up first among the cold records.
        let mut keys = Vec::new();
        while let Some(oldest) = (0..self.entries.len()).min_by_key(|&i| self.entries[i].last_used) {
            keys.push(self.retire(oldest));
        }
        keys
    }

    /// Host bytes of the keys cached now, their recorded constraint matrices included (about
    /// a fifth of a 32 GiB PoRep key's bytes): one bound covers both.
    pub fn host_bytes(&self) -> u64 {
        self.entries.iter().map(CachedKey::held_bytes).sum()
    }

    /// Keys cached now (cold records not counted).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The cache's state; `resident_on(key)` names the devices a cached key is resident on.
    pub fn status(&self, resident_on: impl Fn(&Arc<ProvingKey>) -> Vec<usize>) -> KeyCacheStatus {
        let mut cached: Vec<&CachedKey> = self.entries.iter().collect();
        cached.sort_by_key(|e| std::cmp::Reverse(e.last_used));
        let warm_or_hot = cached.into_iter().map(|e| {
            let devices = resident_on(&e.key);
            KeyCacheEntryStatus {
                identity: e.identity.clone(),
                bytes: e.held_bytes(),
                tier: if devices.is_empty() { KeyTier::Warm } else { KeyTier::Hot },
                devices,
                page_locked: !e.pins.is_empty(),
                hits: e.hits,
                loads: e.loads,
            }
        });
        let cold = self.cold.iter().map(|c| KeyCacheEntryStatus {
            identity: c.identity.clone(),
            bytes: c.bytes,
            tier: KeyTier::Cold,
            devices: Vec::new(),
            page_locked: false,
            hits: c.hits,
            loads: c.loads,
        });
        KeyCacheStatus {
            host_limit_bytes: self.host_limit_bytes,
            host_bytes: self.host_bytes(),
            hits: self.hits,
            misses: self.misses,
            entries: warm_or_hot.chain(cold).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use blstrs::{G1Affine, G1Projective, G2Affine};
    use group::prime::PrimeCurveAffine;
    use group::Group;

    use super::*;

    fn vk(ic: usize) -> VerifyingKey<Bls12> {
        let (g1, g2) = (G1Affine::generator(), G2Affine::generator());
        VerifyingKey {
            alpha_g1: g1,
            beta_g1: g1,
            beta_g2: g2,
            gamma_g2: g2,
            delta_g1: g1,
            delta_g2: g2,
            ic: (0..ic)
                .map(|i| G1Affine::from(G1Projective::generator() * blstrs::Scalar::from(i as u64 + 1)))
                .collect(),
        }
    }

    fn shape(num_aux: usize) -> WitnessShape {
        WitnessShape { num_constraints: 8, num_inputs: 2, num_aux, a_aux_total: 1, b_input_total: 1, b_aux_total: 1 }
    }

    /// A key whose host vectors take `g1_points` × 96 bytes (no G2 points).
    fn key(g1_points: usize) -> Arc<ProvingKey> {
        let points = Arc::new(vec![G1Affine::generator(); g1_points]);
        Arc::new(ProvingKey {
            vk: vk(2),
            h: points,
            l: Arc::new(Vec::new()),
            a: Arc::new(Vec::new()),
            b_g1: Arc::new(Vec::new()),
            b_g2: Arc::new(Vec::new()),
            recording: Default::default(),
        })
    }

    fn id(n: usize) -> KeyIdentity {
        KeyIdentity::of(&vk(2), &shape(n))
    }

    const POINT: u64 = std::mem::size_of::<G1Affine>() as u64;

    #[test]
    fn equal_parameters_have_equal_identities_and_any_difference_tells_them_apart() {
        assert_eq!(KeyIdentity::of(&vk(3), &shape(4)), KeyIdentity::of(&vk(3), &shape(4)));
        assert_eq!(VkDigest::of(&vk(3)), VkDigest::of(&vk(3)), "the digest is not deterministic");
        // Another setup: one point of the verifying key differs.
        let mut other = vk(3);
        other.delta_g1 = G1Affine::from(G1Projective::generator().double());
        assert_ne!(VkDigest::of(&vk(3)), VkDigest::of(&other));
        assert_ne!(KeyIdentity::of(&vk(3), &shape(4)), KeyIdentity::of(&other, &shape(4)));
        // Another number of inputs changes the serialized ic.
        assert_ne!(VkDigest::of(&vk(3)), VkDigest::of(&vk(4)));
        // The same setup cut for another shape.
        assert_ne!(KeyIdentity::of(&vk(3), &shape(4)), KeyIdentity::of(&vk(3), &shape(5)));
        // The same parameters read from two files, or from a file rewritten in place.
        let stamp = |path: &str, len| FileStamp { path: path.into(), len, modified: None };
        let plain = KeyIdentity::of(&vk(3), &shape(4));
        let from_a = plain.clone().from_file(stamp("/p/a.params", 10));
        assert_ne!(plain, from_a);
        assert_ne!(from_a, plain.clone().from_file(stamp("/p/b.params", 10)));
        assert_ne!(from_a, plain.clone().from_file(stamp("/p/a.params", 11)));
        assert_eq!(from_a, plain.from_file(stamp("/p/a.params", 10)));
    }

    #[test]
    fn a_file_stamp_sees_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.params");
        std::fs::write(&path, b"one").unwrap();
        let first = FileStamp::of(&path).unwrap();
        assert_eq!(first, FileStamp::of(&path).unwrap());
        std::fs::write(&path, b"longer").unwrap();
        assert_ne!(first, FileStamp::of(&path).unwrap());
        // The same file by another name is the same file.
        let dotted = dir.path().join(".").join("k.params");
        assert_eq!(FileStamp::of(&path).unwrap(), FileStamp::of(&dotted).unwrap());
    }

    #[test]
    fn a_hit_returns_the_cached_key_and_a_miss_does_not() {
        let mut cache = KeyCache::new(u64::MAX);
        assert!(cache.get(&id(1)).is_none());
        let built = key(4);
        let inserted = cache.insert(id(1), built.clone(), Vec::new());
        assert!(Arc::ptr_eq(&inserted.key, &built) && inserted.evicted.is_empty());
        let hit = cache.get(&id(1)).expect("a hit");
        assert!(Arc::ptr_eq(&hit, &built));
        assert!(cache.get(&id(2)).is_none(), "another identity hit");
        // An entry already there wins over a second build of the same identity.
        let again = cache.insert(id(1), key(4), Vec::new());
        assert!(Arc::ptr_eq(&again.key, &built));
        let status = cache.status(|_| Vec::new());
        assert_eq!((status.hits, status.misses, status.entries.len()), (2, 1, 1));
        assert_eq!((status.entries[0].hits, status.entries[0].loads), (2, 1));
    }

    #[test]
    fn a_file_is_found_by_its_stamp_and_shape_alone() {
        let mut cache = KeyCache::new(u64::MAX);
        let stamp = FileStamp { path: "/p/a.params".into(), len: 10, modified: None };
        let built = key(4);
        cache.insert(id(1).from_file(stamp.clone()), built.clone(), Vec::new());
        assert!(cache.get_file(&stamp, &shape(1)).is_some_and(|k| Arc::ptr_eq(&k, &built)));
        // The twin: another shape, another stamp, or the same parameters not read from a
        // file are not found by stamp.
        assert!(cache.get_file(&stamp, &shape(2)).is_none());
        assert!(cache.get_file(&FileStamp { len: 11, ..stamp.clone() }, &shape(1)).is_none());
        cache.insert(id(2), key(4), Vec::new());
        assert!(cache.get_file(&stamp, &shape(2)).is_none());
        assert_eq!(cache.status(|_| Vec::new()).hits, 1);
    }

    #[test]
    fn the_least_recently_used_entries_go_first() {
        // Room for two keys of 10 points.
        let mut cache = KeyCache::new(20 * POINT);
        let (a, b, c) = (key(10), key(10), key(10));
        cache.insert(id(1), a.clone(), Vec::new());
        cache.insert(id(2), b.clone(), Vec::new());
        // A is used again after B: B is now the least recently used.
        assert!(cache.get(&id(1)).is_some());
        let inserted = cache.insert(id(3), c.clone(), Vec::new());
        assert_eq!(inserted.evicted.len(), 1);
        assert!(Arc::ptr_eq(&inserted.evicted[0], &b), "evicted the wrong entry");
        assert!(cache.get(&id(2)).is_none() && cache.get(&id(1)).is_some() && cache.get(&id(3)).is_some());
        // The twin: without the hit on A, A (the oldest) goes first.
        let mut cache = KeyCache::new(20 * POINT);
        cache.insert(id(1), a.clone(), Vec::new());
        cache.insert(id(2), b, Vec::new());
        let inserted = cache.insert(id(3), c, Vec::new());
        assert!(Arc::ptr_eq(&inserted.evicted[0], &a));
    }

    #[test]
    fn the_host_bytes_stay_within_the_limit_but_one_key_always_stays() {
        let mut cache = KeyCache::new(25 * POINT);
        for (n, points) in [(1, 10), (2, 10), (3, 20), (4, 5), (5, 5)] {
            let inserted = cache.insert(id(n), key(points), Vec::new());
            assert!(cache.host_bytes() <= 25 * POINT, "over the limit after inserting {n}");
            assert!(cache.get(&id(n)).is_some(), "the entry just inserted was evicted");
            assert!(inserted.evicted.iter().all(|k| !Arc::ptr_eq(k, &inserted.key)));
        }
        // A key larger than the limit still stays, alone.
        let huge = cache.insert(id(6), key(40), Vec::new());
        assert_eq!(cache.len(), 1);
        assert_eq!(huge.evicted.len(), 2);
        assert_eq!(cache.host_bytes(), 40 * POINT);
    }

    #[test]
    fn evicted_entries_are_reported_cold_and_count_their_loads() {
        let mut cache = KeyCache::new(10 * POINT);
        let first = key(10);
        cache.insert(id(1), first.clone(), Vec::new());
        cache.get(&id(1));
        cache.insert(id(2), key(10), Vec::new());
        let status = cache.status(|k| if Arc::ptr_eq(k, &first) { vec![0] } else { Vec::new() });
        let tiers: Vec<(KeyTier, u64, u64)> = status.entries.iter().map(|e| (e.tier, e.hits, e.loads)).collect();
        assert_eq!(tiers, vec![(KeyTier::Warm, 0, 1), (KeyTier::Cold, 1, 1)]);
        // Built again, it keeps its history.
        cache.insert(id(1), key(10), Vec::new());
        let status = cache.status(|_| vec![1]);
        let tiers: Vec<(KeyTier, u64, u64)> = status.entries.iter().map(|e| (e.tier, e.hits, e.loads)).collect();
        assert_eq!(tiers, vec![(KeyTier::Hot, 1, 2), (KeyTier::Cold, 0, 1)]);
        assert_eq!(status.entries[0].devices, vec![1]);
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["entries"][0]["tier"], "hot");
        assert_eq!(json["entries"][0]["identity"]["vk_digest"].as_str().map(str::len), Some(64));
        assert_eq!(cache.clear().len(), 1);
        assert!(cache.is_empty() && cache.status(|_| Vec::new()).entries.iter().all(|e| e.tier == KeyTier::Cold));
    }
}
