//! Reads bellperson's `.params` files by position (never memory-mapped, so a file changed
//! under the prover is a typed error, not a SIGBUS), validating the layout before any point is
//! trusted.
//!
//! The layout, as `bellperson::groth16::Parameters::write` produces it (all integers u32
//! big-endian, all points uncompressed: 96 bytes in G1, 192 in G2):
//!
//! ```text
//!  alpha_g1 beta_g1 beta_g2 gamma_g2 delta_g1 delta_g2   the verifying key's fixed part
//!  n_ic  ic[n_ic]       (G1)                            the verifying key's inputs
//!  n_h   h[n_h]         (G1)
//!  n_l   l[n_l]         (G1)
//!  n_a   a[n_a]         (G1)
//!  n_b1  b_g1[n_b1]     (G1)
//!  n_b2  b_g2[n_b2]     (G2)
//! ```
//!
//! [`ParamsFile::open`] walks the counts first, so a hostile count is refused with a typed
//! error before anything is allocated; the points themselves are decoded lazily, once, by
//! [`ParamsFile::proving_key`].

use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bellperson::groth16::{ParameterSource, VerifyingKey};
use bellperson::SynthesisError;
use blstrs::{Bls12, Fp, G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use once_cell::sync::OnceCell;
use rayon::prelude::*;
use serde::Serialize;

use super::ProvingKey;
use crate::error::{Error, Result};

const G1_LEN: usize = 96;
const G2_LEN: usize = 192;
const COUNT_LEN: usize = 4;
const FP_LEN: usize = 48;

/// The verifying key's fixed part: alpha, beta and delta in G1; beta, gamma and delta in G2.
const VK_FIXED_LEN: usize = 3 * G1_LEN + 3 * G2_LEN;

/// Encoding flags in the top three bits of a point's first byte.
const FLAG_COMPRESSED: u8 = 0x80;
const FLAG_INFINITY: u8 = 0x40;
const FLAG_SORT: u8 = 0x20;

/// How much [`ParamsFile::open`] checks of the points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PointCheck {
    /// Every point is on the curve and in the prime-order subgroup, and is not the point at
    /// infinity where bellperson forbids it (`ic`, `h`, `l`, `a`, `b_g1`, `b_g2`).
    #[default]
    Checked,
    /// Only the layout is checked (counts, lengths, no trailing bytes). Fast, for files you
    /// produced yourself: a point off the curve or outside the subgroup is only noticed, if at
    /// all, when [`ParamsFile::proving_key`] decodes it. The verifying key is checked either
    /// way: it is small, and bellperson checks it too.
    Unchecked,
}

/// How many points each section of a `.params` file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
pub struct ParamsCounts {
    pub ic: usize,
    pub h: usize,
    pub l: usize,
    pub a: usize,
    pub b_g1: usize,
    pub b_g2: usize,
}

/// Which group a section's points are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Group {
    G1,
    G2,
}

impl Group {
    fn point_len(self) -> usize {
        match self {
            Group::G1 => G1_LEN,
            Group::G2 => G2_LEN,
        }
    }
}

/// One length-prefixed run of points: where its first point starts and how many there are.
#[derive(Clone, Copy, Debug)]
struct Section {
    name: &'static str,
    group: Group,
    offset: usize,
    count: usize,
}

impl Section {
    /// Point `index`'s bytes in `bytes`, which holds the section's points from `first` on.
    fn point_bytes<'m>(&self, bytes: &'m [u8], first: usize, index: usize) -> &'m [u8] {
        let len = self.group.point_len();
        let start = (index - first) * len;
        &bytes[start..start + len]
    }

    /// Reads points `range` of the section (in bounds: `open` checked that the section lies
    /// inside the file).
    fn read_points(&self, file: &PositionedFile, range: std::ops::Range<usize>) -> Result<Vec<u8>> {
        let len = self.group.point_len();
        file.read(self.offset + range.start * len, range.len() * len)
    }
}

/// Points per read while decoding or checking a section: one task's share, a few MiB.
const POINTS_PER_READ: usize = 1 << 15;

