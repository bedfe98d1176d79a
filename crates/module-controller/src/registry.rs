//! A ModuleSource's registry, laid out as Deckhouse publishes modules under `repo = R`:
//!
//! - the **tags of `R`** are the module names;
//! - `R/<module>/release:<channel>` (`alpha`, `beta`, `early-access`, `stable`, `rock-solid`,
//!   `lts`) is a metadata image holding `version.json` (`{"version": "v1.2.3"}`) and optionally
//!   `changelog.yaml` and `module.yaml`; its manifest digest is the channel's checksum;
//! - `R/<module>:v<x.y.z>` is the module image; its tags are the versions the step-by-step
//!   chain walks; `R/<module>:<tag>` is what a ModulePullOverride runs.
//!
//! In a cluster the registry is read through the node agent; tests point it at a registry.

use std::io::{Seek, Write};
use std::path::Path;
use std::time::Instant;

use base64::Engine;
use futures_util::StreamExt;
use registry_client::{Credentials, Endpoint, Remote};
use release_plan::ReleaseVersion;
use serde_json::Value;

use crate::Error;
use crate::unpack::{Limits, Unpacked, check_symlinks, read_files, unpack_layer};

/// Largest metadata file read from a release image.
pub const MAX_METADATA_BYTES: u64 = 1 << 20;
/// Module names longer than this are skipped.
pub const MAX_MODULE_NAME: usize = 64;

const ACCEPT: [&str; 4] = [
    oci::media_type::OCI_MANIFEST,
    oci::media_type::DOCKER_MANIFEST,
    oci::media_type::OCI_INDEX,
    oci::media_type::DOCKER_MANIFEST_LIST,
];

/// What a release-channel image says.
#[derive(Clone, Debug, PartialEq)]
pub struct ReleaseMetadata {
    /// The channel image's manifest digest (the checksum).
    pub digest: oci::Digest,
    /// The version on the channel.
    pub version: ReleaseVersion,
    /// `changelog.yaml`, if any.
    pub changelog: Option<Value>,
    /// `module.yaml`, if any (requirements of the release come from it).
    pub module_yaml: Option<String>,
    /// `version.json`'s `canary` map by channel key (`stable`, `earlyAccess`…); empty when it
    /// has none or it cannot be read.
    pub canary: std::collections::BTreeMap<String, release_plan::canary::CanarySettings>,
}

/// A downloaded module image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Download {
    /// The module image's manifest digest.
    pub digest: oci::Digest,
    /// Bytes of the layers downloaded.
    pub size: u64,
    /// How long it took.
    pub duration: std::time::Duration,
    /// What was unpacked.
    pub unpacked: Unpacked,
}

/// A module registry.
#[derive(Clone)]
pub struct ModuleRegistry {
    remote: Remote,
    source: Option<api::module_source::SourceRegistry>,
}

impl std::fmt::Debug for ModuleRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The settings hold credentials: only the repository is shown.
        f.debug_struct("ModuleRegistry")
            .field("repo", &self.source.as_ref().map(|s| s.repo.as_str()))
            .finish_non_exhaustive()
    }
}

/// `{"auths": {"<host>": {"auth": base64(user:password)} | {"username", "password"}}}`.
fn credentials_from_docker_cfg(docker_cfg: &str, host: &str) -> Result<Option<Credentials>, Error> {
    let bad = |reason: &str| Error::RegistrySettings {
        reason: format!("dockerCfg: {reason}"),
    };
    let engine = base64::engine::general_purpose::STANDARD;
    let json = engine
        .decode(docker_cfg.trim())
        .map_err(|_| bad("not base64"))?;
    let cfg: Value = serde_json::from_slice(&json).map_err(|_| bad("not a docker config.json"))?;
    let Some(entry) = cfg.get("auths").and_then(|a| a.get(host)) else {
        return Ok(None);
    };
    if let (Some(u), Some(p)) = (
        entry.get("username").and_then(Value::as_str),
        entry.get("password").and_then(Value::as_str),
    ) {
        return Ok(Some(Credentials::new(u, p)));
    }
    let Some(auth) = entry.get("auth").and_then(Value::as_str) else {
        return Ok(None);
    };
    let pair = engine.decode(auth).map_err(|_| bad("auth is not base64"))?;
    let pair = String::from_utf8(pair).map_err(|_| bad("auth is not text"))?;
    let (u, p) = pair
        .split_once(':')
        .ok_or_else(|| bad("auth is not user:password"))?;
    Ok(Some(Credentials::new(u, p)))
}

