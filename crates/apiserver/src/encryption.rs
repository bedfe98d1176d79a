//! Encryption at rest, as kube-apiserver does it: an `EncryptionConfiguration` file
//! (`apiserver.config.k8s.io/v1`) names, per resource, the providers. The first provider seals
//! every write; every provider listed can open what it sealed, so keys rotate by listing the new
//! key first, rewriting the objects, then dropping the old key.
//!
//! Providers: `aesgcm` (AES-GCM with a 128- or 256-bit key, a random 96-bit nonce per write, the
//! object's storage key as associated data; stored as `k8s:enc:aesgcm:v1:<key name>:` followed by
//! the nonce and the sealed bytes, kube-apiserver's layout) and `identity` (plain text).

use std::io::Write as _;
use std::path::Path;

use base64::Engine as _;
use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use serde::Deserialize;

use crate::error::Error;

const AESGCM_PREFIX: &str = "k8s:enc:aesgcm:v1:";
const NONCE_LEN: usize = 12;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Configuration {
    api_version: String,
    kind: String,
    #[serde(default)]
    resources: Vec<ResourceConfiguration>,
}

#[derive(Deserialize)]
struct ResourceConfiguration {
    resources: Vec<String>,
    providers: Vec<ProviderConfiguration>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
struct ProviderConfiguration {
    aesgcm: Option<KeysConfiguration>,
    identity: Option<serde_json::Value>,
    aescbc: Option<serde_json::Value>,
    secretbox: Option<serde_json::Value>,
    kms: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct KeysConfiguration {
    keys: Vec<KeyConfiguration>,
}

#[derive(Deserialize)]
struct KeyConfiguration {
    name: String,
    secret: String,
}

enum Provider {
    Identity,
    AesGcm(Vec<(String, LessSafeKey)>),
}

struct Rule {
    /// `secrets`, `widgets.example.com`, `*.example.com`, `*.*`.
    resources: Vec<String>,
    providers: Vec<Provider>,
}

/// Seals and opens stored objects per resource; without a configuration it stores plain text.
#[derive(Default)]
pub(crate) struct Sealer {
    rules: Vec<Rule>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("rules", &self.rules.len())
            .finish()
    }
}

fn config_error(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::Config(format!(
        "encryption provider config {}: {message}",
        path.display()
    ))
}

/// Whether `pattern` (an `EncryptionConfiguration` resource) names `group`/`plural`.
fn matches(pattern: &str, group: &str, plural: &str) -> bool {
    let (p_plural, p_group) = pattern.split_once('.').unwrap_or((pattern, ""));
    (p_plural == "*" || p_plural == plural) && (p_group == "*" || p_group == group)
}

impl Sealer {
    /// Reads an `EncryptionConfiguration` file.
    pub(crate) fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(Error::io(path))?;
        let config: Configuration =
            serde_saphyr::from_str(&text).map_err(|e| config_error(path, e))?;
        if config.api_version != "apiserver.config.k8s.io/v1"
            || config.kind != "EncryptionConfiguration"
        {
            return Err(config_error(
                path,
                "want apiVersion apiserver.config.k8s.io/v1, kind EncryptionConfiguration",
            ));
        }
        let mut rules = Vec::new();
        for resource in config.resources {
            let mut providers = Vec::new();
            for provider in resource.providers {
                providers.push(Self::provider(path, provider)?);
            }
            if providers.is_empty() {
                return Err(config_error(path, "a resource needs at least one provider"));
            }
            rules.push(Rule {
                resources: resource.resources,
                providers,
            });
        }
        Ok(Self { rules })
    }

    fn provider(path: &Path, provider: ProviderConfiguration) -> Result<Provider, Error> {
        if provider.aescbc.is_some() || provider.secretbox.is_some() || provider.kms.is_some() {
            return Err(config_error(
                path,
                "only the aesgcm and identity providers are supported",
            ));
        }
        match (provider.aesgcm, provider.identity) {
            (Some(keys), None) => {
                let mut out = Vec::new();
                for key in keys.keys {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(key.secret.trim())
                        .map_err(|e| config_error(path, format!("key {}: {e}", key.name)))?;
                    let algorithm = match bytes.len() {
                        16 => &aead::AES_128_GCM,
                        32 => &aead::AES_256_GCM,
                        n => {
                            return Err(config_error(
                                path,
                                format!("key {}: {n} bytes, want 16 or 32", key.name),
                            ));
                        }
                    };
                    let unbound = UnboundKey::new(algorithm, &bytes)
                        .map_err(|_| config_error(path, format!("key {}", key.name)))?;
                    out.push((key.name, LessSafeKey::new(unbound)));
                }
                if out.is_empty() {
                    return Err(config_error(path, "aesgcm needs at least one key"));
                }
                Ok(Provider::AesGcm(out))
            }
            (None, Some(_)) => Ok(Provider::Identity),
            _ => Err(config_error(
                path,
                "each provider is exactly one of aesgcm, identity",
            )),
        }
    }

