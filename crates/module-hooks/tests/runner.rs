//! Real hook processes through the runner: a shell hook, a Python hook written with Flant's
//! `deckhouse` SDK, a module-sdk-style binary, an `enabled` script, and chroot mode.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use module_hooks::output::{CreateMode, MetricAction};
use module_hooks::{
    BindingContext, ChrootManager, ChrootOptions, Error, HookKind, KubeOperation, ModuleRef,
    Runner, RunnerOptions, WatchEvent, context,
};
use serde_json::json;

fn write_exec(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn runner(tmp: &Path, chroot: Option<Arc<ChrootManager>>) -> Runner {
    Runner::new(
        RunnerOptions {
            tmp_dir: tmp.join("hook-tmp"),
            ..RunnerOptions::default()
        },
        chroot,
    )
}

const SHELL_HOOK: &str = r#"#!/bin/bash
if [ "$1" == "--config" ]; then
  cat <<EOC
configVersion: v1
beforeHelm: 10
kubernetes:
- name: cms
  kind: ConfigMap
  jqFilter: .data
EOC
  exit 0
fi
echo '{"level":"info","msg":"hello from hook","n":1}'
count=$(grep -o '"binding"' "$BINDING_CONTEXT_PATH" | wc -l)
seen=false
if [ -e "$SECRET_FILE" ]; then seen=true; fi
echo "[{\"op\":\"add\",\"path\":\"/echo/internal/contexts\",\"value\":$count}]" > "$VALUES_JSON_PATCH_PATH"
echo "{\"op\":\"add\",\"path\":\"/echo/internal/seen\",\"value\":$seen}" >> "$VALUES_JSON_PATCH_PATH"
echo '{"name":"hook_runs","add":1}' >> "$METRICS_PATH"
echo '{"operation":"Delete","kind":"ConfigMap","namespace":"d8","name":"old"}' >> "$KUBERNETES_PATCH_PATH"
"#;

#[tokio::test]
async fn shell_hook_discovered_configured_and_run() {
    let tmp = tempfile::tempdir().unwrap();
    let module = ModuleRef::new("echo", tmp.path().join("modules/100-echo"));
    write_exec(&module.dir.join("hooks/a/hook.sh"), SHELL_HOOK);
    write_exec(
        &module.dir.join("hooks/lib/helper.sh"),
        "#!/bin/sh\nexit 1\n",
    );
    std::fs::write(module.dir.join("hooks/README.md"), "not a hook").unwrap();
    let runner = runner(tmp.path(), None);
    let hooks = runner.discover_module(&module).await.unwrap();
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    let hook = &hooks[0];
    assert_eq!(hook.name, "100-echo/hooks/a/hook.sh");
    assert_eq!(hook.config.before_helm, Some(10.0));

    let mut monitors = context::monitors_for(&hook.config);
    let sync = monitors
        .get_mut("cms")
        .unwrap()
        .synchronize(vec![
            json!({"kind":"ConfigMap","metadata":{"name":"a","namespace":"d8"},"data":{"k":"v"}}),
        ])
        .unwrap()
        .unwrap();
    let ev = monitors
        .get_mut("cms")
        .unwrap()
        .event(
            WatchEvent::Modified,
            json!({"kind":"ConfigMap","metadata":{"name":"a","namespace":"d8"},"data":{"k":"w"}}),
        )
        .unwrap()
        .unwrap();
    let out = runner
        .run(
            hook,
            &[sync, ev],
            &json!({"echo": {"internal": {}}}),
            &json!({}),
        )
        .await
        .unwrap();
    assert_eq!(
        out.values_patch,
        vec![
            json!({"op":"add","path":"/echo/internal/contexts","value":2}),
            json!({"op":"add","path":"/echo/internal/seen","value":false}),
        ]
    );
    assert_eq!(out.metrics[0].action, MetricAction::Add(1.0));
    assert!(
        matches!(&out.kube_operations[0], KubeOperation::Delete { target, .. } if target.name == "old")
    );
    assert!(
        out.logs
            .iter()
            .any(|l| l.message == "hello from hook" && l.level.as_deref() == Some("info"))
    );
    // Temporary files are removed after the run.
    assert_eq!(
        std::fs::read_dir(tmp.path().join("hook-tmp"))
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test]
async fn failing_hook_reports_its_stderr_and_bad_config_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let module = ModuleRef::new("bad", tmp.path().join("modules/bad"));
    write_exec(
        &module.dir.join("hooks/fail.sh"),
        "#!/bin/sh\nif [ \"$1\" = --config ]; then echo '{\"configVersion\":\"v1\",\"afterHelm\":1}'; exit 0; fi\necho 'step 1' >&2\necho 'cannot reach the API' >&2\nexit 3\n",
    );
    let runner = runner(tmp.path(), None);
    let hooks = runner.discover_module(&module).await.unwrap();
    let err = runner
        .run(
            &hooks[0],
            &[BindingContext::helm("afterHelm")],
            &json!({}),
            &json!({}),
        )
        .await
        .unwrap_err();
    match err {
        Error::Failed {
            exit_code, message, ..
        } => {
            assert_eq!(exit_code, Some(3));
            assert_eq!(message, "step 1\ncannot reach the API");
        }
        other => panic!("{other:?}"),
    }
    write_exec(
        &module.dir.join("hooks/zz.sh"),
        "#!/bin/sh\necho 'configVersion: v1\nkubernetes:\n- name: x'\n",
    );
    let err = runner
        .discover_module(&module)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("`bad` module hook `bad/hooks/zz.sh` --config invalid: ")
            && err.contains("kubernetes.0.kind in body is required"),
        "{err}"
    );
}

