//! The platform's own chart (`charts/deckhouse`): rendered by `d8 module render` exactly as
//! `helm template` renders it, valid for Kubernetes 1.29–1.33 (`kubernetes-validate`), accepted
//! by `d8 apiserver` through kubectl; its RBAC table agrees with the code; its node bootstrap
//! script is idempotent on containerd 1.6's and 2's default configurations, which they then load.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use testkit::containerd::Binaries;
use testkit::process::require_tool;

use crate::{Apiserver, kubectl_ok};

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chart() -> String {
    repo().join("charts/deckhouse").display().to_string()
}

/// Value sets every test renders: the defaults, a CNI migration, an image by digest without monitoring, a cache with an upstream.
const VALUE_SETS: &[&[&str]] = &[
    &[],
    &[
        "registry.cache.upstream.url=https://registry.example.com/deckhouse/ee",
        "registry.cache.upstream.credentials=true",
        "registry.cache.upstream.ca=true",
    ],
    &["global.internal.cniMigrationEnabled=true"],
    &[
        "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "monitoring.enabled=false",
        "registry.cache.enabled=false",
        "deckhouse.moduleManagerClusterAdmin=false",
        "deckhouse.metricsProtection=kubeRbacProxy",
    ],
];

fn run(program: &str, args: &[String]) -> (bool, String, String) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn set_args(set: &[&str]) -> Vec<String> {
    set.iter()
        .flat_map(|s| ["--set".to_string(), s.to_string()])
        .collect()
}

/// `d8 module render` of the chart with `set`.
pub(crate) fn render(set: &[&str]) -> String {
    let mut args: Vec<String> = [
        "module",
        "render",
        &chart(),
        "--release-name",
        "deckhouse",
        "-n",
        "d8-system",
    ]
    .map(String::from)
    .to_vec();
    args.extend(set_args(set));
    let (ok, stdout, stderr) = run(env!("CARGO_BIN_EXE_d8"), &args);
    assert!(ok, "d8 module render {set:?}: {stderr}");
    stdout
}

#[test]
fn d8_renders_the_chart_exactly_as_helm_template() {
    let helm = std::env::var("HELM").unwrap_or_else(|_| "helm".into());
    for set in VALUE_SETS {
        let mut args: Vec<String> = ["template", "deckhouse", &chart(), "-n", "d8-system"]
            .map(String::from)
            .to_vec();
        args.extend(set_args(set));
        let (ok, expected, stderr) = run(&helm, &args);
        assert!(ok, "helm template {set:?}: {stderr}");
        assert_eq!(render(set), expected, "values {set:?}");
    }
}

#[test]
fn every_manifest_passes_kubernetes_validate_for_1_29_to_1_33() {
    let validate = require_tool(
        "kubernetes-validate",
        "pip install kubernetes-validate==1.33.1",
    );
    let dir = tempfile::tempdir().unwrap();
    for (index, set) in VALUE_SETS.iter().enumerate() {
        let file = dir.path().join(format!("chart-{index}.yaml"));
        std::fs::write(&file, render(set)).unwrap();
        for minor in 29..=33 {
            let (ok, stdout, stderr) = run(
                &validate.display().to_string(),
                &[
                    "--strict".into(),
                    "--quiet".into(),
                    "-k".into(),
                    format!("1.{minor}.0"),
                    file.display().to_string(),
                ],
            );
            assert!(
                ok,
                "values {set:?}, Kubernetes 1.{minor}:\n{stdout}{stderr}"
            );
            // Only the Prometheus operator's kinds have no schema in Kubernetes itself.
            for line in format!("{stdout}{stderr}")
                .lines()
                .filter(|l| !l.trim().is_empty())
            {
                assert!(
                    line.contains("with api version monitoring.coreos.com/v1"),
                    "values {set:?}, Kubernetes 1.{minor}: {line}"
                );
            }
        }
    }
}

