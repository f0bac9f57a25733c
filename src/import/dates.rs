//! Dates in records. A session needs one; Markdown notes and code carry at most a
//! "measured on 2026-06-28" somewhere, so their sessions take the latest valid
//! `YYYY-MM-DD` found in the records of the import (or `--date`).

/// Whether `text` is exactly a valid `YYYY-MM-DD`.
pub fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        text.get(r)
            .filter(|d| d.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|d| d.parse().ok())
    };
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// The latest valid date written in `text`, not inside a longer run of digits.
pub fn latest(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut best: Option<&str> = None;
    for i in 0..b.len().saturating_sub(9) {
        let bounded = (i == 0 || !b[i - 1].is_ascii_digit())
            && b.get(i + 10).is_none_or(|c| !c.is_ascii_digit());
        if let Some(candidate) = text.get(i..i + 10) {
            if bounded && is_date(candidate) && best.is_none_or(|d| candidate > d) {
                best = Some(candidate);
            }
        }
    }
    best.map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_checked_and_the_latest_wins() {
        assert!(is_date("2024-02-29"));
        assert!(!is_date("2026-02-29"));
        assert!(!is_date("2026-13-01"));
        assert_eq!(
            latest("measured 2026-06-27, again 2026-06-28; not 2026-99-01 nor 12026-07-01"),
            Some("2026-06-28".into())
        );
        assert_eq!(latest("no date"), None);
    }
}
