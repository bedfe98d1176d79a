//! The registry rules: the CEL rules of the RegistryConfig CRD, and the `x-deckhouse-validations`
//! of the `registry` ModuleConfig settings (evaluated on the raw settings, before defaults).

use serde_json::Value;

mod fields;

use super::{Cause, Denial, Operation, Request, Warnings, at};
use crate::registry::{MSG_RCFG_NEEDS_SOURCE, MSG_RCFG_NEEDS_STORAGE_SOURCE};

/// Settings rule: a Managed registry needs an upstream or the cache.
pub(crate) const MSG_NEEDS_SOURCE: &str = "registry: a Managed registry needs a source of images: set 'primary.upstream', or enable 'storage.cache' for an air-gapped cluster.";
/// Settings rule: air-gap needs `storage.source`.
pub(crate) const MSG_NEEDS_STORAGE_SOURCE: &str = "registry: 'storage.source' is required when 'primary.upstream' is not set: in air-gap there is no upstream to fall back on.";
/// Settings rule: settings need `mode: Managed`.
pub(crate) const MSG_NEEDS_MANAGED: &str = "registry: set 'mode: Managed' to apply these settings; with the default 'Unmanaged' the module manages nothing and they have no effect.";
/// Auth rule: license excludes username/password.
pub(crate) const MSG_LICENSE_EXCLUSIVE: &str =
    "'license' and 'username'/'password' are mutually exclusive.";
/// Auth rule: username needs password.
pub(crate) const MSG_PASSWORD_REQUIRED: &str =
    "'password' is required when 'username' is provided.";
/// Auth rule: password needs username.
pub(crate) const MSG_USERNAME_REQUIRED: &str =
    "'username' is required when 'password' is provided.";

fn has(value: &Value, key: &str) -> bool {
    value.get(key).is_some()
}

fn is_true(value: Option<&Value>) -> bool {
    value.and_then(Value::as_bool) == Some(true)
}

pub(super) fn validate_config(request: &Request<'_>) -> Result<Warnings, Denial> {
    if request.operation == Operation::Delete {
        return Ok(Vec::new());
    }
    let Some(spec) = request.new.and_then(|o| at(o, &["spec"])) else {
        return Ok(Vec::new());
    };
    // The CRD defaults `mode` to Managed before the rules run.
    let unmanaged = spec.get("mode").and_then(Value::as_str) == Some("Unmanaged");
    let has_upstream = spec.get("primary").is_some_and(|p| has(p, "upstream"));
    let cache = is_true(at(spec, &["storage", "cache"]));
    let has_source = spec.get("storage").is_some_and(|s| has(s, "source"));
    let mut causes = Vec::new();
    let mut fail = |message: &str| {
        causes.push(Cause {
            field: "spec".into(),
            value: Some("object".into()),
            message: message.into(),
        })
    };
    if !(unmanaged || has_upstream || cache) {
        fail(MSG_RCFG_NEEDS_SOURCE);
    }
    if !(unmanaged || has_upstream || has_source) {
        fail(MSG_RCFG_NEEDS_STORAGE_SOURCE);
    }
    if causes.is_empty() {
        Ok(Vec::new())
    } else {
        Err(Denial::schema_all(causes))
    }
}

/// The messages of every `x-deckhouse-validations` rule of the `registry` settings that fails
/// on `settings` (raw, before defaults): nested `auth` rules first, then the rules on the root,
/// as Deckhouse evaluates them.
pub fn registry_settings_errors(settings: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(upstream) = at(settings, &["primary", "upstream"]) {
        if let Some(auth) = upstream.get("auth") {
            auth_errors(auth, &mut errors);
        }
        for mirror in upstream
            .get("mirrors")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(auth) = mirror.get("auth") {
                auth_errors(auth, &mut errors);
            }
        }
    }
    let mode = settings.get("mode").and_then(Value::as_str);
    let managed = mode == Some("Managed");
    let has_upstream = settings.get("primary").is_some_and(|p| has(p, "upstream"));
    if managed && !has_upstream && !is_true(at(settings, &["storage", "cache"])) {
        errors.push(MSG_NEEDS_SOURCE.to_string());
    }
    if managed && !has_upstream && !settings.get("storage").is_some_and(|s| has(s, "source")) {
        errors.push(MSG_NEEDS_STORAGE_SOURCE.to_string());
    }
    if (has(settings, "primary") || has(settings, "storage")) && !managed {
        errors.push(MSG_NEEDS_MANAGED.to_string());
    }
    fields::field_errors(settings, &mut errors);
    errors
}

fn auth_errors(auth: &Value, errors: &mut Vec<String>) {
    let (license, username, password) = (
        has(auth, "license"),
        has(auth, "username"),
        has(auth, "password"),
    );
    if license && (username || password) {
        errors.push(MSG_LICENSE_EXCLUSIVE.to_string());
    }
    if username && !password {
        errors.push(MSG_PASSWORD_REQUIRED.to_string());
    }
    if password && !username {
        errors.push(MSG_USERNAME_REQUIRED.to_string());
    }
}
