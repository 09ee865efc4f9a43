//! Wall-clock times in the wire form every message and report uses.
//!
//! Owns: [`Rfc3339Millis`], the one formatter of a capture time or a report's timestamp
//! (`YYYY-MM-DDTHH:MM:SS.mmmZ`, UTC). Must not: read clocks (callers pass the time).

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// Formats a wall-clock time as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC). Times before 1970 print as the
/// epoch: a capture timestamp that old is a clock fault, not a date worth encoding.
#[derive(Debug, Clone, Copy)]
pub struct Rfc3339Millis(pub SystemTime);

impl fmt::Display for Rfc3339Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let since_epoch = self.0.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = since_epoch.as_secs();
        let (year, month, day) = civil_from_days(secs / 86_400);
        let second_of_day = secs % 86_400;
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            second_of_day / 3600,
            second_of_day / 60 % 60,
            second_of_day % 60,
            since_epoch.subsec_millis()
        )
    }
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`,
/// restricted to non-negative days).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}
