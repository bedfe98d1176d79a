//! What each component calls, from `d8 apiserver --request-log`, against what its Role in
//! `charts/deckhouse/files/rbac.yaml` grants — verbs included. An end-to-end test that runs a
//! component with the log on ends with [`assert_role_matches`].

use std::collections::BTreeSet;
use std::path::Path;

/// A verb on a resource: (`get`, `deckhouse.io/registrynodes/status`); the core group is `""`.
type Call = (String, String);

fn resource(group: &str, resource: &str) -> String {
    format!("{group}/{resource}")
}

/// Every (verb, group/resource) the component's roles grant, in every scope.
fn granted(component: &str) -> BTreeSet<Call> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/deckhouse/files/rbac.yaml");
    let table: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let entry = &table[component];
    assert!(entry.is_object(), "rbac.yaml has no {component}");
    let mut out = BTreeSet::new();
    for scope in ["cluster", "namespaced", "kubeSystem"] {
        for rule in entry[scope].as_array().into_iter().flatten() {
            let strings = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect()
            };
            for group in strings("apiGroups") {
                for res in strings("resources") {
                    for verb in strings("verbs") {
                        out.insert((verb, resource(&group, &res)));
                    }
                }
            }
        }
    }
    out
}

/// Every (verb, group/resource) `user` called, from the request log.
fn called(log: &Path, user: &str) -> BTreeSet<Call> {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|entry| entry["user"] == user)
        .map(|entry| {
            let mut res = entry["resource"].as_str().unwrap().to_owned();
            if let Some(sub) = entry["subresource"].as_str() {
                res = format!("{res}/{sub}");
            }
            (
                entry["verb"].as_str().unwrap().to_owned(),
                resource(entry["group"].as_str().unwrap(), &res),
            )
        })
        .collect()
}

/// The differences between calls and grants: a call its role does not grant, a grant nothing
/// called (unless `unreached` lists it with the reason the test cannot reach its path).
fn problems(
    component: &str,
    called: &BTreeSet<Call>,
    granted: &BTreeSet<Call>,
    unreached: &[(&str, &str, &str)],
) -> Vec<String> {
    let unreached: BTreeSet<Call> = unreached
        .iter()
        .map(|(verb, res, _why)| ((*verb).to_owned(), (*res).to_owned()))
        .collect();
    let mut out = Vec::new();
    for (verb, res) in called.difference(granted) {
        out.push(format!(
            "{component} calls {verb} {res}, its role does not grant it"
        ));
    }
    for (verb, res) in granted.difference(called) {
        if !unreached.contains(&(verb.clone(), res.clone())) {
            out.push(format!(
                "{component} is granted {verb} {res}, which nothing called"
            ));
        }
    }
    out
}

/// Fails unless `user`'s calls in `log` are exactly what `component`'s role grants, but for
/// the `unreached` grants (verb, group/resource, why the test cannot reach the path using it).
pub(crate) fn assert_role_matches(
    log: &Path,
    user: &str,
    component: &str,
    unreached: &[(&str, &str, &str)],
) {
    let called = called(log, user);
    assert!(
        !called.is_empty(),
        "{user} called nothing in {}",
        log.display()
    );
    let found = problems(component, &called, &granted(component), unreached);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Fails when `user` called something in `log` that `component`'s role does not grant, but for
/// the `beyond` calls (verb, group/resource, what grants them instead) — for a component whose
/// every path no single test reaches, so unused grants are not judged.
pub(crate) fn assert_calls_granted(
    log: &Path,
    user: &str,
    component: &str,
    beyond: &[(&str, &str, &str)],
) {
    let called = called(log, user);
    assert!(
        !called.is_empty(),
        "{user} called nothing in {}",
        log.display()
    );
    let beyond: BTreeSet<Call> = beyond
        .iter()
        .map(|(verb, res, _why)| ((*verb).to_owned(), (*res).to_owned()))
        .collect();
    let called: BTreeSet<Call> = called.difference(&beyond).cloned().collect();
    let found: Vec<String> = problems(component, &called, &granted(component), &[])
        .into_iter()
        .filter(|problem| !problem.contains("which nothing called"))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The user a component's ServiceAccount authenticates as (`--user` of `d8 apiserver`).
pub(crate) fn service_account(component: &str) -> String {
    format!("system:serviceaccount:d8-system:{component}")
}

/// `d8 apiserver` flags for a test checking `components`: each one's ServiceAccount user, and
/// the request log written to `log`.
pub(crate) fn apiserver_flags(components: &[&str], log: &Path) -> Vec<String> {
    let mut flags = vec!["--request-log".to_owned(), log.display().to_string()];
    for component in components {
        flags.push("--user".to_owned());
        flags.push(service_account(component));
    }
    flags
}

/// Applies the chart's ServiceAccounts, roles and bindings (`helm template --show-only
/// templates/rbac.yaml`, defaults) with `admin`: the API server then authorizes each component
/// by exactly what the chart grants it.
pub(crate) fn apply_chart_rbac(admin: &Path) {
    let helm = std::env::var("HELM").unwrap_or_else(|_| "helm".into());
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/deckhouse");
    let output = std::process::Command::new(helm)
        .arg("template")
        .arg("deckhouse")
        .arg(&chart)
        .args(["-n", "d8-system", "--show-only", "templates/rbac.yaml"])
        .output()
        .expect("run helm");
    assert!(
        output.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &output.stdout).unwrap();
    crate::kubectl_ok(admin, &["apply", "-f", &file.path().display().to_string()]);
}

#[test]
fn calls_and_grants_are_compared_both_ways() {
    let set = |items: &[(&str, &str)]| -> BTreeSet<Call> {
        items
            .iter()
            .map(|(v, r)| ((*v).to_owned(), (*r).to_owned()))
            .collect()
    };
    let granted = set(&[
        ("get", "/secrets"),
        ("patch", "deckhouse.io/registrynodes/status"),
    ]);
    assert!(problems("a", &granted.clone(), &granted, &[]).is_empty());
    assert_eq!(
        problems(
            "a",
            &set(&[
                ("get", "/secrets"),
                ("update", "deckhouse.io/registrynodes/status")
            ]),
            &granted,
            &[]
        ),
        [
            "a calls update deckhouse.io/registrynodes/status, its role does not grant it",
            "a is granted patch deckhouse.io/registrynodes/status, which nothing called",
        ]
    );
    assert!(
        problems(
            "a",
            &set(&[("get", "/secrets")]),
            &granted,
            &[("patch", "deckhouse.io/registrynodes/status", "reason")]
        )
        .is_empty()
    );
}
