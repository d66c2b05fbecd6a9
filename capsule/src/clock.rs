//! Status timestamps: RFC 3339 UTC with milliseconds and a `Z`, and the exact instants
//! `statusTimestampAfter` compares against.

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// An instant at millisecond precision, the precision every written timestamp carries, so a
/// cutoff copied from a status compares equal to that status.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub struct Millis(pub i64);

impl Millis {
    pub fn now() -> Self {
        let now = OffsetDateTime::now_utc();
        Millis((now.unix_timestamp_nanos() / 1_000_000) as i64)
    }

    /// `2026-10-13T09:00:00.123Z`.
    pub fn rfc3339(self) -> String {
        let secs = self.0.div_euclid(1000);
        let ms = self.0.rem_euclid(1000);
        match OffsetDateTime::from_unix_timestamp(secs) {
            Ok(t) => format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                t.year(),
                u8::from(t.month()),
                t.day(),
                t.hour(),
                t.minute(),
                t.second(),
                ms
            ),
            Err(_) => "1970-01-01T00:00:00.000Z".to_owned(),
        }
    }
}

/// An RFC 3339 timestamp in any offset, as exact nanoseconds since the epoch.
pub fn parse_rfc3339_nanos(s: &str) -> Option<i128> {
    OffsetDateTime::parse(s, &Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_millis_and_z() {
        assert_eq!(
            Millis(1_760_346_000_123).rfc3339(),
            "2025-10-13T09:00:00.123Z"
        );
    }

    #[test]
    fn parses_any_offset_to_the_same_instant() {
        let a = parse_rfc3339_nanos("2026-10-13T09:00:00Z").unwrap();
        let b = parse_rfc3339_nanos("2026-10-13T11:00:00+02:00").unwrap();
        assert_eq!(a, b);
        assert!(parse_rfc3339_nanos("yesterday").is_none());
    }
}
