//! Conversion between the served versions of the kinds we own: kube-apiserver's CRD conversion
//! (`ConversionReview`) and the embedded API server's reads and writes through another version.
//!
//! ModuleUpdatePolicy `v1alpha1` ↔ `v1alpha2` is a real conversion
//! ([`api::module_update_policy::convert`]); every other kind serves one version, so a
//! conversion only names it (what kube-apiserver does with `strategy: None`).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;

/// Why an object cannot be converted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConversionError {
    /// The object has no `apiVersion` or `kind`.
    #[error("the object has no {0}")]
    Missing(&'static str),
    /// The object is not of a kind we own.
    #[error("{kind} in {group:?} is not a kind this webhook converts")]
    UnknownKind {
        /// The object's group.
        group: String,
        /// The object's kind.
        kind: String,
    },
    /// The desired version is not served for the kind.
    #[error("{kind}.{group} does not serve {desired:?} (served: {served})")]
    UnservedVersion {
        /// The group.
        group: String,
        /// The kind.
        kind: String,
        /// The desired `apiVersion`.
        desired: String,
        /// The served versions, comma-separated.
        served: String,
    },
    /// The kind's own conversion failed.
    #[error("{0}")]
    Kind(String),
}

/// Served versions of every kind we own, by (group, kind).
fn served() -> &'static BTreeMap<(String, String), Vec<String>> {
    static SERVED: OnceLock<BTreeMap<(String, String), Vec<String>>> = OnceLock::new();
    SERVED.get_or_init(|| {
        api::crds::all()
            .into_iter()
            .map(|crd| {
                let versions = crd
                    .spec
                    .versions
                    .iter()
                    .filter(|v| v.served)
                    .map(|v| v.name.clone())
                    .collect();
                ((crd.spec.group, crd.spec.names.kind), versions)
            })
            .collect()
    })
}

/// Every kind we own that serves more than one version, as `(group, kind, versions)`.
pub fn multi_version_kinds() -> Vec<(String, String, Vec<String>)> {
    served()
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|((g, k), v)| (g.clone(), k.clone(), v.clone()))
        .collect()
}

fn split(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// `object` as `desired_api_version` (`group/version`).
pub fn convert(object: Value, desired_api_version: &str) -> Result<Value, ConversionError> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or(ConversionError::Missing("apiVersion"))?;
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .ok_or(ConversionError::Missing("kind"))?
        .to_string();
    let (group, _) = split(api_version);
    let (desired_group, desired_version) = split(desired_api_version);
    let versions = served()
        .get(&(group.to_string(), kind.clone()))
        .ok_or_else(|| ConversionError::UnknownKind {
            group: group.to_string(),
            kind: kind.clone(),
        })?;
    if desired_group != group || !versions.iter().any(|v| v == desired_version) {
        return Err(ConversionError::UnservedVersion {
            group: group.to_string(),
            kind,
            desired: desired_api_version.to_string(),
            served: versions.join(", "),
        });
    }
    if api_version == desired_api_version {
        return Ok(object);
    }
    match kind.as_str() {
        "ModuleUpdatePolicy" => api::module_update_policy::convert(&object, desired_api_version)
            .map_err(|e| ConversionError::Kind(e.to_string())),
        _ => {
            let mut object = object;
            object["apiVersion"] = Value::String(desired_api_version.to_string());
            Ok(object)
        }
    }
}

#[cfg(test)]
mod tests;