#[test]
fn our_crds_pass_kubernetes_validate() {
    let validate = require_tool(
        "kubernetes-validate",
        "pip install kubernetes-validate==1.33.1",
    );
    let mut args: Vec<String> = vec![
        "--strict".into(),
        "--quiet".into(),
        "-k".into(),
        "1.29.0".into(),
    ];
    for entry in std::fs::read_dir(repo().join("crds")).unwrap() {
        args.push(entry.unwrap().path().display().to_string());
    }
    let (ok, stdout, stderr) = run(&validate.display().to_string(), &args);
    assert!(
        ok && stdout.trim().is_empty() && stderr.trim().is_empty(),
        "{stdout}{stderr}"
    );
}

fn kinds(rendered: &str) -> Vec<String> {
    rendered
        .split("\n---\n")
        .filter_map(|doc| {
            doc.lines()
                .find_map(|l| l.strip_prefix("kind: "))
                .map(str::to_string)
        })
        .collect()
}

#[test]
fn the_chart_renders_no_publish_ingress_the_registry_controller_owns_it() {
    // Ingress registry-push follows the cluster's state (registry-controller/tests/publish.rs).
    assert!(!kinds(&render(&[])).contains(&"Ingress".to_string()));
}

#[test]
fn the_push_service_selects_nothing_and_sends_to_the_replicas_write_listener() {
    // Its endpoint is the leader alone: EndpointSlice registry-push-leader, which the registry
    // controller keeps (registry-controller/tests/push.rs) with port WRITE_PORT.
    let rendered = render(&[]);
    let doc = |kind: &str, name: &str| -> serde_json::Value {
        let doc = rendered
            .split("\n---\n")
            .find(|d| {
                d.contains(&format!("kind: {kind}\n")) && d.contains(&format!("\n  name: {name}\n"))
            })
            .unwrap_or_else(|| panic!("the chart has {kind} {name}"));
        serde_saphyr::from_str(doc).unwrap()
    };
    let service = doc("Service", "registry-push");
    assert_eq!(service["spec"].get("selector"), None);
    let write_port = registry_controller_plan::push::WRITE_PORT;
    assert_eq!(
        service["spec"]["ports"],
        serde_json::json!([{"name": registry_controller_plan::push::PORT_NAME, "port": 5001, "targetPort": write_port, "protocol": "TCP"}])
    );
    let replicas = doc("DaemonSet", "registry-storage");
    let args = replicas["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(
        args.contains(&format!("--write-address=$(POD_IP):{write_port}")),
        "{args}"
    );
}

/// The chart's ValidatingWebhookConfiguration as `d8 up` would register it: the Service's path
/// becomes the URL (with an empty base), the Service left out; the chart has no caBundle (`d8
/// controller` injects it, tests/cli/webhook_certs.rs).
fn registered_form(rendered: &str) -> serde_json::Value {
    let doc = rendered
        .split("\n---\n")
        .find(|doc| doc.contains("kind: ValidatingWebhookConfiguration"))
        .expect("the chart has a ValidatingWebhookConfiguration");
    let mut configuration: serde_json::Value = serde_saphyr::from_str(doc).unwrap();
    for hook in configuration["webhooks"].as_array_mut().unwrap() {
        let client = hook["clientConfig"].as_object_mut().unwrap();
        assert_eq!(client.remove("caBundle"), None);
        let service = client.remove("service").unwrap();
        assert_eq!(service["name"], "d8-webhook");
        assert_eq!(service["namespace"], "d8-system");
        assert_eq!(service["port"], 443);
        client.insert("url".into(), service["path"].clone());
    }
    configuration
}

#[test]
fn the_charts_webhook_configuration_is_the_one_d8_up_registers() {
    let mut want = webhook::registration::validating_configuration("", "");
    for hook in want["webhooks"].as_array_mut().unwrap() {
        hook["clientConfig"]
            .as_object_mut()
            .unwrap()
            .remove("caBundle");
    }
    let got = registered_form(&render(&[]));
    assert_eq!(got["metadata"]["name"], want["metadata"]["name"]);
    assert_eq!(got["webhooks"], want["webhooks"]);
}

