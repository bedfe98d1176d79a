//! The preflight probe's decisions: what each answer of the three steps means. The probe runs
//! when the primary upstream's address, CA or credentials change, against the primary endpoint
//! only: `GET /v2/` (200 anonymous; 401 read the challenge; else unreachable), then with a
//! Bearer challenge a token for `repository:<path>/release-channel:pull` (anonymous allowed;
//! non-200 is an auth failure), then the sentinel `GET /v2/<path>/release-channel/tags/list`
//! (200 with a non-empty `tags`; 401/403 auth; 404 or empty sentinel; else unreachable).

use api::registry::UpstreamProbeReason;

/// How the registry wants to be authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Challenge {
    /// `/v2/` answered 200: no authentication.
    Anonymous,
    /// `Basic`.
    Basic,
    /// `Bearer realm=…,service=…`.
    Bearer {
        /// Token endpoint.
        realm: String,
        /// `service` parameter, if given.
        service: Option<String>,
    },
}

/// The probe's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The upstream serves the Deckhouse image set with these credentials.
    Accepted,
    /// It could not be reached, or answered nonsense.
    Unreachable(String),
    /// It refused the credentials.
    AuthFailed(String),
    /// It accepted them but does not hold the image set (wrong path, usually).
    SentinelMissing(String),
}

impl Outcome {
    /// The `outcome` label of `d8_registry_upstream_probes_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Unreachable(_) => "unreachable",
            Outcome::AuthFailed(_) => "auth",
            Outcome::SentinelMissing(_) => "sentinel",
        }
    }

    /// The reason of `UpstreamValid=False`; `None` when accepted.
    pub fn reason(&self) -> Option<UpstreamProbeReason> {
        match self {
            Outcome::Accepted => None,
            Outcome::Unreachable(_) => Some(UpstreamProbeReason::Unreachable),
            Outcome::AuthFailed(_) => Some(UpstreamProbeReason::AuthFailed),
            Outcome::SentinelMissing(_) => Some(UpstreamProbeReason::SentinelMissing),
        }
    }

    /// The human explanation (never a credential).
    pub fn message(&self) -> &str {
        match self {
            Outcome::Accepted => "the upstream passed the preflight probe",
            Outcome::Unreachable(m) | Outcome::AuthFailed(m) | Outcome::SentinelMissing(m) => m,
        }
    }
}

/// The sentinel repository under the upstream's path.
pub fn sentinel_repository(path: Option<&str>) -> String {
    let path = path.unwrap_or_default().trim_matches('/');
    if path.is_empty() {
        "release-channel".to_owned()
    } else {
        format!("{path}/release-channel")
    }
}

/// The token scope asked for.
pub fn sentinel_scope(path: Option<&str>) -> String {
    format!("repository:{}:pull", sentinel_repository(path))
}

/// Step 1: the answer of `GET /v2/`.
pub fn base(status: u16, www_authenticate: Option<&str>) -> Result<Challenge, Outcome> {
    match status {
        200 => Ok(Challenge::Anonymous),
        401 => parse_challenge(www_authenticate.unwrap_or_default()).ok_or_else(|| {
            Outcome::AuthFailed("the registry asks for authentication it does not name".into())
        }),
        other => Err(Outcome::Unreachable(format!("GET /v2/ answered {other}"))),
    }
}

fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut realm = None;
    let mut service = None;
    for part in split_params(rest) {
        let Some((key, value)) = part.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('"').to_owned();
        match key.trim().to_ascii_lowercase().as_str() {
            "realm" => realm = Some(value),
            "service" => service = Some(value),
            _ => {}
        }
    }
    realm
        .filter(|r| !r.is_empty())
        .map(|realm| Challenge::Bearer { realm, service })
}