const PYTHON_HOOK: &str = r#"#!/usr/bin/env python3
from deckhouse import hook

config = """
configVersion: v1
kubernetes:
- name: nodes
  apiVersion: v1
  kind: Node
  jqFilter: .metadata.name
"""

def main(ctx: hook.Context):
    names = [o["filterResult"] for o in ctx.binding_context.get("objects", [])]
    ctx.values["echo"]["internal"]["nodes"] = names
    ctx.kubernetes.create_or_update({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "nodes", "namespace": "d8-echo"},
        "data": {"count": str(len(names))},
    })
    ctx.metrics.collect({"name": "echo_nodes", "set": len(names), "labels": {"src": "python"}})

if __name__ == "__main__":
    hook.run(main, config=config)
"#;

fn python_with_sdk() -> Option<String> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = std::process::Command::new(&python)
        .args(["-c", "import deckhouse.hook"])
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(python)
}

#[tokio::test]
async fn python_hook_with_the_deckhouse_sdk() {
    let Some(_python) = python_with_sdk() else {
        panic!("python3 with the `deckhouse` package is required: pip install deckhouse");
    };
    let tmp = tempfile::tempdir().unwrap();
    let module = ModuleRef::new("echo", tmp.path().join("modules/echo"));
    write_exec(&module.dir.join("hooks/nodes.py"), PYTHON_HOOK);
    let runner = runner(tmp.path(), None);
    let hooks = runner.discover_module(&module).await.unwrap();
    let hook = &hooks[0];
    assert_eq!(hook.kind, HookKind::Python { venv: None });
    assert_eq!(hook.config.kubernetes[0].kind, "Node");

    let mut monitors = context::monitors_for(&hook.config);
    let sync = monitors
        .get_mut("nodes")
        .unwrap()
        .synchronize(vec![
            json!({"kind":"Node","metadata":{"name":"n2"}}),
            json!({"kind":"Node","metadata":{"name":"n1"}}),
        ])
        .unwrap()
        .unwrap();
    let out = runner
        .run(
            hook,
            &[sync],
            &json!({"echo": {"internal": {}}}),
            &json!({}),
        )
        .await
        .unwrap();
    assert_eq!(
        out.values_patch,
        vec![json!({"op":"add","path":"/echo/internal/nodes","value":["n1","n2"]})]
    );
    match &out.kube_operations[..] {
        [
            KubeOperation::Create {
                mode: CreateMode::CreateOrUpdate,
                object,
                ..
            },
        ] => {
            assert_eq!(object["data"]["count"], "2")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(out.metrics[0].name, "echo_nodes");
    assert_eq!(out.metrics[0].action, MetricAction::Set(2.0));
}

/// A stand-in for a Go module-sdk binary: same commands, same outputs.
const SDK_BINARY: &str = r#"#!/bin/sh
case "$1 $2" in
  "hook list") printf 'Found 2 items:\n0 - first\n1 - second\n' ;;
  "hook config") echo '[{"configVersion":"v1","metadata":{"name":"first","path":""},"beforeHelm":5},{"configVersion":"v1","metadata":{"name":"second","path":""},"schedule":[{"name":"tick","crontab":"*/5 * * * *"}]}]' ;;
  "hook run") echo "[{\"op\":\"add\",\"path\":\"/echo/internal/ran\",\"value\":$3}]" > "$VALUES_JSON_PATCH_PATH" ;;
  *) echo "unknown command" >&2; exit 1 ;;
esac
"#;

