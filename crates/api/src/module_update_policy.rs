//! `ModuleUpdatePolicy` (`moduleupdatepolicies.deckhouse.io`, `mup`): how releases of the modules
//! bound to it are applied. `v1alpha2` is stored; the deprecated `v1alpha1` is still served.
//!
//! A module is bound through `ModuleConfig.spec.updatePolicy`; without one it follows the policy
//! derived from the `deckhouse` ModuleConfig (the "embedded" policy, named "").

use crate::Error;

mod selector;

/// The stored version.
pub mod v1alpha2 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use crate::update::{ReleaseChannel, UpdateMode, UpdateWindow};

    /// Update settings for the modules bound to this policy.
    #[derive(
        CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
    )]
    #[kube(
        group = "deckhouse.io",
        version = "v1alpha2",
        kind = "ModuleUpdatePolicy",
        shortname = "mup",
        doc = "Update settings for module releases: the release channel, the update mode and the update windows. Bind a module to it with `ModuleConfig.spec.updatePolicy`.",
        printcolumn(
            name = "release channel",
            type_ = "string",
            json_path = ".spec.releaseChannel",
            description = "The module release channel."
        ),
        printcolumn(
            name = "update mode",
            type_ = "string",
            json_path = ".spec.update.mode",
            description = "The module release update mode."
        ),
        printcolumn(
            name = "update windows",
            type_ = "string",
            json_path = ".spec.update.windows",
            priority = 1,
            description = "The module release update windows."
        )
    )]
    #[serde(rename_all = "camelCase")]
    pub struct ModuleUpdatePolicySpec {
        /// Release channel, from least to most stable: `Alpha`, `Beta`, `EarlyAccess`, `Stable`,
        /// `RockSolid`, `Lts`.
        #[serde(default)]
        pub release_channel: ReleaseChannel,
        /// How and when releases are applied.
        pub update: Update,
    }

    /// How and when releases are applied.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    pub struct Update {
        /// `Auto`: minor and patch releases apply within the windows. `AutoPatch`: patches apply
        /// within the windows, minor releases need approval. `Manual`: every release needs the
        /// `modules.deckhouse.io/approved: "true"` annotation on its ModuleRelease.
        #[serde(default)]
        pub mode: UpdateMode,
        /// When releases may be applied (UTC); empty means any time.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub windows: Vec<UpdateWindow>,
    }
}

/// The deprecated version, still served: it selects modules by label instead of being named by
/// `ModuleConfig.spec.updatePolicy`, and knows the `Ignore` mode.
pub mod v1alpha1 {
    use std::collections::BTreeMap;

    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use crate::macros::string_enum;
    use crate::update::{ReleaseChannel, UpdateWindow};

    /// Update settings for the modules matched by the selector.
    #[derive(
        CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema,
    )]
    #[kube(
        group = "deckhouse.io",
        version = "v1alpha1",
        kind = "ModuleUpdatePolicy",
        shortname = "mup",
        storage = false,
        deprecated,
        doc = "Deprecated: update settings for the module releases matched by a label selector.",
        printcolumn(
            name = "release channel",
            type_ = "string",
            json_path = ".spec.releaseChannel",
            description = "Module release channel."
        ),
        printcolumn(
            name = "update mode",
            type_ = "string",
            json_path = ".spec.update.mode",
            description = "Module release update mode."
        ),
        printcolumn(
            name = "update windows",
            type_ = "string",
            json_path = ".spec.update.windows",
            priority = 1,
            description = "Module release update windows."
        )
    )]
    #[serde(rename_all = "camelCase")]
    pub struct ModuleUpdatePolicySpec {
        /// Release channel.
        #[serde(default)]
        pub release_channel: ReleaseChannel,
        /// How and when releases are applied.
        // Defaulted to `{}` and required (`crds::mup_v1alpha1_as_deckhouse`), as in Deckhouse:
        // the API server fills it in before it checks.
        #[serde(default)]
        #[schemars(extend("default" = {}))]
        pub update: Update,
        /// Which module releases the policy applies to.
        pub module_release_selector: ModuleReleaseSelector,
    }

    /// How and when releases are applied.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    pub struct Update {
        /// `Auto`, `Manual`, `Ignore` (updates are not applied) or `AutoPatch` (the default here).
        #[serde(default)]
        pub mode: UpdateModeV1,
        /// When releases may be applied (UTC); empty means any time.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub windows: Vec<UpdateWindow>,
    }

    string_enum! {
        /// Update mode of the deprecated version.
        #[derive(Default)]
        pub enum UpdateModeV1 {
            /// Every release applies automatically.
            Auto = "Auto",
            /// Every release needs approval.
            Manual = "Manual",
            /// Releases are not applied.
            Ignore = "Ignore",
            /// Patches apply automatically, minor releases need approval.
            #[default]
            AutoPatch = "AutoPatch",
        }
    }

    /// Selects the module releases the policy applies to.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct ModuleReleaseSelector {
        /// Label selector over ModuleReleases; `matchLabels` and `matchExpressions` are ANDed.
        pub label_selector: LabelSelector,
    }

    /// A label selector with at least one of its fields set.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[schemars(extend("minProperties" = 1))]
    pub struct LabelSelector {
        /// Set-based requirements, all of which must match.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub match_expressions: Vec<MatchExpression>,
        /// Equality-based requirements.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub match_labels: BTreeMap<String, String>,
    }

    /// One set-based requirement.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
    // Deckhouse's schema also ties `values` to the operator (a `oneOf`, added in
    // `crds::mup_v1alpha1_as_deckhouse`: kube's schema rewriter cannot hoist it from here).
    pub struct MatchExpression {
        /// Label name.
        pub key: String,
        /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
        pub operator: Operator,
        /// Values, required with `In` and `NotIn`, forbidden otherwise.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub values: Vec<String>,
    }

    string_enum! {
        /// Operator of a set-based requirement.
        #[derive(Default)]
        pub enum Operator {
            /// The label value is one of `values`.
            In = "In",
            /// The label value is none of `values`.
            NotIn = "NotIn",
            /// The label is present.
            #[default]
            Exists = "Exists",
            /// The label is absent.
            DoesNotExist = "DoesNotExist",
        }
    }
}

