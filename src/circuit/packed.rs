//! A [`Density`] packed for a device, so that the device picks a query's scalars out of the
//! aux assignment it already holds instead of the host copying them a second time.
//!
//! Variable `i` is bit `i % 32` of word `i / 32`, and `taken_before[w]` counts the used
//! variables in the words before `w`: a used variable's place in the query is
//! `taken_before[i / 32]` plus the used bits below it in its own word.

use rayon::prelude::*;

use super::Density;
use crate::{Error, Result, Scalar};

/// Variables per packed word.
pub const VARIABLES_PER_WORD: usize = 32;

/// Which of a vector's values a query uses, packed 32 to a word with running counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedDensity {
    words: Vec<u32>,
    taken_before: Vec<u32>,
    len: usize,
    taken: usize,
}

impl PackedDensity {
    /// Packs the first `len` variables of `density` (variables it does not track are unused).
    /// Errors when `len` does not fit the 32-bit counts the device reads.
    pub fn pack(density: &Density, len: usize) -> Result<PackedDensity> {
        if len > u32::MAX as usize {
            return Err(Error::Config(format!(
                "{len} variables exceed the 2^32 a packed density addresses; split the circuit"
            )));
        }
        let bits = &density.bits()[..len.min(density.len())];
        let mut words: Vec<u32> = bits
            .par_chunks(VARIABLES_PER_WORD)
            .map(|chunk| chunk.iter().enumerate().fold(0u32, |word, (bit, &used)| word | ((used as u32) << bit)))
            .collect();
        words.resize(len.div_ceil(VARIABLES_PER_WORD), 0);
        let mut taken_before = Vec::with_capacity(words.len());
        let mut taken = 0u32;
        for word in &words {
            taken_before.push(taken);
            taken += word.count_ones();
        }
        Ok(PackedDensity { words, taken_before, len, taken: taken as usize })
    }

    /// The packed bits.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// Per word, the used variables before it.
    pub fn taken_before(&self) -> &[u32] {
        &self.taken_before
    }

    /// Variables covered.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Variables used: how many values [`PackedDensity::select_into`] writes.
    pub fn taken(&self) -> usize {
        self.taken
    }

    /// Device bytes of the packed form: the words, then the counts.
    pub fn device_bytes(len: usize) -> u64 {
        (len.div_ceil(VARIABLES_PER_WORD) as u64) * 8
    }

    /// Writes the used values of `values` (which must hold [`PackedDensity::len`] of them) to
    /// `out[i]` in order, the reference for the device's selection. Errors on a length mismatch.
    pub fn select_into(&self, values: &[Scalar], out: &mut [Scalar]) -> Result<()> {
        if values.len() < self.len || out.len() < self.taken {
            return Err(Error::Synthesis(format!(
                "a packed density of {} variables ({} used) cannot select from {} values into {}",
                self.len,
                self.taken,
                values.len(),
                out.len()
            )));
        }
        for (i, value) in values[..self.len].iter().enumerate() {
            let (word, bit) = (self.words[i / VARIABLES_PER_WORD], i % VARIABLES_PER_WORD);
            if word >> bit & 1 == 1 {
                let below = (word & ((1u32 << bit) - 1)).count_ones();
                out[(self.taken_before[i / VARIABLES_PER_WORD] + below) as usize] = *value;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn random_case(rng: &mut rand_chacha::ChaCha8Rng, len: usize, used: f64) -> (Density, Vec<Scalar>) {
        let bits = (0..len).map(|_| rng.gen_bool(used)).collect();
        let values = (0..len).map(|_| Scalar::from(rng.gen::<u64>())).collect();
        (Density::from_bits(bits), values)
    }

    #[test]
    fn selects_what_the_density_selects() {
        let seed = rand::random();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        for (len, used) in
            [(0, 0.5), (1, 1.0), (31, 0.5), (32, 1.0), (33, 0.0), (1000, 0.3), (4097, 0.97), (70_000, 0.5)]
        {
            let (density, values) = random_case(&mut rng, len, used);
            let packed = PackedDensity::pack(&density, len).unwrap();
            let expected: Vec<Scalar> = density.select(&values).collect();
            assert_eq!(packed.taken(), expected.len(), "seed {seed} len {len}");
            let mut out = vec![Scalar::from(0u64); packed.taken()];
            packed.select_into(&values, &mut out).unwrap();
            assert_eq!(out, expected, "seed {seed} len {len}");
        }
    }

    #[test]
    fn a_flipped_bit_selects_differently() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(rand::random());
        let (density, values) = random_case(&mut rng, 100, 0.5);
        let mut bits = density.bits().to_vec();
        bits[37] = !bits[37];
        let flipped = Density::from_bits(bits);
        let (packed, other) =
            (PackedDensity::pack(&density, 100).unwrap(), PackedDensity::pack(&flipped, 100).unwrap());
        assert_ne!(packed, other);
        assert_ne!(packed.taken(), other.taken());
        let select = |p: &PackedDensity| {
            let mut out = vec![Scalar::from(0u64); p.taken()];
            p.select_into(&values, &mut out).unwrap();
            out
        };
        assert_ne!(select(&packed), select(&other), "a different density selected the same scalars");
    }

    #[test]
    fn variables_the_density_does_not_track_are_unused() {
        let density = Density::from_bits(vec![true; 10]);
        let packed = PackedDensity::pack(&density, 40).unwrap();
        assert_eq!((packed.len(), packed.taken(), packed.words().len()), (40, 10, 2));
    }

    #[test]
    fn too_few_values_is_an_error() {
        let packed = PackedDensity::pack(&Density::from_bits(vec![true; 10]), 10).unwrap();
        let mut out = vec![Scalar::from(0u64); 10];
        assert!(packed.select_into(&[Scalar::from(1u64); 9], &mut out).is_err());
        assert!(packed.select_into(&[Scalar::from(1u64); 10], &mut out[..9]).is_err());
    }
}
