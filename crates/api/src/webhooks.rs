//! `ConversionWebhook` (`cwhc`) and `ValidationWebhook` (`vwhc`): webhooks written as Python (or
//! CEL) handlers that the webhook handler renders into shell-operator hooks. Their fields live at
//! the top level of the object, not under `spec`.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A conversion webhook for the CRD the object is named after.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "ConversionWebhook",
    shortname = "cwhc",
    no_spec,
    status = "WebhookStatus",
    doc = "Conversion handlers for the custom resource definition this object is named after. The webhook handler sets the CRD's `spec.conversion` and answers ConversionReview requests with them."
)]
#[serde(rename_all = "camelCase")]
pub struct ConversionWebhookFields {
    /// One handler per pair of versions.
    pub conversions: Vec<Conversion>,
    /// Objects to watch and hand to the handlers as snapshots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<Context>,
}

/// Converts objects from one version to another.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conversion {
    /// Version the handler converts from.
    pub from: String,
    /// Version the handler converts to.
    pub to: String,
    /// The handler code.
    pub handler: ConversionHandler,
    /// Names of `context` bindings whose objects are passed to the handler.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_snapshots_from: Vec<String>,
}

/// Code of a conversion handler.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConversionHandler {
    /// A Python script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
}

/// A validating webhook run by the webhook handler.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "deckhouse.io",
    version = "v1alpha1",
    kind = "ValidationWebhook",
    shortname = "vwhc",
    no_spec,
    status = "WebhookStatus",
    doc = "A validating admission webhook whose handler is a Python script or CEL rules; the webhook handler serves it."
)]
#[serde(rename_all = "camelCase")]
pub struct ValidationWebhookFields {
    /// Which requests the webhook receives.
    pub validation_object: ValidationObject,
    /// The handler code.
    pub handler: ValidationHandler,
    /// Objects to watch and hand to the handler as snapshots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<Context>,
}

/// Which admission requests a ValidationWebhook receives.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidationObject {
    /// Webhook name: a domain with at least three dot-separated parts.
    pub name: String,
    /// Group of bindings whose snapshots the handler receives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Which operations on which resources are sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::atomic_rules")]
    pub rules: Vec<RuleWithOperations>,
    /// `Fail` or `Ignore` when the handler errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    /// Whether the handler is dry-run aware.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<String>,
    /// Seconds the API server waits for the handler (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// CEL conditions a request must meet to be sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_conditions: Vec<MatchCondition>,
    /// Only objects with matching labels are sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::atomic_label_selector")]
    pub label_selector: Option<LabelSelector>,
    /// Only objects in matching namespaces are sent (label selector only; use
    /// `kubernetes.io/metadata.name` to select by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<NamespaceLabelSelector>,
    /// Names of `context` bindings whose objects are passed to the handler.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_snapshots_from: Vec<String>,
}

/// A CEL condition on admission requests.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MatchCondition {
    /// Identifier of the condition.
    pub name: String,
    /// CEL expression over `object`, `oldObject`, `request` and `authorizer`; must be boolean.
    pub expression: String,
}

/// Namespace filter of a ValidationWebhook.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceLabelSelector {
    /// Selects namespaces by label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::atomic_label_selector")]
    pub label_selector: Option<LabelSelector>,
}

/// Code of a validation handler.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ValidationHandler {
    /// A Python script defining `validate(ctx)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// CEL rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<String>,
}

/// A shell-operator `kubernetes` binding feeding objects to a handler.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Context {
    /// Binding name, referenced by `includeSnapshotsFrom`.
    pub name: String,
    /// What to watch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesBinding>,
}

/// What a `kubernetes` binding watches.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesBinding {
    /// Kind of the watched objects.
    pub kind: String,
    /// API group and version, e.g. `v1` or `monitoring.coreos.com/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Only objects with these names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_selector: Option<NameSelector>,
    /// Only objects with matching labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::atomic_label_selector")]
    pub label_selector: Option<LabelSelector>,
    /// Only objects in matching namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<NamespaceSelector>,
    /// Only objects matching these field expressions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<FieldSelector>,
    /// jq filter; a Modified event fires only when its result changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jq_filter: Option<String>,
    /// Skip handler errors instead of retrying after 5 seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_failure: Option<bool>,
    /// Queue to run in, separate from `main`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// How often to resynchronize.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resynchronization_period: Option<String>,
    /// Names of bindings whose snapshots are added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_snapshots_from: Vec<String>,
}

/// Selects objects by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NameSelector {
    /// The names.
    pub match_names: Vec<String>,
}

/// Selects namespaces by label or name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceSelector {
    /// By label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::atomic_label_selector")]
    pub label_selector: Option<LabelSelector>,
    /// By name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_selector: Option<NameSelector>,
}

/// Selects objects by field values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldSelector {
    /// Requirements, all of which must hold.
    pub match_expressions: Vec<FieldExpression>,
}

/// One field requirement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FieldExpression {
    /// Field path, e.g. `metadata.name`.
    pub field: String,
    /// `=`, `==` or `!=`.
    pub operator: String,
    /// Value to compare with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// Status of a webhook object: `conditions` (type `Ready`) say whether the webhook handler
/// serves it, and why not.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WebhookStatus(pub BTreeMap<String, serde_json::Value>);

impl JsonSchema for WebhookStatus {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WebhookStatus".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // Deckhouse defines no status fields; the webhook handler reports in `conditions`
        // (type `Ready`) whether the object's handler is serving.
        let conditions = crate::schema::condition_map(generator);
        schemars::json_schema!({"type": "object", "properties": {"conditions": conditions}})
    }
}

/// Message of a ValidationWebhook whose handler raised.
pub const VALIDATIONS_ERROR: &str = "validations.error";
