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

/// `d8 apiserver` (with `extra` flags) recording the calls of ServiceAccount deckhouse in `log`,
/// the chart's roles applied: the server and deckhouse's kubeconfig, for `d8 controller`.
pub(crate) async fn deckhouse_apiserver(
    extra: &[String],
    log: &Path,
) -> (crate::Apiserver, std::path::PathBuf) {
    let mut flags = apiserver_flags(&["deckhouse"], log);
    flags.extend_from_slice(extra);
    let apiserver = crate::Apiserver::start_with(&flags).await;
    apply_chart_rbac(&apiserver.admin());
    let kubeconfig = apiserver.kubeconfig("system-serviceaccount-d8-system-deckhouse");
    (apiserver, kubeconfig)
}

/// What each end-to-end test running `d8 controller` as ServiceAccount deckhouse must call
/// (`verb group/resource`), by the test's short name: together with [`DECKHOUSE_UNREACHED`],
/// exactly what deckhouse's role grants (`deckhouse_grants_are_each_called_by_a_test`), so a
/// grant nothing calls, or a call a test stopped making, fails.
const DECKHOUSE_CALLS: &[(&str, &[&str])] = &[
    (
        "module_lifecycle",
        &[
            "delete /configmaps",
            "delete /secrets",
            "get /namespaces",
            "patch /configmaps",
            "patch /secrets",
            "patch deckhouse.io/moduledocumentations",
            "patch deckhouse.io/modulesettingsdefinitions",
        ],
    ),
    (
        "module_hooks",
        &[
            "create /configmaps",
            "list /configmaps",
            "list /namespaces",
            "patch deckhouse.io/moduleconfigs",
            "watch /configmaps",
            "watch /namespaces",
            "watch /nodes",
            "watch /pods",
        ],
    ),
    (
        "object_keeper",
        &[
            "delete deckhouse.io/objectkeepers",
            "get /configmaps",
            "list deckhouse.io/objectkeepers",
            "patch deckhouse.io/objectkeepers/status",
            "watch deckhouse.io/objectkeepers",
        ],
    ),
    (
        "registry_publish",
        &[
            "create cert-manager.io/certificates",
            "delete cert-manager.io/certificates",
            "get cert-manager.io/certificates",
            "update cert-manager.io/certificates",
            "delete discovery.k8s.io/endpointslices",
            "get /nodes",
            "get deckhouse.io/nodegroups",
            "get discovery.k8s.io/endpointslices",
            "patch deckhouse.io/registryupstreams/status",
            "update deckhouse.io/registrynodes",
            "update discovery.k8s.io/endpointslices",
            "create deckhouse.io/registryconfigs",
            "create deckhouse.io/registrynodes",
            "create deckhouse.io/registrystorages",
            "create discovery.k8s.io/endpointslices",
            "create networking.k8s.io/ingresses",
            "delete networking.k8s.io/ingresses",
            "get deckhouse.io/registrynodes",
            "list /nodes",
            "list deckhouse.io/registryupstreams",
            "patch deckhouse.io/registryconfigs/status",
            "patch deckhouse.io/registrystorages/status",
            "update deckhouse.io/registryconfigs",
            "update deckhouse.io/registrystorages",
            "update networking.k8s.io/ingresses",
        ],
    ),
    (
        "packages",
        &[
            "create deckhouse.io/applicationpackages",
            "create deckhouse.io/applicationpackageversions",
            "create deckhouse.io/packagerepositoryoperations",
            "delete /configmaps",
            "delete /secrets",
            "get deckhouse.io/applicationpackages",
            "get deckhouse.io/applicationpackageversions",
            "get deckhouse.io/packagerepositories",
            "get deckhouse.io/packagerepositoryoperations",
            "list deckhouse.io/applicationpackages",
            "patch /configmaps",
            "patch deckhouse.io/applicationpackages/status",
            "patch deckhouse.io/applicationpackageversions",
            "patch deckhouse.io/applicationpackageversions/status",
            "patch deckhouse.io/applications",
            "patch deckhouse.io/applications/status",
            "patch deckhouse.io/packagerepositories",
            "patch deckhouse.io/packagerepositories/status",
            "patch deckhouse.io/packagerepositoryoperations/status",
        ],
    ),
    (
        "webhook_certs",
        &[
            "create /secrets",
            "create coordination.k8s.io/leases",
            "delete apps/daemonsets",
            "delete apps/deployments",
            "get /configmaps",
            "get /secrets",
            "get coordination.k8s.io/leases",
            "get deckhouse.io/moduleconfigs",
            "get deckhouse.io/registryconfigs",
            "get deckhouse.io/registrystorages",
            "get networking.k8s.io/ingresses",
            "list /pods",
            "list /secrets",
            "list admissionregistration.k8s.io/validatingwebhookconfigurations",
            "list apiextensions.k8s.io/customresourcedefinitions",
            "list deckhouse.io/applicationpackageversions",
            "list deckhouse.io/applications",
            "list deckhouse.io/moduleconfigs",
            "list deckhouse.io/objectkeepers",
            "list deckhouse.io/packagerepositories",
            "list deckhouse.io/packagerepositoryoperations",
            "list deckhouse.io/registrynodes",
            "list network.deckhouse.io/cnimigrations",
            "patch admissionregistration.k8s.io/validatingwebhookconfigurations",
            "patch apiextensions.k8s.io/customresourcedefinitions",
            "update /secrets",
            "update coordination.k8s.io/leases",
            "watch deckhouse.io/applicationpackageversions",
            "watch deckhouse.io/applications",
            "watch deckhouse.io/moduleconfigs",
            "watch deckhouse.io/objectkeepers",
            "watch deckhouse.io/packagerepositories",
            "watch deckhouse.io/packagerepositoryoperations",
        ],
    ),
    (
        "cni_detect",
        &[
            "create apps/daemonsets",
            "create apps/deployments",
            "get apps/deployments",
            "patch apps/daemonsets",
            "patch apps/deployments",
        ],
    ),
    (
        "documentation",
        &[
            "list deckhouse.io/moduledocumentations",
            "list deckhouse.io/modulepulloverrides",
            "list deckhouse.io/modulereleases",
            "list deckhouse.io/modules",
            "list deckhouse.io/modulesources",
            "list deckhouse.io/moduleupdatepolicies",
            "list discovery.k8s.io/endpointslices",
            "patch deckhouse.io/moduledocumentations/status",
            "watch /secrets",
            "watch deckhouse.io/moduledocumentations",
            "watch deckhouse.io/modulepulloverrides",
            "watch deckhouse.io/modulereleases",
            "watch deckhouse.io/modules",
            "watch deckhouse.io/modulesources",
            "watch deckhouse.io/moduleupdatepolicies",
            "watch discovery.k8s.io/endpointslices",
        ],
    ),
    (
        "metrics",
        &[
            "create authentication.k8s.io/tokenreviews",
            "create authorization.k8s.io/subjectaccessreviews",
        ],
    ),
    (
        "release",
        &[
            "create deckhouse.io/deckhousereleases",
            "create events.k8s.io/events",
            "get apps/daemonsets",
            "list deckhouse.io/deckhousereleases",
            "list deckhouse.io/ingressnginxcontrollers",
            "patch deckhouse.io/deckhousereleases",
            "patch deckhouse.io/deckhousereleases/status",
            "patch deckhouse.io/moduleconfigs/status",
            "update apps/deployments",
            "watch deckhouse.io/deckhousereleases",
        ],
    ),
    (
        "module",
        &[
            "create deckhouse.io/moduledocumentations",
            "create deckhouse.io/modulereleases",
            "create deckhouse.io/modules",
            "create deckhouse.io/modulesettingsdefinitions",
            "create deckhouse.io/modulesources",
            "get deckhouse.io/moduledocumentations",
            "get deckhouse.io/modulepulloverrides",
            "get deckhouse.io/modules",
            "get deckhouse.io/modulesettingsdefinitions",
            "get deckhouse.io/modulesources",
            "patch deckhouse.io/modulepulloverrides/status",
            "patch deckhouse.io/modulereleases",
            "patch deckhouse.io/modulereleases/status",
            "patch deckhouse.io/modules",
            "patch deckhouse.io/modules/status",
            "patch deckhouse.io/modulesources",
            "patch deckhouse.io/modulesources/status",
        ],
    ),
];

