//! The one place where Rust data becomes the raw pointers supranational's code takes: supraseal
//! C2's prover, and (at the end) sppark's own MSM and NTT for the kernel race. The only `unsafe`
//! of the crate is here, on the two calls into cuda/sppark_kernels.cu.
//!
//! `supraseal_c2::generate_groth16_proof` is a safe Rust function, but what it receives are
//! `*const Scalar` pointers and bit-vector slices that C++ code reads without any check beyond
//! `assert` (which aborts the process). Everything that must hold for that call is established
//! here, and nowhere else in this crate builds such pointers:
//!
//! 1. **The memory outlives the call.** Every pointer comes from a slice of a [`Prepared`]
//!    witness borrowed by [`prove`] for the whole call; supraseal reads the vectors only during
//!    the call (it copies what it keeps), so nothing it holds dangles afterwards.
//! 2. **Lengths match.** a, b and c have the same length (`abc_size`), which is at most the
//!    domain of the key's h query; the input and aux sizes are the slices' own lengths; each
//!    density has one bit per variable (inputs for B's input density, aux variables for A's
//!    and B's aux densities) in enough 64-bit words; the popcounts are the number of set bits.
//! 3. **The key fits.** l has a point per aux variable, a a point per input plus one per aux
//!    variable in A, b_g1 and b_g2 a point per input and aux variable in B. supraseal only
//!    `assert`s these, so [`check_against`] checks them first and returns an error instead.
//! 4. **Layouts agree.** `blstrs::Scalar` is `blst_fr` (four little-endian u64 limbs in
//!    Montgomery form), which is sppark's `fr_t`; `Proof<Bls12>` is `#[repr(C)]` of blst affine
//!    points (x then y, Montgomery, no infinity flag), which is supraseal's `groth16_proof`.
//!    The sizes are checked at compile time below.
//! 5. **One shape per call.** `generate_groth16_proof` takes one set of densities for all the
//!    circuits of a call; every witness of a batch must have exactly those densities.

use std::panic::{catch_unwind, AssertUnwindSafe};

use anyhow::{bail, ensure, Context, Result};
use bellperson::groth16::Proof;
use blstrs::{Bls12, G1Affine, G2Affine, Scalar};
use group::prime::PrimeCurveAffine;
use snarkpipe::circuit::{Density, Witness};
use snarkpipe::params::ProvingKey;

// Invariant 4: the C++ side's layouts.
const _: () = assert!(std::mem::size_of::<Scalar>() == 32);
const _: () = assert!(std::mem::size_of::<G1Affine>() == 96);
const _: () = assert!(std::mem::size_of::<G2Affine>() == 192);
const _: () = assert!(std::mem::size_of::<Proof<Bls12>>() == 96 + 192 + 96);
const _: () = assert!(std::mem::size_of::<u64>() == std::mem::size_of::<usize>());

/// A density as supraseal reads it: variable `i` is bit `i % 64` (least significant first) of
/// word `i / 64`, as bellperson's `BitVec` stores it on a 64-bit machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedDensity {
    pub words: Vec<u64>,
    pub bits: usize,
    pub popcount: usize,
}

impl PackedDensity {
    pub fn pack(density: &Density) -> PackedDensity {
        let bits = density.bits();
        let mut words = vec![0u64; bits.len().div_ceil(64)];
        for (i, _) in bits.iter().enumerate().filter(|(_, &used)| used) {
            words[i / 64] |= 1 << (i % 64);
        }
        let popcount = words.iter().map(|w| w.count_ones() as usize).sum();
        PackedDensity { words, bits: bits.len(), popcount }
    }

    /// Whether bit `i` is set (false beyond the end).
    pub fn get(&self, i: usize) -> bool {
        i < self.bits && self.words[i / 64] >> (i % 64) & 1 == 1
    }
}

/// A witness with its densities packed for supraseal.
pub struct Prepared<'w> {
    pub witness: &'w Witness,
    pub a_aux: PackedDensity,
    pub b_input: PackedDensity,
    pub b_aux: PackedDensity,
}