/// A file read by position, never mapped: a file truncated or rewritten while it is open gives
/// a typed error (or points the checks refuse), not a SIGBUS that kills the process.
struct PositionedFile {
    path: PathBuf,
    file: File,
    /// The length validated at open.
    len: usize,
}

impl PositionedFile {
    fn open(path: &Path) -> Result<PositionedFile> {
        let context = || format!("opening parameter file {}", path.display());
        let file = File::open(path).map_err(|e| Error::io(context(), e))?;
        let len = file.metadata().map_err(|e| Error::io(context(), e))?.len();
        if len == 0 {
            return Err(file_error(path, "not a .params file: the file is empty".into()));
        }
        let len = usize::try_from(len).map_err(|_| file_error(path, format!("{len} bytes is too large")))?;
        Ok(PositionedFile { path: path.to_path_buf(), file, len })
    }

    /// `len` bytes from `offset`; the caller keeps within the length validated at open.
    fn read(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; len];
        self.file.read_exact_at(&mut bytes, offset as u64).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => file_error(
                &self.path,
                format!(
                    "the file is shorter than the {} bytes it had when it was opened: it was truncated \
                     or rewritten while in use",
                    self.len
                ),
            ),
            _ => Error::io(format!("reading parameter file {}", self.path.display()), e),
        })?;
        Ok(bytes)
    }
}

/// The sections after the verifying key, in file order.
const SECTIONS: [(&str, Group); 5] =
    [("h", Group::G1), ("l", Group::G1), ("a", Group::G1), ("b_g1", Group::G1), ("b_g2", Group::G2)];

/// A `.params` file whose layout has been validated; its points are read when needed.
pub struct ParamsFile {
    path: PathBuf,
    file: PositionedFile,
    check: PointCheck,
    vk: VerifyingKey<Bls12>,
    /// h, l, a, b_g1, b_g2, in file order.
    sections: [Section; 5],
    ic_count: usize,
    proving_key: OnceCell<Arc<ProvingKey>>,
}

impl fmt::Debug for ParamsFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParamsFile")
            .field("path", &self.path)
            .field("bytes", &self.file.len)
            .field("check", &self.check)
            .field("counts", &self.counts())
            .finish()
    }
}

