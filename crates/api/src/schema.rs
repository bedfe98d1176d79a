//! Small schema builders for fields whose Rust type would otherwise produce a schema that differs
//! from Deckhouse's CRDs (free-form objects, times declared as plain strings, list-map keys).
//!
//! Each is used through `#[schemars(schema_with = "…")]`, which puts the field in `required`
//! unless the field also has `#[serde(default)]` (rust-stack.md gotcha 5).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

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

/// `metav1.Condition` list without list-map keys (ObjectKeeper, PackageRepository).
pub(crate) fn condition_list(generator: &mut SchemaGenerator) -> Schema {
    list_of::<Condition>(generator)
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

fn list_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    let items = generator.subschema_for::<T>();
    json_schema!({ "type": "array", "items": items })
}
