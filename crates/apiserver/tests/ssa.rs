//! Server-side apply of a realistic module (every kind a Deckhouse module chart usually
//! holds) with kubectl and with kube-rs' dynamic API, as the module runtime applies charts.

#[path = "support/common.rs"]
mod common;
#[path = "support/kubectl.rs"]
mod kubectl;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope};
use kubectl::Kubectl;
use serde_json::{Value, json};

const MODULE: &str = include_str!("support/module.yaml");

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The header and the first row of `kubectl get`.
async fn get(k: &Kubectl<'_>, args: &[&str]) -> (Vec<String>, Vec<String>) {
    let (ok, out, err) = k.run(args, None).await;
    assert!(ok, "{err}");
    let mut lines = out.lines();
    let own = |l: Option<&str>| {
        words(l.unwrap_or_default())
            .into_iter()
            .map(str::to_string)
            .collect()
    };
    (own(lines.next()), own(lines.next()))
}

/// The store's current revision (a list's resourceVersion).
async fn revision(k: &Kubectl<'_>) -> String {
    let (ok, out, err) = k.run(&["get", "--raw", "/api/v1/namespaces"], None).await;
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn a_module_applies_server_side_with_kubectl() {
    let s = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let k = Kubectl {
        kubeconfig: s.server.admin_kubeconfig(),
        home: home.path(),
    };
    let (ok, out, err) = k
        .run(&["apply", "--server-side", "-f", "-"], Some(MODULE))
        .await;
    assert!(ok, "{err}");
    assert_eq!(
        out.lines()
            .filter(|l| l.ends_with(" serverside-applied"))
            .count(),
        20,
        "{out}"
    );
    assert!(
        out.contains("deployment.apps/demo serverside-applied"),
        "{out}"
    );

    // `kubectl get` with the usual columns.
    let ns = ["-n", "d8-demo"];
    let cases: &[(&[&str], &[&str], &[&str])] = &[
        (
            &["get", "deploy"],
            &["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
            &["demo", "0/2", "0", "0"],
        ),
        (
            &["get", "svc"],
            &[
                "NAME",
                "TYPE",
                "CLUSTER-IP",
                "EXTERNAL-IP",
                "PORT(S)",
                "AGE",
            ],
            &["demo", "ClusterIP", "<none>", "<none>", "80/TCP,8443/TCP"],
        ),
        (
            &["get", "ds"],
            &[
                "NAME",
                "DESIRED",
                "CURRENT",
                "READY",
                "UP-TO-DATE",
                "AVAILABLE",
                "NODE",
                "SELECTOR",
                "AGE",
            ],
            &[
                "demo-agent",
                "0",
                "0",
                "0",
                "0",
                "0",
                "kubernetes.io/os=linux",
            ],
        ),
        (
            &["get", "sts"],
            &["NAME", "READY", "AGE"],
            &["demo-db", "0/1"],
        ),
        (
            &["get", "cj"],
            &[
                "NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE",
            ],
            &[
                "demo-cleanup",
                "*/15",
                "*",
                "*",
                "*",
                "*",
                "<none>",
                "False",
                "0",
                "<none>",
            ],
        ),
        (
            &["get", "pdb"],
            &[
                "NAME",
                "MIN",
                "AVAILABLE",
                "MAX",
                "UNAVAILABLE",
                "ALLOWED",
                "DISRUPTIONS",
                "AGE",
            ],
            &["demo", "N/A", "1", "0"],
        ),
        (
            &["get", "ing"],
            &["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
            &["demo", "nginx", "demo.example.com", "80,", "443"],
        ),
        (
            &["get", "netpol"],
            &["NAME", "POD-SELECTOR", "AGE"],
            &["demo", "app=demo"],
        ),
        (
            &["get", "hpa"],
            &[
                "NAME",
                "REFERENCE",
                "TARGETS",
                "MINPODS",
                "MAXPODS",
                "REPLICAS",
                "AGE",
            ],
            &[
                "demo",
                "Deployment/demo",
                "cpu:",
                "<unknown>/80%",
                "2",
                "4",
                "0",
            ],
        ),
        (
            &["get", "rolebinding"],
            &["NAME", "ROLE", "AGE"],
            &["demo", "Role/demo"],
        ),
        (&["get", "sa"], &["NAME", "SECRETS", "AGE"], &["demo", "0"]),
        (
            &["get", "secret"],
            &["NAME", "TYPE", "DATA", "AGE"],
            &["demo-tls", "kubernetes.io/tls", "2"],
        ),
        (
            &["get", "pc", "demo-critical"],
            &["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"],
            &["demo-critical", "1000000", "False"],
        ),
        (
            &["get", "validatingwebhookconfigurations"],
            &["NAME", "WEBHOOKS", "AGE"],
            &["d8-demo", "1"],
        ),
        (
            &["get", "clusterrolebinding", "d8:demo"],
            &["NAME", "ROLE", "AGE"],
            &["d8:demo", "ClusterRole/d8:demo"],
        ),
        (
            &["get", "clusterrole", "d8:demo"],
            &["NAME", "CREATED", "AT"],
            &["d8:demo"],
        ),
    ];
    for (args, header, row) in cases {
        let mut a = args.to_vec();
        a.extend(ns);
        let (h, r) = get(&k, &a).await;
        assert_eq!(h, *header, "kubectl {a:?}");
        assert!(
            r.len() >= row.len() && r[..row.len()] == **row,
            "kubectl {a:?}: {r:?}"
        );
    }
    let (ok, out, _) = k
        .run(&["get", "all", "-n", "d8-demo", "-o", "name"], None)
        .await;
    assert!(ok);
    for name in [
        "service/demo",
        "deployment.apps/demo",
        "daemonset.apps/demo-agent",
        "cronjob.batch/demo-cleanup",
    ] {
        assert!(out.lines().any(|l| l == name), "{name} in `get all`: {out}");
    }

    // Applying the same manifests again writes nothing.
    let before = revision(&k).await;
    let (ok, _, err) = k
        .run(&["apply", "--server-side", "-f", "-"], Some(MODULE))
        .await;
    assert!(ok, "{err}");
    assert_eq!(revision(&k).await, before, "a second apply changed objects");

    // A field left out of the manifest is removed from the object.
    let trimmed = MODULE
        .replace("        - name: LOG_LEVEL\n          value: Info\n", "")
        .replace("    tier: web\n", "")
        .replace("  revisionHistoryLimit: 2\n", "");
    let (ok, _, err) = k
        .run(&["apply", "--server-side", "-f", "-"], Some(&trimmed))
        .await;
    assert!(ok, "{err}");
    let (ok, out, _) = k
        .run(
            &[
                "get",
                "deploy",
                "demo",
                "-n",
                "d8-demo",
                "-o",
                "json",
                "--show-managed-fields",
            ],
            None,
        )
        .await;
    assert!(ok);
    let d: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["metadata"]["labels"], json!({"app": "demo"}));
    assert!(d["spec"].get("revisionHistoryLimit").is_none());
    let env: Vec<&str> = d["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(env, ["POD_NAME"]);
    assert_eq!(d["metadata"]["managedFields"][0]["manager"], "kubectl");
    assert_eq!(d["metadata"]["managedFields"][0]["operation"], "Apply");

    // Another manager changing an owned field: kubectl's conflict error, then a forced take-over.
    let ops = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: demo\n  namespace: d8-demo\nspec:\n  replicas: 5\n";
    let args = ["apply", "--server-side", "--field-manager=ops", "-f", "-"];
    let (ok, _, err) = k.run(&args, Some(ops)).await;
    assert!(!ok);
    assert!(
        err.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#),
        "{err}"
    );
    assert!(err.contains("--force-conflicts"), "{err}");
    let (ok, _, err) = k
        .run(&[&args[..], &["--force-conflicts"]].concat(), Some(ops))
        .await;
    assert!(ok, "{err}");
    let (ok, out, _) = k
        .run(
            &[
                "get",
                "deploy",
                "demo",
                "-n",
                "d8-demo",
                "--show-managed-fields",
                "-o",
                "jsonpath={.spec.replicas} {.metadata.managedFields[*].manager}",
            ],
            None,
        )
        .await;
    assert!(ok);
    assert_eq!(out, "5 kubectl ops");
    // Now the module's own apply is the one in conflict.
    let (ok, _, err) = k
        .run(&["apply", "--server-side", "-f", "-"], Some(&trimmed))
        .await;
    assert!(!ok);
    assert!(
        err.contains(r#"conflict with "ops": .spec.replicas"#),
        "{err}"
    );

    // kubectl scale goes through the scale subresource.
    let (ok, out, err) = k
        .run(
            &["scale", "deployment/demo", "-n", "d8-demo", "--replicas=3"],
            None,
        )
        .await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "deployment.apps/demo scaled");
    let (_, out, _) = k
        .run(
            &[
                "get",
                "deploy",
                "demo",
                "-n",
                "d8-demo",
                "-o",
                "jsonpath={.spec.replicas}",
            ],
            None,
        )
        .await;
    assert_eq!(out, "3");
}

/// Applies every document of `yaml` as the module runtime does: resolve the kind through
/// discovery, then `Patch::Apply` on a dynamic API.
async fn apply_all(
    client: &kube::Client,
    discovery: &Discovery,
    yaml: &str,
    pp: &PatchParams,
) -> Result<Vec<DynamicObject>, kube::Error> {
    let mut out = Vec::new();
    for doc in serde_saphyr::from_multiple::<Value>(yaml).unwrap() {
        let obj: DynamicObject = serde_json::from_value(doc).unwrap();
        let tm = obj.types.clone().unwrap();
        let gvk = GroupVersionKind::try_from(&tm).unwrap();
        let (ar, caps) = discovery.resolve_gvk(&gvk).expect("kind is served");
        let name = obj.metadata.name.clone().unwrap();
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                obj.metadata.namespace.as_deref().unwrap(),
                &ar,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        out.push(api.patch(&name, pp, &Patch::Apply(&obj)).await?);
    }
    Ok(out)
}

#[tokio::test]
async fn re_applying_a_secret_with_string_data_is_a_no_op() {
    let s = common::start().await;
    let client = s.admin().await;
    let secrets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Secret")),
    );
    let secret: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
        "stringData": {"user": "admin"}, "data": {"extra": "eA=="}
    }))
    .unwrap();
    let pp = PatchParams::apply("helm").force();
    let first = secrets
        .patch("creds", &pp, &Patch::Apply(&secret))
        .await
        .unwrap();
    assert_eq!(
        first.data["data"],
        json!({"extra": "eA==", "user": "YWRtaW4="})
    );
    // managedFields record times to the second: a later apply that changed nothing must not
    // restamp them (that would be a write, a new revision and a watch event).
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = secrets
        .patch("creds", &pp, &Patch::Apply(&secret))
        .await
        .unwrap();
    assert_eq!(
        first.metadata.resource_version,
        second.metadata.resource_version
    );
}

