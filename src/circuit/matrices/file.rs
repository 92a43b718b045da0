//! The constraint matrices' file format, kept beside a key's parameters.

use super::*;

// The on-disk format, all integers little-endian:
//
//   magic            8 bytes   MAGIC
//   version          u32       FORMAT_VERSION
//   key digest       32 bytes  the proving key's digest the matrices were recorded for
//   num_inputs       u64
//   num_aux          u64
//   num_constraints  u64
//   table length     u64
//   terms of A, B, C 3 × u64
//   table            table length × 32 bytes, each a scalar's canonical representation
//   A, B, C          each: row_starts (num_constraints + 1) × u64, columns × u32,
//                    coefficient indices × u32
//   checksum         32 bytes  SHA-256 of everything before it
//
// The reader checks the header, then that the file holds exactly what the counts say, before
// it allocates; then the checksum, then the invariants of `SparseMatrix`.

/// The first bytes of a constraint-matrices file.
const MAGIC: [u8; 8] = *b"SNKPMTRX";
/// The format [`ConstraintMatrices::write_to`] writes and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes before the body: magic, version, key digest and the seven counts.
const HEADER_BYTES: u64 = 8 + 4 + 32 + 7 * 8;
/// Bytes a write or a read moves at a time.
const IO_CHUNK_BYTES: usize = 1 << 20;

/// A writer that hashes what passes through it.
struct HashingWriter<'a, W: Write> {
    inner: &'a mut W,
    hasher: Sha256,
    buffer: Vec<u8>,
}

impl<W: Write> HashingWriter<'_, W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= IO_CHUNK_BYTES {
            self.flush_buffer()?;
        }
        Ok(())
    }

    fn flush_buffer(&mut self) -> std::io::Result<()> {
        self.hasher.update(&self.buffer);
        self.inner.write_all(&self.buffer)?;
        self.buffer.clear();
        Ok(())
    }
}

/// A reader of the body: hashes what it reads, and reports a short read as truncation.
struct HashingReader<'a, R: Read> {
    inner: &'a mut R,
    hasher: Sha256,
    source: &'a str,
}

impl<R: Read> HashingReader<'_, R> {
    fn take(&mut self, bytes: &mut [u8]) -> Result<()> {
        self.inner.read_exact(bytes).map_err(|err| read_error(self.source, err))?;
        self.hasher.update(&*bytes);
        Ok(())
    }

    /// `count` little-endian values of `N` bytes, in chunks; `count` was checked against the
    /// file's length, so the allocation is what the file holds.
    fn values<const N: usize, T>(&mut self, count: usize, decode: impl Fn([u8; N]) -> T) -> Result<Vec<T>> {
        let mut values = Vec::with_capacity(count);
        let mut chunk = vec![0u8; IO_CHUNK_BYTES / N * N];
        while values.len() < count {
            let n = (count - values.len()).min(chunk.len() / N);
            let bytes = &mut chunk[..n * N];
            self.take(bytes)?;
            values.extend(bytes.chunks_exact(N).map(|b| decode(b.try_into().unwrap_or([0; N]))));
        }
        Ok(values)
    }
}

/// An error about a matrices file, with what the user can do about it.
fn file_error(source: &str, reason: impl std::fmt::Display) -> Error {
    Error::Io {
        context: source.to_string(),
        message: format!("{reason}; delete the file to record the matrices again"),
    }
}

fn read_error(source: &str, err: std::io::Error) -> Error {
    if err.kind() == std::io::ErrorKind::UnexpectedEof {
        file_error(source, "the file is truncated")
    } else {
        Error::io(source, err)
    }
}

impl ConstraintMatrices {
    /// Writes the matrices in the versioned format, tied to `key_digest` (the digest of the
    /// proving key they were recorded for), with a SHA-256 checksum over everything written.
    pub fn write_to(&self, writer: &mut impl Write, key_digest: [u8; 32]) -> Result<()> {
        let mut out =
            HashingWriter { inner: writer, hasher: Sha256::new(), buffer: Vec::with_capacity(IO_CHUNK_BYTES) };
        self.write_hashed(&mut out, key_digest).map_err(|err| Error::io("writing constraint matrices", err))
    }

