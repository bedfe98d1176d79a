//! The computed cells of the built-in kinds' `kubectl get` columns (`#name arg` paths), shaped
//! as Kubernetes' printers shape them: `1/3`, `80/TCP,443/TCP`, `app=web`, `Role/admin`.
//! A `None` cell is printed by kubectl as `<none>`.

use super::{eval as path, human_duration};
use serde_json::{Value, json};

/// What Kubernetes' printers show for an unset value.
const NONE: &str = "<none>";

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn int(obj: &Value, p: &str) -> Option<i64> {
    path(obj, p).and_then(|v| v.as_i64())
}

fn items(obj: &Value, p: &str) -> Vec<Value> {
    match path(obj, p) {
        Some(Value::Array(a)) => a,
        Some(other) => vec![other],
        None => Vec::new(),
    }
}

fn join_non_empty(parts: Vec<String>) -> Option<Value> {
    (!parts.is_empty()).then(|| json!(parts.join(",")))
}

/// `k=v,k2=v2` of a string map.
fn map_text(m: Option<&Value>) -> Option<String> {
    let m = m?.as_object()?;
    let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={}", text(v))).collect();
    (!parts.is_empty()).then(|| parts.join(","))
}

/// A label selector as `kubectl` prints it (`app=web,tier in (a,b)`).
pub(crate) fn selector_text(sel: &Value) -> Option<String> {
    let mut parts: Vec<String> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", text(v))).collect())
        .unwrap_or_default();
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").map(text).unwrap_or_default();
        let values: Vec<String> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(text).collect())
            .unwrap_or_default();
        match e
            .get("operator")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "In" => parts.push(format!("{key} in ({})", values.join(","))),
            "NotIn" => parts.push(format!("{key} notin ({})", values.join(","))),
            "Exists" => parts.push(key),
            "DoesNotExist" => parts.push(format!("!{key}")),
            _ => {}
        }
    }
    (!parts.is_empty()).then(|| parts.join(","))
}

fn date(obj: &Value, p: &str) -> Option<Value> {
    let ts = path(obj, p)?;
    let t = ts.as_str()?.parse::<jiff::Timestamp>().ok()?;
    Some(json!(human_duration(
        jiff::Timestamp::now().as_second() - t.as_second()
    )))
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
}

fn condition_true(obj: &Value, type_: &str) -> bool {
    condition(obj, type_)
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        == Some("True")
}