impl ModuleRegistry {
    /// A registry whose repository `R` is the remote's path prefix.
    pub fn new(remote: Remote) -> Self {
        Self {
            remote,
            source: None,
        }
    }

    /// Whether the registry pages the tag list of `R` (Deckhouse's pagination probe): a
    /// listing limited to one tag differs from the full one.
    pub async fn pages_tags(&self) -> Result<bool, Error> {
        let all = self
            .remote
            .all_tags("")
            .await
            .map_err(|e| Error::registry("list all tags", e))?;
        let page = self
            .remote
            .tags("", Some(1), None)
            .await
            .map_err(|e| Error::registry("list tags with limit", e))?;
        Ok(all.len() != page.tags.len())
    }

    /// The registry of a ModuleSource's `spec.registry`.
    pub fn from_source(
        client: &registry_client::Client,
        registry: &api::module_source::SourceRegistry,
    ) -> Result<Self, Error> {
        let repo = registry.repo.trim().trim_end_matches('/');
        let (host, path) = repo.split_once('/').unwrap_or((repo, ""));
        if host.is_empty() || path.is_empty() {
            return Err(Error::RegistrySettings {
                reason: format!("repo {repo:?} must be <host>/<path>"),
            });
        }
        let mut endpoint = match registry.scheme {
            api::module_source::Scheme::Http => Endpoint::http(host),
            api::module_source::Scheme::Https => Endpoint::https(host),
        }
        .path_prefix(path);
        if let Some(ca) = registry.ca.as_deref().filter(|c| !c.trim().is_empty()) {
            endpoint = endpoint.ca_pem(ca);
        }
        if let Some(cfg) = registry
            .docker_cfg
            .as_deref()
            .filter(|c| !c.trim().is_empty())
            && let Some(credentials) = credentials_from_docker_cfg(cfg, host)?
        {
            endpoint = endpoint.credentials(credentials);
        }
        let remote = client
            .remote(endpoint)
            .map_err(|e| Error::RegistrySettings {
                reason: e.to_string(),
            })?;
        Ok(Self {
            remote,
            source: Some(registry.clone()),
        })
    }

    /// The ModuleSource's registry settings this was built from (`None` from [`Self::new`]).
    pub fn source(&self) -> Option<&api::module_source::SourceRegistry> {
        self.source.as_ref()
    }

    /// The module names: the tags of `R` (without `modules` and over-long names), sorted.
    pub async fn modules(&self) -> Result<Vec<String>, Error> {
        let mut tags = self
            .remote
            .all_tags("")
            .await
            .map_err(|e| Error::registry("list modules", e))?;
        tags.retain(|t| t != "modules" && t.len() <= MAX_MODULE_NAME);
        tags.sort();
        tags.dedup();
        Ok(tags)
    }

    /// Every tag of `R/<module>` (the module image versions).
    pub async fn versions(&self, module: &str) -> Result<Vec<String>, Error> {
        self.remote
            .all_tags(module)
            .await
            .map_err(|e| Error::registry(format!("list tags of {module}"), e))
    }

    /// The digest of `R/<module>:<tag>` (a HEAD).
    pub async fn digest(&self, module: &str, tag: &str) -> Result<oci::Digest, Error> {
        let head = self
            .remote
            .head_manifest(module, tag, &ACCEPT)
            .await
            .map_err(|e| Error::registry(format!("HEAD {module}:{tag}"), e))?;
        match head.digest {
            Some(d) => Ok(d),
            None => Ok(self.image_manifest(module, tag).await?.0),
        }
    }

