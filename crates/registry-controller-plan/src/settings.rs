//! The `registry` ModuleConfig settings: read them (refusing what the schema's three rules and
//! the `auth` rules refuse, with Deckhouse's messages), and render the `RegistryConfig` spec from
//! them. Credentials are resolved here once, so every later decision compares plain values.

use api::registry::{
    InlineAuth, Mirror, Primary, RegistryConfigSpec, RegistryMode, RegistrySettings, SettingsAuth,
    Upstream,
};
use base64::Engine;
use registry_plan::Credentials;
use serde_json::Value;

use crate::{Error, LICENSE_USERNAME};

/// Reads raw `spec.settings` of ModuleConfig `registry`. The rules run on the raw value, before
/// defaults, exactly as the admission check does; a refusal carries every failing message.
pub fn parse(raw: Option<&Value>) -> Result<RegistrySettings, Error> {
    let Some(raw) = raw else {
        return Ok(RegistrySettings::default());
    };
    let errors = api::validation::registry_settings_errors(raw);
    if !errors.is_empty() {
        return Err(Error::SettingsRejected(errors));
    }
    serde_json::from_value(raw.clone()).map_err(Error::SettingsShape)
}

/// The `RegistryConfig` spec rendered from the settings: `license` expands to
/// `license-token`/license, `Unmanaged` carries nothing else.
pub fn render(settings: &RegistrySettings) -> RegistryConfigSpec {
    let mode = settings.mode.unwrap_or_default();
    if mode == RegistryMode::Unmanaged {
        return RegistryConfigSpec {
            mode,
            primary: None,
            storage: None,
        };
    }
    let upstream = settings
        .primary
        .as_ref()
        .and_then(|p| p.upstream.as_ref())
        .map(|u| Upstream {
            scheme: u.scheme,
            host: u.host.clone(),
            path: u.path.clone(),
            ca: u.ca.clone(),
            auth: u.auth.as_ref().and_then(inline),
            mirrors: u
                .mirrors
                .iter()
                .map(|m| Mirror {
                    scheme: m.scheme,
                    host: m.host.clone(),
                    path: m.path.clone(),
                    ca: m.ca.clone(),
                    auth: m.auth.as_ref().and_then(inline),
                })
                .collect(),
        });
    RegistryConfigSpec {
        mode,
        primary: upstream.map(|upstream| Primary {
            upstream: Some(upstream),
        }),
        storage: settings.storage.clone(),
    }
}

fn inline(auth: &SettingsAuth) -> Option<InlineAuth> {
    let username = auth
        .username
        .clone()
        .or_else(|| auth.license.as_ref().map(|_| LICENSE_USERNAME.to_owned()));
    let password = auth.password.clone().or_else(|| auth.license.clone());
    if username.is_none() && password.is_none() {
        return None;
    }
    Some(InlineAuth {
        username,
        password,
        auth: None,
    })
}

/// The credentials an inline `auth` stands for: `auth` (base64 of `username:password`) wins over
/// `username`/`password`. `None` when it names none.
pub fn credentials(auth: Option<&InlineAuth>, field: &str) -> Result<Option<Credentials>, Error> {
    let Some(auth) = auth else { return Ok(None) };
    if let Some(encoded) = auth.auth.as_deref().filter(|s| !s.is_empty()) {
        return decode(encoded.as_bytes())
            .map(Some)
            .ok_or_else(|| Error::BadEncodedAuth {
                field: field.to_owned(),
            });
    }
    match (&auth.username, &auth.password) {
        (None, None) => Ok(None),
        (username, password) => Ok(Some(Credentials {
            username: username.clone().unwrap_or_default(),
            password: password.clone().unwrap_or_default(),
        })),
    }
}

/// The value stored in `registry-resolved-auth`: base64 of `username:password` (what the agent
/// and the replicas decode).
pub fn encode(credentials: &Credentials) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .encode(format!("{}:{}", credentials.username, credentials.password))
        .into_bytes()
}

/// Reads a value written by [`encode`]; `None` when it is not one.
pub fn decode(value: &[u8]) -> Option<Credentials> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (username, password) = decoded.split_once(':')?;
    Some(Credentials {
        username: username.to_owned(),
        password: password.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_settings_mean_unmanaged_and_render_nothing() {
        let settings = parse(None).unwrap();
        let spec = render(&settings);
        assert_eq!(spec.mode, RegistryMode::Unmanaged);
        assert!(spec.primary.is_none() && spec.storage.is_none());
    }

    #[test]
    fn each_rule_is_refused_with_deckhouses_message() {
        let cases = [
            (json!({"mode": "Managed"}), "needs a source of images"),
            (
                json!({"mode": "Managed", "storage": {"cache": true}}),
                "'storage.source' is required",
            ),
            (
                json!({"storage": {"cache": true}}),
                "set 'mode: Managed' to apply these settings",
            ),
            (
                json!({"mode": "Managed", "primary": {"upstream": {"host": "r", "auth": {"license": "l", "username": "u"}}}}),
                "mutually exclusive",
            ),
            (
                json!({"mode": "Managed", "primary": {"upstream": {"host": "r", "auth": {"username": "u"}}}}),
                "'password' is required",
            ),
        ];
        for (raw, message) in cases {
            let error = parse(Some(&raw)).unwrap_err().to_string();
            assert!(error.contains(message), "{raw}: {error}");
        }
    }

    #[test]
    fn a_license_expands_to_license_token() {
        let raw = json!({"mode": "Managed", "primary": {"upstream": {
            "host": "registry.deckhouse.io", "path": "/deckhouse/ee",
            "auth": {"license": "LICENSE"},
            "mirrors": [{"host": "m.example", "auth": {"username": "mu", "password": "mp"}}]
        }}});
        let spec = render(&parse(Some(&raw)).unwrap());
        let upstream = spec.primary.unwrap().upstream.unwrap();
        let creds = credentials(upstream.auth.as_ref(), "upstream")
            .unwrap()
            .unwrap();
        assert_eq!(creds.username, "license-token");
        assert_eq!(creds.password, "LICENSE");
        assert_eq!(upstream.scheme, api::module_source::Scheme::Https);
        let mirror = credentials(upstream.mirrors[0].auth.as_ref(), "m")
            .unwrap()
            .unwrap();
        assert_eq!(
            (mirror.username.as_str(), mirror.password.as_str()),
            ("mu", "mp")
        );
    }

    #[test]
    fn encoded_auth_wins_and_bad_encoding_is_named() {
        let auth = InlineAuth {
            username: Some("x".into()),
            password: Some("y".into()),
            auth: Some(
                String::from_utf8(encode(&Credentials {
                    username: "u".into(),
                    password: "p:q".into(),
                }))
                .unwrap(),
            ),
        };
        let creds = credentials(Some(&auth), "f").unwrap().unwrap();
        assert_eq!(
            (creds.username.as_str(), creds.password.as_str()),
            ("u", "p:q")
        );
        let bad = InlineAuth {
            auth: Some("%%%".into()),
            ..Default::default()
        };
        let error = credentials(Some(&bad), "spec.primary.upstream.auth").unwrap_err();
        assert_eq!(
            error.to_string(),
            "spec.primary.upstream.auth: auth is not base64 of username:password"
        );
    }

    #[test]
    fn unmanaged_drops_everything_else() {
        let settings = RegistrySettings {
            mode: Some(RegistryMode::Unmanaged),
            ingress_class: Some("nginx".into()),
            ..Default::default()
        };
        assert_eq!(
            render(&settings),
            RegistryConfigSpec {
                mode: RegistryMode::Unmanaged,
                primary: None,
                storage: None
            }
        );
    }
}
