//! `d8 controller` runs a module's hooks (one shared setup for several observations, to keep
//! CI time low): a Python hook written with Flant's `deckhouse` SDK watches a ConfigMap and
//! patches values (the next render differs), a `schedule` hook and an `afterHelm` hook write
//! metrics served on `/metrics`, a failing hook puts its error on the Module status and is
//! retried until it passes, and disabling the module removes its resources and runs
//! `afterDeleteHelm`. A global hook (`--global-hooks-dir`) patches the global values at
//! onStartup and from a watched ConfigMap (every module converges again) and writes a metric
//! after every converge (afterAll).

use std::process::Command;

use testkit::ImageBuilder;
use testkit::image::Layout;
use testkit::process::{Service, free_port};
use testkit::push::Registry;

use crate::module::{REPO, apply, get, push_module, until};
use crate::{Stage, kubectl_ok};

const MODULE_YAML: &str = "name: hooked\nweight: 910\nnamespace: d8-hooked\n";
const CONFIG_SCHEMA: &str = "type: object\nproperties:\n  message: {type: string, default: hello}\n  note: {type: string}\n";
const VALUES_SCHEMA: &str = "x-extend:\n  schema: config-values.yaml\ntype: object\nproperties:\n  internal:\n    type: object\n    default: {}\n    properties:\n      color: {type: string, default: unset}\n";
const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: d8-hooked\n";
const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hooked\ndata:\n  message: {{ .Values.hooked.message | quote }}\n  color: {{ .Values.hooked.internal.color | quote }}\n  modules: {{ .Values.global.enabledModules | join \",\" | quote }}\n  tint: {{ .Values.global.tint | default \"unset\" | quote }}\n  startedBy: {{ .Values.global.startedBy | default \"unset\" | quote }}\n  registry: {{ .Values.global.modulesImages.registry.base | quote }}\n  scheme: {{ .Values.global.modulesImages.registry.scheme | quote }}\n";

/// A global hook (`--global-hooks-dir`): onStartup and a kubernetes binding patch the global
/// values (`startedBy`, `tint` from ConfigMap `default/tint`), afterAll writes a metric.
const GLOBAL_SH: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","onStartup":1,"afterAll":1,"kubernetes":[{"name":"tint","apiVersion":"v1","kind":"ConfigMap","namespace":{"nameSelector":{"matchNames":["default"]}},"nameSelector":{"matchNames":["tint"]},"jqFilter":".data.tint","includeSnapshotsFrom":["tint"]}]}'
  exit 0
fi
case "$(jq -r '.[0].binding' "$BINDING_CONTEXT_PATH")" in
onStartup)
  echo '[{"op":"add","path":"/global/startedBy","value":"onStartup"}]' > "$VALUES_JSON_PATCH_PATH" ;;
afterAll)
  echo '{"name":"global_after_all_runs","action":"add","value":1}' >> "$METRICS_PATH" ;;
tint)
  tint=$(jq -r '.[-1].snapshots.tint[0].filterResult // "none"' "$BINDING_CONTEXT_PATH")
  echo "[{\"op\":\"add\",\"path\":\"/global/tint\",\"value\":\"$tint\"}]" > "$VALUES_JSON_PATCH_PATH" ;;
esac
"#;

/// Flant's Python SDK: the color ConfigMap's `data.color` becomes `internal.color`.
const COLOR_PY: &str = r#"#!/usr/bin/env python3
from deckhouse import hook

config = """
configVersion: v1
kubernetes:
- name: color
  apiVersion: v1
  kind: ConfigMap
  namespace: {nameSelector: {matchNames: [default]}}
  nameSelector: {matchNames: [color]}
  jqFilter: .data.color
  includeSnapshotsFrom: [color]
"""

def main(ctx: hook.Context):
    snapshot = ctx.snapshots.get("color", [])
    ctx.values["hooked"]["internal"]["color"] = snapshot[0]["filterResult"] if snapshot else "none"

if __name__ == "__main__":
    hook.run(main, config=config)
"#;

const TICK_SH: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","schedule":[{"name":"tick","crontab":"*/2 * * * * *"}]}'
  exit 0
fi
echo '{"name":"hooked_schedule_runs_total","action":"add","value":1}' >> "$METRICS_PATH"
"#;