#[test]
fn cni_migration_workloads_exist_only_while_a_migration_is_active() {
    // Their ServiceAccounts and roles are always there: `d8 controller` applies only the
    // Deployment and the DaemonSet while a CNIMigration exists.
    let quiet = render(&[]);
    assert!(quiet.contains("name: d8:cni-migration-agent"), "{quiet}");
    for object in [
        "kind: Deployment\nmetadata:\n  name: cni-migration-manager",
        "kind: DaemonSet\nmetadata:\n  name: cni-migration-agent",
    ] {
        assert!(!quiet.contains(object), "{object}");
    }
    let active = render(&["global.internal.cniMigrationEnabled=true"]);
    for object in [
        "kind: Deployment\nmetadata:\n  name: cni-migration-manager",
        "kind: DaemonSet\nmetadata:\n  name: cni-migration-agent",
    ] {
        assert!(active.contains(object), "{object}");
    }
}

/// Every object of the chart that names the platform's image is one the image address moves
/// (step two of the registry switch), or one `d8 controller` applies with the deckhouse
/// container's image (the CNI migration's workloads): no component is left at the install
/// registry once the in-cluster address is published.
#[test]
fn every_object_running_the_platform_image_follows_the_image_address() {
    use release_controller::apply::{
        AGENT_MANIFEST_KEY, NODE_BOOTSTRAP_CONFIGMAP, PLATFORM_DAEMONSETS, PLATFORM_DEPLOYMENTS,
    };
    let image = "image: registry.example.com/deckhouse/d8:0.1.0";
    let rendered = render(&["global.internal.cniMigrationEnabled=true"]);
    let mut named = BTreeSet::new();
    for doc in rendered.split("\n---\n").filter(|doc| doc.contains(image)) {
        let object: serde_json::Value = serde_saphyr::from_str(doc).unwrap();
        let kind = object["kind"].as_str().unwrap().to_owned();
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        named.insert(format!("{kind}/{name}"));
    }
    let mut follows: BTreeSet<String> = PLATFORM_DEPLOYMENTS
        .iter()
        .map(|n| format!("Deployment/{n}"))
        .chain(PLATFORM_DAEMONSETS.iter().map(|n| format!("DaemonSet/{n}")))
        .collect();
    follows.insert(format!("ConfigMap/{NODE_BOOTSTRAP_CONFIGMAP}"));
    // Applied by d8 controller from the deckhouse container's image while a migration runs.
    follows.insert("Deployment/cni-migration-manager".into());
    follows.insert("DaemonSet/cni-migration-agent".into());
    assert_eq!(named, follows);
    assert!(rendered.contains(&format!("  {AGENT_MANIFEST_KEY}: |")));
}

#[test]
fn the_shipped_alert_rules_are_the_crates_own() {
    for (shipped, source) in [
        (
            "files/registry-rules.yaml",
            "crates/registry-controller/monitoring/rules.yaml",
        ),
        (
            "files/module-rules.yaml",
            "crates/module-controller/monitoring/rules.yaml",
        ),
    ] {
        let a = std::fs::read_to_string(repo().join("charts/deckhouse").join(shipped)).unwrap();
        let b = std::fs::read_to_string(repo().join(source)).unwrap();
        assert_eq!(a, b, "{shipped} is a copy of {source}: copy it again");
    }
}

#[tokio::test]
async fn kubectl_applies_every_object_of_the_chart_to_d8_apiserver() {
    let apiserver = Apiserver::start(&[]).await;
    let admin = apiserver.admin();
    // d8 apiserver has namespace d8-system from the start, as a cluster has it after
    // `kubectl create namespace d8-system` (docs/install.md).
    kubectl_ok(
        &admin,
        &["apply", "-f", &repo().join("crds").display().to_string()],
    );
    let dir = tempfile::tempdir().unwrap();
    for (index, set) in VALUE_SETS.iter().enumerate() {
        // The Prometheus operator's kinds are not served by d8 apiserver (nor by a cluster
        // without the operator): monitoring stays off here.
        let mut set = set.to_vec();
        set.push("monitoring.enabled=false");
        let rendered = render(&set);
        let file = dir.path().join(format!("chart-{index}.yaml"));
        std::fs::write(&file, &rendered).unwrap();
        let out = kubectl_ok(
            &admin,
            &["apply", "--server-side", "-f", &file.display().to_string()],
        );
        let applied = out
            .lines()
            .filter(|l| l.ends_with("serverside-applied"))
            .count();
        assert_eq!(applied, kinds(&rendered).len(), "values {set:?}:\n{out}");
    }
    let deployments = kubectl_ok(
        &admin,
        &["get", "deployments", "-n", "d8-system", "-o", "name"],
    );
    for name in [
        "deployment.apps/deckhouse",
        "deployment.apps/d8-webhook",
        "deployment.apps/webhook-handler",
    ] {
        assert!(deployments.contains(name), "{deployments}");
    }
}