    fn providers(&self, group: &str, plural: &str) -> Option<&[Provider]> {
        self.rules
            .iter()
            .find(|r| r.resources.iter().any(|p| matches(p, group, plural)))
            .map(|r| r.providers.as_slice())
    }

    /// What to store for `plain` under the storage key `key` of `group`/`plural`.
    pub(crate) fn seal(&self, group: &str, plural: &str, key: &str, plain: Vec<u8>) -> Vec<u8> {
        let Some(Provider::AesGcm(keys)) = self.providers(group, plural).and_then(|p| p.first())
        else {
            return plain;
        };
        let (name, sealing) = &keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .expect("the system's random source works");
        let mut sealed = plain;
        sealing
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(key.as_bytes()),
                &mut sealed,
            )
            .expect("AES-GCM seals any object size we store");
        let mut out = Vec::with_capacity(AESGCM_PREFIX.len() + name.len() + 1 + sealed.len() + 12);
        let _ = write!(out, "{AESGCM_PREFIX}{name}:");
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// The plain bytes of what is stored under `key`, or why they cannot be read.
    pub(crate) fn open(
        &self,
        group: &str,
        plural: &str,
        key: &str,
        stored: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let Some(rest) = stored.strip_prefix(AESGCM_PREFIX.as_bytes()) else {
            return Ok(stored.to_vec());
        };
        let fail = |message: &str| Error::Db(format!("stored object {key}: {message}"));
        let colon = rest
            .iter()
            .position(|b| *b == b':')
            .ok_or_else(|| fail("malformed aesgcm envelope"))?;
        let name = std::str::from_utf8(&rest[..colon]).map_err(|_| fail("bad key name"))?;
        let body = &rest[colon + 1..];
        let opening = self
            .providers(group, plural)
            .into_iter()
            .flatten()
            .filter_map(|p| match p {
                Provider::AesGcm(keys) => Some(keys),
                Provider::Identity => None,
            })
            .flatten()
            .find(|(n, _)| n == name)
            .map(|(_, k)| k)
            .ok_or_else(|| {
                fail(&format!(
                    "sealed with aesgcm key {name:?}, which the encryption provider config no longer lists"
                ))
            })?;
        if body.len() < NONCE_LEN {
            return Err(fail("malformed aesgcm envelope"));
        }
        let (nonce, sealed) = body.split_at(NONCE_LEN);
        let mut buffer = sealed.to_vec();
        let plain = opening
            .open_in_place(
                Nonce::try_assume_unique_for_key(nonce).map_err(|_| fail("bad nonce"))?,
                Aad::from(key.as_bytes()),
                &mut buffer,
            )
            .map_err(|_| fail(&format!("does not open with aesgcm key {name:?}")))?;
        Ok(plain.to_vec())
    }
}

