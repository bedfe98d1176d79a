//! The field schema of the `registry` settings that its `x-deckhouse-validations` do not cover:
//! `https.mode`, `storage.garbageCollection.schedule`, `storage.size`, `whitelistSourceRanges`
//! and `ingressClass`, refused when the ModuleConfig is written — not later, as a RegistryConfig
//! or RegistryStorage error — in go-openapi's words (`<path> in body should …`), as Deckhouse's
//! schema validation words them.

use serde_json::Value;

use crate::registry::{GcSchedule, SCHEDULE_PATTERN, SIZE_PATTERN};
use crate::validation::at;

/// `https.mode` values.
pub(crate) const HTTPS_MODES: [&str; 4] =
    ["Disabled", "CertManager", "CustomCertificate", "OnlyInURI"];
/// Pattern of a `whitelistSourceRanges` item: an IPv4 CIDR.
pub(crate) const CIDR_PATTERN: &str =
    r"^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}/[0-9]{1,2}$";
/// Pattern of `ingressClass`: DNS labels.
pub(crate) const INGRESS_CLASS_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Matches [`SIZE_PATTERN`]: `50Gi`, `1.5T`, `1000`.
pub(crate) fn is_size(s: &str) -> bool {
    let digits_end = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits_end == 0 {
        return false;
    }
    let mut rest = &s[digits_end..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    }
    matches!(
        rest,
        "" | "E" | "P" | "T" | "G" | "M" | "k" | "Ei" | "Pi" | "Ti" | "Gi" | "Mi" | "Ki"
    )
}

/// Matches [`SCHEDULE_PATTERN`]: five whitespace-separated fields.
pub(crate) fn is_schedule(s: &str) -> bool {
    s.split_whitespace().count() == 5
}

/// The refusal of a garbage collection schedule, if any: the schema's pattern first (in its
/// words), then the cron parser the replicas run the schedule with (a value that is not of the
/// format, in go-openapi's words).
pub(crate) fn schedule_error(path: &str, s: &str) -> Option<String> {
    if !is_schedule(s) {
        return Some(format!("{path} in body should match '{SCHEDULE_PATTERN}'"));
    }
    GcSchedule::parse(s)
        .err()
        .map(|e| format!("{path} in body must be of type cron: {s:?} ({})", e.reason))
}

/// Matches [`CIDR_PATTERN`].
pub(crate) fn is_cidr(s: &str) -> bool {
    let Some((address, prefix)) = s.split_once('/') else {
        return false;
    };
    let digits =
        |p: &str, max: usize| (1..=max).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit());
    let octets: Vec<&str> = address.split('.').collect();
    octets.len() == 4 && octets.iter().all(|o| digits(o, 3)) && digits(prefix, 2)
}

/// Matches [`INGRESS_CLASS_PATTERN`].
pub(crate) fn is_ingress_class(s: &str) -> bool {
    let label = |l: &str| {
        let b = l.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        !b.is_empty()
            && b.first().is_some_and(edge)
            && b.last().is_some_and(edge)
            && b.iter().all(|c| edge(c) || *c == b'-')
    };
    s.split('.').all(label)
}

