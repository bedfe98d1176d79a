//! Discovery documents (`/api`, `/apis`, resource lists), `/version` and `/openapi/v3`.
//!
//! `/openapi/v3` publishes, per group version, a PATCH operation for every kind with the
//! `fieldValidation` parameter: this is how kubectl learns that the server validates fields
//! itself, so `kubectl apply` sends `fieldValidation=Strict` instead of needing client-side
//! schemas (and `--validate=false` is never necessary).

use crate::resources::{Registry, ResourceDef};
use serde_json::{Value, json};

/// The Kubernetes version the server reports (its API surface follows this minor).
pub(crate) const KUBE_MAJOR: &str = "1";
/// Minor version.
pub(crate) const KUBE_MINOR: &str = "31";

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// `/version`.
pub(crate) fn version() -> Value {
    json!({
        "major": KUBE_MAJOR, "minor": KUBE_MINOR,
        "gitVersion": format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0+d8.{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z", "goVersion": "rust", "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else { std::env::consts::ARCH }),
    })
}

/// `/api`.
pub(crate) fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]})
}

fn group_doc(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(json!({}))})
}

/// `/apis`.
pub(crate) fn groups(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_doc(&g, &vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub(crate) fn group(reg: &Registry, name: &str) -> Option<Value> {
    reg.groups()
        .into_iter()
        .find(|(g, _)| g == name && !g.is_empty())
        .map(|(g, vs)| {
            let mut d = group_doc(&g, &vs);
            d["kind"] = json!("APIGroup");
            d["apiVersion"] = json!("v1");
            d
        })
}

fn resource_entries(d: &ResourceDef, version: &str) -> Vec<Value> {
    let mut main = json!({
        "name": d.plural, "singularName": d.singular, "namespaced": d.namespaced, "kind": d.kind,
        "verbs": VERBS,
    });
    if !d.short_names.is_empty() {
        main["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        main["categories"] = json!(d.categories);
    }
    let mut out = vec![main];
    if d.version(version).is_some_and(|v| v.status) {
        out.push(json!({
            "name": format!("{}/status", d.plural), "singularName": "", "namespaced": d.namespaced,
            "kind": d.kind, "verbs": ["get", "patch", "update"],
        }));
    }
    if d.version(version).is_some_and(|v| v.scale.is_some()) {
        out.push(json!({
            "name": format!("{}/scale", d.plural), "singularName": "", "namespaced": d.namespaced,
            "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"],
        }));
    }
    out
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub(crate) fn resources(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = reg.in_group_version(group, version);
    if defs.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let resources: Vec<Value> = defs
        .iter()
        .flat_map(|d| resource_entries(d, version))
        .collect();
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3/<gv>`: operations with the query parameters kubectl looks for.
pub(crate) fn openapi_gv(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let defs = reg.in_group_version(group, version);
    if defs.is_empty() {
        return None;
    }
    let param = |n: &str| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for d in &defs {
        let gvk = json!({"group": group, "version": version, "kind": d.kind});
        let base = if d.namespaced {
            format!(
                "/{}/namespaces/{{namespace}}/{}",
                gv_path(group, version),
                d.plural
            )
        } else {
            format!("/{}/{}", gv_path(group, version), d.plural)
        };
        let op = |action: &str| {
            json!({
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [param("dryRun"), param("fieldManager"), param("fieldValidation")],
                "responses": {"200": {"description": "OK"}}
            })
        };
        paths.insert(base.clone(), json!({"post": op("post"), "get": {"x-kubernetes-action": "list", "x-kubernetes-group-version-kind": gvk, "responses": {"200": {"description": "OK"}}}}));
        paths.insert(format!("{base}/{{name}}"), json!({"put": op("put"), "patch": op("patch"), "get": {"x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk, "responses": {"200": {"description": "OK"}}}}));
        if let Some(s) = d.version(version).and_then(|v| v.schema.as_ref()) {
            let name = format!(
                "{}.{}.{}",
                group.split('.').rev().collect::<Vec<_>>().join("."),
                version,
                d.kind
            );
            let mut s = s.raw().clone();
            s["x-kubernetes-group-version-kind"] = json!([gvk]);
            schemas.insert(name, s);
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0")},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// `/openapi/v3`: where each group version's document is.
pub(crate) fn openapi_root(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    for (g, vs) in reg.groups() {
        for v in vs {
            let p = gv_path(&g, &v);
            let hash = openapi_gv(reg, &g, &v)
                .map(|d| {
                    crate::pki::hex_encode(
                        ring::digest::digest(&ring::digest::SHA256, d.to_string().as_bytes())
                            .as_ref(),
                    )
                })
                .unwrap_or_default();
            paths.insert(p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", &hash[..hash.len().min(32)])}));
        }
    }
    json!({"paths": paths})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_resources_list_status_subresources() {
        let (reg, _) = Registry::build([]);
        let doc = resources(&reg, "", "v1").unwrap();
        let names: Vec<&str> = doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"namespaces/status"));
        assert!(names.contains(&"secrets"));
        assert!(!names.contains(&"secrets/status"));
        assert!(resources(&reg, "nope.io", "v1").is_none());
        let gs = groups(&reg);
        assert!(
            gs["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == "coordination.k8s.io")
        );
        let root = openapi_root(&reg);
        assert!(
            root["paths"]["apis/apps/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/apis/apps/v1?hash=")
        );
        let apps = openapi_gv(&reg, "apps", "v1").unwrap();
        let patch =
            &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "Deployment"
        );
    }
}
