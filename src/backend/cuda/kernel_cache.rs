//! NVRTC's output kept on disk between processes.
//!
//! A binary built without nvcc compiles its kernels with NVRTC when a process first opens a
//! GPU, which delays the first proof by tens of seconds. A node that starts a process per proof,
//! or a daemon that restarts, would pay that every time. With NVRTC's output kept here only the
//! first process on a machine compiles. The backend keeps a cubin (machine code for the GPU
//! found), not PTX: PTX would still cost the driver a JIT compile in every process
//! (BENCHMARKS.md, "The first proof of a process", times both).
//!
//! A cache file is never trusted blindly: its first line names the key it was written for
//! (a digest of the module's name, its source, the compute capability, the NVRTC version, the
//! form (cubin or PTX) and this format) and a digest of the bytes after it. A file that does
//! not match both, truncated or another build's, is compiled afresh and replaced, never loaded.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// Bumped when what goes into the key or the file changes.
const FORMAT: &str = "snarkpipe-kernel-v2";

/// Where compiled kernels are kept.
#[derive(Debug, Clone)]
pub struct KernelCache {
    dir: PathBuf,
}

/// What [`KernelCache::ptx`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOutcome {
    /// The file held this module's PTX; nothing was compiled.
    Hit,
    /// There was no file: compiled, and written for the next process.
    Compiled,
    /// The file did not pass its check (why): compiled, and the file replaced.
    Replaced(String),
}

impl KernelCache {
    /// The cache the environment names: `SNARKPIPE_KERNEL_CACHE` (a directory, or `off` for
    /// none), else `$XDG_CACHE_HOME/snarkpipe/kernels`, else `$HOME/.cache/snarkpipe/kernels`;
    /// None when it is off or no such variable is set.
    pub fn from_env() -> Option<KernelCache> {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let dir = match var("SNARKPIPE_KERNEL_CACHE") {
            Some(dir) if dir.as_os_str() == "off" => return None,
            Some(dir) => dir,
            None => var("XDG_CACHE_HOME")
                .or_else(|| var("HOME").map(|home| home.join(".cache")))?
                .join("snarkpipe")
                .join("kernels"),
        };
        Some(KernelCache::at(dir))
    }

