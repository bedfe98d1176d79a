//! The release record, in Helm 3's storage format so that `helm list -n d8-system`, `helm get
//! manifest <module>` and a person with kubectl read it as they read addon-operator's:
//! Secret `sh.helm.release.v1.<module>.v<revision>` of type `helm.sh/release.v1`, labels
//! `name`, `owner: helm`, `status`, `version` (plus addon-operator's release labels
//! `moduleChecksum` and `maintenance.deckhouse.io/no-resource-reconciliation`), and
//! `data.release` = base64(gzip(the release JSON)).
//!
//! Pure: encoding, decoding and the history decisions; the Secrets are written by
//! [`super::apply`].

use std::collections::BTreeMap;
use std::io::{Read, Write};

use base64::Engine;
use serde_json::{Value, json};

/// The Secret type of a Helm 3 release.
pub const SECRET_TYPE: &str = "helm.sh/release.v1";
/// The release label with the checksum of the rendered manifests (addon-operator's).
pub const LABEL_MODULE_CHECKSUM: &str = "moduleChecksum";
/// Releases kept per module (addon-operator's history limit).
pub const HISTORY_MAX: usize = 10;
/// The gzip magic Helm looks for before gunzipping.
const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b, 0x08];
/// A release JSON larger than this when unpacked is refused.
const MAX_RELEASE_JSON: u64 = 64 * 1024 * 1024;

/// A release status, as Helm names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The current release.
    Deployed,
    /// An older release.
    Superseded,
    /// The apply of this release failed.
    Failed,
    /// Being uninstalled.
    Uninstalling,
    /// Being installed.
    PendingInstall,
    /// Being upgraded.
    PendingUpgrade,
}

impl Status {
    /// Helm's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Deployed => "deployed",
            Status::Superseded => "superseded",
            Status::Failed => "failed",
            Status::Uninstalling => "uninstalling",
            Status::PendingInstall => "pending-install",
            Status::PendingUpgrade => "pending-upgrade",
        }
    }

    /// Parses Helm's name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "deployed" => Status::Deployed,
            "superseded" => Status::Superseded,
            "failed" => Status::Failed,
            "uninstalling" => Status::Uninstalling,
            "pending-install" => Status::PendingInstall,
            "pending-upgrade" => Status::PendingUpgrade,
            _ => return None,
        })
    }
}

/// One revision of a module's release.
#[derive(Clone, Debug, PartialEq)]
pub struct Release {
    /// The release name (the module name).
    pub name: String,
    /// The release namespace: where its namespaced objects go when they name none (the
    /// module's namespace). The Secret itself is stored in `d8-system`.
    pub namespace: String,
    /// The revision, from 1.
    pub version: i64,
    /// Its status.
    pub status: Status,
    /// The rendered manifest.
    pub manifest: String,
    /// The values it was rendered with.
    pub config: Value,
    /// The chart's name and version.
    pub chart: (String, String),
    /// When the first revision was deployed (RFC 3339).
    pub first_deployed: String,
    /// When this revision was deployed.
    pub last_deployed: String,
    /// Helm's description (`Install complete`, `Upgrade complete`, the error).
    pub description: String,
    /// Release labels stored on the Secret (`moduleChecksum`, the maintenance label).
    pub labels: BTreeMap<String, String>,
}

/// Why a stored release cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("release secret {name}: {reason}")]
pub struct DecodeError {
    /// The Secret.
    pub name: String,
    /// What is wrong.
    pub reason: String,
}

/// `sh.helm.release.v1.<name>.v<revision>`.
pub fn secret_name(name: &str, version: i64) -> String {
    format!("sh.helm.release.v1.{name}.v{version}")
}

