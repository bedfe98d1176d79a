//! `kubectl` against `d8 apiserver`: our admission rules with the cluster's facts (settings
//! schemas, experimental modules, update policies, pull overrides, deletion) and the real
//! ModuleUpdatePolicy conversion, run in process by the embedded API server. The same
//! scenarios run against `d8 up`, through `d8 webhook` (`up::webhook`).

use std::path::Path;

use crate::{Apiserver, example, kubectl, kubectl_ok};

fn apply(admin: &Path, dir: &Path, name: &str, yaml: &str) -> (bool, String) {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, yaml).unwrap();
    let (ok, stdout, stderr) = kubectl(admin, &["apply", "-f", file.to_str().unwrap()]);
    (ok, format!("{stdout}{stderr}"))
}

const WEBHOOK: &str =
    "admission webhook \"module-configs.deckhouse-webhook.deckhouse.io\" denied the request: ";

#[tokio::test]
async fn every_rule_refuses_with_deckhouses_message_through_kubectl() {
    let server = Apiserver::start(&[]).await;
    every_rule_refuses_with_deckhouses_message(&server.admin());
}

/// Every rule's refusal through kubectl, word for word, and what is admitted.
pub(crate) fn every_rule_refuses_with_deckhouses_message(admin: &Path) {
    let admin = admin.to_path_buf();
    let dir = tempfile::tempdir().unwrap();
    // What the module manager publishes: a module's settings schema, an experimental module,
    // an update policy and a pull override.
    for (name, yaml) in [
        (
            "msd",
            "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleSettingsDefinition\nmetadata:\n  name: echo\nspec:\n  versions:\n  - name: \"1\"\n    schema:\n      type: object\n      properties:\n        replicas: {type: integer, maximum: 3}\n",
        ),
        (
            "module",
            "apiVersion: deckhouse.io/v1alpha1\nkind: Module\nmetadata:\n  name: lab\nproperties:\n  stage: Experimental\n",
        ),
        (
            "mup",
            "apiVersion: deckhouse.io/v1alpha2\nkind: ModuleUpdatePolicy\nmetadata:\n  name: weekly\nspec:\n  update:\n    mode: Auto\n",
        ),
        (
            "mpo",
            "apiVersion: deckhouse.io/v1alpha2\nkind: ModulePullOverride\nmetadata:\n  name: pinned\nspec:\n  imageTag: pr-1\n",
        ),
    ] {
        let (ok, out) = apply(&admin, dir.path(), name, yaml);
        assert!(ok, "{out}");
    }
    let mc = |name: &str, spec: &str| {
        format!(
            "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: {name}\nspec:\n{spec}"
        )
    };
    let cases: Vec<(String, String)> = vec![
        (
            "apiVersion: deckhouse.io/v1alpha1\nkind: ObjectKeeper\nmetadata:\n  name: k\nspec:\n  mode: TTL\n".into(),
            "ObjectKeeper.deckhouse.io \"k\" is invalid: spec: Invalid value: \"object\": ttl is required when mode is TTL or FollowObjectWithTTL".into(),
        ),
        (
            std::fs::read_to_string(example("invalid/module-update-policy-reversed-window.yaml")).unwrap(),
            "Start time (windows.from) should be less than the end time of the update window (windows.to)".into(),
        ),
        (mc("echo", "  settings: {replicas: 1}\n"), format!("{WEBHOOK}spec.version is required when spec.settings are specified")),
        (mc("echo", "  source: Embedded\n"), format!("{WEBHOOK}'Embedded' is a forbidden source")),
        (mc("echo", "  updatePolicy: daily\n"), format!("{WEBHOOK}the 'daily' module policy does not exist")),
        (
            mc("echo", "  version: 1\n  settings: {replicas: 5}\n"),
            format!("{WEBHOOK}spec.settings are not valid (version 1):  1 error occurred: * echo.replicas should be less than or equal to 3  "),
        ),
        (
            mc("echo", "  version: 2\n  settings: {replicas: 1}\n"),
            format!("{WEBHOOK}spec.version=2 is unsupported. Use latest version 1"),
        ),
        (
            mc("lab", "  enabled: true\n"),
            format!("{WEBHOOK}the 'lab' module is experimental; to allow it, in the 'deckhouse' ModuleConfig either set spec.settings.allowExperimentalModules: true (allows all experimental modules) or add 'lab' to spec.settings.allowedExperimentalModules"),
        ),
    ];
    for (i, (yaml, message)) in cases.iter().enumerate() {
        let (ok, out) = apply(&admin, dir.path(), &format!("case-{i}"), yaml);
        assert!(!ok, "case {i} admitted:\n{yaml}");
        assert!(
            out.contains(message.as_str()),
            "case {i}: want {message:?} in\n{out}"
        );
    }
    // Within the schema and the facts: admitted.
    let (ok, out) = apply(
        &admin,
        dir.path(),
        "good",
        &mc(
            "echo",
            "  version: 1\n  updatePolicy: weekly\n  settings: {replicas: 3}\n",
        ),
    );
    assert!(ok, "{out}");
    // Allowing the experimental module in the `deckhouse` ModuleConfig admits it.
    let (ok, out) = apply(
        &admin,
        dir.path(),
        "deckhouse",
        &mc(
            "deckhouse",
            "  version: 1\n  settings:\n    allowedExperimentalModules: [lab]\n",
        ),
    );
    assert!(ok, "{out}");
    let (ok, out) = apply(&admin, dir.path(), "lab", &mc("lab", "  enabled: true\n"));
    assert!(ok, "{out}");
    // Deletion rules: a module config whose module is pulled by an override stays.
    let (ok, out) = apply(
        &admin,
        dir.path(),
        "pinned",
        &mc("pinned", "  enabled: true\n"),
    );
    assert!(ok, "{out}");
    let (ok, _, stderr) = kubectl(&admin, &["delete", "moduleconfig", "pinned"]);
    assert!(!ok);
    assert!(
        stderr.contains(&format!(
            "{WEBHOOK}delete the ModulePullOverride before deleting the module config"
        )),
        "{stderr}"
    );
    kubectl_ok(&admin, &["delete", "modulepulloverride", "pinned"]);
    kubectl_ok(&admin, &["delete", "moduleconfig", "pinned"]);
}