const AFTER_SH: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","afterHelm":10}'
  exit 0
fi
echo '{"name":"hooked_after_helm","action":"set","value":1}' >> "$METRICS_PATH"
echo '[{"op":"add","path":"/hooked/note","value":"written by afterHelm"}]' > "$CONFIG_VALUES_JSON_PATCH_PATH"
"#;

const DELETE_SH: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","afterDeleteHelm":10}'
  exit 0
fi
cat > "$KUBERNETES_PATCH_PATH" <<'EOT'
{"operation":"CreateOrUpdate","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"hooked-deleted","namespace":"default"},"data":{"by":"afterDeleteHelm"}}}
EOT
"#;

/// Fails while ConfigMap `default/breaker` exists.
const BREAKER_SH: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","kubernetes":[{"name":"breaker","apiVersion":"v1","kind":"ConfigMap","namespace":{"nameSelector":{"matchNames":["default"]}},"nameSelector":{"matchNames":["breaker"]},"includeSnapshotsFrom":["breaker"],"executeHookOnSynchronization":false}]}'
  exit 0
fi
if [ "$(jq '.[-1].snapshots.breaker | length' "$BINDING_CONTEXT_PATH")" != "0" ]; then
  echo "broken on purpose" >&2
  exit 1
fi
"#;

/// Bindings on the cluster-wide kinds a hook may watch: Nodes, Pods, and ConfigMaps in the
/// namespaces a label selects. It only counts its runs.
const WATCHER_SH: &str = r#"#!/bin/sh
if [ "$1" = "--config" ]; then
  echo '{"configVersion":"v1","kubernetes":[{"name":"nodes","apiVersion":"v1","kind":"Node","executeHookOnSynchronization":false},{"name":"pods","apiVersion":"v1","kind":"Pod","namespace":{"nameSelector":{"matchNames":["default"]}},"executeHookOnSynchronization":false},{"name":"labelled","apiVersion":"v1","kind":"ConfigMap","namespace":{"labelSelector":{"matchLabels":{"hooked.example/watch":"yes"}}},"executeHookOnSynchronization":false}]}'
  exit 0
fi
echo '{"name":"hooked_watcher_runs_total","action":"add","value":1}' >> "$METRICS_PATH"
"#;

async fn publish(push: &Registry, layout: &Layout, version: &str) {
    let files: &[(&str, &str)] = &[
        ("module.yaml", MODULE_YAML),
        ("openapi/config-values.yaml", CONFIG_SCHEMA),
        ("openapi/values.yaml", VALUES_SCHEMA),
        ("templates/ns.yaml", NAMESPACE),
        ("templates/cm.yaml", CONFIG_MAP),
        ("hooks/color.py", COLOR_PY),
        ("hooks/tick.sh", TICK_SH),
        ("hooks/after.sh", AFTER_SH),
        ("hooks/delete.sh", DELETE_SH),
        ("hooks/breaker.sh", BREAKER_SH),
        ("hooks/watcher.sh", WATCHER_SH),
    ];
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, d)| (*n, d.as_bytes())).collect();
    let image = ImageBuilder::new(&format!("hooked-{version}"))
        .files(&refs)
        .executable(&[
            "hooks/color.py",
            "hooks/tick.sh",
            "hooks/after.sh",
            "hooks/delete.sh",
            "hooks/breaker.sh",
            "hooks/watcher.sh",
        ])
        .build(layout);
    push_module(push, layout, "hooked", version, &image).await;
}

fn config_map(name: &str, color: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n  color: {color}\n"
    )
}