impl Release {
    /// The release JSON as Helm marshals `release.Release`.
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "info": {
                "first_deployed": self.first_deployed,
                "last_deployed": self.last_deployed,
                "deleted": "",
                "description": self.description,
                "status": self.status.as_str(),
            },
            "chart": {
                "metadata": {
                    "name": self.chart.0,
                    "version": self.chart.1,
                    "apiVersion": "v2",
                },
                "lock": null,
                "templates": [],
                "values": {},
                "schema": null,
                "files": [],
            },
            "config": self.config,
            "manifest": self.manifest,
            "version": self.version,
            "namespace": self.namespace,
        })
    }

    /// `data.release` of the Secret before Kubernetes' own base64: base64(gzip(JSON)).
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(&self.to_json()).unwrap_or_default();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let _ = gz.write_all(&json);
        let packed = gz.finish().unwrap_or_default();
        base64::engine::general_purpose::STANDARD.encode(packed)
    }

    /// The Secret stored in `storage` (the platform namespace), as JSON for the API.
    pub fn to_secret(&self, storage: &str) -> Value {
        let mut labels: BTreeMap<String, String> = self.labels.clone();
        labels.insert("name".into(), self.name.clone());
        labels.insert("owner".into(), "helm".into());
        labels.insert("status".into(), self.status.as_str().into());
        labels.insert("version".into(), self.version.to_string());
        let data = base64::engine::general_purpose::STANDARD.encode(self.encode());
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": secret_name(&self.name, self.version),
                "namespace": storage,
                "labels": labels,
            },
            "type": SECRET_TYPE,
            "data": {"release": data},
        })
    }

    /// Reads a release Secret (as JSON from the API).
    pub fn from_secret(secret: &Value) -> Result<Release, DecodeError> {
        let name = secret
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let fail = |reason: String| DecodeError {
            name: name.clone(),
            reason,
        };
        let b64 = base64::engine::general_purpose::STANDARD;
        let outer = secret
            .pointer("/data/release")
            .and_then(Value::as_str)
            .ok_or_else(|| fail("no data.release".into()))?;
        let inner = b64.decode(outer).map_err(|e| fail(e.to_string()))?;
        let mut packed = b64.decode(&inner).map_err(|e| fail(e.to_string()))?;
        if packed.starts_with(GZIP_MAGIC) {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(packed.as_slice())
                .take(MAX_RELEASE_JSON + 1)
                .read_to_end(&mut out)
                .map_err(|e| fail(e.to_string()))?;
            if out.len() as u64 > MAX_RELEASE_JSON {
                return Err(fail("the release is too large".into()));
            }
            packed = out;
        }
        let v: Value = serde_json::from_slice(&packed).map_err(|e| fail(e.to_string()))?;
        let s = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let labels = secret
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "name" | "owner" | "status" | "version"))
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Release {
            name: s("/name"),
            namespace: s("/namespace"),
            version: v.get("version").and_then(Value::as_i64).unwrap_or(0),
            status: Status::parse(&s("/info/status"))
                .ok_or_else(|| fail(format!("unknown status {:?}", s("/info/status"))))?,
            manifest: s("/manifest"),
            config: v.get("config").cloned().unwrap_or(Value::Null),
            chart: (s("/chart/metadata/name"), s("/chart/metadata/version")),
            first_deployed: s("/info/first_deployed"),
            last_deployed: s("/info/last_deployed"),
            description: s("/info/description"),
            labels,
        })
    }

    /// `moduleChecksum`.
    pub fn checksum(&self) -> Option<&str> {
        self.labels.get(LABEL_MODULE_CHECKSUM).map(String::as_str)
    }
}

/// The last revision of a history (any order).
pub fn last(history: &[Release]) -> Option<&Release> {
    history.iter().max_by_key(|r| r.version)
}

/// The revisions to delete so that at most [`HISTORY_MAX`] remain (oldest first).
pub fn to_prune(history: &[Release]) -> Vec<i64> {
    let mut versions: Vec<i64> = history.iter().map(|r| r.version).collect();
    versions.sort_unstable();
    let excess = versions.len().saturating_sub(HISTORY_MAX);
    versions.truncate(excess);
    versions
}

/// What a run does with a release under addon-operator's maintenance rule (its
/// `RunHelmInstall` with the module's maintenance state; Deckhouse applies an Application's the
/// same way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Maintenance {
    /// In `maintenance: NoResourceReconciliation` and the last revision was applied so: nothing
    /// is rendered or applied (settings changes wait, deleted objects are not restored).
    Skip,
    /// Render and apply with [`maintenance_labels`]; `force` applies although nothing else
    /// changed — the mode changed since the last revision, so the label is put on (entering)
    /// or taken off (leaving) every object once.
    Apply {
        /// The mode differs from the last revision's.
        force: bool,
    },
}

/// The maintenance plan of a run: `maintenance` is whether the ModuleConfig (or Application)
/// sets `NoResourceReconciliation`, `last` the release's last revision.
pub fn maintenance(maintenance: bool, last: Option<&Release>) -> Maintenance {
    let was = last.is_some_and(applied_in_maintenance);
    if maintenance && was {
        return Maintenance::Skip;
    }
    Maintenance::Apply {
        force: last.is_some() && maintenance != was,
    }
}

/// Whether `release` was applied in maintenance (its record says
/// `maintenance.deckhouse.io/no-resource-reconciliation=true`).
pub fn applied_in_maintenance(release: &Release) -> bool {
    release
        .labels
        .get(api::keys::LABEL_MAINTENANCE_NO_RESOURCE_RECONCILIATION)
        .map(String::as_str)
        == Some("true")
}