#[tokio::test]
async fn a_v1alpha1_update_policy_reads_back_as_v1alpha2_and_back_in_every_mode() {
    let server = Apiserver::start(&[]).await;
    update_policies_read_back_in_both_versions(&server.admin());
}

/// A v1alpha1 ModuleUpdatePolicy in every mode, read as v1alpha2 and as v1alpha1.
pub(crate) fn update_policies_read_back_in_both_versions(admin: &Path) {
    let admin = admin.to_path_buf();
    let dir = tempfile::tempdir().unwrap();
    for mode in ["Auto", "Manual", "Ignore", "AutoPatch"] {
        let name = format!("policy-{}", mode.to_lowercase());
        let yaml = format!(
            "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleUpdatePolicy\nmetadata:\n  name: {name}\nspec:\n  releaseChannel: Beta\n  update:\n    mode: {mode}\n    windows:\n    - {{from: \"01:00\", to: \"02:00\", days: [Sat]}}\n  moduleReleaseSelector:\n    labelSelector:\n      matchLabels: {{source: example}}\n"
        );
        let (ok, out) = apply(&admin, dir.path(), &name, &yaml);
        assert!(ok, "{out}");
        let get = |version: &str, path: &str| {
            kubectl_ok(
                &admin,
                &[
                    "get",
                    &format!("moduleupdatepolicies.{version}.deckhouse.io"),
                    &name,
                    "-o",
                    &format!("jsonpath={path}"),
                ],
            )
        };
        let fields = "{.apiVersion} {.spec.releaseChannel} {.spec.update.mode} {.spec.update.windows[0].from}-{.spec.update.windows[0].to}";
        assert_eq!(
            get("v1alpha2", fields),
            format!("deckhouse.io/v1alpha2 Beta {mode} 01:00-02:00")
        );
        assert_eq!(
            get("v1alpha1", fields),
            format!("deckhouse.io/v1alpha1 Beta {mode} 01:00-02:00")
        );
        // The stored version binds modules by name: the selector is not kept.
        assert_eq!(get("v1alpha2", "{.spec.moduleReleaseSelector}"), "");
    }
    // kubectl's table of the preferred version shows every mode, Ignore included.
    let table = kubectl_ok(&admin, &["get", "mup"]);
    assert!(table.contains("Ignore"), "{table}");
}

#[tokio::test]
async fn a_v1alpha1_policy_stored_before_v1alpha2_keeps_its_selector_until_rewritten() {
    let server = Apiserver::start(&[]).await;
    let admin = server.admin();
    let dir = tempfile::tempdir().unwrap();
    // A cluster from before v1alpha2: the CRD stores v1alpha1 (our CRD lists it first).
    kubectl_ok(
        &admin,
        &[
            "patch",
            "crd",
            "moduleupdatepolicies.deckhouse.io",
            "--type=json",
            "-p",
            r#"[{"op": "replace", "path": "/spec/versions/0/storage", "value": true},
                {"op": "replace", "path": "/spec/versions/1/storage", "value": false}]"#,
        ],
    );
    let policy = |name: &str| {
        format!(
            "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleUpdatePolicy\nmetadata:\n  name: {name}\nspec:\n  update:\n    mode: Auto\n  moduleReleaseSelector:\n    labelSelector:\n      matchLabels: {{source: example}}\n"
        )
    };
    let (ok, out) = apply(&admin, dir.path(), "legacy", &policy("legacy"));
    assert!(ok, "{out}");
    // The upgrade: today's CRD, which stores v1alpha2.
    let crd = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../crds/moduleupdatepolicies.deckhouse.io.yaml")
        .display()
        .to_string();
    kubectl_ok(&admin, &["apply", "-f", &crd]);
    let (ok, out) = apply(&admin, dir.path(), "fresh", &policy("fresh"));
    assert!(ok, "{out}");
    let selector = |version: &str, name: &str| {
        kubectl_ok(
            &admin,
            &[
                "get",
                &format!("moduleupdatepolicies.{version}.deckhouse.io"),
                name,
                "-o",
                "jsonpath={.spec.moduleReleaseSelector.labelSelector.matchLabels}",
            ],
        )
    };
    // Stored as v1alpha1, the policy still selects through v1alpha1 (what
    // ModuleHasDeprecatedUpdatePolicy reads); one written since is stored as v1alpha2 without it.
    assert_eq!(selector("v1alpha1", "legacy"), r#"{"source":"example"}"#);
    assert_eq!(selector("v1alpha2", "legacy"), "");
    assert_eq!(selector("v1alpha1", "fresh"), "");
    // Deckhouse's way to retire it rewrites the object, now stored as v1alpha2.
    kubectl_ok(
        &admin,
        &[
            "patch",
            "moduleupdatepolicies.v1alpha1.deckhouse.io",
            "legacy",
            "--type=json",
            "-p",
            r#"[{"op": "replace", "path": "/spec/moduleReleaseSelector/labelSelector/matchLabels", "value": {"": ""}}]"#,
        ],
    );
    assert_eq!(selector("v1alpha1", "legacy"), "");
}