impl ParamsFile {
    /// Opens the file and validates its layout; in [`PointCheck::Checked`] mode also every point
    /// (in parallel). Nothing is allocated in proportion to a declared count before that count
    /// has been checked against the file's length.
    pub fn open(path: impl AsRef<Path>, check: PointCheck) -> Result<ParamsFile> {
        let path = path.as_ref().to_path_buf();
        let file = PositionedFile::open(&path)?;
        let layout = Layout::parse(&file)?;
        let vk = decode_verifying_key(&file, layout.ic_count)?;
        let file = ParamsFile {
            path,
            file,
            check,
            vk,
            sections: layout.sections,
            ic_count: layout.ic_count,
            proving_key: OnceCell::new(),
        };
        if check == PointCheck::Checked {
            file.validate_points()?;
        }
        Ok(file)
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How the points were checked at open.
    pub fn point_check(&self) -> PointCheck {
        self.check
    }

    /// How many points each section holds.
    pub fn counts(&self) -> ParamsCounts {
        let [h, l, a, b_g1, b_g2] = self.sections.map(|s| s.count);
        ParamsCounts { ic: self.ic_count, h, l, a, b_g1, b_g2 }
    }

    /// The verifying key, decoded and checked at open.
    pub fn verifying_key(&self) -> &VerifyingKey<Bls12> {
        &self.vk
    }

    /// Decodes every point (in parallel) into a proving key. The key is built once and shared
    /// by later calls, so proving many times from one file pays for decoding once.
    pub fn proving_key(&self) -> Result<Arc<ProvingKey>> {
        self.proving_key.get_or_try_init(|| self.decode_proving_key()).cloned()
    }

    fn decode_proving_key(&self) -> Result<Arc<ProvingKey>> {
        // After a checked open every point is known to be in its subgroup, so decoding only
        // re-reads the coordinates (blst still checks that they are on the curve). After an
        // unchecked open nobody checks the subgroup: the trade-off `PointCheck` documents.
        let [h, l, a, b_g1, b_g2] = &self.sections;
        Ok(Arc::new(ProvingKey {
            vk: self.vk.clone(),
            h: Arc::new(self.decode_section(h, decode_g1)?),
            l: Arc::new(self.decode_section(l, decode_g1)?),
            a: Arc::new(self.decode_section(a, decode_g1)?),
            b_g1: Arc::new(self.decode_section(b_g1, decode_g1)?),
            b_g2: Arc::new(self.decode_section(b_g2, decode_g2)?),
            recording: Default::default(),
        }))
    }

    fn decode_section<P: PrimeCurveAffine + Send + Sync>(
        &self,
        section: &Section,
        decode: fn(&[u8], Subgroup, Identity) -> Result<P, PointError>,
    ) -> Result<Vec<P>> {
        let mut points = vec![P::identity(); section.count];
        points.par_chunks_mut(POINTS_PER_READ).enumerate().try_for_each(|(chunk, out)| {
            let first = chunk * POINTS_PER_READ;
            let bytes = section.read_points(&self.file, first..first + out.len())?;
            for (i, point) in (first..).zip(out.iter_mut()) {
                *point = decode(section.point_bytes(&bytes, first, i), Subgroup::Trusted, Identity::Forbidden)
                    .map_err(|why| invalid_point(section.name, i, why))?;
            }
            Ok::<(), Error>(())
        })?;
        Ok(points)
    }

    /// Checks every point of every section, reporting the first bad point of the first bad
    /// section so that the message does not depend on thread scheduling.
    fn validate_points(&self) -> Result<()> {
        for section in &self.sections {
            let chunks = section.count.div_ceil(POINTS_PER_READ);
            let bad = (0..chunks).into_par_iter().find_map_first(|chunk| {
                let first = chunk * POINTS_PER_READ;
                let range = first..(first + POINTS_PER_READ).min(section.count);
                let bytes = match section.read_points(&self.file, range.clone()) {
                    Ok(bytes) => bytes,
                    Err(err) => return Some(err),
                };
                range.into_iter().find_map(|i| {
                    let point = section.point_bytes(&bytes, first, i);
                    let checked = match section.group {
                        Group::G1 => decode_g1(point, Subgroup::Check, Identity::Forbidden).map(drop),
                        Group::G2 => decode_g2(point, Subgroup::Check, Identity::Forbidden).map(drop),
                    };
                    checked.err().map(|why| invalid_point(section.name, i, why))
                })
            });
            if let Some(err) = bad {
                return Err(err);
            }
        }
        Ok(())
    }
}

impl ParameterSource<Bls12> for &ParamsFile {
    type G1Builder = (Arc<Vec<G1Affine>>, usize);
    type G2Builder = (Arc<Vec<G2Affine>>, usize);

    fn get_vk(&self, _num_ic: usize) -> Result<&VerifyingKey<Bls12>, SynthesisError> {
        Ok(&self.vk)
    }

    fn get_h(&self, _num_h: usize) -> Result<Self::G1Builder, SynthesisError> {
        Ok((self.proving_key().map_err(to_synthesis)?.h.clone(), 0))
    }

    fn get_l(&self, _num_l: usize) -> Result<Self::G1Builder, SynthesisError> {
        Ok((self.proving_key().map_err(to_synthesis)?.l.clone(), 0))
    }

    fn get_a(&self, num_inputs: usize, _num_aux: usize) -> Result<(Self::G1Builder, Self::G1Builder), SynthesisError> {
        let a = self.proving_key().map_err(to_synthesis)?.a.clone();
        Ok(((a.clone(), 0), (a, num_inputs)))
    }

    fn get_b_g1(
        &self,
        num_inputs: usize,
        _num_aux: usize,
    ) -> Result<(Self::G1Builder, Self::G1Builder), SynthesisError> {
        let b = self.proving_key().map_err(to_synthesis)?.b_g1.clone();
        Ok(((b.clone(), 0), (b, num_inputs)))
    }

    fn get_b_g2(
        &self,
        num_inputs: usize,
        _num_aux: usize,
    ) -> Result<(Self::G2Builder, Self::G2Builder), SynthesisError> {
        let b = self.proving_key().map_err(to_synthesis)?.b_g2.clone();
        Ok(((b.clone(), 0), (b, num_inputs)))
    }
}

/// bellperson's trait speaks `SynthesisError`; an I/O error carries our message through it.
fn to_synthesis(err: Error) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::new(std::io::ErrorKind::InvalidData, err.to_string()))
}