    fn write_hashed<W: Write>(&self, out: &mut HashingWriter<W>, key_digest: [u8; 32]) -> std::io::Result<()> {
        out.put(&MAGIC)?;
        out.put(&FORMAT_VERSION.to_le_bytes())?;
        out.put(&key_digest)?;
        let matrices = [&self.a, &self.b, &self.c];
        let counts = [self.num_inputs, self.num_aux, self.num_constraints(), self.coefficient_table.len()]
            .into_iter()
            .chain(matrices.iter().map(|m| m.num_terms()));
        for count in counts {
            out.put(&(count as u64).to_le_bytes())?;
        }
        for coeff in &self.coefficient_table {
            out.put(&coeff.to_repr())?;
        }
        for m in matrices {
            for start in &m.row_starts {
                out.put(&start.to_le_bytes())?;
            }
            for column in &m.columns {
                out.put(&column.to_le_bytes())?;
            }
            for k in &m.coefficients {
                out.put(&k.to_le_bytes())?;
            }
        }
        out.flush_buffer()?;
        let checksum: [u8; 32] = std::mem::take(&mut out.hasher).finalize().into();
        out.inner.write_all(&checksum)?;
        out.inner.flush()
    }

    /// Writes the matrices to `path` (see [`ConstraintMatrices::write_to`]) through a
    /// temporary file beside it, renamed into place: a reader never sees half a file.
    pub fn write_file(&self, path: &Path, key_digest: [u8; 32]) -> Result<()> {
        let context = format!("writing constraint matrices {}", path.display());
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(format!(".{}.tmp", std::process::id()));
        let temporary = std::path::PathBuf::from(temporary);
        let result = (|| {
            let file = std::fs::File::create(&temporary).map_err(|err| Error::io(&context, err))?;
            let mut writer = std::io::BufWriter::new(file);
            self.write_to(&mut writer, key_digest)?;
            let file = writer.into_inner().map_err(|err| Error::io(&context, err.into_error()))?;
            file.sync_all().map_err(|err| Error::io(&context, err))?;
            std::fs::rename(&temporary, path).map_err(|err| Error::io(&context, err))
        })();
        if result.is_err() {
            // Best effort: the write already failed, and the temporary is not the user's file.
            let _ = std::fs::remove_file(&temporary);
        }
        result
    }

    /// Reads matrices that [`ConstraintMatrices::write_to`] wrote for the proving key whose
    /// digest is `expected_key_digest`.
    ///
    /// The counts are checked against the bytes the reader holds before anything is
    /// allocated, and everything is checked before the matrices are returned. Errors, each a
    /// [`crate::Error::Io`] that says what is wrong and to delete the file to record again: not
    /// a matrices file (wrong magic), another format version, recorded for another proving key,
    /// counts that do not fit (a truncated file or trailing bytes), a checksum that does not
    /// match, or contents that break the matrices' invariants.
    pub fn read_from<R: Read + Seek>(reader: &mut R, expected_key_digest: [u8; 32]) -> Result<ConstraintMatrices> {
        read_matrices(reader, expected_key_digest, "constraint matrices")
    }

    /// Reads matrices from `path`; see [`ConstraintMatrices::read_from`]. The errors name the
    /// file.
    pub fn read_file(path: &Path, expected_key_digest: [u8; 32]) -> Result<ConstraintMatrices> {
        let source = format!("constraint matrices {}", path.display());
        let file = std::fs::File::open(path).map_err(|err| Error::io(&source, err))?;
        read_matrices(&mut std::io::BufReader::new(file), expected_key_digest, &source)
    }
}