/// The schema messages of these fields for raw `settings`, in the order of the schema.
pub(crate) fn field_errors(settings: &Value, errors: &mut Vec<String>) {
    if let Some(mode) = at(settings, &["https", "mode"]).and_then(Value::as_str)
        && !HTTPS_MODES.contains(&mode)
    {
        errors.push(format!(
            "https.mode in body should be one of [{}]",
            HTTPS_MODES.join(" ")
        ));
    }
    if let Some(class) = settings.get("ingressClass").and_then(Value::as_str)
        && !is_ingress_class(class)
    {
        errors.push(format!(
            "ingressClass in body should match '{INGRESS_CLASS_PATTERN}'"
        ));
    }
    if let Some(size) = at(settings, &["storage", "size"]).and_then(Value::as_str)
        && !is_size(size)
    {
        errors.push(format!(
            "storage.size in body should match '{SIZE_PATTERN}'"
        ));
    }
    if let Some(error) = at(settings, &["storage", "garbageCollection", "schedule"])
        .and_then(Value::as_str)
        .and_then(|s| schedule_error("storage.garbageCollection.schedule", s))
    {
        errors.push(error);
    }
    let ranges = settings
        .get("whitelistSourceRanges")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for (i, range) in ranges.enumerate() {
        if range.as_str().is_none_or(|r| !is_cidr(r)) {
            errors.push(format!(
                "whitelistSourceRanges.{i} in body should match '{CIDR_PATTERN}'"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matchers_follow_their_patterns() {
        for (s, ok) in [
            ("50Gi", true),
            ("1.5T", true),
            ("1000", true),
            ("10k", true),
            ("10K", false),
            ("1.", false),
            (".5Gi", false),
            ("50GB", false),
            ("lots", false),
            ("", false),
        ] {
            assert_eq!(is_size(s), ok, "size {s:?}");
        }
        for (s, ok) in [
            ("17 3 * * *", true),
            (" 0 */6 * * 1-5 ", true),
            ("@daily", false),
            ("0 3 * *", false),
            ("0 0 3 * * *", false),
        ] {
            assert_eq!(is_schedule(s), ok, "schedule {s:?}");
        }
        for (s, ok) in [
            ("10.0.0.0/8", true),
            ("192.168.1.1/32", true),
            ("10.0.0.0", false),
            ("10.0.0/8", false),
            ("fd00::/8", false),
            ("10.0.0.0/128", false),
        ] {
            assert_eq!(is_cidr(s), ok, "cidr {s:?}");
        }
        for (s, ok) in [
            ("nginx", true),
            ("nginx-public.example", true),
            ("Nginx", false),
            ("-nginx", false),
            ("nginx.", false),
            ("", false),
        ] {
            assert_eq!(is_ingress_class(s), ok, "ingress class {s:?}");
        }
    }

    #[test]
    fn each_field_is_refused_in_go_openapis_words() {
        let cases = [
            (
                json!({"https": {"mode": "Always"}}),
                "https.mode in body should be one of [Disabled CertManager CustomCertificate OnlyInURI]",
            ),
            (
                json!({"ingressClass": "Nginx"}),
                "ingressClass in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'",
            ),
            (
                json!({"storage": {"size": "lots"}}),
                "storage.size in body should match '^[0-9]+(\\.[0-9]+)?(E|P|T|G|M|k|Ei|Pi|Ti|Gi|Mi|Ki)?$'",
            ),
            (
                json!({"storage": {"garbageCollection": {"schedule": "@daily"}}}),
                "storage.garbageCollection.schedule in body should match '^\\s*\\S+\\s+\\S+\\s+\\S+\\s+\\S+\\s+\\S+\\s*$'",
            ),
            (
                json!({"storage": {"garbageCollection": {"schedule": "61 3 * * *"}}}),
                "storage.garbageCollection.schedule in body must be of type cron: \"61 3 * * *\" (",
            ),
            (
                json!({"whitelistSourceRanges": ["10.0.0.0/8", "everyone"]}),
                "whitelistSourceRanges.1 in body should match '^[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}/[0-9]{1,2}$'",
            ),
        ];
        for (settings, message) in cases {
            let mut errors = Vec::new();
            field_errors(&settings, &mut errors);
            assert_eq!(errors.len(), 1, "{settings}: {errors:?}");
            assert!(errors[0].starts_with(message), "{settings}: {errors:?}");
        }
        let mut errors = Vec::new();
        field_errors(
            &json!({"https": {"mode": "CertManager"}, "ingressClass": "nginx",
                    "storage": {"size": "50Gi", "garbageCollection": {"schedule": "17 3 * * *"}},
                    "whitelistSourceRanges": ["10.0.0.0/8"]}),
            &mut errors,
        );
        assert!(errors.is_empty(), "{errors:?}");
    }
}
