//! What a ValidationWebhook or ConversionWebhook object becomes: the Python hook file the way
//! Deckhouse's webhook-handler generates it (shell-operator config, `main`, the object's code),
//! the hook's typed `kubernetes` bindings (its `context`), the ValidatingWebhookConfiguration
//! entry and the CRD's `spec.conversion`.
//!
//! Pure: no I/O.

use module_hooks::{HookConfig, HookScope};
use serde_json::{Value, json};

/// The ValidatingWebhookConfiguration the handler keeps, as Deckhouse names it.
pub const CONFIGURATION_NAME: &str = "d8-deckhouse-validating-webhook-handler";
/// The Services in front of the handler, as Deckhouse names them.
pub const VALIDATING_SERVICE: &str = "validating-webhook-handler";
pub const CONVERSION_SERVICE: &str = "conversion-webhook-handler";
/// The group every generated binding is in.
const GROUP: &str = "main";

/// Where the API server reaches the handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `clientConfig.url`: this base (`https://127.0.0.1:9680`) and the path.
    Url(String),
    /// `clientConfig.service` in this namespace (port 443), as in a cluster.
    Service(String),
}

impl Endpoint {
    /// `clientConfig` for `path` with the CA bundle (PEM).
    pub fn client_config(&self, service: &str, path: &str, ca_pem: &str) -> Value {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
        match self {
            Endpoint::Url(base) => {
                json!({"url": format!("{}{path}", base.trim_end_matches('/')), "caBundle": ca})
            }
            Endpoint::Service(ns) => json!({
                "service": {"namespace": ns, "name": service, "path": path, "port": 443},
                "caBundle": ca,
            }),
        }
    }
}

fn s<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

/// The `context` entries as shell-operator `kubernetes` bindings (in group `main`).
fn context_bindings(obj: &Value) -> Vec<Value> {
    obj.get("context")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let mut b = c.get("kubernetes").cloned().unwrap_or_else(|| json!({}));
            if let Some(m) = b.as_object_mut() {
                let mut out = serde_json::Map::new();
                out.insert("name".into(), c.get("name").cloned().unwrap_or(Value::Null));
                out.append(m);
                out.entry("group").or_insert(json!(GROUP));
                return Value::Object(out);
            }
            b
        })
        .collect()
}

/// The typed bindings of the object's `context`, checked as shell-operator checks a hook's
/// config; the error is its message.
pub fn bindings(obj: &Value) -> Result<HookConfig, String> {
    let ctx = context_bindings(obj);
    // shell-operator refuses a config with nothing but its version, and an empty `kubernetes`
    // list: without context the config is parsed with an `onStartup` that is then dropped.
    let config = if ctx.is_empty() {
        json!({"configVersion": "v1", "onStartup": 1})
    } else {
        json!({"configVersion": "v1", "kubernetes": ctx})
    };
    let mut parsed = HookConfig::parse(config.to_string().as_bytes(), HookScope::Global)
        .map_err(|e| e.message)?;
    parsed.on_startup = None;
    Ok(parsed)
}

/// The names of the context bindings a handler gets snapshots of: every binding of the
/// group, as shell-operator includes a group's snapshots, and `includeSnapshotsFrom`.
pub fn snapshot_names(obj: &Value, include: Option<&Value>) -> Vec<String> {
    let mut names: Vec<String> = context_bindings(obj)
        .iter()
        .filter_map(|b| b.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    for n in include
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !names.iter().any(|x| x == n) {
            names.push(n.to_string());
        }
    }
    names
}

fn config_text(config: &Value) -> String {
    serde_json::to_string_pretty(config).unwrap_or_default()
}

/// The `kubernetesValidating` entry of a ValidationWebhook (its `validationObject`, in group
/// `main`).
fn validating_binding(vw: &Value) -> Value {
    let mut b = vw
        .get("validationObject")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(m) = b.as_object_mut() {
        m.entry("group").or_insert(json!(GROUP));
    }
    b
}

/// The Python hook of a ValidationWebhook, as Deckhouse generates it: the user's code defines
/// `validate(ctx, output)` and answers with `output.allow()` / `output.deny(msg)`.
pub fn validation_hook(vw: &Value) -> String {
    let mut config =
        json!({"configVersion": "v1", "kubernetesValidating": [validating_binding(vw)]});
    let ctx = context_bindings(vw);
    if !ctx.is_empty() {
        config["kubernetes"] = Value::Array(ctx);
    }
    format!(
        r#"#!/usr/bin/env python3
from typing import Optional

from deckhouse import hook
from dotmap import DotMap

config = """
{config}
"""

def main(ctx: hook.Context):
    try:
        # DotMap is a dict with dot notation
        binding_context = DotMap(ctx.binding_context)
        validate(binding_context, ctx.output.validations)
    except Exception as e:
        ctx.output.validations.error(str(e))

{code}

if __name__ == "__main__":
    hook.run(main, config=config)
"#,
        config = config_text(&config),
        code = s(vw, "/handler/python"),
    )
}