/// Why a grant is in [`DECKHOUSE_UNREACHED`]: the paths no end-to-end test runs as deckhouse yet.
const REGISTRY: &str = "registry controller paths registry_publish.rs does not take as deckhouse (they are tested as admin in storage.rs, agent.rs, multinode.rs and the registry-controller crate): ConfigMap registry-image-address replaced, and the objects withdrawn when the module leaves Managed (an air-gapped configuration cannot drain, and a drain waits 30 s between its scans)";
const PACKAGE_OPERATIONS_CLEANUP: &str = "the package controller deletes a repository's operations beyond the newest ones once one completed; packages.rs scans each repository once";
const PACKAGE_OPERATION_BY_HAND: &str = "the package controller labels an operation created by hand and makes its repository its owner; packages.rs lets the controller create them";
const EVENT_SERIES: &str = "kube's recorder patches an event published again (a series); the release test publishes each event once";
const IMAGE_ADDRESS: &str = "the image address (ConfigMap registry-image-address) replaces the image of DaemonSet registry-storage; no test moves the address as deckhouse";
const RELEASE_PATHS: &str = "the release engine deletes a release the channel withdrew and, in its cleanup, outdated releases beyond the newest 10; the release test publishes three";
const MODULE_PATHS: &str = "module manager paths no test takes as deckhouse (module.rs and module_hooks.rs enable, reconfigure, upgrade and disable modules; nothing deletes an embedded Module that left the image or a Pending ModuleRelease, creates a ModuleConfig for a hook's config values, reads a release's update policy, takes a ModulePullOverride of a module with an active source (its finalizer) or cleans up old releases)";