fn file_error(path: &Path, reason: String) -> Error {
    Error::ParamsFile { path: path.display().to_string(), reason }
}

fn invalid_point(section: &str, index: usize, why: PointError) -> Error {
    Error::InvalidPoint(format!("section {section}, point {index}: {why}"))
}

/// Where the sections lie, found by walking the counts without decoding any point.
struct Layout {
    ic_count: usize,
    sections: [Section; 5],
}

impl Layout {
    fn parse(file: &PositionedFile) -> Result<Layout> {
        let bad = |reason: String| file_error(&file.path, reason);
        let len = file.len;
        if len < G1_LEN {
            return Err(bad(format!(
                "not a .params file: it is {len} bytes long, shorter than its first point (alpha_g1)"
            )));
        }
        if !looks_like_g1(&file.read(0, G1_LEN)?) {
            return Err(bad(format!(
                "not a .params file: it should start with an uncompressed G1 point (alpha_g1), but its \
                 first {G1_LEN} bytes are not one"
            )));
        }
        if len < VK_FIXED_LEN + COUNT_LEN {
            return Err(bad(format!(
                "truncated inside the verifying key: it needs {} bytes before the first \
                 section but the file has only {len}",
                VK_FIXED_LEN + COUNT_LEN
            )));
        }
        let mut cursor = VK_FIXED_LEN;
        let ic = read_section(file, &mut cursor, "ic", Group::G1)?;
        let mut sections = [ic; 5];
        for (slot, (name, group)) in sections.iter_mut().zip(SECTIONS) {
            *slot = read_section(file, &mut cursor, name, group)?;
        }
        if cursor != len {
            return Err(bad(format!(
                "{} bytes of trailing data: the sections end at byte {cursor} but the file is \
                 {len} bytes; it is not a bellperson .params file, or it was corrupted",
                len - cursor
            )));
        }
        Ok(Layout { ic_count: ic.count, sections })
    }
}

/// Reads one section's count at `*cursor`, checks that its points fit in the file and moves
/// the cursor past them.
fn read_section(file: &PositionedFile, cursor: &mut usize, name: &'static str, group: Group) -> Result<Section> {
    let remaining = file.len.saturating_sub(*cursor);
    if remaining < COUNT_LEN {
        return Err(file_error(
            &file.path,
            format!(
                "truncated: the length prefix of section {name} needs {COUNT_LEN} bytes but only {remaining} remain"
            ),
        ));
    }
    let prefix = file.read(*cursor, COUNT_LEN)?;
    let declared = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let offset = *cursor + COUNT_LEN;
    let available = file.len - offset;
    // u32 * 192 fits in u64 on every platform; compare before converting to usize.
    let needed = u64::from(declared) * group.point_len() as u64;
    if needed > available as u64 {
        return Err(file_error(
            &file.path,
            format!(
                "truncated: section {name} declares {declared} points ({needed} bytes) but only \
                 {available} bytes remain"
            ),
        ));
    }
    // `needed <= available`, a usize, so neither conversion can fail or overflow.
    let count = declared as usize;
    *cursor = offset + needed as usize;
    Ok(Section { name, group, offset, count })
}

/// A first look at the file's first bytes: whether they encode a point of G1's curve at all
/// (the subgroup is checked with the rest of the verifying key).
fn looks_like_g1(bytes: &[u8]) -> bool {
    decode_g1(bytes, Subgroup::Trusted, Identity::Allowed).is_ok()
}