fn read_matrices<R: Read + Seek>(
    reader: &mut R,
    expected_key_digest: [u8; 32],
    source: &str,
) -> Result<ConstraintMatrices> {
    let start = reader.stream_position().map_err(|err| Error::io(source, err))?;
    let end = reader.seek(SeekFrom::End(0)).map_err(|err| Error::io(source, err))?;
    reader.seek(SeekFrom::Start(start)).map_err(|err| Error::io(source, err))?;
    let available = end.saturating_sub(start);

    let mut input = HashingReader { inner: reader, hasher: Sha256::new(), source };
    let mut magic = [0u8; 8];
    input.take(&mut magic).map_err(|_| file_error(source, "not a constraint-matrices file (too short)"))?;
    if magic != MAGIC {
        return Err(file_error(source, "not a constraint-matrices file (its first bytes are not the format's)"));
    }
    let mut word = [0u8; 4];
    input.take(&mut word)?;
    let version = u32::from_le_bytes(word);
    if version != FORMAT_VERSION {
        return Err(file_error(
            source,
            format!("format version {version}, but this snarkpipe reads version {FORMAT_VERSION}"),
        ));
    }
    let mut digest = [0u8; 32];
    input.take(&mut digest)?;
    if digest != expected_key_digest {
        return Err(file_error(
            source,
            format!(
                "recorded for another proving key (key digest {}, this key's is {})",
                hex::encode(digest),
                hex::encode(expected_key_digest)
            ),
        ));
    }
    let mut counts = [0u64; 7];
    for count in &mut counts {
        let mut bytes = [0u8; 8];
        input.take(&mut bytes)?;
        *count = u64::from_le_bytes(bytes);
    }
    let [num_inputs, num_aux, num_constraints, table_len, terms @ ..] = counts;

    // What the counts say the rest of the file holds, in u128 so no count can overflow it.
    let terms_total: u128 = terms.iter().map(|&t| t as u128).sum();
    let needed: u128 =
        table_len as u128 * 32 + 3 * (num_constraints as u128 + 1) * 8 + terms_total * 8 + 32 + HEADER_BYTES as u128;
    if needed != available as u128 {
        let what = if needed > available as u128 { "truncated" } else { "longer than its counts say" };
        return Err(file_error(
            source,
            format!("the file is {what}: its counts need {needed} bytes, it holds {available}"),
        ));
    }
    // Every count now fits in the file, so in a usize; the rest of the invariants are checked
    // once the checksum has shown the contents are what was written.
    let (num_inputs, num_aux, num_constraints, table_len) =
        (num_inputs as usize, num_aux as usize, num_constraints as usize, table_len as usize);
    let table_bytes: Vec<[u8; 32]> = input.values(table_len, |bytes: [u8; 32]| bytes)?;
    let mut parts = Vec::with_capacity(3);
    for &terms in &terms {
        let row_starts = input.values(num_constraints + 1, u64::from_le_bytes)?;
        let columns = input.values(terms as usize, u32::from_le_bytes)?;
        let coefficients = input.values(terms as usize, u32::from_le_bytes)?;
        parts.push(SparseMatrix { row_starts, columns, coefficients });
    }
    let computed: [u8; 32] = std::mem::take(&mut input.hasher).finalize().into();
    let mut stored = [0u8; 32];
    input.take(&mut stored)?;
    if computed != stored {
        return Err(file_error(source, "the checksum does not match: the file is corrupt"));
    }

    let invalid = |reason: String| file_error(source, format!("the file is malformed: {reason}"));
    let mut table = Vec::with_capacity(table_len);
    for (k, bytes) in table_bytes.into_iter().enumerate() {
        let coeff = Option::<Scalar>::from(Scalar::from_repr(bytes))
            .ok_or_else(|| invalid(format!("coefficient {k} is not a canonical scalar")))?;
        if coeff.is_zero_vartime() {
            return Err(invalid(format!("coefficient {k} is zero")));
        }
        table.push(coeff);
    }
    if table.first() != Some(&Scalar::ONE) {
        return Err(invalid("the coefficient table does not start with ONE".into()));
    }
    let num_variables = num_inputs as u64 + num_aux as u64;
    if num_inputs == 0 || num_variables > u32::MAX as u64 + 1 || num_constraints < Witness::MIN_CONSTRAINTS {
        return Err(invalid(format!(
            "{num_inputs} inputs, {num_aux} aux variables and {num_constraints} constraints are not a circuit's"
        )));
    }
    for (name, m) in ["A", "B", "C"].into_iter().zip(&parts) {
        let terms = m.columns.len() as u64;
        if m.row_starts.first() != Some(&0) || m.row_starts.last() != Some(&terms) {
            return Err(invalid(format!("{name}'s row starts do not run from 0 to its {terms} terms")));
        }
        if let Some(r) = m.row_starts.windows(2).position(|w| w[0] > w[1]) {
            return Err(invalid(format!("{name}'s row {r} ends before it starts")));
        }
        if let Some(t) = m.columns.iter().position(|&column| column as u64 >= num_variables) {
            return Err(invalid(format!("{name}'s term {t} has a column beyond the {num_variables} variables")));
        }
        if let Some(t) = m.coefficients.iter().position(|&k| k as usize >= table.len()) {
            return Err(invalid(format!("{name}'s term {t} has a coefficient beyond the table")));
        }
    }
    let [a, b, c]: [SparseMatrix; 3] =
        parts.try_into().map_err(|_| Error::Internal("three matrices were read, not three".into()))?;
    Ok(ConstraintMatrices::from_parts(num_inputs, num_aux, [a, b, c], table))
}
