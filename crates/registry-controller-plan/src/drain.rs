//! The drain (Managed → Unmanaged). Workloads may still name `registry.d8-system.svc:5001`, so
//! the module keeps serving the configuration captured when the drain began (saved in Secret
//! `registry-drain`, key `record`) until two scans, at least 30 s apart, find nothing naming
//! that address; only then is everything withdrawn. A cluster without an upstream (air gap) has
//! nowhere to send workloads back to, so its drain cannot finish. A disabled module skips the
//! drain. Asking for Managed again abandons it.

use std::collections::BTreeMap;

use api::registry::{RegistryConfigSpec, RegistryMode};
use serde::{Deserialize, Serialize};

use crate::{Error, settings};

/// The shortest gap between the two scans that must both find nothing.
pub const MIN_SCAN_GAP_SECONDS: i64 = 30;
/// Scans that must find nothing.
pub const ZERO_SCANS_TO_FINISH: u32 = 2;
/// Key of the record in Secret `registry-drain`.
pub const RECORD_KEY: &str = "record";

/// The drain record. Its `config` carries credentials, hence the Secret.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainRecord {
    /// The configuration being served while draining.
    pub config: RegistryConfigSpec,
    /// When the drain began (seconds since the epoch).
    pub started_at: i64,
    /// Consecutive scans that found nothing.
    pub zero_scans: u32,
    /// The drain completed.
    pub finished: bool,
    /// When the last empty scan was counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_zero_at: Option<i64>,
}

impl DrainRecord {
    /// Reads a stored record.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        serde_json::from_slice(bytes).map_err(Error::DrainRecord)
    }

    /// The stored form.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a drain record serializes")
    }

    /// Whether the drained configuration has an upstream to send workloads back to.
    pub fn can_finish(&self) -> bool {
        self.config
            .primary
            .as_ref()
            .is_some_and(|p| p.upstream.is_some())
    }
}

/// Secret `d8-system/deckhouse-registry`'s data after a finished drain, or `None` when it must
/// stay as it is. A cluster installed into the module names the in-cluster address there; once
/// the module withdraws, that address no longer answers, so the drained configuration's upstream
/// is written back (address, path, scheme, CA, `imagesRegistry` and `.dockerconfigjson`; other
/// keys are kept). A cluster installed from an outside registry keeps its Secret untouched.
pub fn write_back(
    existing: &BTreeMap<String, Vec<u8>>,
    record: &DrainRecord,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, Error> {
    let names_module = existing
        .get("address")
        .and_then(|a| std::str::from_utf8(a).ok())
        .is_some_and(|a| a.trim().eq_ignore_ascii_case(crate::IN_CLUSTER_HOST));
    let Some(upstream) = record
        .config
        .primary
        .as_ref()
        .and_then(|p| p.upstream.as_ref())
    else {
        return Ok(None);
    };
    if !names_module {
        return Ok(None);
    }
    let credentials = settings::credentials(upstream.auth.as_ref(), "spec.primary.upstream.auth")?;
    let path = upstream.path_prefix();
    let mut data = existing.clone();
    let mut set = |key: &str, value: String| {
        data.insert(key.to_owned(), value.into_bytes());
    };
    set("address", upstream.host.clone());
    set("path", path.clone());
    set("imagesRegistry", format!("{}{path}", upstream.host));
    set(
        "scheme",
        match upstream.scheme {
            api::module_source::Scheme::Http => "http",
            api::module_source::Scheme::Https => "https",
        }
        .to_owned(),
    );
    let entry = match &credentials {
        Some(c) => {
            use base64::Engine;
            let auth = base64::engine::general_purpose::STANDARD
                .encode(format!("{}:{}", c.username, c.password));
            serde_json::json!({ "auth": auth })
        }
        None => serde_json::json!({}),
    };
    let config = serde_json::json!({ "auths": { upstream.host.clone(): entry } });
    set(".dockerconfigjson", config.to_string());
    match &upstream.ca {
        Some(ca) => set("ca", ca.clone()),
        None => {
            data.remove("ca");
        }
    }
    Ok(Some(data))
}

/// What the drain step observed.
#[derive(Clone, Debug, PartialEq)]
pub struct Inputs {
    /// The ModuleConfig asks for Managed.
    pub wanted_managed: bool,
    /// The module is enabled (`enabled: false` skips the drain).
    pub module_enabled: bool,
    /// RegistryConfig spec as it was before this reconcile re-renders it.
    pub current: Option<RegistryConfigSpec>,
    /// The stored record.
    pub record: Option<DrainRecord>,
    /// Objects still naming the in-cluster address.
    pub references: u64,
    /// Now, seconds since the epoch.
    pub now: i64,
}

/// What to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Not draining: follow the ModuleConfig; delete a stored record if there is one.
    Follow,
    /// Keep serving `record.config`; store `record`.
    Serve {
        /// The updated record.
        record: Box<DrainRecord>,
    },
    /// Withdraw everything and delete the record.
    Withdraw,
}