    async fn image_manifest(
        &self,
        repository: &str,
        tag: &str,
    ) -> Result<(oci::Digest, oci::manifest::ImageManifest), Error> {
        let reference = format!("{repository}:{tag}");
        let fetched = self
            .remote
            .get_manifest(repository, tag, &ACCEPT)
            .await
            .map_err(|e| Error::registry(format!("GET {reference} manifest"), e))?;
        let bad = |reason: String| Error::Image {
            reference: reference.clone(),
            reason,
        };
        let mut manifest =
            oci::Manifest::parse(fetched.bytes.to_vec(), fetched.media_type.as_deref())
                .map_err(|e| bad(format!("manifest: {e}")))?;
        if let Some(index) = manifest.as_index() {
            let first = index
                .manifests
                .first()
                .ok_or_else(|| bad("the index lists no manifest".into()))?
                .digest;
            let inner = self
                .remote
                .get_manifest(repository, &first.to_string(), &ACCEPT)
                .await
                .map_err(|e| Error::registry(format!("GET {reference} platform manifest"), e))?;
            manifest = oci::Manifest::parse(inner.bytes.to_vec(), inner.media_type.as_deref())
                .map_err(|e| bad(format!("platform manifest: {e}")))?;
        }
        let image = manifest
            .as_image()
            .ok_or_else(|| bad("not an image manifest".into()))?
            .clone();
        Ok((fetched.digest, image))
    }

    /// Reads `R/<module>/release:<tag>`.
    pub async fn release(&self, module: &str, tag: &str) -> Result<ReleaseMetadata, Error> {
        self.metadata_image(&format!("{module}/release"), tag).await
    }