/// `Api<Kind>` and `Api::<Kind>` in a crate's sources (tests excluded), as plural resources.
/// The sources an entry of `crates` names: `krate` (all of it), `krate/module` (a module and
/// its submodules) or `krate/file.rs` (that file alone) — a crate holding code of several
/// components is split by module.
fn sources_of(entry: &str) -> Vec<PathBuf> {
    let (krate, module) = entry.split_once('/').unwrap_or((entry, ""));
    let src = repo().join("crates").join(krate).join("src");
    let mut files = Vec::new();
    let mut stack = Vec::new();
    if module.is_empty() {
        stack.push(src);
    } else if module.ends_with(".rs") {
        files.push(src.join(module));
    } else {
        files.push(src.join(format!("{module}.rs")));
        stack.push(src.join(module));
    }
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.retain(|path| path.is_file());
    assert!(!files.is_empty(), "{entry} names no source file");
    files
}

fn resources_used_by(entry: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for path in sources_of(entry) {
        let name = path.file_name().unwrap().to_string_lossy();
        if !name.ends_with(".rs") || name == "tests.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.split("#[cfg(test)]").next().unwrap();
        // kube's event recorder writes events.k8s.io Events.
        if text.contains("Recorder::new(") {
            found.insert("events".to_owned());
        }
        // `Api` of a kind, and the module manager's generic helpers over one.
        for pattern in ["Api<", "Api::<", "api::<", "get_opt::<", "watch::<"] {
            for piece in text.split(pattern).skip(1) {
                let kind: String = piece
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == ':' || *c == '_')
                    .collect();
                let kind = kind.rsplit("::").next().unwrap_or_default();
                if let Some(resource) = plural(kind) {
                    found.insert(resource);
                }
            }
        }
        // A kind opened as DynamicObject by its plural, written out:
        // `ApiResource::from_gvk_with_plural(&gvk, "certificates")`.
        for piece in text.split("from_gvk_with_plural(").skip(1) {
            let call = piece.split(");").next().unwrap_or_default();
            let mut literals = call.rsplit('"');
            if let (Some(_), Some(resource)) = (literals.next(), literals.next())
                && !resource.is_empty()
                && resource.chars().all(|c| c.is_ascii_lowercase())
            {
                found.insert(resource.to_owned());
            }
        }
    }
    found
}

/// A kind's plural resource; generic parameters and dynamic objects are `None`.
fn plural(kind: &str) -> Option<String> {
    if kind.len() <= 1
        || kind == "DynamicObject"
        || !kind.starts_with(|c: char| c.is_ascii_uppercase())
    {
        return None;
    }
    let lower = kind.to_ascii_lowercase();
    // A consonant and `y` end in `ies` (policies, packagerepositories); a vowel and `y` do not.
    let consonant_y =
        lower.ends_with('y') && !lower[..lower.len() - 1].ends_with(['a', 'e', 'i', 'o', 'u']);
    // A sibilant ends in `es` (ingresses), as Kubernetes' own pluralizer has it.
    Some(if consonant_y {
        format!("{}ies", &lower[..lower.len() - 1])
    } else if lower.ends_with(['s', 'x', 'z']) || lower.ends_with("ch") || lower.ends_with("sh") {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    })
}

