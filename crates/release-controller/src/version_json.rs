//! `version.json`, the metadata of a release-channel image, and how it is taken out of the
//! image's layers (gzip or plain tar) without trusting them: bounded sizes, no path traversal.

use std::collections::BTreeMap;
use std::io::Read;

use release_plan::ReleaseVersion;
use release_plan::canary::CanarySettings;
use serde::Deserialize;
use serde_json::Value;

use crate::Error;
use crate::duration::parse_go_duration;

/// Largest `version.json` read.
pub const MAX_VERSION_JSON_BYTES: u64 = 1 << 20;
/// Most bytes a layer may unpack to while looking for `version.json` (a gzip bomb stops here).
pub const MAX_UNPACKED_BYTES: u64 = 64 << 20;
/// Most entries a layer may hold.
pub const MAX_ENTRIES: usize = 10_000;

/// The canary settings of one channel, as written (`interval` is a Go duration).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
struct RawCanary {
    #[serde(default)]
    enabled: bool,
    #[serde(default)]
    waves: u64,
    #[serde(default)]
    interval: String,
}

#[derive(Debug, Deserialize)]
struct RawVersionJson {
    version: String,
    #[serde(default)]
    canary: BTreeMap<String, RawCanary>,
    #[serde(default)]
    requirements: BTreeMap<String, Value>,
    #[serde(default)]
    disruptions: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    suspend: bool,
}

/// What a release-channel image says about its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionJson {
    /// The version (never a pre-release).
    pub version: ReleaseVersion,
    /// Canary settings per channel key (`alpha`, `earlyAccess`…).
    pub canary: BTreeMap<String, CanarySettings>,
    /// `requirements`, values as text.
    pub requirements: BTreeMap<String, String>,
    /// `disruptions`, keyed by `MAJOR.MINOR`.
    pub disruptions: BTreeMap<String, Vec<String>>,
    /// `suspend`.
    pub suspend: bool,
}

impl VersionJson {
    /// Parses and checks `version.json`; pre-release versions are refused.
    pub fn parse(bytes: &[u8]) -> Result<Self, Error> {
        let invalid = |reason: String| Error::VersionJson { reason };
        let raw: RawVersionJson =
            serde_json::from_slice(bytes).map_err(|e| invalid(format!("not valid JSON: {e}")))?;
        let version = ReleaseVersion::parse(&raw.version)?;
        if version.is_prerelease() {
            return Err(release_plan::Error::PreRelease {
                version: raw.version,
            }
            .into());
        }
        let mut canary = BTreeMap::new();
        for (channel, c) in raw.canary {
            let interval = if c.interval.is_empty() {
                jiff::SignedDuration::ZERO
            } else {
                parse_go_duration(&c.interval)
                    .map_err(|e| invalid(format!("canary.{channel}.interval: {e}")))?
            };
            canary.insert(
                channel,
                CanarySettings {
                    enabled: c.enabled,
                    waves: c.waves,
                    interval,
                },
            );
        }
        let requirements = raw
            .requirements
            .into_iter()
            .map(|(k, v)| {
                let text = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, text)
            })
            .collect();
        Ok(Self {
            version,
            canary,
            requirements,
            disruptions: raw.disruptions,
            suspend: raw.suspend,
        })
    }

    /// The disruptions listed for this version's minor.
    pub fn disruptions_of_minor(&self) -> Vec<String> {
        self.disruptions
            .get(&self.version.major_minor())
            .cloned()
            .unwrap_or_default()
    }
}

/// Whether an archive path is safe: relative, and without `..` components.
fn safe_path(path: &str) -> bool {
    !path.starts_with('/') && !path.split('/').any(|part| part == "..")
}