/// The labels a run in (or out of) maintenance puts on every object —
/// `maintenance.deckhouse.io/no-resource-reconciliation: ""` (the value nelm writes) in
/// maintenance, none otherwise — and on the release record (the same key, `"true"` or
/// `"false"`).
pub fn maintenance_labels(maintenance: bool) -> (Vec<(String, String)>, BTreeMap<String, String>) {
    let key = api::keys::LABEL_MAINTENANCE_NO_RESOURCE_RECONCILIATION;
    let objects = if maintenance {
        vec![(key.to_owned(), String::new())]
    } else {
        Vec::new()
    };
    (objects, [(key.to_owned(), maintenance.to_string())].into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maintenance_applies_once_with_the_label_then_skips() {
        let key = api::keys::LABEL_MAINTENANCE_NO_RESOURCE_RECONCILIATION;
        let labelled = |value: Option<&str>| {
            let mut r = release(1, Status::Deployed);
            if let Some(v) = value {
                r.labels.insert(key.into(), v.into());
            }
            r
        };
        let apply = |force| Maintenance::Apply { force };
        let (t, f, none) = (
            labelled(Some("true")),
            labelled(Some("false")),
            labelled(None),
        );
        for (on, last, want) in [
            // Entering: applied once, labelled …
            (true, Some(&f), apply(true)),
            (true, Some(&none), apply(true)),
            // … then left alone.
            (true, Some(&t), Maintenance::Skip),
            // Leaving: applied once more, the label taken off.
            (false, Some(&t), apply(true)),
            (false, Some(&f), apply(false)),
            (false, Some(&none), apply(false)),
            // A first install is an install.
            (true, None, apply(false)),
            (false, None, apply(false)),
        ] {
            let labels = last.map(|r| &r.labels);
            assert_eq!(maintenance(on, last), want, "{on} {labels:?}");
        }
        assert_eq!(
            maintenance_labels(true),
            (
                vec![(key.to_owned(), String::new())],
                [(key.to_owned(), "true".to_owned())].into()
            )
        );
        assert_eq!(
            maintenance_labels(false),
            (Vec::new(), [(key.to_owned(), "false".to_owned())].into())
        );
    }

    fn release(version: i64, status: Status) -> Release {
        Release {
            name: "echo".into(),
            namespace: "d8-system".into(),
            version,
            status,
            manifest: "---\n# Source: echo/templates/cm.yaml\nkind: ConfigMap\n".into(),
            config: json!({"echo": {"replicas": 2}}),
            chart: ("echo".into(), "0.2.0".into()),
            first_deployed: "2026-12-01T10:00:00Z".into(),
            last_deployed: "2026-12-01T10:00:00Z".into(),
            description: "Install complete".into(),
            labels: [(LABEL_MODULE_CHECKSUM.to_owned(), "abc".to_owned())].into(),
        }
    }

    #[test]
    fn secret_round_trip_in_helms_format() {
        let r = release(3, Status::Deployed);
        let secret = r.to_secret("d8-system");
        assert_eq!(secret["metadata"]["name"], "sh.helm.release.v1.echo.v3");
        assert_eq!(secret["type"], "helm.sh/release.v1");
        assert_eq!(secret["metadata"]["namespace"], "d8-system");
        assert_eq!(
            secret["metadata"]["labels"],
            json!({"name": "echo", "owner": "helm", "status": "deployed", "version": "3", "moduleChecksum": "abc"})
        );
        // Kubernetes' base64 around Helm's base64 around gzip.
        let b64 = base64::engine::general_purpose::STANDARD;
        let inner = b64
            .decode(secret["data"]["release"].as_str().unwrap())
            .unwrap();
        let packed = b64.decode(inner).unwrap();
        assert!(packed.starts_with(GZIP_MAGIC));
        let back = Release::from_secret(&secret).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.checksum(), Some("abc"));
    }

    #[test]
    fn bad_secrets_are_errors_not_panics() {
        for data in [
            json!({}),
            json!({"release": "!!"}),
            json!({"release": "aGVsbG8="}),
        ] {
            let secret = json!({"metadata": {"name": "x"}, "data": data});
            assert!(Release::from_secret(&secret).is_err(), "{secret}");
        }
    }

    #[test]
    fn history_keeps_the_last_ten() {
        let history: Vec<Release> = (1..=12).map(|v| release(v, Status::Superseded)).collect();
        assert_eq!(to_prune(&history), vec![1, 2]);
        assert_eq!(last(&history).map(|r| r.version), Some(12));
        assert!(to_prune(&history[..10]).is_empty());
        assert_eq!(last(&[]), None);
    }
}