/// Evaluates the computed cell `name` with argument `arg` (a path for most).
pub(super) fn eval(obj: &Value, name: &str, arg: &str) -> Option<Value> {
    match name {
        "count" => Some(json!(match path(obj, arg) {
            Some(Value::Object(m)) => m.len(),
            Some(Value::Array(a)) => a.len(),
            _ => 0,
        })),
        "or" => {
            let (default, p) = arg.split_once('|')?;
            Some(path(obj, p).unwrap_or_else(|| json!(default)))
        }
        "bool" => Some(json!(if path(obj, arg) == Some(Value::Bool(true)) {
            "True"
        } else {
            "False"
        })),
        "date" => date(obj, arg).or_else(|| Some(json!(NONE))),
        "map" => Some(json!(
            map_text(path(obj, arg).as_ref()).unwrap_or_else(|| NONE.into())
        )),
        "selector" => Some(json!(
            path(obj, arg)
                .and_then(|s| selector_text(&s))
                .unwrap_or_else(|| NONE.into())
        )),
        "object" => {
            let o = path(obj, arg)?;
            let kind = o.get("kind").map(text).unwrap_or_default().to_lowercase();
            let name = o.get("name").map(text).unwrap_or_default();
            Some(json!(format!("{kind}/{name}")))
        }
        "reference" => {
            let o = path(obj, arg)?;
            let kind = o.get("kind").map(text).unwrap_or_default();
            let name = o.get("name").map(text).unwrap_or_default();
            Some(json!(format!("{kind}/{name}")))
        }
        "ready" => {
            let ready = int(obj, ".status.readyReplicas").unwrap_or(0);
            let want = int(obj, ".spec.replicas").unwrap_or(1);
            Some(json!(format!("{ready}/{want}")))
        }
        "podready" => {
            let total = items(obj, ".spec.containers").len();
            let ready = items(obj, ".status.containerStatuses")
                .iter()
                .filter(|c| c.get("ready") == Some(&Value::Bool(true)))
                .count();
            Some(json!(format!("{ready}/{total}")))
        }
        "podstatus" => {
            if obj.pointer("/metadata/deletionTimestamp").is_some() {
                return Some(json!("Terminating"));
            }
            let waiting = items(obj, ".status.containerStatuses")
                .into_iter()
                .find_map(|c| {
                    c.pointer("/state/waiting/reason")
                        .or_else(|| c.pointer("/state/terminated/reason"))
                        .cloned()
                });
            waiting
                .or_else(|| obj.pointer("/status/reason").cloned())
                .or_else(|| obj.pointer("/status/phase").cloned())
                .or_else(|| Some(json!("Pending")))
        }
        "restarts" => Some(json!(
            items(obj, ".status.containerStatuses")
                .iter()
                .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
                .sum::<i64>()
        )),
        "svcports" => join_non_empty(
            items(obj, ".spec.ports")
                .iter()
                .map(|p| {
                    let port = p.get("port").map(text).unwrap_or_default();
                    let proto = p.get("protocol").map_or_else(|| "TCP".into(), text);
                    match p.get("nodePort") {
                        Some(n) => format!("{port}:{}/{proto}", text(n)),
                        None => format!("{port}/{proto}"),
                    }
                })
                .collect(),
        ),
        "svcexternal" => {
            let mut ips: Vec<String> = items(obj, ".status.loadBalancer.ingress")
                .iter()
                .filter_map(|i| i.get("ip").or_else(|| i.get("hostname")).map(text))
                .collect();
            ips.extend(items(obj, ".spec.externalIPs").iter().map(text));
            if ips.is_empty()
                && obj.pointer("/spec/type").and_then(Value::as_str) == Some("LoadBalancer")
            {
                return Some(json!("<pending>"));
            }
            join_non_empty(ips).or_else(|| Some(json!(NONE)))
        }
        "lbaddress" => join_non_empty(
            items(obj, ".status.loadBalancer.ingress")
                .iter()
                .filter_map(|i| i.get("ip").or_else(|| i.get("hostname")).map(text))
                .collect(),
        ),
        "ingresshosts" => {
            let hosts: Vec<String> = items(obj, ".spec.rules")
                .iter()
                .map(|r| r.get("host").map_or_else(|| "*".into(), text))
                .collect();
            Some(json!(if hosts.is_empty() {
                "*".to_string()
            } else {
                hosts.join(",")
            }))
        }
        "ingressports" => Some(json!(if items(obj, ".spec.tls").is_empty() {
            "80"
        } else {
            "80, 443"
        })),
        "endpoints" => join_non_empty(
            items(obj, ".subsets")
                .iter()
                .flat_map(|s| {
                    let ports: Vec<String> = s
                        .get("ports")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(|p| p.get("port")).map(text).collect())
                        .unwrap_or_default();
                    let addrs: Vec<String> = s
                        .get("addresses")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(|x| x.get("ip")).map(text).collect())
                        .unwrap_or_default();
                    addrs
                        .into_iter()
                        .flat_map(move |a| {
                            if ports.is_empty() {
                                vec![a]
                            } else {
                                ports.iter().map(|p| format!("{a}:{p}")).collect()
                            }
                        })
                        .collect::<Vec<_>>()
                })
                .collect(),
        ),
        "accessmodes" => join_non_empty(
            items(obj, arg)
                .iter()
                .map(|m| {
                    match m.as_str().unwrap_or_default() {
                        "ReadWriteOnce" => "RWO",
                        "ReadOnlyMany" => "ROX",
                        "ReadWriteMany" => "RWX",
                        "ReadWriteOncePod" => "RWOP",
                        other => other,
                    }
                    .to_string()
                })
                .collect(),
        ),
        "claim" => {
            let r = obj.pointer("/spec/claimRef")?;
            Some(json!(format!(
                "{}/{}",
                r.get("namespace").map(text).unwrap_or_default(),
                r.get("name").map(text).unwrap_or_default()
            )))
        }
        "quota" => {
            let hard = obj.pointer("/status/hard")?.as_object()?;
            let used = obj.pointer("/status/used");
            let parts: Vec<String> = hard
                .iter()
                .filter(|(k, _)| k.starts_with("limits.") == (arg == "limits"))
                .map(|(k, v)| {
                    let u = used.and_then(|u| u.get(k)).map_or_else(|| "0".into(), text);
                    format!("{k}: {u}/{}", text(v))
                })
                .collect();
            (!parts.is_empty()).then(|| json!(parts.join(", ")))
        }
        "jobstatus" => Some(json!(if condition_true(obj, "Complete") {
            "Complete"
        } else if condition_true(obj, "Failed") {
            "Failed"
        } else if condition_true(obj, "FailureTarget") {
            "FailureTarget"
        } else if condition_true(obj, "SuccessCriteriaMet") {
            "SuccessCriteriaMet"
        } else if condition_true(obj, "Suspended") {
            "Suspended"
        } else {
            "Running"
        })),
        "completions" => {
            let done = int(obj, ".status.succeeded").unwrap_or(0);
            match path(obj, ".spec.completions").and_then(|v| v.as_i64()) {
                Some(n) => Some(json!(format!("{done}/{n}"))),
                None => {
                    let parallel = int(obj, ".spec.parallelism").unwrap_or(1);
                    Some(json!(if parallel > 1 {
                        format!("{done}/1 of {parallel}")
                    } else {
                        format!("{done}/1")
                    }))
                }
            }
        }
        "duration" => {
            let ts = |p: &str| {
                path(obj, p)
                    .and_then(|v| v.as_str()?.parse::<jiff::Timestamp>().ok())
                    .map(|t| t.as_second())
            };
            let start = ts(".status.startTime")?;
            let end =
                ts(".status.completionTime").unwrap_or_else(|| jiff::Timestamp::now().as_second());
            Some(json!(human_duration(end - start)))
        }
        "hpatargets" => {
            let current = items(obj, ".status.currentMetrics");
            let parts: Vec<String> = items(obj, ".spec.metrics")
                .iter()
                .filter_map(|m| {
                    let res = m.get("resource")?;
                    let name = res.get("name").map(text)?;
                    let target = res.pointer("/target/averageUtilization").map(text)?;
                    let cur = current
                        .iter()
                        .find(|c| c.pointer("/resource/name").map(text).as_deref() == Some(&name))
                        .and_then(|c| c.pointer("/resource/current/averageUtilization"))
                        .map_or_else(|| "<unknown>".into(), |v| format!("{}%", text(v)));
                    Some(format!("{name}: {cur}/{target}%"))
                })
                .collect();
            Some(json!(if parts.is_empty() {
                "<none>".to_string()
            } else {
                parts.join(", ")
            }))
        }
        "serviceaccounts" => join_non_empty(
            items(obj, ".subjects")
                .iter()
                .filter(|s| s.get("kind").and_then(Value::as_str) == Some("ServiceAccount"))
                .map(|s| {
                    format!(
                        "{}/{}",
                        s.get("namespace").map(text).unwrap_or_default(),
                        s.get("name").map(text).unwrap_or_default()
                    )
                })
                .collect(),
        ),
        "controller" => items(obj, ".metadata.ownerReferences")
            .iter()
            .find(|o| o.get("controller") == Some(&Value::Bool(true)))
            .map(|o| {
                json!(format!(
                    "{}/{}",
                    o.get("kind").map(text).unwrap_or_default().to_lowercase(),
                    o.get("name").map(text).unwrap_or_default()
                ))
            }),
        "apiservice" => Some(json!(match obj.pointer("/spec/service") {
            Some(s) => format!(
                "{}/{}",
                s.get("namespace").map(text).unwrap_or_default(),
                s.get("name").map(text).unwrap_or_default()
            ),
            None => "Local".to_string(),
        })),
        "available" => {
            let c = condition(obj, "Available")?;
            let status = c.get("status").map(text).unwrap_or_default();
            Some(json!(match c.get("reason") {
                Some(r) if status != "True" => format!("{status} ({})", text(r)),
                _ => status,
            }))
        }
        "nodestatus" => {
            let mut s = match condition(obj, "Ready").and_then(|c| c.get("status")) {
                Some(Value::String(v)) if v == "True" => "Ready".to_string(),
                _ => "NotReady".to_string(),
            };
            if obj.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
                s.push_str(",SchedulingDisabled");
            }
            Some(json!(s))
        }
        "noderoles" => {
            let roles: Vec<String> = obj
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.keys()
                        .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            join_non_empty(roles)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_look_like_kubectls() {
        let svc = json!({"spec": {"ports": [{"port": 80}, {"port": 443, "protocol": "TCP", "nodePort": 30443}]}});
        assert_eq!(
            eval(&svc, "svcports", ""),
            Some(json!("80/TCP,443:30443/TCP"))
        );
        assert_eq!(
            eval(&svc, "or", "ClusterIP|.spec.type"),
            Some(json!("ClusterIP"))
        );
        assert_eq!(eval(&svc, "svcexternal", ""), Some(json!("<none>")));
        let sel = json!({"spec": {"podSelector": {"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}}});
        assert_eq!(
            eval(&sel, "selector", ".spec.podSelector"),
            Some(json!("app=web,tier in (a,b)"))
        );
        assert_eq!(
            eval(
                &json!({"spec": {"podSelector": {}}}),
                "selector",
                ".spec.podSelector"
            ),
            Some(json!("<none>"))
        );
        let rb = json!({"roleRef": {"kind": "ClusterRole", "name": "view"}});
        assert_eq!(
            eval(&rb, "reference", ".roleRef"),
            Some(json!("ClusterRole/view"))
        );
        let pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "containerStatuses": [{"ready": true, "restartCount": 2}, {"ready": false, "restartCount": 1}]}});
        assert_eq!(eval(&pod, "podready", ""), Some(json!("1/2")));
        assert_eq!(eval(&pod, "restarts", ""), Some(json!(3)));
        assert_eq!(eval(&pod, "podstatus", ""), Some(json!("Running")));
        let job = json!({"spec": {"completions": 2}, "status": {"succeeded": 2,
            "conditions": [{"type": "Complete", "status": "True"}]}});
        assert_eq!(eval(&job, "jobstatus", ""), Some(json!("Complete")));
        assert_eq!(eval(&job, "completions", ""), Some(json!("2/2")));
        assert_eq!(eval(&json!({}), "count", ".webhooks"), Some(json!(0)));
        assert_eq!(
            eval(&json!({}), "bool", ".spec.suspend"),
            Some(json!("False"))
        );
    }
}