/// One drain step.
pub fn step(inputs: Inputs) -> Decision {
    if inputs.wanted_managed {
        return Decision::Follow;
    }
    if !inputs.module_enabled {
        return Decision::Withdraw;
    }
    let mut record = match inputs.record {
        Some(record) if record.finished => return Decision::Withdraw,
        Some(record) => record,
        None => match inputs.current {
            Some(config) if config.mode == RegistryMode::Managed => DrainRecord {
                config,
                started_at: inputs.now,
                zero_scans: 0,
                finished: false,
                last_zero_at: None,
            },
            _ => return Decision::Withdraw,
        },
    };
    if inputs.references > 0 {
        record.zero_scans = 0;
        record.last_zero_at = None;
    } else {
        let counts = match record.last_zero_at {
            None => true,
            Some(at) => inputs.now - at >= MIN_SCAN_GAP_SECONDS,
        };
        if counts {
            record.zero_scans += 1;
            record.last_zero_at = Some(inputs.now);
        }
    }
    if record.zero_scans >= ZERO_SCANS_TO_FINISH && record.can_finish() {
        return Decision::Withdraw;
    }
    Decision::Serve {
        record: Box::new(record),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::registry::{Primary, StorageConfig, StorageSource, Upstream};

    fn managed(upstream: bool) -> RegistryConfigSpec {
        RegistryConfigSpec {
            mode: RegistryMode::Managed,
            primary: upstream.then(|| Primary {
                upstream: Some(Upstream {
                    host: "r.example".into(),
                    ..Default::default()
                }),
            }),
            storage: Some(StorageConfig {
                cache: !upstream,
                source: Some(StorageSource::default()),
                ..Default::default()
            }),
        }
    }

    fn inputs(record: Option<DrainRecord>, references: u64, now: i64) -> Inputs {
        Inputs {
            wanted_managed: false,
            module_enabled: true,
            current: Some(managed(true)),
            record,
            references,
            now,
        }
    }

    fn serve(decision: Decision) -> DrainRecord {
        match decision {
            Decision::Serve { record } => *record,
            other => panic!("expected Serve, got {other:?}"),
        }
    }

    #[test]
    fn two_empty_scans_thirty_seconds_apart_finish_it() {
        let first = serve(step(inputs(None, 0, 1000)));
        assert_eq!((first.started_at, first.zero_scans), (1000, 1));
        assert_eq!(first.config, managed(true));
        // Too soon: does not count.
        let soon = serve(step(inputs(Some(first.clone()), 0, 1010)));
        assert_eq!(soon.zero_scans, 1);
        assert_eq!(step(inputs(Some(soon), 0, 1030)), Decision::Withdraw);
    }

    #[test]
    fn a_reference_resets_the_count() {
        let first = serve(step(inputs(None, 0, 1000)));
        let busy = serve(step(inputs(Some(first), 3, 1040)));
        assert_eq!((busy.zero_scans, busy.last_zero_at), (0, None));
        let again = serve(step(inputs(Some(busy), 0, 1041)));
        assert_eq!(again.zero_scans, 1);
        assert_eq!(again.started_at, 1000, "the drain keeps its start");
    }

    #[test]
    fn an_air_gapped_cluster_cannot_finish() {
        let mut i = inputs(None, 0, 0);
        i.current = Some(managed(false));
        let mut record = serve(step(i));
        for now in [100, 200, 300] {
            record = serve(step(inputs(Some(record), 0, now)));
        }
        assert!(record.zero_scans >= 2);
    }

    #[test]
    fn managed_again_abandons_it_and_disabled_skips_it() {
        let record = serve(step(inputs(None, 5, 0)));
        let mut i = inputs(Some(record.clone()), 5, 10);
        i.wanted_managed = true;
        assert_eq!(step(i), Decision::Follow);
        let mut i = inputs(Some(record), 5, 10);
        i.module_enabled = false;
        assert_eq!(step(i), Decision::Withdraw);
    }

    #[test]
    fn nothing_managed_means_nothing_to_drain() {
        let mut i = inputs(None, 7, 0);
        i.current = None;
        assert_eq!(step(i.clone()), Decision::Withdraw);
        i.current = Some(RegistryConfigSpec::default());
        assert_eq!(step(i), Decision::Withdraw);
    }

    fn installed(address: &str) -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([
            ("address".to_owned(), address.as_bytes().to_vec()),
            ("path".to_owned(), b"/system/deckhouse".to_vec()),
            ("clusterIsBootstrapped".to_owned(), b"true".to_vec()),
            ("ca".to_owned(), b"old".to_vec()),
        ])
    }

    #[test]
    fn a_cluster_installed_into_the_module_gets_the_upstream_written_back() {
        let mut record = serve(step(inputs(None, 0, 5)));
        if let Some(u) = record
            .config
            .primary
            .as_mut()
            .and_then(|p| p.upstream.as_mut())
        {
            u.path = Some("deckhouse/ee/".into());
            u.auth = Some(api::registry::InlineAuth {
                username: Some("license-token".into()),
                password: Some("k".into()),
                auth: None,
            });
        }
        let data = write_back(&installed("registry.d8-system.svc:5001"), &record)
            .unwrap()
            .expect("written back");
        let text = |k: &str| String::from_utf8(data[k].clone()).unwrap();
        assert_eq!(text("address"), "r.example");
        assert_eq!(text("path"), "/deckhouse/ee");
        assert_eq!(text("imagesRegistry"), "r.example/deckhouse/ee");
        assert_eq!(text("scheme"), "https");
        assert_eq!(text("clusterIsBootstrapped"), "true", "other keys are kept");
        assert!(
            !data.contains_key("ca"),
            "no CA in the upstream: the old one goes"
        );
        let config: serde_json::Value = serde_json::from_slice(&data[".dockerconfigjson"]).unwrap();
        // base64("license-token:k")
        assert_eq!(config["auths"]["r.example"]["auth"], "bGljZW5zZS10b2tlbjpr");
    }

    #[test]
    fn an_outside_install_registry_or_an_air_gapped_record_is_left_alone() {
        let record = serve(step(inputs(None, 0, 5)));
        assert_eq!(write_back(&installed("r.example"), &record).unwrap(), None);
        assert_eq!(write_back(&BTreeMap::new(), &record).unwrap(), None);
        let mut i = inputs(None, 0, 0);
        i.current = Some(managed(false));
        let air_gapped = serve(step(i));
        assert_eq!(
            write_back(&installed("registry.d8-system.svc:5001"), &air_gapped).unwrap(),
            None
        );
    }

    #[test]
    fn a_record_round_trips_and_garbage_is_an_error() {
        let record = serve(step(inputs(None, 0, 5)));
        assert_eq!(DrainRecord::from_bytes(&record.to_bytes()).unwrap(), record);
        assert!(DrainRecord::from_bytes(b"{").is_err());
    }
}
