//! What the previous implementation left: the `registry` section of the `deckhouse`
//! ModuleConfig (`mode` Direct/Proxy/Local/Unmanaged with per-mode sections such as
//! `unmanaged.imagesRepo/scheme/license`) and the install registry Secret
//! `d8-system/deckhouse-registry`. From them, a ready-made `registry` ModuleConfig is suggested
//! (Secret `registry-suggested-config`, key `registry-mc.yaml`): Managed with `primary.upstream`
//! — unless that registry is the in-cluster one, or the operator's ModuleConfig already names
//! `primary`.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::{Error, IN_CLUSTER_HOST};

/// One per-mode section of the legacy settings.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacySection {
    /// `host[/path]` of the registry.
    #[serde(default)]
    pub images_repo: Option<String>,
    /// `HTTP` or `HTTPS`.
    #[serde(default)]
    pub scheme: Option<String>,
    /// PEM CA.
    #[serde(default)]
    pub ca: Option<String>,
    /// Deckhouse license key.
    #[serde(default)]
    pub license: Option<String>,
    /// Username.
    #[serde(default)]
    pub username: Option<String>,
    /// Password.
    #[serde(default)]
    pub password: Option<String>,
}

impl std::fmt::Debug for LegacySection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacySection")
            .field("images_repo", &self.images_repo)
            .field("scheme", &self.scheme)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The legacy `registry` settings of ModuleConfig `deckhouse`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LegacySettings {
    /// `Direct`, `Proxy`, `Local` or `Unmanaged`.
    pub mode: String,
    /// The section of that mode, if present.
    pub section: Option<LegacySection>,
}

/// Reads `spec.settings` of ModuleConfig `deckhouse`; `None` when it has no `registry` section.
pub fn read_legacy_settings(settings: Option<&Value>) -> Result<Option<LegacySettings>, Error> {
    let Some(registry) = settings.and_then(|s| s.get("registry")) else {
        return Ok(None);
    };
    let mode = registry
        .get("mode")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let key = mode.to_ascii_lowercase();
    let section = registry
        .get(&key)
        .map(|s| serde_json::from_value(s.clone()))
        .transpose()
        .map_err(|e| Error::LegacySettings(format!("{key}: {e}")))?;
    Ok(Some(LegacySettings { mode, section }))
}

/// The install registry (Secret `d8-system/deckhouse-registry`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct InstallRegistry {
    /// `address` key: host[:port].
    pub address: String,
    /// `path` key.
    pub path: Option<String>,
    /// `scheme` key (`http`/`https`).
    pub scheme: Option<String>,
    /// `ca` key.
    pub ca: Option<String>,
    /// Username and password from `.dockerconfigjson` for `address`.
    pub credentials: Option<(String, String)>,
}

impl std::fmt::Debug for InstallRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstallRegistry")
            .field("address", &self.address)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl InstallRegistry {
    /// Reads the Secret's data; `None` without an `address`.
    pub fn from_secret(data: &std::collections::BTreeMap<String, Vec<u8>>) -> Option<Self> {
        let text = |key: &str| {
            data.get(key)
                .and_then(|v| String::from_utf8(v.clone()).ok())
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        };
        let address = text("address")?;
        let credentials = data
            .get(".dockerconfigjson")
            .and_then(|raw| serde_json::from_slice::<Value>(raw).ok())
            .and_then(|v| dockercfg_credentials(&v, &address));
        Some(Self {
            path: text("path"),
            scheme: text("scheme"),
            ca: text("ca"),
            credentials,
            address,
        })
    }
}

fn dockercfg_credentials(config: &Value, address: &str) -> Option<(String, String)> {
    let entry = config.get("auths")?.get(address)?;
    if let Some(auth) = entry.get("auth").and_then(Value::as_str) {
        let creds = crate::settings::decode(auth.as_bytes())?;
        return Some((creds.username, creds.password));
    }
    let username = entry.get("username")?.as_str()?.to_owned();
    let password = entry.get("password")?.as_str()?.to_owned();
    Some((username, password))
}

/// The suggested `registry` ModuleConfig as YAML, or `None` when none should exist.
pub fn suggested_config(
    install: Option<&InstallRegistry>,
    legacy: Option<&LegacySettings>,
    operator_names_primary: bool,
) -> Option<String> {
    if operator_names_primary {
        return None;
    }
    let upstream = suggested_upstream(install, legacy)?;
    let config = json!({
        "apiVersion": "deckhouse.io/v1alpha1",
        "kind": "ModuleConfig",
        "metadata": {"name": "registry"},
        "spec": {
            "version": 1,
            "enabled": true,
            "settings": {"mode": "Managed", "primary": {"upstream": upstream}},
        },
    });
    serde_saphyr::to_string(&config).ok()
}

