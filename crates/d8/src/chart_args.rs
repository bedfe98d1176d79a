//! Every container of the platform's chart (`charts/deckhouse`) that runs `d8` passes flags
//! `d8` takes: the command line of each — Deployments, DaemonSets, the static pod manifest the
//! node bootstrap ConfigMap carries, init containers too — is parsed by the binary's own parser
//! ([`Cli`]), with `$(VAR)` references expanded from the container's `env`. A flag renamed in
//! the code or misspelt in the chart fails here, not on a node.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use clap::{CommandFactory as _, Parser as _};
use serde_json::Value;

use crate::Cli;

/// The chart's image repository (values.yaml): a container with another image is not `d8`.
const IMAGE_REPOSITORY: &str = "registry.example.com/deckhouse/d8";

/// Value sets that, together, render every container the chart can hold.
const VALUE_SETS: &[&[&str]] = &[
    &[],
    &[
        "deckhouse.metricsProtection=kubeRbacProxy",
        "global.internal.cniMigrationEnabled=true",
        "registry.cache.upstream.url=https://registry.example.com/deckhouse/ee",
        "registry.cache.upstream.credentials=true",
        "registry.cache.upstream.ca=true",
    ],
];

/// What a `fieldRef` gives a container, as a kubelet would fill it in.
fn field(path: &str) -> String {
    match path {
        "status.podIP" | "status.hostIP" => "10.0.0.1".into(),
        "metadata.namespace" => "d8-system".into(),
        "spec.nodeName" => "node-0".into(),
        other => format!("{other}-value"),
    }
}

/// The container's environment, by name.
fn environment(container: &Value) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap_or_default().to_owned();
        let value = match (&var["value"], &var["valueFrom"]["fieldRef"]["fieldPath"]) {
            (Value::String(v), _) => v.clone(),
            (_, Value::String(path)) => field(path),
            _ => continue,
        };
        env.insert(name, value);
    }
    env
}