/// Decodes the verifying key, always checked: it is small and every proof depends on it.
/// Only `ic` forbids the point at infinity, as in bellperson; a delta at infinity is refused
/// by the prover, which can name the problem precisely.
fn decode_verifying_key(file: &PositionedFile, ic_count: usize) -> Result<VerifyingKey<Bls12>> {
    // The fixed points, ic's count and ic: inside the file, as the layout was checked.
    let map = file.read(0, VK_FIXED_LEN + COUNT_LEN + ic_count * G1_LEN)?;
    let vk_point = |name: &str, why: PointError| Error::InvalidPoint(format!("verifying key, {name}: {why}"));
    let g1_at = |at: usize, name: &str| {
        decode_g1(&map[at..at + G1_LEN], Subgroup::Check, Identity::Allowed).map_err(|why| vk_point(name, why))
    };
    let g2_at = |at: usize, name: &str| {
        decode_g2(&map[at..at + G2_LEN], Subgroup::Check, Identity::Allowed).map_err(|why| vk_point(name, why))
    };
    let alpha_g1 = g1_at(0, "alpha_g1")?;
    let beta_g1 = g1_at(G1_LEN, "beta_g1")?;
    let beta_g2 = g2_at(2 * G1_LEN, "beta_g2")?;
    let gamma_g2 = g2_at(2 * G1_LEN + G2_LEN, "gamma_g2")?;
    let delta_g1 = g1_at(2 * G1_LEN + 2 * G2_LEN, "delta_g1")?;
    let delta_g2 = g2_at(3 * G1_LEN + 2 * G2_LEN, "delta_g2")?;

    let ic_section = Section { name: "ic", group: Group::G1, offset: VK_FIXED_LEN + COUNT_LEN, count: ic_count };
    let ic = (0..ic_count)
        .into_par_iter()
        .map(|i| {
            let bytes = &map[ic_section.offset..];
            decode_g1(ic_section.point_bytes(bytes, 0, i), Subgroup::Check, Identity::Forbidden)
                .map_err(|why| invalid_point("ic", i, why))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(VerifyingKey { alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2, ic })
}

/// Whether decoding checks the prime-order subgroup (the expensive part) or trusts an earlier
/// check.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Subgroup {
    Check,
    Trusted,
}

/// Whether the point at infinity is acceptable where the point is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Identity {
    Allowed,
    Forbidden,
}

/// Why a point's bytes were refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PointError {
    Compressed,
    SortFlag,
    BadInfinity,
    Identity,
    NonCanonical,
    NotOnCurve,
    NotInSubgroup,
}

impl fmt::Display for PointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PointError::Compressed => "the compression flag is set in an uncompressed encoding",
            PointError::SortFlag => "the sign flag is set in an uncompressed encoding",
            PointError::BadInfinity => "the infinity flag is set but the coordinates are not zero",
            PointError::Identity => "the point at infinity, which this section never contains",
            PointError::NonCanonical => "a coordinate is not reduced modulo p",
            PointError::NotOnCurve => "not on the curve",
            PointError::NotInSubgroup => "on the curve but not in the prime-order subgroup",
        })
    }
}

/// The checks every encoding gets before blst sees it: blst would silently decompress a point
/// whose compression flag is set, which a file of uncompressed points never contains.
fn check_flags(bytes: &[u8]) -> std::result::Result<bool, PointError> {
    let flags = bytes[0] & (FLAG_COMPRESSED | FLAG_INFINITY | FLAG_SORT);
    if flags & FLAG_COMPRESSED != 0 {
        return Err(PointError::Compressed);
    }
    if flags & FLAG_INFINITY != 0 {
        let rest_zero = bytes[0] & !FLAG_INFINITY == 0 && bytes[1..].iter().all(|&b| b == 0);
        return if rest_zero { Ok(true) } else { Err(PointError::BadInfinity) };
    }
    if flags & FLAG_SORT != 0 {
        return Err(PointError::SortFlag);
    }
    Ok(false)
}

/// Tells apart the ways blst's decoding can fail (it only says "no").
fn classify_failure(bytes: &[u8]) -> PointError {
    let canonical = bytes.chunks_exact(FP_LEN).enumerate().all(|(i, chunk)| {
        let mut fp = [0u8; FP_LEN];
        fp.copy_from_slice(chunk);
        if i == 0 {
            fp[0] &= 0x1f;
        }
        bool::from(Fp::from_bytes_be(&fp).is_some())
    });
    if !canonical {
        PointError::NonCanonical
    } else if bytes[..FP_LEN].iter().enumerate().all(|(i, &b)| if i == 0 { b & 0x1f == 0 } else { b == 0 }) {
        // blst refuses x = 0 as "not in the group": (0, ±2) is on G1's curve but has order 3.
        PointError::NotInSubgroup
    } else {
        PointError::NotOnCurve
    }
}