/// The group of a CRD named `<plural>.<group>`.
pub fn crd_group(crd_name: &str) -> &str {
    crd_name.split_once('.').map(|(_, g)| g).unwrap_or_default()
}

/// The binding (and method) name of one conversion: `<from>_to_<to>`.
pub fn conversion_name(from: &str, to: &str) -> String {
    format!("{from}_to_{to}")
}

/// The Python hook of a ConversionWebhook (named after its CRD), as Deckhouse generates it:
/// each conversion's code is the body of a `<from>_to_<to>(self, o)` method of a
/// `BaseConversionHook`, returning `(error or None, converted object)`.
pub fn conversion_hook(cw: &Value) -> String {
    let crd = s(cw, "/metadata/name");
    let group = crd_group(crd);
    let conversions: Vec<&Value> = cw
        .get("conversions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let bindings: Vec<Value> = conversions
        .iter()
        .map(|c| {
            let (from, to) = (s(c, "/from"), s(c, "/to"));
            json!({
                "name": conversion_name(from, to),
                "crdName": crd,
                "conversions": [{"fromVersion": format!("{group}/{from}"), "toVersion": format!("{group}/{to}")}],
            })
        })
        .collect();
    let mut config = json!({"configVersion": "v1", "kubernetesCustomResourceConversion": bindings});
    let ctx = context_bindings(cw);
    if !ctx.is_empty() {
        config["kubernetes"] = Value::Array(ctx);
    }
    let mut methods = String::new();
    for c in &conversions {
        methods.push_str(&format!(
            "    def {}(self, o: dict) -> typing.Tuple[str | None, dict]:\n",
            conversion_name(s(c, "/from"), s(c, "/to"))
        ));
        for line in s(c, "/handler/python").lines() {
            methods.push_str("        ");
            methods.push_str(line);
            methods.push('\n');
        }
        methods.push_str("    \n");
    }
    format!(
        r#"#!/usr/bin/env python3

import typing

from dotmap import DotMap
from deckhouse import hook, utils

config = """
{config}
"""

class Conversion(utils.BaseConversionHook):
    def __init__(self, ctx: hook.Context):
        super().__init__(ctx)
{methods}

def main(ctx: hook.Context):
    Conversion(ctx).run()


if __name__ == "__main__":
    hook.run(main, config=config)
"#,
        config = config_text(&config),
    )
}

/// Where a ValidationWebhook's Python hook is written, under the hooks directory (Deckhouse's
/// layout).
pub fn validating_hook_file(name: &str) -> String {
    format!("{name}/webhooks/validating/{name}.py")
}

/// Where a ConversionWebhook's hook is written, under the hooks directory.
pub fn conversion_hook_file(crd: &str) -> String {
    format!("{crd}/webhooks/conversion/{crd}.py")
}

/// The URL path of a ValidationWebhook's webhook: `/<object>/<webhook name>`.
pub fn validating_path(vw: &Value) -> String {
    format!(
        "/{}/{}",
        s(vw, "/metadata/name"),
        s(vw, "/validationObject/name")
    )
}

/// The URL path of a CRD's conversion webhook: `/<crd name>`.
pub fn conversion_path(crd: &str) -> String {
    format!("/{crd}")
}

/// One webhook of the ValidatingWebhookConfiguration for a ValidationWebhook.
pub fn validating_webhook(vw: &Value, endpoint: &Endpoint, ca_pem: &str) -> Value {
    let vo = vw
        .get("validationObject")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut w = json!({
        "name": s(&vo, "/name"),
        "admissionReviewVersions": ["v1"],
        "clientConfig": endpoint.client_config(VALIDATING_SERVICE, &validating_path(vw), ca_pem),
        "rules": vo.get("rules").cloned().unwrap_or_else(|| json!([])),
        "failurePolicy": vo.get("failurePolicy").and_then(Value::as_str).unwrap_or("Fail"),
        "sideEffects": vo.get("sideEffects").and_then(Value::as_str).unwrap_or("None"),
        "timeoutSeconds": vo.get("timeoutSeconds").and_then(Value::as_i64).unwrap_or(10),
        "matchPolicy": "Equivalent",
    });
    if let Some(l) = vo.get("labelSelector") {
        w["objectSelector"] = l.clone();
    }
    if let Some(n) = vo.pointer("/namespace/labelSelector") {
        w["namespaceSelector"] = n.clone();
    }
    if let Some(m) = vo
        .get("matchConditions")
        .filter(|m| m.as_array().is_some_and(|a| !a.is_empty()))
    {
        w["matchConditions"] = m.clone();
    }
    w
}

/// The ValidatingWebhookConfiguration serving `webhooks`.
pub fn validating_configuration(webhooks: Vec<Value>) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION_NAME, "labels": {"heritage": "deckhouse", "module": "deckhouse"}},
        "webhooks": webhooks,
    })
}