#[test]
fn plurals_of_kinds() {
    for (kind, want) in [
        ("ModuleUpdatePolicy", Some("moduleupdatepolicies")),
        ("PackageRepository", Some("packagerepositories")),
        ("Gateway", Some("gateways")),
        ("Ingress", Some("ingresses")),
        ("Application", Some("applications")),
        ("T", None),
        ("DynamicObject", None),
    ] {
        assert_eq!(plural(kind).as_deref(), want, "{kind}");
    }
}

#[test]
fn every_component_is_granted_exactly_the_resources_its_code_opens() {
    let table: serde_json::Value = {
        let text =
            std::fs::read_to_string(repo().join("charts/deckhouse/files/rbac.yaml")).unwrap();
        serde_saphyr::from_str(&text).unwrap()
    };
    let mut problems = Vec::new();
    for (component, entry) in table.as_object().unwrap() {
        let crates: Vec<&str> = entry["crates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        if crates.is_empty() {
            continue; // its code is not in this repository yet (see docs/install.md)
        }
        let used: BTreeSet<String> = crates.iter().flat_map(|c| resources_used_by(c)).collect();
        let granted: BTreeSet<String> = ["cluster", "namespaced", "kubeSystem"]
            .iter()
            .flat_map(|scope| entry[scope].as_array().into_iter().flatten())
            .flat_map(|rule| rule["resources"].as_array().unwrap().iter())
            .map(|r| r.as_str().unwrap().to_string())
            .filter(|r| !r.contains('/'))
            .collect();
        for missing in used.difference(&granted) {
            problems.push(format!(
                "{component}: its code opens {missing}, its role does not grant it"
            ));
        }
        for unused in granted.difference(&used) {
            problems.push(format!(
                "{component}: granted {unused}, which none of {crates:?} opens"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn bootstrap(root: &Path, config: &Path) -> String {
    bootstrap_with(root, config, &[])
}

/// Runs the chart's node bootstrap script with every path under `root`, on containerd's file
/// `config`, with extra environment `env`: what it printed.
pub(crate) fn bootstrap_with(root: &Path, config: &Path, env: &[(&str, &Path)]) -> String {
    let script = repo().join("charts/deckhouse/files/registry-node-bootstrap.sh");
    let manifest = root.join("agent.yaml");
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(&manifest, "apiVersion: v1\nkind: Pod\n").unwrap();
    let output = Command::new("bash")
        .arg(script)
        .env("D8_ROOT", root)
        .env("CONTAINERD_CONFIG", config)
        .env("AGENT_MANIFEST", &manifest)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn node_bootstrap_points_containerd_1_6_at_the_drop_in_once() {
    let containerd = require_tool("containerd", "containerd");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let (ok, default, stderr) = run(
        &containerd.display().to_string(),
        &["config".into(), "default".into()],
    );
    assert!(ok, "{stderr}");
    std::fs::write(&config, &default).unwrap();
    let first = bootstrap(dir.path(), &config);
    assert!(first.contains("config.toml"), "{first}");
    assert!(
        dir.path()
            .join("etc/kubernetes/manifests/registry-agent.yaml")
            .exists()
    );
    let after_first = std::fs::read_to_string(&config).unwrap();
    assert_eq!(
        bootstrap(dir.path(), &config),
        "",
        "a second run changes nothing"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), after_first);
    let (ok, dump, stderr) = run(
        &containerd.display().to_string(),
        &[
            "--config".into(),
            config.display().to_string(),
            "config".into(),
            "dump".into(),
        ],
    );
    assert!(ok, "{stderr}");
    assert!(
        dump.contains("config_path = \"/etc/containerd/registry.d\""),
        "{dump}"
    );
    // Only that line changed.
    let changed: Vec<_> = default
        .lines()
        .zip(after_first.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
}

/// containerd 2's own `containerd config default` (generated here by the 2.x binary), a file
/// holding only `version = 3`, and no file (the script writes a version 2 file, which containerd 2
/// migrates): after the script, containerd 2 loads the file with `config_path` in its CRI images
/// registry table, and a second run leaves the file byte for byte.
#[test]
fn node_bootstrap_points_containerd_2_at_the_drop_in_once() {
    let containerd = Binaries::v2();
    let default = containerd.config_default();
    assert!(default.starts_with("version = 3\n"), "{default}");
    for (name, initial) in [
        ("containerd config default", Some(default.as_str())),
        ("version only", Some("version = 3\n")),
        ("no file", None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("etc/containerd/config.toml");
        if let Some(initial) = initial {
            std::fs::create_dir_all(config.parent().unwrap()).unwrap();
            std::fs::write(&config, initial).unwrap();
        }
        let first = bootstrap(dir.path(), &config);
        assert!(
            first.contains(&format!("changed: {}", config.display())),
            "{name}: {first}"
        );
        let after_first = std::fs::read(&config).unwrap();
        assert_eq!(
            bootstrap(dir.path(), &config),
            "",
            "{name}: a second run changes nothing"
        );
        assert_eq!(std::fs::read(&config).unwrap(), after_first, "{name}");
        let after_first = String::from_utf8(after_first).unwrap();
        let dump = containerd.config_dump(&config).unwrap_or_else(|e| {
            panic!("{name}: containerd 2 does not load the result: {e}\n{after_first}")
        });
        assert_eq!(
            cri_images_config_path(dir.path(), &dump),
            "/etc/containerd/registry.d",
            "{name}:\n{dump}"
        );
        if let Some(initial) = initial.filter(|i| *i == default) {
            // Only that line changed.
            let changed: Vec<_> = initial
                .lines()
                .zip(after_first.lines())
                .filter(|(a, b)| a != b)
                .collect();
            assert_eq!(changed.len(), 1, "{changed:?}");
            assert_eq!(initial.lines().count(), after_first.lines().count());
        }
    }
}

/// `config_path` of containerd 2's CRI images registry table (`plugins."io.containerd.cri.v1.images"
/// .registry`) in `dump`, a `containerd config dump` (read as TOML by Python's tomllib; written
/// under `dir` for it).
fn cri_images_config_path(dir: &Path, dump: &str) -> String {
    let file = dir.join("dump.toml");
    std::fs::write(&file, dump).unwrap();
    let read = "import sys, tomllib; c = tomllib.load(open(sys.argv[1], 'rb')); \
        print(c['plugins']['io.containerd.cri.v1.images']['registry']['config_path'])";
    let (ok, stdout, stderr) = run(
        "python3",
        &["-c".into(), read.into(), file.display().to_string()],
    );
    assert!(ok, "{stderr}\n{dump}");
    stdout.trim_end_matches('\n').to_owned()
}

/// The deckhouse Deployment of a rendering.
fn deckhouse_deployment(rendered: &str) -> &str {
    rendered
        .split("\n---\n")
        .find(|doc| doc.contains("kind: Deployment\n") && doc.contains("\n  name: deckhouse\n"))
        .expect("Deployment deckhouse")
}

#[test]
fn deckhouse_protects_its_metrics_itself_unless_the_sidecar_is_chosen() {
    // The flags `metrics::secure_metrics_answer_only_reviewed_and_allowed_tokens` runs with.
    let attributes = "--metrics-resource-attributes=namespace=d8-system,apiGroup=apps,apiVersion=v1,resource=deployments,subresource=prometheus-metrics,name=deckhouse";
    let rendered = render(&[]);
    let builtin = deckhouse_deployment(&rendered);
    assert!(
        builtin.contains("- --secure-metrics-address=$(POD_IP):9650"),
        "{builtin}"
    );
    assert!(builtin.contains(attributes), "{builtin}");
    assert!(!builtin.contains("name: kube-rbac-proxy"), "{builtin}");
    let rendered = render(&["deckhouse.metricsProtection=kubeRbacProxy"]);
    let sidecar = deckhouse_deployment(&rendered);
    assert!(!sidecar.contains("--secure-metrics-address"), "{sidecar}");
    assert!(sidecar.contains("name: kube-rbac-proxy"), "{sidecar}");
    let lines: Vec<&str> = sidecar.lines().map(str::trim).collect();
    assert!(
        lines
            .windows(2)
            .any(|w| w == ["subresource: prometheus-metrics", "name: deckhouse"]),
        "{sidecar}"
    );
}
