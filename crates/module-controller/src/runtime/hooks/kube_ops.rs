//! A hook's `KUBERNETES_PATCH_PATH` operations carried out on the API server (the edge), and
//! the labels a module hook's metrics get.

use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy};
use module_hooks::MetricOperation;
use module_hooks::output::{CreateMode, KubeOperation, ObjectRef, Propagation};
use serde_json::Value;

use crate::Error;
use crate::runtime::apply::Applier;

/// A module hook's metrics get `hook` and `module` labels (what addon-operator adds), unless
/// the hook set them itself; a global hook's (`module` empty) get `hook` only. Pure.
pub fn label_metrics(ops: Vec<MetricOperation>, module: &str, hook: &str) -> Vec<MetricOperation> {
    ops.into_iter()
        .map(|mut op| {
            if !op.name.is_empty() {
                // A global hook's metrics carry no module label.
                for (k, v) in [("hook", hook), ("module", module)] {
                    if v.is_empty() {
                        continue;
                    }
                    if !op.labels.iter().any(|(l, _)| l == k) {
                        op.labels.push((k.to_owned(), v.to_owned()));
                    }
                }
            }
            op
        })
        .collect()
}

async fn api_for(
    applier: &Applier,
    api_version: &str,
    kind: &str,
    namespace: &str,
) -> Result<Api<DynamicObject>, Error> {
    let api_version = if api_version.is_empty() {
        "v1"
    } else {
        api_version
    };
    let (resource, namespaced) = applier.resolve(api_version, kind).await?;
    let client = applier.client();
    Ok(if namespaced {
        let ns = if namespace.is_empty() {
            "default"
        } else {
            namespace
        };
        Api::namespaced_with(client, ns, &resource)
    } else {
        Api::all_with(client, &resource)
    })
}

fn kube_err(what: String) -> impl FnOnce(kube::Error) -> Error {
    move |e| Error::kube(what, e)
}

fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Carries out one operation.
pub async fn execute(applier: &Applier, op: &KubeOperation) -> Result<(), Error> {
    match op {
        KubeOperation::Create {
            mode,
            object,
            subresource,
        } => {
            let api_version = object
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
            let ns = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let api = api_for(applier, api_version, kind, ns).await?;
            let typed: DynamicObject =
                serde_json::from_value(object.clone()).map_err(|e| Error::Render {
                    module: String::new(),
                    message: format!("kubernetes patch: {kind} {name}: {e}"),
                })?;
            let what = format!("create {kind} {name}");
            if subresource.as_deref() == Some("status") {
                api.replace_status(&name, &PostParams::default(), &typed)
                    .await
                    .map_err(kube_err(what))?;
                return Ok(());
            }
            match api.create(&PostParams::default(), &typed).await {
                Ok(_) => Ok(()),
                Err(e) if is_code(&e, 409) => match mode {
                    CreateMode::Create => Err(Error::kube(what, e)),
                    CreateMode::CreateIfNotExists => Ok(()),
                    CreateMode::CreateOrUpdate => {
                        let current = api.get(&name).await.map_err(kube_err(what.clone()))?;
                        let mut typed = typed;
                        typed.metadata.resource_version = current.metadata.resource_version;
                        api.replace(&name, &PostParams::default(), &typed)
                            .await
                            .map_err(kube_err(what))?;
                        Ok(())
                    }
                },
                Err(e) => Err(Error::kube(what, e)),
            }
        }
        KubeOperation::Delete {
            target,
            propagation,
            ..
        } => {
            let api = api_for(
                applier,
                &target.api_version,
                &target.kind,
                &target.namespace,
            )
            .await?;
            let params = DeleteParams {
                propagation_policy: Some(match propagation {
                    Propagation::Foreground => PropagationPolicy::Foreground,
                    Propagation::Background => PropagationPolicy::Background,
                    Propagation::Orphan => PropagationPolicy::Orphan,
                }),
                ..Default::default()
            };
            match api.delete(&target.name, &params).await {
                Ok(_) => Ok(()),
                Err(e) if is_code(&e, 404) => Ok(()),
                Err(e) => Err(Error::kube(describe("delete", target), e)),
            }
        }
        KubeOperation::Patch {
            target,
            patch,
            subresource,
            ignore_missing_object,
            ..
        } => {
            let api = api_for(
                applier,
                &target.api_version,
                &target.kind,
                &target.namespace,
            )
            .await?;
            let what = describe("patch", target);
            let status = subresource.as_deref() == Some("status");
            let params = PatchParams::default();
            let result = match patch {
                module_hooks::output::Patch::Merge(m) => {
                    let p = Patch::Merge(m);
                    if status {
                        api.patch_status(&target.name, &params, &p).await
                    } else {
                        api.patch(&target.name, &params, &p).await
                    }
                }
                module_hooks::output::Patch::Json(j) => {
                    let ops: json_patch::Patch =
                        serde_json::from_value(j.clone()).map_err(|e| Error::Render {
                            module: String::new(),
                            message: format!("{what}: {e}"),
                        })?;
                    let p: Patch<()> = Patch::Json(ops);
                    if status {
                        api.patch_status(&target.name, &params, &p).await
                    } else {
                        api.patch(&target.name, &params, &p).await
                    }
                }
                module_hooks::output::Patch::Jq(filter) => match api.get(&target.name).await {
                    Ok(current) => {
                        let input = serde_json::to_value(&current).unwrap_or_default();
                        let out = jq::run(filter, &input).map_err(|e| Error::Render {
                            module: String::new(),
                            message: format!("{what}: jqFilter: {e}"),
                        })?;
                        let new = out.into_iter().next().unwrap_or(Value::Null);
                        let typed: DynamicObject =
                            serde_json::from_value(new).map_err(|e| Error::Render {
                                module: String::new(),
                                message: format!("{what}: {e}"),
                            })?;
                        if status {
                            api.replace_status(&target.name, &PostParams::default(), &typed)
                                .await
                        } else {
                            api.replace(&target.name, &PostParams::default(), &typed)
                                .await
                        }
                    }
                    Err(e) => Err(e),
                },
            };
            match result {
                Ok(_) => Ok(()),
                Err(e) if is_code(&e, 404) && *ignore_missing_object => Ok(()),
                Err(e) => Err(Error::kube(what, e)),
            }
        }
    }
}

fn describe(verb: &str, target: &ObjectRef) -> String {
    if target.namespace.is_empty() {
        format!("{verb} {} {}", target.kind, target.name)
    } else {
        format!(
            "{verb} {} {}/{}",
            target.kind, target.namespace, target.name
        )
    }
}

#[cfg(test)]
mod tests {
    use module_hooks::output::MetricAction;

    use super::*;

    #[test]
    fn module_hook_metrics_are_labelled() {
        let op = |labels: Vec<(&str, &str)>| MetricOperation {
            name: "m".into(),
            labels: labels
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            group: None,
            action: MetricAction::Set(1.0),
        };
        let out = label_metrics(vec![op(vec![]), op(vec![("hook", "mine")])], "echo", "h");
        assert_eq!(
            out[0].labels,
            vec![
                ("hook".into(), "h".into()),
                ("module".into(), "echo".into())
            ]
        );
        assert_eq!(
            out[1].labels,
            vec![
                ("hook".into(), "mine".into()),
                ("module".into(), "echo".into())
            ]
        );
        // A global hook's: `hook` only.
        assert_eq!(
            label_metrics(vec![op(vec![])], "", "g")[0].labels,
            vec![("hook".into(), "g".into())]
        );
        let expire = MetricOperation {
            name: String::new(),
            labels: vec![],
            group: Some("g".into()),
            action: MetricAction::Expire,
        };
        assert!(
            label_metrics(vec![expire], "echo", "h")[0]
                .labels
                .is_empty()
        );
    }
}