/// Writes an `EncryptionConfiguration` sealing Secrets and every `deckhouse.io` resource (some
/// carry credentials inline: the registry ModuleConfig's and RegistryConfig's upstream password,
/// a ModuleSource's `dockerCfg`) with a fresh random
/// AES-256-GCM key named `key1` at `path` (mode 0600), unless the file exists. Returns whether it
/// was written.
pub fn ensure_config(path: &Path) -> Result<bool, Error> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if path.exists() {
        return Ok(false);
    }
    let mut key = [0u8; 32];
    SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| Error::Config("the system's random source failed".into()))?;
    let secret = base64::engine::general_purpose::STANDARD.encode(key);
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\n\
         kind: EncryptionConfiguration\n\
         resources:\n\
         - resources:\n  - secrets\n  - '*.deckhouse.io'\n  providers:\n\
         \x20 - aesgcm:\n      keys:\n      - name: key1\n        secret: {secret}\n\
         \x20 - identity: {{}}\n"
    );
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(Error::io(path))?;
    file.write_all(text.as_bytes()).map_err(Error::io(path))?;
    file.sync_all().map_err(Error::io(path))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer(dir: &Path, yaml: &str) -> Result<Sealer, Error> {
        let path = dir.join("enc.yaml");
        std::fs::write(&path, yaml).unwrap();
        Sealer::load(&path)
    }

    const KEY_A: &str = "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE="; // 32 × 'A'
    const KEY_B: &str = "QkJCQkJCQkJCQkJCQkJCQg=="; // 16 × 'B'

    fn config(keys: &[(&str, &str)], identity_first: bool) -> String {
        let keys: String = keys
            .iter()
            .map(|(n, s)| format!("      - name: {n}\n        secret: {s}\n"))
            .collect();
        let aes = format!("  - aesgcm:\n      keys:\n{keys}");
        let identity = "  - identity: {}\n";
        let providers = if identity_first {
            format!("{identity}{aes}")
        } else {
            format!("{aes}{identity}")
        };
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n{providers}"
        )
    }

    #[test]
    fn resource_patterns() {
        let table = [
            ("secrets", "", "secrets", true),
            ("secrets", "", "configmaps", false),
            ("secrets", "apps", "secrets", false),
            ("*.*", "deckhouse.io", "moduleconfigs", true),
            ("*.deckhouse.io", "deckhouse.io", "modules", true),
            ("modules.deckhouse.io", "deckhouse.io", "modules", true),
            ("modules.deckhouse.io", "", "modules", false),
        ];
        for (pattern, group, plural, want) in table {
            assert_eq!(
                matches(pattern, group, plural),
                want,
                "{pattern} {group}/{plural}"
            );
        }
    }

    #[test]
    fn sealed_secrets_open_after_rotation_and_never_hold_the_plain_text() {
        let dir = tempfile::tempdir().unwrap();
        let old = sealer(dir.path(), &config(&[("a", KEY_A)], false)).unwrap();
        let plain = br#"{"data":{"password":"aHVudGVyMg=="}}"#.to_vec();
        let stored = old.seal("", "secrets", "/secrets/ns/s", plain.clone());
        assert!(stored.starts_with(b"k8s:enc:aesgcm:v1:a:"));
        assert!(!stored.windows(8).any(|w| w == b"aHVudGVy"));
        assert_eq!(
            old.open("", "secrets", "/secrets/ns/s", &stored).unwrap(),
            plain
        );
        // Another key (the storage key is the associated data) does not open it.
        assert!(old.open("", "secrets", "/secrets/ns/t", &stored).is_err());
        // Other resources stay plain.
        assert_eq!(old.seal("", "configmaps", "k", plain.clone()), plain);

        // Rotation: the new key first, the old one still listed: old objects open, new ones
        // are sealed with the new key.
        let rotated = sealer(dir.path(), &config(&[("b", KEY_B), ("a", KEY_A)], false)).unwrap();
        assert_eq!(
            rotated
                .open("", "secrets", "/secrets/ns/s", &stored)
                .unwrap(),
            plain
        );
        let resealed = rotated.seal("", "secrets", "/secrets/ns/s", plain.clone());
        assert!(resealed.starts_with(b"k8s:enc:aesgcm:v1:b:"));
        // The old key dropped: what it sealed no longer opens, with a message naming the key.
        let dropped = sealer(dir.path(), &config(&[("b", KEY_B)], false)).unwrap();
        let error = dropped
            .open("", "secrets", "/secrets/ns/s", &stored)
            .unwrap_err();
        assert!(error.to_string().contains("key \"a\""), "{error}");
        // Plain objects from before encryption was turned on still read.
        assert_eq!(dropped.open("", "secrets", "k", &plain).unwrap(), plain);
        // identity first: writes plain text, reads sealed.
        let off = sealer(dir.path(), &config(&[("a", KEY_A)], true)).unwrap();
        assert_eq!(off.seal("", "secrets", "k", plain.clone()), plain);
        assert_eq!(
            off.open("", "secrets", "/secrets/ns/s", &stored).unwrap(),
            plain
        );
    }

    #[test]
    fn bad_configurations_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let table = [
            (
                config(&[("a", "c2hvcnQ=")], false),
                "5 bytes, want 16 or 32",
            ),
            (config(&[("a", "a%b")], false), "key a"),
            (
                "apiVersion: v1\nkind: ConfigMap\n".to_string(),
                "want apiVersion",
            ),
            (
                config(&[("a", KEY_A)], false).replace("aesgcm", "secretbox"),
                "only the aesgcm and identity providers",
            ),
        ];
        for (yaml, want) in table {
            let error = sealer(dir.path(), &yaml).unwrap_err().to_string();
            assert!(error.contains(want), "{error} lacks {want}");
        }
    }

    #[test]
    fn ensure_config_writes_a_private_working_key_once() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("encryption-config.yaml");
        assert!(ensure_config(&path).unwrap());
        let first = std::fs::read(&path).unwrap();
        assert!(!ensure_config(&path).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), first);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let sealer = Sealer::load(&path).unwrap();
        for (group, plural) in [("", "secrets"), ("deckhouse.io", "moduleconfigs")] {
            let stored = sealer.seal(group, plural, "k", b"x".to_vec());
            assert!(stored.starts_with(b"k8s:enc:aesgcm:v1:key1:"), "{plural}");
        }
        assert_eq!(sealer.seal("", "configmaps", "k", b"x".to_vec()), b"x");
    }
}