async fn scrape(port: u16) -> String {
    reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_controller_runs_module_hooks() {
    let requests = tempfile::tempdir().unwrap();
    let log = requests.path().join("requests.jsonl");
    let stage = Stage::start_with(&crate::rbac::apiserver_flags(&["deckhouse"], &log)).await;
    let Stage {
        apiserver,
        admin,
        upstream,
        push,
        dir,
        layout,
    } = &stage;
    // The controller runs as ServiceAccount deckhouse with the chart's roles: the module's own
    // objects are written through `moduleManagerClusterAdmin`'s binding to cluster-admin.
    crate::rbac::apply_chart_rbac(admin);
    let deckhouse = apiserver.kubeconfig("system-serviceaccount-d8-system-deckhouse");
    publish(push, layout, "v1.0.0").await;
    apply(admin, dir.path(), "color.yaml", &config_map("color", "red"));
    apply(
        admin,
        dir.path(),
        "tint.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tint\n  namespace: default\ndata:\n  tint: amber\n",
    );
    // The registry module's Secret: its registry becomes global.modulesImages.registry.
    apply(
        admin,
        dir.path(),
        "registry.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: deckhouse-registry\n  namespace: d8-system\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{\"auths\":{}}'\n  address: registry.example.com\n  path: /deckhouse/ce\n",
    );
    let global_hooks = dir.path().join("global-hooks");
    std::fs::create_dir_all(&global_hooks).unwrap();
    std::fs::write(global_hooks.join("tint.sh"), GLOBAL_SH).unwrap();
    std::fs::set_permissions(
        global_hooks.join("tint.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let metrics_port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .arg("controller")
        .arg("--kubeconfig")
        .arg(&deckhouse)
        .args(["--identity", "test-controller", "--without-release-engine"])
        .arg(format!("--metrics-address=127.0.0.1:{metrics_port}"))
        .arg("--module-source-interval=2s")
        .arg("--global-hooks-dir")
        .arg(&global_hooks)
        .arg("--downloaded-modules-dir")
        .arg(dir.path().join("downloaded"));
    command.env_remove("RUST_LOG");
    let controller =
        Service::spawn("d8 controller", command, dir.path().join("controller.log")).unwrap();
    let source = format!(
        "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleSource\nmetadata:\n  name: example\nspec:\n  registry:\n    scheme: HTTP\n    repo: {}/{REPO}\n",
        upstream.host()
    );
    apply(admin, dir.path(), "source.yaml", &source);
    let config = |enabled: bool| {
        format!(
            "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: hooked\nspec:\n  enabled: {enabled}\n  version: 1\n  settings:\n    message: hi\n"
        )
    };
    apply(admin, dir.path(), "config.yaml", &config(true));
    let rendered = |field: &str| {
        get(
            admin,
            &[
                "get",
                "configmap",
                "hooked",
                "-n",
                "d8-hooked",
                "-o",
                &format!("jsonpath={{.data.{field}}}"),
            ],
        )
    };

    // Config, internal (set by the Python hook from the watched ConfigMap) and global values.
    until(
        "the chart is rendered with the color the hook found",
        || rendered("color").as_deref() == Some("red"),
    )
    .await;
    assert_eq!(rendered("message").as_deref(), Some("hi"));
    assert_eq!(rendered("modules").as_deref(), Some("hooked"));
    // Global values the global hook patched: onStartup, and its kubernetes binding.
    assert_eq!(rendered("startedBy").as_deref(), Some("onStartup"));
    assert_eq!(rendered("tint").as_deref(), Some("amber"));
    // The registry, under Deckhouse's names.
    assert_eq!(
        rendered("registry").as_deref(),
        Some("registry.example.com/deckhouse/ce")
    );
    assert_eq!(rendered("scheme").as_deref(), Some("https"));
    // The Secret changes: every module converges with the new registry.
    kubectl_ok(
        admin,
        &[
            "patch",
            "secret",
            "deckhouse-registry",
            "-n",
            "d8-system",
            "-p",
            r#"{"stringData":{"scheme":"http"}}"#,
        ],
    );
    until("the new registry scheme is rendered", || {
        rendered("scheme").as_deref() == Some("http")
    })
    .await;
    // The afterHelm hook's config values patch is written back to the ModuleConfig.
    let setting = |field: &str| {
        get(
            admin,
            &[
                "get",
                "moduleconfig",
                "hooked",
                "-o",
                &format!("jsonpath={{.spec.settings.{field}}}"),
            ],
        )
    };
    until("the config values patch is in the ModuleConfig", || {
        setting("note").as_deref() == Some("written by afterHelm")
    })
    .await;
    assert_eq!(setting("message").as_deref(), Some("hi"));

    // The global hook's ConfigMap changes: global values change, every module converges.
    apply(
        admin,
        dir.path(),
        "tint.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tint\n  namespace: default\ndata:\n  tint: teal\n",
    );
    until("the new global tint is rendered", || {
        rendered("tint").as_deref() == Some("teal")
    })
    .await;

    // The watched ConfigMap changes: the hook patches the values, the module renders again.
    apply(
        admin,
        dir.path(),
        "color.yaml",
        &config_map("color", "blue"),
    );
    until("the new color is rendered", || {
        rendered("color").as_deref() == Some("blue")
    })
    .await;

    // afterHelm and schedule hooks' metrics on /metrics, labelled with module and hook.
    let mut metrics = String::new();
    for _ in 0..60 {
        metrics = scrape(metrics_port).await;
        let ticks = metrics
            .lines()
            .find(|l| l.starts_with("hooked_schedule_runs_total{"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        if ticks >= 2.0 && metrics.contains("hooked_after_helm{") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let after = metrics
        .lines()
        .find(|l| l.starts_with("hooked_after_helm{"))
        .unwrap_or_else(|| panic!("no afterHelm metric:\n{metrics}"));
    // Named as addon-operator names hooks: the path relative to the modules directory, where
    // a downloaded module is linked under its own name.
    assert!(
        after.contains("module=\"hooked\"")
            && after.contains("hook=\"hooked/hooks/after.sh\"")
            && after.ends_with(" 1"),
        "{after}"
    );
    assert!(
        metrics.contains("hooked_schedule_runs_total{"),
        "no schedule metric:\n{metrics}"
    );
    // The global afterAll hook's metric: labelled with its hook, no module.
    let after_all = metrics
        .lines()
        .find(|l| l.starts_with("global_after_all_runs"))
        .unwrap_or_else(|| panic!("no afterAll metric:\n{metrics}"));
    assert!(
        after_all.contains("hook=\"tint.sh\"") && !after_all.contains("module="),
        "{after_all}"
    );

    // A failing hook: its error on the Module status; retried until it passes.
    apply(
        admin,
        dir.path(),
        "breaker.yaml",
        &config_map("breaker", "x"),
    );
    let status = |path: &str| {
        get(
            admin,
            &["get", "module", "hooked", "-o", &format!("jsonpath={path}")],
        )
        .unwrap_or_default()
    };
    until("the Module shows the hook error", || {
        status("{.status.phase}") == "Error"
            && status("{.status.conditions[?(@.type==\"IsReady\")].message}")
                .contains("broken on purpose")
    })
    .await;
    // addon-operator's words: `<hook>: module hook '<hook>' failed: <stderr>`, and the
    // failing hooks in status.hooksState.
    let message = status("{.status.conditions[?(@.type==\"IsReady\")].message}");
    let hook = "hooked/hooks/breaker.sh";
    assert_eq!(
        message,
        format!("{hook}: module hook '{hook}' failed: broken on purpose")
    );
    assert_eq!(status("{.status.hooksState}"), message);
    assert_eq!(
        status("{.status.conditions[?(@.type==\"IsReady\")].reason}"),
        "HookError"
    );
    kubectl_ok(admin, &["delete", "configmap", "breaker", "-n", "default"]);
    until("the retried hook passes and the Module is Ready", || {
        status("{.status.phase}") == "Ready"
    })
    .await;
    assert_eq!(status("{.status.hooksState}"), "");

    // The deckhouse ModuleConfig's logLevel takes effect on the running controller.
    assert!(
        !controller.log().contains("DEBUG"),
        "debug lines at level info"
    );
    apply(
        admin,
        dir.path(),
        "deckhouse.yaml",
        "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: deckhouse\nspec:\n  version: 1\n  settings:\n    logLevel: Debug\n",
    );
    until("the controller logs at level debug", || {
        controller.log().contains("DEBUG")
    })
    .await;

    // Disabled: resources removed, afterDeleteHelm ran.
    apply(admin, dir.path(), "config.yaml", &config(false));
    until("the rendered ConfigMap is gone", || {
        rendered("color").is_none()
    })
    .await;
    until("afterDeleteHelm created its ConfigMap", || {
        get(
            admin,
            &[
                "get",
                "configmap",
                "hooked-deleted",
                "-n",
                "default",
                "-o",
                "jsonpath={.data.by}",
            ],
        )
        .as_deref()
            == Some("afterDeleteHelm")
    })
    .await;
    crate::rbac::assert_deckhouse_calls_beyond(
        "module_hooks",
        &log,
        crate::rbac::MODULE_CHART_NAMESPACE,
    )
    .await;
}