fn decode_g1(bytes: &[u8], subgroup: Subgroup, identity: Identity) -> std::result::Result<G1Affine, PointError> {
    let bytes: &[u8; G1_LEN] = bytes.try_into().map_err(|_| PointError::NotOnCurve)?;
    if check_flags(bytes)? {
        return match identity {
            Identity::Allowed => Ok(G1Affine::identity()),
            Identity::Forbidden => Err(PointError::Identity),
        };
    }
    let point: G1Affine =
        Option::from(G1Affine::from_uncompressed_unchecked(bytes)).ok_or_else(|| classify_failure(bytes))?;
    if subgroup == Subgroup::Check && !bool::from(point.is_torsion_free()) {
        return Err(PointError::NotInSubgroup);
    }
    Ok(point)
}

fn decode_g2(bytes: &[u8], subgroup: Subgroup, identity: Identity) -> std::result::Result<G2Affine, PointError> {
    let bytes: &[u8; G2_LEN] = bytes.try_into().map_err(|_| PointError::NotOnCurve)?;
    if check_flags(bytes)? {
        return match identity {
            Identity::Allowed => Ok(G2Affine::identity()),
            Identity::Forbidden => Err(PointError::Identity),
        };
    }
    let point: G2Affine =
        Option::from(G2Affine::from_uncompressed_unchecked(bytes)).ok_or_else(|| classify_failure(bytes))?;
    if subgroup == Subgroup::Check && !bool::from(point.is_torsion_free()) {
        return Err(PointError::NotInSubgroup);
    }
    Ok(point)
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Curve;

    #[test]
    fn generator_round_trips_and_identity_follows_the_rule() {
        let g = G1Affine::generator();
        assert_eq!(decode_g1(&g.to_uncompressed(), Subgroup::Check, Identity::Forbidden), Ok(g));
        let zero = G1Affine::identity().to_uncompressed();
        assert_eq!(decode_g1(&zero, Subgroup::Check, Identity::Allowed), Ok(G1Affine::identity()));
        assert_eq!(decode_g1(&zero, Subgroup::Check, Identity::Forbidden), Err(PointError::Identity));
        let g2 = (G2Affine::generator().to_curve() + G2Affine::generator().to_curve()).to_affine();
        assert_eq!(decode_g2(&g2.to_uncompressed(), Subgroup::Check, Identity::Forbidden), Ok(g2));
    }

    #[test]
    fn flags_and_coordinates_are_told_apart() {
        let g = G1Affine::generator().to_uncompressed();
        let mut compressed = g;
        compressed[0] |= FLAG_COMPRESSED;
        assert_eq!(decode_g1(&compressed, Subgroup::Check, Identity::Allowed), Err(PointError::Compressed));
        let mut off_curve = g;
        off_curve[95] ^= 1;
        assert_eq!(decode_g1(&off_curve, Subgroup::Check, Identity::Allowed), Err(PointError::NotOnCurve));
        let mut too_big = g;
        too_big[48..].fill(0xff);
        too_big[48] = 0x1f;
        assert_eq!(decode_g1(&too_big, Subgroup::Check, Identity::Allowed), Err(PointError::NonCanonical));
        let mut bad_infinity = [0u8; G1_LEN];
        bad_infinity[0] = FLAG_INFINITY;
        bad_infinity[7] = 1;
        assert_eq!(decode_g1(&bad_infinity, Subgroup::Check, Identity::Allowed), Err(PointError::BadInfinity));
    }

    #[test]
    fn a_huge_count_is_refused_before_any_allocation() {
        let mut bytes = vec![0u8; VK_FIXED_LEN];
        bytes[..G1_LEN].copy_from_slice(&G1Affine::generator().to_uncompressed());
        bytes.extend_from_slice(&u32::MAX.to_be_bytes());
        let path = std::env::temp_dir().join(format!("snarkpipe-huge-count-{}.params", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let file = PositionedFile::open(&path).unwrap();
        let err = Layout::parse(&file).err().expect("refused").to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains("section ic declares 4294967295 points"), "{err}");
    }
}
