//! Sizes of memory as a user writes them on the command line (`--device-memory 24GiB`).

/// Bytes from `text`: a plain count of bytes, or a number (decimals allowed) with a unit:
/// `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024) or `KB`, `MB`, `GB`, `TB` (powers of 1000);
/// `K`, `M`, `G` and `T` alone are the binary ones, as `free -h` prints them. Case and a
/// space before the unit do not matter.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: write bytes (25769803776) or a size such as 24GiB, 24GB or 512MiB"
            ))
        }
    };
    let refused = || format!("{text:?} is not a size: write bytes (25769803776) or a size such as 24GiB, 24GB or 512MiB");
    if number.is_empty() {
        return Err(refused());
    }
    if multiplier == 1 || !number.contains('.') {
        let whole: u64 = number.parse().map_err(|_| refused())?;
        return whole.checked_mul(multiplier).ok_or_else(refused);
    }
    let value: f64 = number.parse().map_err(|_| refused())?;
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(refused());
    }
    Ok(bytes.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_parse_as_written_and_nonsense_is_refused() {
        assert_eq!(parse_bytes("25769803776"), Ok(24 << 30));
        assert_eq!(parse_bytes("24GiB"), Ok(24 << 30));
        assert_eq!(parse_bytes("24g"), Ok(24 << 30));
        assert_eq!(parse_bytes("24 GB"), Ok(24_000_000_000));
        assert_eq!(parse_bytes("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        for bad in ["", "GiB", "24 parsecs", "-3G", "1.2.3G", "99999999999999999999", "20000000T"] {
            assert!(parse_bytes(bad).is_err(), "{bad:?} was taken");
        }
    }
}