/// deckhouse's grants no end-to-end test calls yet, and why.
const DECKHOUSE_UNREACHED: &[(&str, &str)] = &[
    ("create deckhouse.io/moduleconfigs", MODULE_PATHS),
    ("delete deckhouse.io/deckhousereleases", RELEASE_PATHS),
    ("delete deckhouse.io/modulereleases", MODULE_PATHS),
    ("delete deckhouse.io/modules", MODULE_PATHS),
    (
        "delete deckhouse.io/packagerepositoryoperations",
        PACKAGE_OPERATIONS_CLEANUP,
    ),
    ("delete deckhouse.io/registryconfigs", REGISTRY),
    ("delete deckhouse.io/registrynodes", REGISTRY),
    ("delete deckhouse.io/registrystorages", REGISTRY),
    ("get deckhouse.io/modulereleases", MODULE_PATHS),
    ("get deckhouse.io/moduleupdatepolicies", MODULE_PATHS),
    ("patch deckhouse.io/modulepulloverrides", MODULE_PATHS),
    (
        "patch deckhouse.io/packagerepositoryoperations",
        PACKAGE_OPERATION_BY_HAND,
    ),
    ("patch events.k8s.io/events", EVENT_SERIES),
    ("update /configmaps", REGISTRY),
    ("update apps/daemonsets", IMAGE_ADDRESS),
];

fn parse_call(text: &str) -> Call {
    let (verb, res) = text.split_once(' ').expect("`verb group/resource`");
    (verb.to_owned(), res.to_owned())
}

/// Ends an end-to-end test that ran `d8 controller` as ServiceAccount deckhouse with the request
/// log `log`: every call it made is granted by deckhouse's role, and it made every call
/// [`DECKHOUSE_CALLS`] lists for `test`.
pub(crate) async fn assert_deckhouse_calls(test: &str, log: &Path) {
    assert_deckhouse_calls_beyond(test, log, &[]).await;
}

/// The calls a module's chart makes beyond deckhouse's role, granted by
/// `moduleManagerClusterAdmin`'s binding to cluster-admin (verb, group/resource, why).
pub(crate) const MODULE_CHART_NAMESPACE: &[(&str, &str, &str)] = &[
    (
        "patch",
        "/namespaces",
        "the module's chart holds its Namespace (applied)",
    ),
    (
        "delete",
        "/namespaces",
        "the module's Namespace goes when it is disabled",
    ),
    (
        "create",
        "/namespaces",
        "the module's Namespace is created by an apply, which needs create",
    ),
];

/// [`assert_deckhouse_calls`] for a test whose module chart holds objects deckhouse's role does
/// not grant (`beyond`: verb, group/resource, what grants them instead).
pub(crate) async fn assert_deckhouse_calls_beyond(
    test: &str,
    log: &Path,
    beyond: &[(&str, &str, &str)],
) {
    tokio::time::sleep(std::time::Duration::from_millis(500)).await; // written every 200 ms
    let user = service_account("deckhouse");
    let made = called(log, &user);
    if std::env::var_os("D8_RBAC_DUMP").is_some() {
        for (verb, res) in &made {
            eprintln!("RBACDUMP {test} {verb} {res}");
        }
    }
    assert_calls_granted(log, &user, "deckhouse", beyond);
    let expected = DECKHOUSE_CALLS
        .iter()
        .find(|(name, _)| *name == test)
        .unwrap_or_else(|| panic!("DECKHOUSE_CALLS has no entry for {test}"))
        .1;
    let missing: Vec<&str> = expected
        .iter()
        .filter(|call| !made.contains(&parse_call(call)))
        .copied()
        .collect();
    assert!(
        missing.is_empty(),
        "{test} no longer calls {missing:?} (DECKHOUSE_CALLS): if no test does, take the grant out of rbac.yaml"
    );
}

#[test]
fn deckhouse_grants_are_each_called_by_a_test() {
    let granted = granted("deckhouse");
    let mut covered = BTreeSet::new();
    for (test, calls) in DECKHOUSE_CALLS {
        for call in *calls {
            let call = parse_call(call);
            assert!(granted.contains(&call), "{test}: {call:?} is not granted");
            covered.insert(call);
        }
    }
    for (call, why) in DECKHOUSE_UNREACHED {
        let call = parse_call(call);
        assert!(granted.contains(&call), "unreached {call:?} is not granted");
        assert!(
            !covered.contains(&call),
            "{call:?} is called by a test: not unreached ({why})"
        );
        covered.insert(call);
    }
    let uncovered: Vec<String> = granted
        .difference(&covered)
        .map(|(verb, res)| format!("{verb} {res}"))
        .collect();
    assert!(
        uncovered.is_empty(),
        "deckhouse is granted what no end-to-end test calls and DECKHOUSE_UNREACHED does not list:\n{}",
        uncovered.join("\n")
    );
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