/// The `primary.upstream` the suggestion names (the registry the cluster pulls from now, as the
/// install Secret or the legacy section records it), or `None` when that is the in-cluster
/// registry or nothing names one.
pub fn suggested_upstream(
    install: Option<&InstallRegistry>,
    legacy: Option<&LegacySettings>,
) -> Option<Value> {
    let (host, path, scheme, ca, auth) = if let Some(install) = install {
        let auth = install
            .credentials
            .as_ref()
            .map(|(u, p)| json!({"username": u, "password": p}));
        (
            install.address.clone(),
            install.path.clone(),
            install.scheme.clone(),
            install.ca.clone(),
            auth,
        )
    } else {
        let section = legacy?.section.as_ref()?;
        let repo = section.images_repo.as_deref()?.trim_end_matches('/');
        let (host, path) = match repo.split_once('/') {
            Some((host, path)) => (host.to_owned(), Some(format!("/{path}"))),
            None => (repo.to_owned(), None),
        };
        let auth = match (&section.license, &section.username, &section.password) {
            (Some(license), _, _) => Some(json!({"license": license})),
            (None, Some(u), Some(p)) => Some(json!({"username": u, "password": p})),
            _ => None,
        };
        (host, path, section.scheme.clone(), section.ca.clone(), auth)
    };
    if host.is_empty() || host.eq_ignore_ascii_case(IN_CLUSTER_HOST) {
        return None;
    }
    let mut upstream = json!({"host": host});
    if let Some(path) = path.filter(|p| !p.is_empty()) {
        upstream["path"] = json!(path);
    }
    if let Some(scheme) = scheme {
        upstream["scheme"] = json!(scheme.to_ascii_uppercase());
    }
    if let Some(ca) = ca {
        upstream["ca"] = json!(ca);
    }
    if let Some(auth) = auth {
        upstream["auth"] = auth;
    }
    Some(upstream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn install(address: &str) -> InstallRegistry {
        let dockercfg = json!({"auths": {address: {"auth": "dTpw"}}});
        InstallRegistry::from_secret(&BTreeMap::from([
            ("address".to_owned(), address.as_bytes().to_vec()),
            ("path".to_owned(), b"/deckhouse/ee".to_vec()),
            ("scheme".to_owned(), b"https".to_vec()),
            (
                ".dockerconfigjson".to_owned(),
                dockercfg.to_string().into_bytes(),
            ),
        ]))
        .unwrap()
    }

    #[test]
    fn the_suggestion_is_a_valid_managed_config_with_the_install_registry() {
        let yaml = suggested_config(Some(&install("registry.deckhouse.io")), None, false).unwrap();
        let value: Value = serde_saphyr::from_str(&yaml).unwrap();
        let settings = &value["spec"]["settings"];
        assert_eq!(settings["mode"], "Managed");
        assert_eq!(
            settings["primary"]["upstream"]["host"],
            "registry.deckhouse.io"
        );
        assert_eq!(settings["primary"]["upstream"]["path"], "/deckhouse/ee");
        assert_eq!(settings["primary"]["upstream"]["scheme"], "HTTPS");
        assert_eq!(settings["primary"]["upstream"]["auth"]["username"], "u");
        assert_eq!(settings["primary"]["upstream"]["auth"]["password"], "p");
        assert!(api::validation::registry_settings_errors(settings).is_empty());
        assert!(crate::settings::parse(Some(settings)).is_ok());
    }

    #[test]
    fn no_suggestion_for_the_in_cluster_registry_or_once_primary_is_named() {
        assert!(
            suggested_config(Some(&install("Registry.d8-system.svc:5001")), None, false).is_none()
        );
        assert!(suggested_config(Some(&install("r.example")), None, true).is_none());
        assert!(suggested_config(None, None, false).is_none());
    }

    #[test]
    fn the_legacy_section_is_understood() {
        let settings = json!({"registry": {"mode": "Unmanaged", "unmanaged": {
            "imagesRepo": "registry.example.com/deckhouse/ce", "scheme": "HTTP", "license": "L"
        }}});
        let legacy = read_legacy_settings(Some(&settings)).unwrap().unwrap();
        assert_eq!(legacy.mode, "Unmanaged");
        let yaml = suggested_config(None, Some(&legacy), false).unwrap();
        let value: Value = serde_saphyr::from_str(&yaml).unwrap();
        let upstream = &value["spec"]["settings"]["primary"]["upstream"];
        assert_eq!(upstream["host"], "registry.example.com");
        assert_eq!(upstream["path"], "/deckhouse/ce");
        assert_eq!(upstream["auth"]["license"], "L");
        assert!(read_legacy_settings(Some(&json!({}))).unwrap().is_none());
        let bad = json!({"registry": {"mode": "Direct", "direct": {"imagesRepo": 5}}});
        assert!(read_legacy_settings(Some(&bad)).is_err());
    }
}