#[tokio::test]
async fn module_sdk_binary_lists_configures_and_runs_by_index() {
    let tmp = tempfile::tempdir().unwrap();
    let module = ModuleRef::new("echo", tmp.path().join("modules/echo"));
    write_exec(&module.dir.join("hooks/go-hooks"), SDK_BINARY);
    let runner = runner(tmp.path(), None);
    let hooks = runner.discover_module(&module).await.unwrap();
    let names: Vec<&str> = hooks.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "echo/hooks/go-hooks:first:0",
            "echo/hooks/go-hooks:second:1"
        ]
    );
    assert_eq!(hooks[0].config.before_helm, Some(5.0));
    assert_eq!(hooks[1].config.schedules[0].name, "tick");
    let out = runner
        .run(
            &hooks[1],
            &[BindingContext::schedule(&hooks[1].config.schedules[0])],
            &json!({}),
            &json!({}),
        )
        .await
        .unwrap();
    assert_eq!(
        out.values_patch,
        vec![json!({"op":"add","path":"/echo/internal/ran","value":1})]
    );
}

#[tokio::test]
async fn enabled_script_result() {
    let tmp = tempfile::tempdir().unwrap();
    let module = ModuleRef::new("echo", tmp.path().join("modules/echo"));
    let runner = runner(tmp.path(), None);
    assert!(
        runner
            .run_enabled_script(&module, &json!({}), &json!({}))
            .await
            .unwrap()
    );
    write_exec(
        &module.dir.join("enabled"),
        "#!/bin/sh\ngrep -q '\"on\":true' \"$CONFIG_VALUES_PATH\" && echo true > \"$MODULE_ENABLED_RESULT\" || echo false > \"$MODULE_ENABLED_RESULT\"\n",
    );
    assert!(
        runner
            .run_enabled_script(&module, &json!({}), &json!({"on": true}))
            .await
            .unwrap()
    );
    assert!(
        !runner
            .run_enabled_script(&module, &json!({}), &json!({"on": false}))
            .await
            .unwrap()
    );
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The same hook sees a file of the controller's filesystem without chroot mode and cannot
/// with it; its outputs still arrive through the chroot's /tmp.
#[tokio::test]
async fn chroot_mode_hides_the_controllers_filesystem() {
    if !is_root() {
        panic!("chroot mode needs root (bind mounts and chroot)");
    }
    // Not under /tmp: the chroot's own /tmp is mounted there and would hide the module.
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let secret = tmp.path().join("controller-secret");
    std::fs::write(&secret, "s3cr3t").unwrap();
    let module = ModuleRef::new("echo", tmp.path().join("modules/echo"));
    write_exec(&module.dir.join("hooks/hook.sh"), SHELL_HOOK);
    write_exec(
        &module.dir.join("enabled"),
        "#!/bin/bash\nif [ -e \"$SECRET_FILE\" ]; then echo true; else echo false; fi > \"$MODULE_ENABLED_RESULT\"\n",
    );
    let options = || RunnerOptions {
        tmp_dir: tmp.path().join("hook-tmp"),
        env: vec![("SECRET_FILE".into(), secret.display().to_string())],
        ..RunnerOptions::default()
    };
    let seen = |out: &module_hooks::HookOutput| out.values_patch[1]["value"].clone();

    let plain = Runner::new(options(), None);
    let hooks = plain.discover_module(&module).await.unwrap();
    let out = plain
        .run(
            &hooks[0],
            &[BindingContext::helm("beforeHelm")],
            &json!({}),
            &json!({}),
        )
        .await
        .unwrap();
    assert_eq!(seen(&out), json!(true));
    assert!(
        plain
            .run_enabled_script(&module, &json!({}), &json!({}))
            .await
            .unwrap()
    );

    let manager = Arc::new(ChrootManager::new(ChrootOptions::deckhouse(
        tmp.path().join("chroot"),
    )));
    let chrooted = Runner::new(options(), Some(manager.clone()));
    let hooks = chrooted.discover_module(&module).await.unwrap();
    assert_eq!(
        hooks[0].config.before_helm,
        Some(10.0),
        "--config runs in the chroot too"
    );
    let out = chrooted
        .run(
            &hooks[0],
            &[BindingContext::helm("beforeHelm")],
            &json!({}),
            &json!({}),
        )
        .await
        .unwrap();
    assert_eq!(seen(&out), json!(false));
    assert!(
        !chrooted
            .run_enabled_script(&module, &json!({}), &json!({}))
            .await
            .unwrap()
    );
    // The module's own files are visible inside, at their own path.
    assert!(
        module_hooks::runner::path_inside(
            &manager.options().module_root("echo"),
            &module.dir.join("hooks/hook.sh")
        )
        .exists()
    );
    manager.disassemble_all().unwrap();
    assert!(
        !module_hooks::runner::path_inside(
            &manager.options().module_root("echo"),
            &module.dir.join("hooks/hook.sh")
        )
        .exists()
    );
}