#[tokio::test]
async fn dynamic_apply_status_and_conflicts_through_kube_rs() {
    let s = common::start().await;
    let client = s.admin().await;
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let pp = PatchParams::apply("deckhouse").force();

    // Dry run creates nothing.
    apply_all(
        &client,
        &discovery,
        MODULE,
        &PatchParams::apply("deckhouse").dry_run(),
    )
    .await
    .unwrap_err(); // the namespace does not exist yet, so namespaced objects are refused
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "d8-demo");
    assert!(deployments.get_opt("demo").await.unwrap().is_none());

    let first = apply_all(&client, &discovery, MODULE, &pp).await.unwrap();
    assert_eq!(first.len(), 20);
    let second = apply_all(&client, &discovery, MODULE, &pp).await.unwrap();
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(
            a.metadata.resource_version, b.metadata.resource_version,
            "{:?} changed on a no-op apply",
            a.metadata.name
        );
    }

    // A kubelet-like status update, then the module's apply leaves status alone.
    let status = json!({"status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
        "readyReplicas": 2, "availableReplicas": 2,
        "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}});
    let d = deployments
        .patch_status("demo", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(d.status.as_ref().unwrap().available_replicas, Some(2));
    let mf = d.metadata.managed_fields.clone().unwrap();
    assert!(
        mf.iter().any(|e| e.subresource.as_deref() == Some("status")
            && e.operation.as_deref() == Some("Update")),
        "{mf:?}"
    );
    let rv = d.metadata.resource_version.clone();
    apply_all(&client, &discovery, MODULE, &pp).await.unwrap();
    let d = deployments.get("demo").await.unwrap();
    assert_eq!(d.metadata.resource_version, rv);
    assert_eq!(d.status.unwrap().ready_replicas, Some(2));

    // Status through server-side apply on the status subresource.
    let ds_api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "d8-demo",
        &discovery
            .resolve_gvk(&GroupVersionKind::gvk("apps", "v1", "DaemonSet"))
            .unwrap()
            .0,
    );
    let ds_status: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "demo-agent"},
        "status": {"desiredNumberScheduled": 1, "numberReady": 1, "numberAvailable": 1, "currentNumberScheduled": 1, "updatedNumberScheduled": 1}
    }))
    .unwrap();
    let ds = ds_api
        .patch_status(
            "demo-agent",
            &PatchParams::apply("kubelet"),
            &Patch::Apply(&ds_status),
        )
        .await
        .unwrap();
    assert_eq!(ds.data["status"]["numberReady"], 1);
    assert!(ds.data["spec"]["template"].is_object(), "spec kept");

    // Another manager's different value: 409 Conflict, Kubernetes' message.
    let other: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "demo", "namespace": "d8-demo"},
        "spec": {"replicas": 7}
    }))
    .unwrap();
    let deploy_api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "d8-demo",
        &discovery
            .resolve_gvk(&GroupVersionKind::gvk("apps", "v1", "Deployment"))
            .unwrap()
            .0,
    );
    let err = deploy_api
        .patch(
            "demo",
            &PatchParams::apply("hpa-controller"),
            &Patch::Apply(&other),
        )
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(e) => {
            assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
            assert_eq!(
                e.message,
                r#"Apply failed with 1 conflict: conflict with "deckhouse": .spec.replicas"#
            );
        }
        other => panic!("{other:?}"),
    }
    // Apply without a field manager is refused as Kubernetes refuses it.
    let err = deploy_api
        .patch("demo", &PatchParams::default(), &Patch::Apply(&other))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 422 && e.message.contains("fieldManager: Required value")),
        "{err:?}"
    );

    // A custom resource's list-map markers: items merged by key, each manager keeps its own.
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (ar, _) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "Demo"))
        .expect("the module's CRD is served");
    let demos: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let demo = |backends: Value| -> DynamicObject {
        serde_json::from_value(
            json!({"apiVersion": "deckhouse.io/v1alpha1", "kind": "Demo",
            "metadata": {"name": "main"}, "spec": {"backends": backends}}),
        )
        .unwrap()
    };
    let names = |o: &DynamicObject| -> Vec<(String, i64)> {
        o.data["spec"]["backends"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b["name"].as_str().unwrap().to_string(),
                    b["weight"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    let module = PatchParams::apply("deckhouse");
    demos
        .patch(
            "main",
            &module,
            &Patch::Apply(demo(json!([{"name": "a"}, {"name": "b", "weight": 3}]))),
        )
        .await
        .unwrap();
    let o = demos
        .patch(
            "main",
            &PatchParams::apply("ops"),
            &Patch::Apply(demo(json!([{"name": "c"}]))),
        )
        .await
        .unwrap();
    assert_eq!(
        names(&o),
        [("a".into(), 1), ("b".into(), 3), ("c".into(), 1)]
    );
    let o = demos
        .patch("main", &module, &Patch::Apply(demo(json!([{"name": "a"}]))))
        .await
        .unwrap();
    assert_eq!(names(&o), [("a".into(), 1), ("c".into(), 1)]);
    let again = demos
        .patch("main", &module, &Patch::Apply(demo(json!([{"name": "a"}]))))
        .await
        .unwrap();
    assert_eq!(again.metadata.resource_version, o.metadata.resource_version);

    // Every kind is listed through discovery.
    let lp = ListParams::default();
    for (g, v, k) in [
        ("policy", "v1", "PodDisruptionBudget"),
        ("networking.k8s.io", "v1", "NetworkPolicy"),
        (
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
        ),
        ("discovery.k8s.io", "v1", "EndpointSlice"),
        ("storage.k8s.io", "v1", "StorageClass"),
        ("", "v1", "PersistentVolumeClaim"),
        ("batch", "v1", "Job"),
    ] {
        let (ar, _) = discovery
            .resolve_gvk(&GroupVersionKind::gvk(g, v, k))
            .unwrap_or_else(|| panic!("{k} is discovered"));
        Api::<DynamicObject>::all_with(client.clone(), &ar)
            .list(&lp)
            .await
            .unwrap();
    }
}
