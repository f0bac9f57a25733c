//! Session timestamps for the run's trajectory, in the language's ISO 8601 form,
//! without a date library: the civil-from-days conversion on UTC seconds.

/// `YYYY-MM-DDTHH:MMZ` for `secs` seconds after the Unix epoch.
pub fn utc_minutes(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Now, as [`utc_minutes`].
pub fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_minutes(secs)
}

/// Howard Hinnant's algorithm: days since 1970-01-01 → (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(utc_minutes(0), "1970-01-01T00:00Z");
        assert_eq!(utc_minutes(951_782_400), "2000-02-29T00:00Z");
        assert_eq!(utc_minutes(1_764_456_480), "2025-11-29T22:48Z");
    }
}
