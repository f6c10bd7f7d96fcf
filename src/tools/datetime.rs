//! `get_datetime`: the local date and time, with the zone, for programs that stamp or schedule.

use chrono::{DateTime, Datelike, Local, TimeZone};
use serde_json::{Value, json};

use crate::registry::{Handler, ToolSpec, sync_handler};

/// The tool's spec.
pub fn spec() -> ToolSpec {
    ToolSpec::new(
        "get_datetime",
        "Current date and time",
        "Return the local date and time: date, time, timezone name and UTC offset, ISO 8601 \
         timestamp, weekday and unix time.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    )
    .output(json!({
        "type": "object",
        "properties": {
            "date": {"type": "string"},
            "time": {"type": "string"},
            "timezone": {"type": "string"},
            "utc_offset": {"type": "string"},
            "iso8601": {"type": "string"},
            "weekday": {"type": "string"},
            "unix": {"type": "integer"}
        },
        "required": ["date", "time", "timezone", "utc_offset", "iso8601", "weekday", "unix"]
    }))
}

/// The tool's handler.
pub fn handler() -> Handler {
    sync_handler(|_| {
        let zone = iana_time_zone::get_timezone().unwrap_or_else(|_| "local".to_string());
        Ok(describe(&Local::now(), &zone))
    })
}

/// The fields `get_datetime` returns for an instant in a zone.
pub fn describe<Tz: TimeZone>(now: &DateTime<Tz>, zone: &str) -> Value
where
    Tz::Offset: std::fmt::Display,
{
    json!({
        "date": now.format("%Y-%m-%d").to_string(),
        "time": now.format("%H:%M:%S").to_string(),
        "timezone": zone,
        "utc_offset": now.format("%:z").to_string(),
        "iso8601": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
        "weekday": now.weekday().to_string_long(),
        "unix": now.timestamp(),
    })
}

/// Full English weekday names.
trait LongName {
    fn to_string_long(&self) -> &'static str;
}

impl LongName for chrono::Weekday {
    fn to_string_long(&self) -> &'static str {
        use chrono::Weekday::*;
        match self {
            Mon => "Monday",
            Tue => "Tuesday",
            Wed => "Wednesday",
            Thu => "Thursday",
            Fri => "Friday",
            Sat => "Saturday",
            Sun => "Sunday",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;

    #[test]
    fn describes_an_instant_in_a_fixed_zone() {
        let tz = FixedOffset::east_opt(3600 + 1800).unwrap();
        let t = tz.with_ymd_and_hms(2026, 11, 30, 9, 5, 7).unwrap();
        let v = describe(&t, "Asia/Test");
        assert_eq!(v["date"], "2026-11-30");
        assert_eq!(v["time"], "09:05:07");
        assert_eq!(v["utc_offset"], "+01:30");
        assert_eq!(v["iso8601"], "2026-11-30T09:05:07+01:30");
        assert_eq!(v["weekday"], "Monday");
        assert_eq!(v["unix"], t.timestamp());
    }
}