/// Splits `a="x,y",b=z` on the commas outside quotes.
fn split_params(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in text.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// Step 2: the token endpoint's status.
pub fn token(status: u16) -> Result<(), Outcome> {
    if status == 200 {
        Ok(())
    } else {
        Err(Outcome::AuthFailed(format!(
            "the token endpoint answered {status}"
        )))
    }
}

/// What an upstream must hold, and how to fix one that does not: said with every sentinel
/// refusal.
fn sentinel_fix(repository: &str) -> String {
    format!(
        "an upstream must hold the Deckhouse release channel images (tags such as `stable`) in \
         {repository}: set `path` to where the platform images are, or fill it with \
         `d8 mirror pull` and `d8 mirror push`"
    )
}

/// Step 3: the sentinel tag list of `repository` (`host/path/release-channel`, as the message
/// names it).
pub fn sentinel(status: u16, body: &[u8], repository: &str) -> Outcome {
    let missing = |what: String| {
        Outcome::SentinelMissing(format!(
            "looked for release-channel tags in {repository}: {what}; {}",
            sentinel_fix(repository)
        ))
    };
    match status {
        200 => {
            let tags = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("tags").and_then(|t| t.as_array()).map(Vec::len));
            match tags {
                Some(n) if n > 0 => Outcome::Accepted,
                Some(_) => missing("the repository has no tags".into()),
                None => missing("the tag list is unreadable".into()),
            }
        }
        401 | 403 => Outcome::AuthFailed(format!(
            "the registry refused to list the tags of {repository} ({status}): check the credentials"
        )),
        404 => missing("no such repository (404)".into()),
        other => Outcome::Unreachable(format!("listing the tags of {repository} answered {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_answers() {
        assert_eq!(base(200, None), Ok(Challenge::Anonymous));
        assert_eq!(base(401, Some("Basic realm=\"r\"")), Ok(Challenge::Basic));
        assert_eq!(
            base(
                401,
                Some(r#"Bearer realm="https://auth.example/token",service="Docker registry,x""#)
            ),
            Ok(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("Docker registry,x".into())
            })
        );
        assert_eq!(base(401, None).unwrap_err().label(), "auth");
        assert_eq!(
            base(401, Some("Bearer service=\"x\"")).unwrap_err().label(),
            "auth"
        );
        assert_eq!(base(401, Some("Negotiate")).unwrap_err().label(), "auth");
        for status in [302, 404, 500, 503] {
            assert_eq!(
                base(status, None).unwrap_err().label(),
                "unreachable",
                "{status}"
            );
        }
    }

    #[test]
    fn token_and_sentinel_answers() {
        assert_eq!(token(200), Ok(()));
        assert_eq!(token(401).unwrap_err().label(), "auth");
        assert_eq!(token(500).unwrap_err().label(), "auth");
        let rows: [(u16, &[u8], &str); 8] = [
            (
                200,
                br#"{"name":"x","tags":["alpha","stable"]}"#,
                "accepted",
            ),
            (200, br#"{"name":"x","tags":[]}"#, "sentinel"),
            (200, br#"{"name":"x","tags":null}"#, "sentinel"),
            (200, b"<html>", "sentinel"),
            (401, b"", "auth"),
            (403, b"", "auth"),
            (404, b"", "sentinel"),
            (502, b"", "unreachable"),
        ];
        for (status, body, label) in rows {
            assert_eq!(
                sentinel(status, body, "r.example/dkp/release-channel").label(),
                label,
                "{status}"
            );
        }
    }

    #[test]
    fn a_missing_sentinel_says_what_was_looked_for_where_and_how_to_fix_it() {
        for (status, body) in [(404, &b""[..]), (200, br#"{"tags":[]}"#)] {
            let outcome = sentinel(status, body, "r.example/dkp/release-channel");
            let message = outcome.message();
            for part in [
                "looked for release-channel tags in r.example/dkp/release-channel",
                "an upstream must hold the Deckhouse release channel images",
                "set `path`",
                "d8 mirror push",
            ] {
                assert!(message.contains(part), "{part:?} missing from {message:?}");
            }
        }
    }

    #[test]
    fn reasons_and_paths() {
        assert_eq!(Outcome::Accepted.reason(), None);
        assert_eq!(
            Outcome::SentinelMissing(String::new()).reason(),
            Some(UpstreamProbeReason::SentinelMissing)
        );
        assert_eq!(
            sentinel_scope(Some("/deckhouse/ee/")),
            "repository:deckhouse/ee/release-channel:pull"
        );
        assert_eq!(sentinel_repository(None), "release-channel");
    }
}
