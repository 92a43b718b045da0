//! The parameters both provers use: a real Groth16 setup of snarkpipe's synthetic circuit
//! (snarkpipe's own setup, which makes what bellperson's generator makes for the same
//! secrets), written to a file with bellperson's `Parameters::write` for supraseal and shared
//! in memory with snarkpipe.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use anyhow::{ensure, Context, Result};
use bellperson::groth16::Parameters;
use blstrs::{Bls12, Scalar};
use ff::Field;
use group::UncompressedEncoding;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use snarkpipe::backend::Device;
use snarkpipe::circuit::WitnessShape;
use snarkpipe::groth16::setup::{setup_on, ToxicWaste};
use snarkpipe::synthetic::SyntheticSpec;

/// Secrets drawn from `seed`: anyone can remake them, which is what a test key is for.
pub fn toxic_waste(seed: u64) -> ToxicWaste {
    let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 0x7031_5ec2_e7a5_7e00);
    let mut secret = || loop {
        let x = Scalar::random(&mut rng);
        if !bool::from(x.is_zero()) {
            break x;
        }
    };
    ToxicWaste { alpha: secret(), beta: secret(), gamma: secret(), delta: secret(), tau: secret() }
}

/// The setup of `spec`'s circuit, its fixed-base multiplications on `device` (the host's cores
/// when `None`).
pub fn setup_params(spec: &SyntheticSpec, device: Option<&dyn Device>) -> Result<Parameters<Bls12>> {
    setup_on(spec.circuit(0), &toxic_waste(spec.seed), device)
        .with_context(|| format!("the setup of the 2^{} synthetic circuit failed", spec.log_n))
}

/// Writes `params` to `path` with bellperson's `Parameters::write` (uncompressed points, the
/// layout supraseal's SRS reader expects); returns the file's bytes.
pub fn write_params(params: &Parameters<Bls12>, path: &Path) -> Result<u64> {
    let file = File::create(path).with_context(|| format!("creating the parameter file {}", path.display()))?;
    let mut writer = BufWriter::with_capacity(8 << 20, file);
    params.write(&mut writer).with_context(|| format!("writing the parameters to {}", path.display()))?;
    writer.flush().with_context(|| format!("writing the parameters to {}", path.display()))?;
    let file = writer.into_inner().map_err(|e| e.into_error()).context("flushing the parameter file")?;
    file.sync_all().ok();
    Ok(file.metadata()?.len())
}

/// Writes exactly the bytes of [`write_params`], but encodes the points on every core (a chunk
/// at a time) where bellperson's writer encodes them one by one on one: at 2^26 that is minutes
/// of a device call saved. `--check-only` compares the two files byte for byte.
pub fn write_params_parallel(params: &Parameters<Bls12>, path: &Path) -> Result<u64> {
    let file = File::create(path).with_context(|| format!("creating the parameter file {}", path.display()))?;
    let mut writer = BufWriter::with_capacity(8 << 20, file);
    let context = || format!("writing the parameters to {}", path.display());
    params.vk.write(&mut writer).with_context(context)?;
    write_points(&mut writer, &params.h).with_context(context)?;
    write_points(&mut writer, &params.l).with_context(context)?;
    write_points(&mut writer, &params.a).with_context(context)?;
    write_points(&mut writer, &params.b_g1).with_context(context)?;
    write_points(&mut writer, &params.b_g2).with_context(context)?;
    writer.flush().with_context(context)?;
    let file = writer.into_inner().map_err(|e| e.into_error()).context("flushing the parameter file")?;
    file.sync_all().ok();
    Ok(file.metadata()?.len())
}

/// A query as bellperson writes it: its length as a big-endian u32, then each point
/// uncompressed.
fn write_points<P>(writer: &mut impl Write, points: &[P]) -> Result<()>
where
    P: UncompressedEncoding + Sync,
{
    const CHUNK: usize = 1 << 18;
    let count = u32::try_from(points.len()).context("a query of more than 2^32 points")?;
    writer.write_all(&count.to_be_bytes())?;
    let size = P::Uncompressed::default().as_ref().len();
    let mut buffer = Vec::new();
    for chunk in points.chunks(CHUNK) {
        buffer.resize(chunk.len() * size, 0u8);
        buffer.par_chunks_mut(size).zip(chunk.par_iter()).for_each(|(out, point)| {
            out.copy_from_slice(point.to_uncompressed().as_ref());
        });
        writer.write_all(&buffer)?;
    }
    Ok(())
}

/// Reads parameters back with bellperson's `Parameters::read`, every point checked.
pub fn read_params(path: &Path) -> Result<Parameters<Bls12>> {
    let file = File::open(path).with_context(|| format!("opening the parameter file {}", path.display()))?;
    Parameters::read(BufReader::with_capacity(8 << 20, file), true)
        .with_context(|| format!("bellperson could not read the parameters in {}", path.display()))
}

/// The point counts of a parameter file, read the way supraseal's SRS reader walks it: the
/// verifying key (three G1 and three G2 points), then ic, h, l, a, b_g1 (G1) and b_g2 (G2),
/// each after its count as a big-endian u32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SrsHeader {
    pub ic: u32,
    pub h: u32,
    pub l: u32,
    pub a: u32,
    pub b_g1: u32,
    pub b_g2: u32,
    pub bytes: u64,
}

const G1_BYTES: u64 = 96;
const G2_BYTES: u64 = 192;

impl SrsHeader {
    pub fn read(path: &Path) -> Result<SrsHeader> {
        let mut file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let bytes = file.metadata()?.len();
        let mut offset = 3 * G1_BYTES + 3 * G2_BYTES;
        let mut next = |point_bytes: u64| -> Result<u32> {
            file.seek(SeekFrom::Start(offset))?;
            let mut count = [0u8; 4];
            file.read_exact(&mut count)
                .with_context(|| format!("{} ends at a count, byte {offset}", path.display()))?;
            let count = u32::from_be_bytes(count);
            offset += 4 + count as u64 * point_bytes;
            Ok(count)
        };
        let header = SrsHeader {
            ic: next(G1_BYTES)?,
            h: next(G1_BYTES)?,
            l: next(G1_BYTES)?,
            a: next(G1_BYTES)?,
            b_g1: next(G1_BYTES)?,
            b_g2: next(G2_BYTES)?,
            bytes,
        };
        ensure!(
            offset == bytes,
            "{} holds {bytes} bytes but its counts describe {offset}: not a parameter file supraseal can read",
            path.display()
        );
        Ok(header)
    }

    /// The counts a circuit of `shape` needs (domain of 2^log_n).
    pub fn check_shape(&self, shape: &WitnessShape, log_n: u32) -> Result<()> {
        let b = shape.b_query_len();
        let expected = [
            ("ic", self.ic as usize, shape.num_inputs),
            ("h", self.h as usize, (1usize << log_n) - 1),
            ("l", self.l as usize, shape.num_aux),
            ("a", self.a as usize, shape.a_query_len()),
            ("b_g1", self.b_g1 as usize, b),
            ("b_g2", self.b_g2 as usize, b),
        ];
        for (name, have, want) in expected {
            ensure!(have == want, "the parameter file's {name} has {have} points, the circuit needs {want}");
        }
        Ok(())
    }
}

/// Whether two parameter sets hold the same key, point for point.
pub fn same_params(x: &Parameters<Bls12>, y: &Parameters<Bls12>) -> bool {
    x.vk == y.vk && x.h == y.h && x.l == y.l && x.a == y.a && x.b_g1 == y.b_g1 && x.b_g2 == y.b_g2
}