impl<'w> Prepared<'w> {
    pub fn new(witness: &'w Witness) -> Result<Prepared<'w>> {
        let w = witness;
        ensure!(
            w.a.len() == w.b.len() && w.a.len() == w.c.len(),
            "a, b and c have {}, {} and {} evaluations; supraseal takes one length for all three",
            w.a.len(),
            w.b.len(),
            w.c.len()
        );
        ensure!(
            w.b_input_density.len() == w.input_assignment.len(),
            "the B input density tracks {} inputs, the witness has {}",
            w.b_input_density.len(),
            w.input_assignment.len()
        );
        ensure!(
            w.a_aux_density.len() == w.aux_assignment.len() && w.b_aux_density.len() == w.aux_assignment.len(),
            "the A and B aux densities track {} and {} variables, the witness has {}",
            w.a_aux_density.len(),
            w.b_aux_density.len(),
            w.aux_assignment.len()
        );
        Ok(Prepared {
            witness,
            a_aux: PackedDensity::pack(&w.a_aux_density),
            b_input: PackedDensity::pack(&w.b_input_density),
            b_aux: PackedDensity::pack(&w.b_aux_density),
        })
    }

    /// Invariants 2 and 3 against the key (the same points the SRS file holds).
    pub fn check_against(&self, key: &ProvingKey) -> Result<()> {
        let w = self.witness;
        let domain = key.h.len() + 1;
        ensure!(
            w.a.len() <= domain,
            "{} constraint evaluations do not fit the key's domain of {domain} (h has {} points)",
            w.a.len(),
            key.h.len()
        );
        ensure!(
            key.l.len() == w.aux_assignment.len(),
            "the key's l has {} points for {} aux variables",
            key.l.len(),
            w.aux_assignment.len()
        );
        ensure!(
            key.a.len() == w.input_assignment.len() + self.a_aux.popcount,
            "the key's a has {} points for {} inputs and {} aux variables in A",
            key.a.len(),
            w.input_assignment.len(),
            self.a_aux.popcount
        );
        let b = self.b_input.popcount + self.b_aux.popcount;
        ensure!(
            key.b_g1.len() == b && key.b_g2.len() == b,
            "the key's b_g1 and b_g2 have {} and {} points for {b} variables in B",
            key.b_g1.len(),
            key.b_g2.len()
        );
        for (name, density, len) in [
            ("A aux", &self.a_aux, w.aux_assignment.len()),
            ("B input", &self.b_input, w.input_assignment.len()),
            ("B aux", &self.b_aux, w.aux_assignment.len()),
        ] {
            ensure!(
                density.bits == len && density.words.len() * 64 >= len,
                "the {name} density has {} bits in {} words for {len} variables",
                density.bits,
                density.words.len()
            );
        }
        Ok(())
    }

    fn same_shape(&self, other: &Prepared<'_>) -> bool {
        self.a_aux == other.a_aux
            && self.b_input == other.b_input
            && self.b_aux == other.b_aux
            && self.witness.a.len() == other.witness.a.len()
            && self.witness.input_assignment.len() == other.witness.input_assignment.len()
            && self.witness.aux_assignment.len() == other.witness.aux_assignment.len()
    }
}

/// Proves `witnesses[i]` with `(r[i], s[i])` in one call of supraseal C2 against `srs`, the SRS
/// read from the parameters `key` was made from. Each witness must pass
/// [`Prepared::check_against`] for `key` (checked again here).
pub fn prove(
    srs: &supraseal_c2::SRS,
    key: &ProvingKey,
    witnesses: &[&Prepared<'_>],
    r: &[Scalar],
    s: &[Scalar],
) -> Result<Vec<Proof<Bls12>>> {
    let first = *witnesses.first().context("supraseal needs at least one witness per call")?;
    ensure!(
        r.len() == witnesses.len() && s.len() == witnesses.len(),
        "{} witnesses but {} r and {} s",
        witnesses.len(),
        r.len(),
        s.len()
    );
    for w in witnesses {
        w.check_against(key)?;
        if !w.same_shape(first) {
            bail!("supraseal proves one circuit shape per call: the witnesses of this batch differ in shape");
        }
    }
    // Invariant 1: each pointer points into a vector of a witness borrowed until we return.
    let a: Vec<*const Scalar> = witnesses.iter().map(|w| w.witness.a.as_ptr()).collect();
    let b: Vec<*const Scalar> = witnesses.iter().map(|w| w.witness.b.as_ptr()).collect();
    let c: Vec<*const Scalar> = witnesses.iter().map(|w| w.witness.c.as_ptr()).collect();
    let inputs: Vec<*const Scalar> = witnesses.iter().map(|w| w.witness.input_assignment.as_ptr()).collect();
    let aux: Vec<*const Scalar> = witnesses.iter().map(|w| w.witness.aux_assignment.as_ptr()).collect();
    let placeholder = Proof::<Bls12> { a: G1Affine::identity(), b: G2Affine::identity(), c: G1Affine::identity() };
    let mut proofs = vec![placeholder; witnesses.len()];
    let fw = first.witness;
    // supraseal reports a CUDA error by panicking with its message; it becomes an error here.
    catch_unwind(AssertUnwindSafe(|| {
        supraseal_c2::generate_groth16_proof(
            &a,
            &b,
            &c,
            fw.a.len(),
            &inputs,
            &aux,
            fw.input_assignment.len(),
            fw.aux_assignment.len(),
            &first.a_aux.words,
            &first.b_input.words,
            &first.b_aux.words,
            first.a_aux.popcount,
            first.b_input.popcount,
            first.b_aux.popcount,
            witnesses.len(),
            r,
            s,
            &mut proofs,
            srs,
        )
    }))
    .map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "no message".into());
        anyhow::anyhow!("supraseal C2 failed: {message}")
    })?;
    Ok(proofs)
}

