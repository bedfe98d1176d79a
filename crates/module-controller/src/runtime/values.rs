//! The values a chart sees — a stand-in until `module-plan` assembles them with their schemas:
//! `global` = the global ModuleConfig's settings, over the runtime's base (what the caller
//! knows, e.g. `clusterConfiguration`), plus what Deckhouse adds itself: `enabledModules` (the
//! names of the enabled modules, sorted) and `discovery.kubernetesVersion`; the module's own
//! values are its settings, converted and defaulted. Pure.

use serde_json::{Map, Value, json};

/// Deep-merges `over` into `base` (objects merged key by key, anything else replaced).
fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// `global` for every chart.
pub fn global(
    base: &Value,
    settings: Option<&Value>,
    enabled: &[String],
    kubernetes_version: Option<&str>,
) -> Value {
    let mut out = if base.is_object() {
        base.clone()
    } else {
        Value::Object(Map::new())
    };
    if let Some(settings) = settings {
        merge(&mut out, settings);
    }
    let mut enabled = enabled.to_vec();
    enabled.sort();
    enabled.dedup();
    merge(&mut out, &json!({"enabledModules": enabled}));
    if let Some(v) = kubernetes_version {
        merge(&mut out, &json!({"discovery": {"kubernetesVersion": v}}));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_values() {
        let base = json!({"clusterConfiguration": {"clusterDomain": "cluster.local"}, "discovery": {"a": 1}});
        let settings = json!({"modules": {"publicDomainTemplate": "%s.example.com"}, "clusterConfiguration": {"podSubnetCIDR": "10.0.0.0/16"}});
        assert_eq!(
            global(
                &base,
                Some(&settings),
                &["b".into(), "a".into(), "a".into()],
                Some("1.29.3")
            ),
            json!({
                "clusterConfiguration": {"clusterDomain": "cluster.local", "podSubnetCIDR": "10.0.0.0/16"},
                "modules": {"publicDomainTemplate": "%s.example.com"},
                "enabledModules": ["a", "b"],
                "discovery": {"a": 1, "kubernetesVersion": "1.29.3"},
            })
        );
        assert_eq!(
            global(&Value::Null, None, &[], None),
            json!({"enabledModules": []})
        );
    }
}