/// Converts a ModuleUpdatePolicy object between the served versions, for the API server and the
/// conversion webhook.
///
/// Every field both versions have is kept as it is — the update mode included: `Ignore`, which
/// only `v1alpha1` can be written with, reads back through `v1alpha2` unchanged, as Deckhouse
/// keeps it (its controller then holds the module's releases with "Update disabled by 'Ignore'
/// update policy"). `v1alpha1` → `v1alpha2` drops `moduleReleaseSelector` (v1alpha2 binds
/// modules by name, and kube-apiserver prunes the field from the stored version too).
/// `v1alpha2` → `v1alpha1` adds the required selector, matching no release (every ModuleRelease
/// carries the `module` label, the selector asks for it to be absent).
pub fn convert(object: &serde_json::Value, to_version: &str) -> Result<serde_json::Value, Error> {
    let mut out = object.clone();
    let bad = |value: &str| Error::UnknownValue {
        what: "ModuleUpdatePolicy version",
        value: value.to_string(),
        expected: "deckhouse.io/v1alpha1, deckhouse.io/v1alpha2".into(),
    };
    let target = match to_version {
        "v1alpha1" | "deckhouse.io/v1alpha1" => "v1alpha1",
        "v1alpha2" | "deckhouse.io/v1alpha2" => "v1alpha2",
        other => return Err(bad(other)),
    };
    if let Some(map) = out.as_object_mut() {
        map.insert("apiVersion".into(), format!("deckhouse.io/{target}").into());
        if let Some(spec) = map.get_mut("spec").and_then(|s| s.as_object_mut()) {
            match target {
                "v1alpha2" => {
                    spec.remove("moduleReleaseSelector");
                }
                _ => {
                    spec.entry("moduleReleaseSelector").or_insert_with(|| {
                        serde_json::json!({"labelSelector": {"matchExpressions": [
                            {"key": "module", "operator": "DoesNotExist"}
                        ]}})
                    });
                }
            }
        }
    }
    Ok(out)
}

pub use v1alpha2::{ModuleUpdatePolicy, ModuleUpdatePolicySpec, Update};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn converts_v1alpha1_to_v1alpha2() {
        let old = json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleUpdatePolicy",
            "metadata": {"name": "p"},
            "spec": {"releaseChannel": "Alpha", "update": {"mode": "Ignore"},
                     "moduleReleaseSelector": {"labelSelector": {"matchLabels": {"source": "x"}}}}});
        let new = convert(&old, "v1alpha2").unwrap();
        assert_eq!(new["apiVersion"], "deckhouse.io/v1alpha2");
        // Deckhouse keeps the mode; its controller reads `Ignore` in v1alpha2 too.
        assert_eq!(new["spec"]["update"]["mode"], "Ignore");
        assert!(new["spec"].get("moduleReleaseSelector").is_none());
        let typed: ModuleUpdatePolicy = serde_json::from_value(new).unwrap();
        assert_eq!(
            typed.spec.release_channel,
            crate::update::ReleaseChannel::Alpha
        );
    }

    #[test]
    fn converts_v1alpha2_to_v1alpha1_and_back() {
        let new = json!({"apiVersion": "deckhouse.io/v1alpha2", "kind": "ModuleUpdatePolicy",
            "metadata": {"name": "p"}, "spec": {"update": {"mode": "Auto", "windows": [{"from": "1:00", "to": "2:00"}]}}});
        let old = convert(&new, "deckhouse.io/v1alpha1").unwrap();
        let typed: v1alpha1::ModuleUpdatePolicy = serde_json::from_value(old.clone()).unwrap();
        assert_eq!(typed.spec.update.windows.len(), 1);
        assert_eq!(convert(&old, "v1alpha2").unwrap(), new);
        assert!(
            convert(&new, "v1")
                .unwrap_err()
                .to_string()
                .contains("\"v1\" is not a valid")
        );
    }
}