/// Opens the SRS (supraseal's copy of the parameters, read into pinned host memory by a
/// thread of its own; the first proof waits for that read).
pub fn open_srs(path: &std::path::Path) -> Result<supraseal_c2::SRS> {
    supraseal_c2::SRS::try_new(path.to_path_buf(), false).map_err(|err| {
        anyhow::anyhow!("supraseal could not open the SRS {}: {err} (code {})", path.display(), err.code)
    })
}

// sppark's own kernels (cuda/sppark_kernels.cu, for `--kernels`). The same invariants hold: the
// slices are borrowed for the whole call and their lengths are passed with them, and G1Affine
// and Scalar have the layouts the C++ side reads (checked at the top of this module).

#[allow(unsafe_code)]
mod sppark_ffi {
    use blstrs::{G1Affine, Scalar};

    extern "C" {
        pub fn peer_sppark_msm_g1(
            points: *const G1Affine,
            scalars: *const Scalar,
            n: usize,
            runs: usize,
            ms: *mut f64,
            sum: *mut G1Affine,
        ) -> sppark::Error;
        pub fn peer_sppark_ntt_forward(data: *mut Scalar, lg_n: u32, runs: usize, ms: *mut f32) -> sppark::Error;
    }
}

/// sppark's G1 MSM of `points` and `scalars`, resident on the GPU before the clock: the sum and
/// the milliseconds of each of `runs` timed calls (after one untimed).
#[allow(unsafe_code)]
pub fn sppark_msm_g1(points: &[G1Affine], scalars: &[Scalar], runs: usize) -> Result<(G1Affine, Vec<f64>)> {
    ensure!(
        !points.is_empty() && points.len() == scalars.len(),
        "{} points for {} scalars",
        points.len(),
        scalars.len()
    );
    ensure!(runs >= 1, "at least one timed run");
    let mut ms = vec![0f64; runs];
    let mut sum = G1Affine::identity();
    // SAFETY: `points` and `scalars` hold n elements each and `ms` holds `runs`, all borrowed
    // until the call returns; `sum` is one G1Affine, the 96 bytes of sppark's affine point.
    let err = unsafe {
        sppark_ffi::peer_sppark_msm_g1(points.as_ptr(), scalars.as_ptr(), points.len(), runs, ms.as_mut_ptr(), &mut sum)
    };
    if err.code != 0 {
        bail!("sppark's MSM of {} points failed: {err}", points.len());
    }
    Ok((sum, ms))
}

/// sppark's forward NTT (natural order in and out) of `data` (a power-of-two length), in place:
/// the milliseconds of each of `runs` timed transforms (after one untimed), each of the input.
#[allow(unsafe_code)]
pub fn sppark_ntt_forward(data: &mut [Scalar], runs: usize) -> Result<Vec<f32>> {
    ensure!(data.len().is_power_of_two() && data.len() >= 2, "an NTT of {} values", data.len());
    ensure!(runs >= 1, "at least one timed run");
    let lg_n = data.len().trailing_zeros();
    let mut ms = vec![0f32; runs];
    // SAFETY: `data` holds 2^lg_n scalars and `ms` holds `runs`, both borrowed mutably until
    // the call returns.
    let err = unsafe { sppark_ffi::peer_sppark_ntt_forward(data.as_mut_ptr(), lg_n, runs, ms.as_mut_ptr()) };
    if err.code != 0 {
        bail!("sppark's NTT of 2^{lg_n} failed: {err}");
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_is_least_significant_bit_first() {
        let bits: Vec<bool> = (0..130).map(|i| i % 3 == 0 || i == 64).collect();
        let packed = PackedDensity::pack(&Density::from_bits(bits.clone()));
        assert_eq!(packed.words.len(), 3);
        assert_eq!(packed.popcount, bits.iter().filter(|&&b| b).count());
        assert!((0..140).all(|i| packed.get(i) == bits.get(i).copied().unwrap_or(false)));
        assert_eq!(packed.words[0] & 0b1001, 0b1001);
    }
}
