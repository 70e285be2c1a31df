//! The throttle's limits (and `--disk-room`) on the command line: a duration (`500ms`,
//! `10s`, `2m`), a size (`40GB`), a rate of bytes per second (`64MB`, `512kB/s`; units of 1024 as PostgreSQL writes
//! them), a ratio over a baseline (`3`, `1.5x`), or `off`.

/// A limit; `None` is `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit(pub Option<u64>);

fn split(text: &str) -> Result<(u64, String), String> {
    let text = text.trim();
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return Err(format!(
            "{text:?} does not start with a number (or say `off`)"
        ));
    }
    let (number, unit) = text.split_at(digits);
    let number = number
        .parse::<u64>()
        .map_err(|_| format!("{number:?} is too large"))?;
    Ok((number, unit.trim().to_owned()))
}

/// A duration in milliseconds, or `off`.
pub fn duration_ms(text: &str) -> Result<Limit, String> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(Limit(None));
    }
    let (number, unit) = split(text)?;
    let factor = match unit.as_str() {
        "ms" => 1,
        "s" | "" => 1_000,
        "m" | "min" => 60_000,
        _ => return Err(format!("unknown unit {unit:?}: use ms, s or m (or `off`)")),
    };
    number
        .checked_mul(factor)
        .map(|ms| Limit(Some(ms)))
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// Bytes per second, or `off`.
pub fn bytes_per_s(text: &str) -> Result<Limit, String> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(Limit(None));
    }
    let (number, unit) = split(text)?;
    let unit = unit.strip_suffix("/s").unwrap_or(&unit);
    scaled(text, number, unit, "(per second), or `off`").map(|b| Limit(Some(b)))
}

/// A size in bytes (`40GB`, `512MB`, `1TB`; units of 1024), for `--disk-room`.
pub fn bytes(text: &str) -> Result<u64, String> {
    let (number, unit) = split(text)?;
    scaled(text, number, &unit, "")
}

fn scaled(text: &str, number: u64, unit: &str, or: &str) -> Result<u64, String> {
    let factor: u64 = match unit {
        "B" | "" => 1,
        "kB" => 1 << 10,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        _ => {
            return Err(format!(
                "unknown unit {unit:?}: use B, kB, MB, GB or TB {or}"
            ))
        }
    };
    number
        .checked_mul(factor)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// A ratio limit; `None` is `off`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatioLimit(pub Option<f64>);

/// A ratio over 1 (`3`, `1.5x`, `2×`), or `off`.
pub fn ratio(text: &str) -> Result<RatioLimit, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") {
        return Ok(RatioLimit(None));
    }
    let number = text.strip_suffix(['x', 'X', '×']).unwrap_or(text).trim();
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a ratio such as 3 or 1.5x (or `off`)"))?;
    if !value.is_finite() || value <= 1.0 {
        return Err(format!(
            "{text:?}: a slowdown limit is a ratio over 1 (1 would allow no slowdown at all)"
        ));
    }
    Ok(RatioLimit(Some(value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_parse_over_one_or_off() {
        assert_eq!(ratio("3"), Ok(RatioLimit(Some(3.0))));
        assert_eq!(ratio("1.5x"), Ok(RatioLimit(Some(1.5))));
        assert_eq!(ratio("2×"), Ok(RatioLimit(Some(2.0))));
        assert_eq!(ratio("off"), Ok(RatioLimit(None)));
        for bad in ["1", "0.5", "-2", "inf", "NaN", "fast", ""] {
            assert!(ratio(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn limits_parse_with_their_units() {
        assert_eq!(duration_ms("10s"), Ok(Limit(Some(10_000))));
        assert_eq!(duration_ms("500ms"), Ok(Limit(Some(500))));
        assert_eq!(duration_ms("2m"), Ok(Limit(Some(120_000))));
        assert_eq!(duration_ms("off"), Ok(Limit(None)));
        assert!(duration_ms("ten").is_err());
        assert!(duration_ms("10h").is_err());
        assert_eq!(bytes_per_s("64MB"), Ok(Limit(Some(64 << 20))));
        assert_eq!(bytes_per_s("512kB/s"), Ok(Limit(Some(512 << 10))));
        assert_eq!(bytes_per_s("OFF"), Ok(Limit(None)));
        assert!(bytes_per_s("1PB").is_err());
        assert_eq!(bytes("40GB"), Ok(40 << 30));
        assert_eq!(bytes("2TB"), Ok(2 << 40));
        assert!(bytes("off").is_err());
        assert!(bytes_per_s("99999999999999999999GB").is_err());
    }
}
