//! Small schema builders for fields whose Rust type would otherwise produce a schema that differs
//! from Deckhouse's CRDs (free-form objects, times declared as plain strings, list-map keys).
//!
//! Each is used through `#[schemars(schema_with = "…")]`, which puts the field in `required`
//! unless the field also has `#[serde(default)]` (rust-stack.md gotcha 5).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

/// `{type: object, x-kubernetes-preserve-unknown-fields: true}`: settings, changelogs and other
/// free-form objects the API server must store as they are.
pub(crate) fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// `{type: string}` for times Deckhouse declares without `format: date-time`
/// (`applyAfter`, `transitionTime`, `syncTime`, `updatedAt`), so the API server accepts what
/// Deckhouse's accepts.
pub(crate) fn plain_string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string" })
}

/// `metav1.Condition` list keyed by `type` (`x-kubernetes-list-type: map`).
pub(crate) fn condition_map(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = list_of::<Condition>(generator);
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema
}

/// A Module-style condition list merged by `type` with a strategic-merge patch.
pub(crate) fn patch_merge_by_type<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = list_of::<T>(generator);
    schema.insert("x-kubernetes-patch-merge-key".into(), "type".into());
    schema.insert("x-kubernetes-patch-strategy".into(), "merge".into());
    schema
}

/// A list of `T` keyed by `type` (`x-kubernetes-list-type: map`).
pub(crate) fn map_by_type<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = list_of::<T>(generator);
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema
}

/// `metav1.LabelSelector` with the markers controller-gen emits for it, as Deckhouse's
/// ValidationWebhook and ConversionWebhook CRDs carry them: the selector is
/// `x-kubernetes-map-type: atomic`, `matchExpressions` and each expression's `values` are
/// `x-kubernetes-list-type: atomic` (a server-side apply replaces them whole).
pub(crate) fn atomic_label_selector(generator: &mut SchemaGenerator) -> Schema {
    let mut schema =
        generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>();
    if let Some(selector) = schema.as_object_mut() {
        selector.insert("x-kubernetes-map-type".into(), "atomic".into());
        if let Some(expressions) = property(selector, "matchExpressions") {
            expressions.insert("x-kubernetes-list-type".into(), "atomic".into());
            if let Some(values) = expressions
                .get_mut("items")
                .and_then(Value::as_object_mut)
                .and_then(|item| property(item, "values"))
            {
                values.insert("x-kubernetes-list-type".into(), "atomic".into());
            }
        }
    }
    schema
}

/// A list of `admissionregistration/v1` `RuleWithOperations` with controller-gen's markers, as
/// Deckhouse's ValidationWebhook carries them: `apiGroups`, `apiVersions`, `operations` and
/// `resources` are `x-kubernetes-list-type: atomic`.
pub(crate) fn atomic_rules(generator: &mut SchemaGenerator) -> Schema {
    let mut schema =
        list_of::<k8s_openapi::api::admissionregistration::v1::RuleWithOperations>(generator);
    if let Some(rule) = schema
        .as_object_mut()
        .and_then(|s| s.get_mut("items"))
        .and_then(Value::as_object_mut)
    {
        for field in ["apiGroups", "apiVersions", "operations", "resources"] {
            if let Some(list) = property(rule, field) {
                list.insert("x-kubernetes-list-type".into(), "atomic".into());
            }
        }
    }
    schema
}

/// The schema of property `name` of an object schema.
fn property<'a>(
    schema: &'a mut serde_json::Map<String, Value>,
    name: &str,
) -> Option<&'a mut serde_json::Map<String, Value>> {
    schema
        .get_mut("properties")
        .and_then(|p| p.get_mut(name))
        .and_then(Value::as_object_mut)
}

fn list_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    let items = generator.subschema_for::<T>();
    json_schema!({ "type": "array", "items": items })
}

/// `metav1.Condition` list as controller-gen emits it for Deckhouse's package-system kinds
/// (Application, PackageRepositoryOperation, Module v1beta1): Kubernetes' standard constraints
/// (status `True`/`False`/`Unknown`, CamelCase `reason`, a qualified-name `type`, lengths), keyed
/// by `type`.
pub(crate) fn standard_condition_map(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = standard_condition_list(generator);
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema
}

/// [`standard_condition_map`]'s constraints on a plain list, as Deckhouse's PackageRepository and
/// ObjectKeeper declare it (no list-map keys).
pub(crate) fn standard_condition_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "description": "One aspect of the object's current state.",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {
                    "type": "string",
                    "format": "date-time",
                    "description": "When the condition last changed status."
                },
                "message": {
                    "type": "string",
                    "maxLength": 32768,
                    "description": "Details for people; may be empty."
                },
                "observedGeneration": {
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                    "description": "The `.metadata.generation` the condition was set for."
                },
                "reason": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 1024,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                    "description": "Why the condition last changed, in CamelCase."
                },
                "status": {
                    "type": "string",
                    "enum": ["True", "False", "Unknown"],
                    "description": "`True`, `False` or `Unknown`."
                },
                "type": {
                    "type": "string",
                    "maxLength": 316,
                    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
                    "description": "The condition's type, CamelCase or `foo.example.com/CamelCase`."
                }
            }
        }
    })
}