/// Finds `version.json` at the root of a layer (`version.json` or `./version.json`), gzip or
/// plain tar. `Ok(None)` when the layer does not hold it. Entries with absolute paths or `..`
/// components make the whole layer invalid: such an image was not built by Deckhouse.
pub fn extract_version_json(layer: &[u8]) -> Result<Option<Vec<u8>>, Error> {
    let invalid = |reason: String| Error::VersionJson { reason };
    let gzip = layer.starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn Read> = if gzip {
        Box::new(flate2::read::GzDecoder::new(layer))
    } else {
        Box::new(layer)
    };
    // The whole archive may not unpack to more than MAX_UNPACKED_BYTES.
    let mut archive = tar::Archive::new(reader.take(MAX_UNPACKED_BYTES));
    let entries = archive
        .entries()
        .map_err(|e| invalid(format!("layer is not a tar archive: {e}")))?;
    let mut found = None;
    for (count, entry) in entries.enumerate() {
        if count >= MAX_ENTRIES {
            return Err(invalid(format!(
                "layer has more than {MAX_ENTRIES} entries"
            )));
        }
        let mut entry = entry.map_err(|e| invalid(format!("reading the layer: {e}")))?;
        let path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if !safe_path(&path) {
            return Err(invalid(format!(
                "layer entry {path:?} escapes the image root"
            )));
        }
        let name = path.strip_prefix("./").unwrap_or(&path);
        if name != "version.json" || !entry.header().entry_type().is_file() {
            continue;
        }
        if entry.size() > MAX_VERSION_JSON_BYTES {
            return Err(invalid(format!(
                "version.json is {} bytes, more than {MAX_VERSION_JSON_BYTES}",
                entry.size()
            )));
        }
        let mut bytes = Vec::new();
        (&mut entry)
            .take(MAX_VERSION_JSON_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| invalid(format!("reading version.json: {e}")))?;
        found = Some(bytes);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, data) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            // Write the name bytes directly: `append_data` itself refuses `..`.
            let name = &mut header.as_old_mut().name;
            name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            builder.append(&header, *data).unwrap();
        }
        builder.into_inner().unwrap()
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    const DOC: &str = r#"{"version":"v1.68.5","canary":{"stable":{"enabled":true,"waves":5,"interval":"15m"}},
        "requirements":{"k8s":"1.27","ingressNginx":"1.9","flag":true},
        "disruptions":{"1.68":["ingressNginx"]},"suspend":false}"#;

    #[test]
    fn parses_deckhouse_version_json() {
        let v = VersionJson::parse(DOC.as_bytes()).unwrap();
        assert_eq!(v.version.original(), "v1.68.5");
        assert_eq!(
            v.canary["stable"],
            CanarySettings {
                enabled: true,
                waves: 5,
                interval: jiff::SignedDuration::from_mins(15)
            }
        );
        assert_eq!(v.requirements["k8s"], "1.27");
        assert_eq!(v.requirements["flag"], "true");
        assert_eq!(v.disruptions_of_minor(), vec!["ingressNginx".to_owned()]);
        assert!(!v.suspend);
    }

    #[test]
    fn refuses_pre_releases_and_garbage() {
        let err = VersionJson::parse(br#"{"version":"v1.69.0-rc.1"}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "pre-release versions are not supported: v1.69.0-rc.1"
        );
        let err = VersionJson::parse(b"{").unwrap_err().to_string();
        assert!(err.starts_with("version.json: not valid JSON"), "{err}");
        let err = VersionJson::parse(br#"{"version":"latest"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid release version \"latest\""), "{err}");
        let err = VersionJson::parse(
            br#"{"version":"v1.2.3","canary":{"alpha":{"enabled":true,"waves":2,"interval":"soon"}}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("canary.alpha.interval"), "{err}");
    }

    #[test]
    fn extracts_from_gzip_and_plain_tar() {
        let plain = tar_of(&[
            ("changelog.yaml", b"x: 1"),
            ("version.json", DOC.as_bytes()),
        ]);
        assert_eq!(
            extract_version_json(&plain).unwrap().unwrap(),
            DOC.as_bytes()
        );
        let dotted = gzip(&tar_of(&[("./version.json", b"{}")]));
        assert_eq!(extract_version_json(&dotted).unwrap().unwrap(), b"{}");
        let none = gzip(&tar_of(&[("other.json", b"{}")]));
        assert_eq!(extract_version_json(&none).unwrap(), None);
        let nested = gzip(&tar_of(&[("sub/version.json", b"{}")]));
        assert_eq!(extract_version_json(&nested).unwrap(), None);
    }

    #[test]
    fn refuses_traversal_and_oversize() {
        for path in ["../version.json", "/version.json", "a/../../etc/passwd"] {
            let layer = gzip(&tar_of(&[(path, b"{}")]));
            let err = extract_version_json(&layer).unwrap_err().to_string();
            assert!(err.contains("escapes the image root"), "{path}: {err}");
        }
        let big = vec![b' '; (MAX_VERSION_JSON_BYTES + 1) as usize];
        let layer = gzip(&tar_of(&[("version.json", &big)]));
        let err = extract_version_json(&layer).unwrap_err().to_string();
        assert!(err.contains("more than 1048576"), "{err}");
        let err = extract_version_json(b"\x1f\x8bnot gzip").unwrap_err();
        assert!(matches!(err, Error::VersionJson { .. }), "{err}");
    }
}