/// The `spec.conversion` of a CRD converted by the handler.
pub fn crd_conversion(crd: &str, endpoint: &Endpoint, ca_pem: &str) -> Value {
    json!({
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": endpoint.client_config(CONVERSION_SERVICE, &conversion_path(crd), ca_pem),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vw() -> Value {
        json!({
            "metadata": {"name": "widgets"},
            "validationObject": {"name": "widgets.example.deckhouse.io", "failurePolicy": "Ignore", "timeoutSeconds": 3,
                "rules": [{"apiGroups": ["example.io"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["widgets"]}],
                "labelSelector": {"matchLabels": {"a": "b"}}},
            "context": [{"name": "limits", "kubernetes": {"apiVersion": "v1", "kind": "ConfigMap", "jqFilter": ".data"}}],
            "handler": {"python": "def validate(ctx, output):\n    output.allow()\n"},
        })
    }

    #[test]
    fn a_validation_webhook_becomes_deckhouses_hook_and_a_webhook_entry() {
        let py = validation_hook(&vw());
        assert!(py.starts_with("#!/usr/bin/env python3\n"));
        assert!(py.contains("validate(binding_context, ctx.output.validations)"));
        assert!(py.contains("ctx.output.validations.error(str(e))"));
        assert!(py.contains("def validate(ctx, output):\n    output.allow()\n"));
        assert!(py.contains("\"kubernetesValidating\""));
        let w = validating_webhook(
            &vw(),
            &Endpoint::Url("https://127.0.0.1:9680".into()),
            "PEM",
        );
        assert_eq!(w["name"], "widgets.example.deckhouse.io");
        assert_eq!(
            w["clientConfig"]["url"],
            "https://127.0.0.1:9680/widgets/widgets.example.deckhouse.io"
        );
        assert_eq!(w["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(
            (w["failurePolicy"].as_str(), w["timeoutSeconds"].as_i64()),
            (Some("Ignore"), Some(3))
        );
        assert_eq!(w["objectSelector"], json!({"matchLabels": {"a": "b"}}));
        let w = validating_webhook(
            &json!({"metadata": {"name": "x"}, "validationObject": {"name": "a.b.c"}}),
            &Endpoint::Service("d8-system".into()),
            "",
        );
        assert_eq!(
            (
                w["failurePolicy"].as_str(),
                w["sideEffects"].as_str(),
                w["timeoutSeconds"].as_i64()
            ),
            (Some("Fail"), Some("None"), Some(10))
        );
        assert_eq!(
            w["clientConfig"]["service"],
            json!({"namespace": "d8-system", "name": "validating-webhook-handler", "path": "/x/a.b.c", "port": 443})
        );
    }

    #[test]
    fn context_entries_become_typed_bindings_in_group_main() {
        let config = bindings(&vw()).unwrap();
        assert_eq!(config.kubernetes.len(), 1);
        assert_eq!(config.kubernetes[0].name, "limits");
        assert_eq!(config.kubernetes[0].group.as_deref(), Some("main"));
        assert_eq!(snapshot_names(&vw(), None), ["limits"]);
        let bad = json!({"context": [{"name": "x", "kubernetes": {"apiVersion": "v1"}}]});
        assert!(bindings(&bad).is_err());
        assert!(bindings(&json!({})).unwrap().kubernetes.is_empty());
    }

    #[test]
    fn a_conversion_webhook_becomes_one_method_per_pair() {
        let cw = json!({"metadata": {"name": "sprockets.example.io"}, "conversions": [
            {"from": "v1", "to": "v2", "handler": {"python": "o[\"apiVersion\"] = \"example.io/v2\"\nreturn None, o"}}]});
        let py = conversion_hook(&cw);
        assert!(py.contains("class Conversion(utils.BaseConversionHook):"));
        assert!(py.contains("    def v1_to_v2(self, o: dict) -> typing.Tuple[str | None, dict]:\n        o[\"apiVersion\"] = \"example.io/v2\"\n        return None, o\n"));
        assert!(py.contains("\"fromVersion\": \"example.io/v1\""));
        let c = crd_conversion(
            "sprockets.example.io",
            &Endpoint::Url("https://127.0.0.1:1".into()),
            "",
        );
        assert_eq!(c["strategy"], "Webhook");
        assert_eq!(
            c["webhook"]["clientConfig"]["url"],
            "https://127.0.0.1:1/sprockets.example.io"
        );
    }
}