    pub fn at(dir: impl Into<PathBuf>) -> KernelCache {
        KernelCache { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The compiled image (`form`: `cubin` or `ptx`) of module `name` (its `source`) for
    /// compute capability `cc` and the NVRTC version `nvrtc`: read from the cache when its file
    /// holds exactly this, else `compile`d and written there (through a temporary file renamed
    /// into place, so a reader never sees half a file). A compile error is returned as it is;
    /// a cache that cannot be written is only logged, since the image is in hand.
    pub fn image(
        &self,
        name: &str,
        source: &str,
        cc: (i32, i32),
        nvrtc: (i32, i32),
        form: &str,
        compile: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<(Vec<u8>, CacheOutcome)> {
        let key = cache_key(name, source, cc, nvrtc, form);
        let path = self.dir.join(format!("{name}-sm{}{}-{}.{form}", cc.0, cc.1, &key[..16]));
        let outcome = match std::fs::read(&path) {
            Ok(bytes) => match checked_body(&bytes, &key) {
                Ok(image) => return Ok((image.to_vec(), CacheOutcome::Hit)),
                Err(why) => CacheOutcome::Replaced(format!("{}: {why}", path.display())),
            },
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => CacheOutcome::Compiled,
            Err(err) => CacheOutcome::Replaced(format!("{}: unreadable: {err}", path.display())),
        };
        if let CacheOutcome::Replaced(why) = &outcome {
            tracing::warn!(%why, "a cached kernel was not used; compiling it again");
        }
        let image = compile()?;
        if let Err(err) = self.write(&path, &key, &image) {
            tracing::warn!(%err, "compiled kernels not cached; the next process compiles them again");
        }
        Ok((image, outcome))
    }

    fn write(&self, path: &Path, key: &str, image: &[u8]) -> Result<()> {
        let io = |what: &str| {
            let what = format!("{what} {}", path.display());
            move |e| Error::io(what, e)
        };
        std::fs::create_dir_all(&self.dir).map_err(io("creating the kernel cache for"))?;
        let temporary = path.with_extension(format!("{}.tmp", std::process::id()));
        let mut file = std::fs::File::create(&temporary).map_err(io("creating"))?;
        let written = writeln!(file, "// {FORMAT} {key} {}", digest(image))
            .and_then(|()| file.write_all(image))
            .and_then(|()| file.sync_all());
        if let Err(err) = written.and_then(|()| std::fs::rename(&temporary, path)) {
            let _ = std::fs::remove_file(&temporary);
            return Err(Error::io(format!("writing {}", path.display()), err));
        }
        Ok(())
    }
}

/// The key a module's compiled image is cached under.
fn cache_key(name: &str, source: &str, cc: (i32, i32), nvrtc: (i32, i32), form: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [FORMAT, name, &format!("sm_{}{} nvrtc {}.{} {form}", cc.0, cc.1, nvrtc.0, nvrtc.1), source] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The image in a cache file, if its header line names `key` and the digest of what follows.
fn checked_body<'b>(bytes: &'b [u8], key: &str) -> std::result::Result<&'b [u8], &'static str> {
    let end = bytes.iter().position(|&b| b == b'\n').ok_or("no header line")?;
    let (header, body) =
        (std::str::from_utf8(&bytes[..end]).map_err(|_| "a header that is not text")?, &bytes[end + 1..]);
    let mut fields = header.strip_prefix("// ").ok_or("not a snarkpipe kernel cache file")?.split(' ');
    if fields.next() != Some(FORMAT) {
        return Err("written by another version of the cache");
    }
    if fields.next() != Some(key) {
        return Err("another module, source, architecture or NVRTC version");
    }
    if fields.next() != Some(digest(body).as_str()) {
        return Err("its image does not match its digest (truncated or altered)");
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    const CC: (i32, i32) = (9, 0);
    const NVRTC: (i32, i32) = (13, 0);

    /// A module's PTX through the cache: [`KernelCache::image`] of form `ptx`, as text.
    fn ptx(
        cache: &KernelCache,
        name: &str,
        source: &str,
        cc: (i32, i32),
        nvrtc: (i32, i32),
        compile: impl FnOnce() -> Result<String>,
    ) -> Result<(String, CacheOutcome)> {
        let (bytes, outcome) = cache.image(name, source, cc, nvrtc, "ptx", || compile().map(String::into_bytes))?;
        Ok((String::from_utf8(bytes).expect("PTX is text"), outcome))
    }

    /// A stand-in compiler that counts its calls and returns `ptx`.
    fn compiler<'a>(calls: &'a Cell<usize>, ptx: &'a str) -> impl FnOnce() -> Result<String> + 'a {
        move || {
            calls.set(calls.get() + 1);
            Ok(ptx.to_string())
        }
    }

    #[test]
    fn a_second_process_reads_what_the_first_compiled() {
        let dir = tempfile::tempdir().unwrap();
        let calls = Cell::new(0);
        let cache = KernelCache::at(dir.path());
        let first = ptx(&cache, "msm", "source", CC, NVRTC, compiler(&calls, ".version 8.8\nA")).unwrap();
        assert_eq!(first, (".version 8.8\nA".to_string(), CacheOutcome::Compiled));
        // A fresh cache value over the same directory, as another process has.
        let again = ptx(&KernelCache::at(dir.path()), "msm", "source", CC, NVRTC, compiler(&calls, "other")).unwrap();
        assert_eq!(again, (".version 8.8\nA".to_string(), CacheOutcome::Hit));
        assert_eq!(calls.get(), 1, "the hit compiled");
    }

    #[test]
    fn another_source_architecture_or_nvrtc_is_compiled_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::at(dir.path());
        let calls = Cell::new(0);
        ptx(&cache, "msm", "source", CC, NVRTC, compiler(&calls, "A")).unwrap();
        for (source, cc, nvrtc) in [("source2", CC, NVRTC), ("source", (8, 0), NVRTC), ("source", CC, (13, 1))] {
            let (ptx, outcome) = ptx(&cache, "msm", source, cc, nvrtc, compiler(&calls, "B")).unwrap();
            assert_eq!((ptx.as_str(), &outcome), ("B", &CacheOutcome::Compiled), "{source} {cc:?} {nvrtc:?}");
        }
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn a_damaged_or_foreign_file_is_replaced_never_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::at(dir.path());
        let calls = Cell::new(0);
        ptx(&cache, "ntt", "source", CC, NVRTC, compiler(&calls, "GOOD PTX")).unwrap();
        let file = std::fs::read_dir(dir.path()).unwrap().next().unwrap().unwrap().path();
        let written = std::fs::read_to_string(&file).unwrap();
        let damages = [
            written.replace("GOOD PTX", "GOOD PT"),
            written.replace("GOOD PTX", "EVIL PTX"),
            written.replacen(FORMAT, "snarkpipe-ptx-v1", 1),
            written.replacen(
                &cache_key("ntt", "source", CC, NVRTC, "ptx"),
                &cache_key("ntt", "other", CC, NVRTC, "ptx"),
                1,
            ),
            String::new(),
        ];
        for damaged in damages {
            std::fs::write(&file, &damaged).unwrap();
            let (ptx, outcome) = ptx(&cache, "ntt", "source", CC, NVRTC, compiler(&calls, "GOOD PTX")).unwrap();
            assert_eq!(ptx, "GOOD PTX", "{damaged:?}");
            assert!(matches!(outcome, CacheOutcome::Replaced(_)), "{damaged:?}: {outcome:?}");
            assert_eq!(std::fs::read_to_string(&file).unwrap(), written, "the file was not replaced");
        }
    }

    #[test]
    fn a_binary_image_round_trips_and_each_form_has_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::at(dir.path());
        // A cubin holds NUL bytes and newlines: the file must give back exactly these bytes.
        let cubin: Vec<u8> = [b"\x7fELF\0\n\n".as_slice(), &(0..=255u8).collect::<Vec<_>>()].concat();
        let calls = Cell::new(0);
        let compile = || {
            calls.set(calls.get() + 1);
            Ok(cubin.clone())
        };
        assert_eq!(cache.image("msm", "source", CC, NVRTC, "cubin", compile).unwrap().1, CacheOutcome::Compiled);
        let (back, outcome) = cache.image("msm", "source", CC, NVRTC, "cubin", || unreachable!()).unwrap();
        assert_eq!((back, outcome), (cubin.clone(), CacheOutcome::Hit));
        // The PTX of the same module is another entry, compiled on its own.
        let (ptx, outcome) = ptx(&cache, "msm", "source", CC, NVRTC, compiler(&calls, "PTX")).unwrap();
        assert_eq!((ptx.as_str(), outcome), ("PTX", CacheOutcome::Compiled));
        assert_eq!((calls.get(), std::fs::read_dir(dir.path()).unwrap().count()), (2, 2));
        // A truncated cubin is compiled again, never loaded.
        let file = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "cubin"))
            .unwrap();
        let bytes = std::fs::read(&file).unwrap();
        std::fs::write(&file, &bytes[..bytes.len() - 1]).unwrap();
        let (again, outcome) = cache.image("msm", "source", CC, NVRTC, "cubin", || Ok(cubin.clone())).unwrap();
        assert_eq!(again, cubin);
        assert!(matches!(&outcome, CacheOutcome::Replaced(why) if why.contains("digest")), "{outcome:?}");
    }

    #[test]
    fn a_compile_error_is_returned_and_nothing_is_cached() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::at(dir.path().join("kernels"));
        let failed = ptx(&cache, "msm", "source", CC, NVRTC, || Err(Error::Internal("no".into())));
        assert!(matches!(failed, Err(Error::Internal(_))));
        assert!(!dir.path().join("kernels").exists());
    }

    #[test]
    fn a_cache_that_cannot_be_written_still_gives_the_ptx() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "not a directory").unwrap();
        let calls = Cell::new(0);
        let cache = KernelCache::at(blocker.join("kernels"));
        let (ptx, outcome) = ptx(&cache, "msm", "source", CC, NVRTC, compiler(&calls, "A")).unwrap();
        assert_eq!((ptx.as_str(), calls.get()), ("A", 1));
        assert!(matches!(outcome, CacheOutcome::Replaced(why) if why.contains("unreadable")));
    }
}