    /// Reads the metadata image `R/<repository>:<tag>` (`version.json`, and `changelog.yaml`
    /// and `module.yaml` when present) without unpacking it: module release channels
    /// (`<module>/release`) and package release channels (`<package>/release-channel`) are
    /// published alike.
    pub async fn metadata_image(
        &self,
        repository: &str,
        tag: &str,
    ) -> Result<ReleaseMetadata, Error> {
        let reference = format!("{repository}:{tag}");
        let (digest, image) = self.image_manifest(repository, tag).await?;
        let bad = |reason: String| Error::Image {
            reference: reference.clone(),
            reason,
        };
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        for layer in &image.layers {
            if layer.size > MAX_METADATA_BYTES * 16 {
                return Err(bad(format!(
                    "layer {} is {} bytes, too large for release metadata",
                    layer.digest, layer.size
                )));
            }
            let bytes = self
                .remote
                .get_blob(repository, &layer.digest, None, Some(layer.size))
                .await
                .map_err(|e| Error::registry(format!("GET {reference} layer"), e))?
                .into_body()
                .collect(MAX_METADATA_BYTES * 16)
                .await
                .map_err(|e| Error::registry(format!("reading {reference} layer"), e))?;
            for (name, data) in read_files(
                bytes.as_ref(),
                &[
                    "version.json",
                    "changelog.yaml",
                    "changelog.yml",
                    "module.yaml",
                ],
                MAX_METADATA_BYTES,
            )? {
                files.retain(|(n, _)| n != &name);
                files.push((name, data));
            }
        }
        let file = |name: &str| files.iter().find(|(n, _)| n == name).map(|(_, d)| d);
        let version_json =
            file("version.json").ok_or_else(|| bad("no version.json in any layer".into()))?;
        let version: Value =
            serde_json::from_slice(version_json).map_err(|e| bad(format!("version.json: {e}")))?;
        let version = version
            .get("version")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("version.json has no version".into()))?;
        let version = ReleaseVersion::parse(version)?;
        if version.is_prerelease() {
            return Err(release_plan::Error::PreRelease {
                version: version.original().to_owned(),
            }
            .into());
        }
        let changelog = match file("changelog.yaml").or(file("changelog.yml")) {
            Some(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                Some(
                    serde_saphyr::from_str::<Value>(&text)
                        .map_err(|e| bad(format!("changelog.yaml: {e}")))?,
                )
            }
            None => None,
        };
        let module_yaml = file("module.yaml").map(|b| String::from_utf8_lossy(b).into_owned());
        let canary = release_controller::version_json::VersionJson::parse(version_json)
            .map(|v| v.canary)
            .unwrap_or_default();
        Ok(ReleaseMetadata {
            digest,
            version,
            changelog,
            module_yaml,
            canary,
        })
    }

    /// Downloads `R/<module>:<tag>` and unpacks it into `dest` (an empty directory). Every layer
    /// is streamed to a temporary file with its digest and size verified, then unpacked
    /// ([`crate::unpack`]); symlinks are checked once all layers are in.
    pub async fn download(
        &self,
        module: &str,
        tag: &str,
        dest: &Path,
        limits: Limits,
    ) -> Result<Download, Error> {
        let started = Instant::now();
        let (digest, image) = self.image_manifest(module, tag).await?;
        let reference = format!("{module}:{tag}");
        let mut size = 0;
        let mut unpacked = Unpacked::default();
        for layer in &image.layers {
            if layer.size > limits.max_layer_bytes {
                return Err(Error::TooLarge {
                    what: format!("layer {} of {reference}", layer.digest),
                    actual: layer.size,
                    limit: limits.max_layer_bytes,
                });
            }
            let mut file = tempfile::tempfile().map_err(|e| Error::io("create", dest, e))?;
            let mut body = self
                .remote
                .get_blob(module, &layer.digest, None, Some(layer.size))
                .await
                .map_err(|e| Error::registry(format!("GET {reference} layer"), e))?
                .into_body();
            let mut received = 0u64;
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| {
                    Error::registry(format!("reading {reference} layer {}", layer.digest), e)
                })?;
                received += chunk.len() as u64;
                if received > limits.max_layer_bytes {
                    return Err(Error::TooLarge {
                        what: format!("layer {} of {reference}", layer.digest),
                        actual: received,
                        limit: limits.max_layer_bytes,
                    });
                }
                file.write_all(&chunk)
                    .map_err(|e| Error::io("write", dest, e))?;
            }
            size += received;
            file.rewind().map_err(|e| Error::io("rewind", dest, e))?;
            let root = dest.to_path_buf();
            unpacked = tokio::task::spawn_blocking(move || {
                let mut stats = unpacked;
                unpack_layer(std::io::BufReader::new(file), &root, &limits, &mut stats)
                    .map(|()| stats)
            })
            .await
            .map_err(|e| Error::io("unpack", dest, std::io::Error::other(e.to_string())))??;
        }
        check_symlinks(dest, &unpacked)?;
        Ok(Download {
            digest,
            size,
            duration: started.elapsed(),
            unpacked,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_cfg_credentials() {
        let engine = base64::engine::general_purpose::STANDARD;
        let auth = engine.encode("user:pa:ss");
        let cfg = engine.encode(format!(r#"{{"auths":{{"r.io":{{"auth":"{auth}"}},"other":{{"username":"u","password":"p"}}}}}}"#));
        let c = credentials_from_docker_cfg(&cfg, "r.io").unwrap().unwrap();
        assert_eq!((c.username(), c.password().expose()), ("user", "pa:ss"));
        let c = credentials_from_docker_cfg(&cfg, "other").unwrap().unwrap();
        assert_eq!(c.username(), "u");
        assert!(credentials_from_docker_cfg(&cfg, "none").unwrap().is_none());
        let err = credentials_from_docker_cfg("%%%", "r.io").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid registry settings: dockerCfg: not base64"
        );
    }
}