/// `$(VAR)` replaced by the variable's value, as the kubelet expands arguments (unknown ones
/// stay as they are).
fn expand(arg: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(start) = rest.find("$(") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find(')') {
            Some(end) if env.contains_key(&after[..end]) => {
                out.push_str(&env[&after[..end]]);
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("$(");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The pod specs of a manifest: a workload's template, a Pod, or a Pod kept in a ConfigMap's
/// data (the agent's static pod manifest).
fn pod_specs(doc: &Value) -> Vec<(String, Value)> {
    let name = |d: &Value| {
        format!(
            "{} {}",
            d["kind"].as_str().unwrap_or_default(),
            d["metadata"]["name"].as_str().unwrap_or_default()
        )
    };
    match doc["kind"].as_str() {
        Some("Deployment" | "DaemonSet" | "StatefulSet" | "Job") => {
            vec![(name(doc), doc["spec"]["template"]["spec"].clone())]
        }
        Some("Pod") => vec![(name(doc), doc["spec"].clone())],
        Some("ConfigMap") => doc["data"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(key, text)| {
                let pod: Value = serde_saphyr::from_str(text.as_str()?).ok()?;
                (pod["kind"] == "Pod")
                    .then(|| (format!("{} {key}", name(doc)), pod["spec"].clone()))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Each `d8` container's (place, argv), and the names of the containers running other images.
fn command_lines(rendered: &str) -> (Vec<(String, Vec<String>)>, BTreeSet<String>) {
    let mut ours = Vec::new();
    let mut others = BTreeSet::new();
    for doc in rendered.split("\n---\n") {
        let Ok(doc) = serde_saphyr::from_str::<Value>(doc) else {
            continue;
        };
        for (place, spec) in pod_specs(&doc) {
            let containers = ["initContainers", "containers"]
                .iter()
                .flat_map(|k| spec[*k].as_array().cloned().unwrap_or_default());
            for container in containers {
                let name = container["name"].as_str().unwrap_or_default().to_owned();
                let image = container["image"].as_str().unwrap_or_default();
                if !image.starts_with(IMAGE_REPOSITORY) {
                    others.insert(name);
                    continue;
                }
                let env = environment(&container);
                let mut argv = vec!["d8".to_owned()];
                for part in ["command", "args"] {
                    for arg in container[part].as_array().into_iter().flatten() {
                        argv.push(expand(arg.as_str().unwrap_or_default(), &env));
                    }
                }
                // The image's entrypoint is /usr/bin/d8: a command naming it is the same.
                if argv.get(1).is_some_and(|a| a.ends_with("/d8")) {
                    argv.remove(1);
                }
                ours.push((format!("{place} container {name}"), with_env(&argv, &env)));
            }
        }
    }
    (ours, others)
}

/// `argv` with the flags the container's `env` gives through clap's `env` attributes (what
/// the parser reads from the process environment in the container) added as flags, unless
/// the command line gives them.
fn with_env(argv: &[String], env: &BTreeMap<String, String>) -> Vec<String> {
    let mut command = Cli::command();
    for word in argv.iter().skip(1).filter(|w| !w.starts_with('-')) {
        match command.find_subcommand(word) {
            Some(sub) => command = sub.clone(),
            None => break,
        }
    }
    let mut out = argv.to_vec();
    for arg in command.get_arguments() {
        let (Some(var), Some(long)) = (arg.get_env(), arg.get_long()) else {
            continue;
        };
        let flag = format!("--{long}");
        let given = argv
            .iter()
            .any(|a| *a == flag || a.starts_with(&format!("{flag}=")));
        if let Some(value) = env.get(&*var.to_string_lossy()).filter(|_| !given) {
            out.push(format!("{flag}={value}"));
        }
    }
    out
}

#[test]
fn arguments_expand_as_the_kubelet_expands_them() {
    let env: BTreeMap<String, String> = [("POD_IP", "10.0.0.1"), ("A", "x")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
    for (arg, want) in [
        ("--listen=$(POD_IP):5001", "--listen=10.0.0.1:5001"),
        ("$(A)$(A)", "xx"),
        ("$(UNKNOWN)-$(A)", "$(UNKNOWN)-x"),
        ("$(A", "$(A"),
        ("plain", "plain"),
    ] {
        assert_eq!(expand(arg, &env), want, "{arg}");
    }
}

#[test]
fn every_container_of_the_chart_passes_flags_the_binary_takes() {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/deckhouse");
    let mut seen = BTreeSet::new();
    let mut others = BTreeSet::new();
    let mut refused = Vec::new();
    for set in VALUE_SETS {
        let rendered = crate::module_render::render_dir(&chart, "deckhouse", "d8-system", set)
            .unwrap_or_else(|e| panic!("rendering with {set:?}: {e}"));
        let (ours, theirs) = command_lines(&rendered);
        others.extend(theirs);
        for (place, argv) in ours {
            if let Err(error) = Cli::try_parse_from(&argv) {
                refused.push(format!("{place} ({set:?}): {argv:?}\n{}", error.render()));
            }
            seen.insert(place);
        }
    }
    assert!(refused.is_empty(), "{}", refused.join("\n"));
    // Every d8 process of the chart was looked at…
    for place in [
        "Deployment deckhouse container init-downloaded-modules",
        "Deployment deckhouse container deckhouse",
        "Deployment d8-webhook container webhook",
        "Deployment webhook-handler container webhook-handler",
        "DaemonSet registry-storage container registry-storage",
        "ConfigMap registry-node-bootstrap registry-agent.yaml container registry-agent",
        "Deployment cni-migration-manager container manager",
        "DaemonSet cni-migration-agent container agent",
    ] {
        assert!(seen.contains(place), "{place} not found in {seen:#?}");
    }
    // …and the only containers running something else are the sidecars from elsewhere.
    assert_eq!(others, BTreeSet::from(["kube-rbac-proxy".to_owned()]));
}

#[test]
fn every_pod_runs_as_a_service_account_the_chart_creates() {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/deckhouse");
    for set in VALUE_SETS {
        let rendered =
            crate::module_render::render_dir(&chart, "deckhouse", "d8-system", set).unwrap();
        let docs: Vec<Value> = rendered
            .split("\n---\n")
            .filter_map(|d| serde_saphyr::from_str::<Value>(d).ok())
            .collect();
        let accounts: BTreeSet<&str> = docs
            .iter()
            .filter(|d| d["kind"] == "ServiceAccount")
            .filter_map(|d| d["metadata"]["name"].as_str())
            .collect();
        let mut used = 0;
        for doc in &docs {
            for (place, spec) in pod_specs(doc) {
                if let Some(account) = spec["serviceAccountName"].as_str() {
                    used += 1;
                    assert!(
                        accounts.contains(account),
                        "{place} runs as ServiceAccount {account}, which the chart does not create ({accounts:?})"
                    );
                }
            }
        }
        assert!(used >= 4, "{set:?}: {used} pods name a ServiceAccount");
    }
}
