//! Converge of 50 modules × 20 resources on the embedded API server, through the module
//! runtime: the first converge (install), a converge with nothing changed, and a converge after
//! one setting of every module changed — time and API requests per module by verb. The peer is
//! `kubectl apply --server-side` of the same rendered objects (one run for all): what the same
//! writes cost a stock client. With nothing changed the runtime must make reads only.
//!
//! `cargo bench -p module-controller --bench converge` (`BENCH_MODULES`, `BENCH_RESOURCES`).

#![allow(clippy::print_stdout, missing_docs)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use api::module_config::ModuleConfig;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use module_controller::manager::Manager;
use module_controller::runtime::{ModuleDirs, Runtime};
use module_plan::enabling::{Facts, version_of};
use serde_json::json;

type Counts = Arc<Mutex<BTreeMap<String, u64>>>;

fn counting_client(config: kube::Config, counts: Counts) -> Client {
    let layer = tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
        let verb = if req.uri().query().is_some_and(|q| q.contains("watch=")) {
            "WATCH".to_owned()
        } else {
            req.method().to_string()
        };
        if let Ok(mut c) = counts.lock() {
            *c.entry(verb).or_default() += 1;
        }
        req
    });
    kube::client::ClientBuilder::try_from(config)
        .expect("client")
        .with_layer(&layer)
        .build()
}

fn take(counts: &Counts) -> BTreeMap<String, u64> {
    std::mem::take(&mut *counts.lock().unwrap())
}

fn per_module(counts: &BTreeMap<String, u64>, modules: usize) -> String {
    counts
        .iter()
        .map(|(verb, n)| format!("{verb} {:.1}", *n as f64 / modules as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

fn module_files(dir: &std::path::Path, index: usize, resources: usize) {
    // Module names must survive kebab → camel → kebab: letters only.
    let letter = |n: usize| char::from(b'a' + (n % 26) as u8);
    let name = format!("bench-{}{}", letter(index / 26), letter(index));
    let root = dir.join(format!("{}-{name}", 100 + index));
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::create_dir_all(root.join("openapi")).unwrap();
    std::fs::write(
        root.join("module.yaml"),
        format!(
            "name: {name}\nweight: {}\nnamespace: d8-{name}\n",
            100 + index
        ),
    )
    .unwrap();
    std::fs::write(
        root.join("openapi/config-values.yaml"),
        "type: object\nproperties:\n  message: {type: string, default: hello}\n",
    )
    .unwrap();
    let mut t = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: d8-{name}\n");
    let key = module_plan::definition::camel_case(&name);
    for i in 1..resources {
        let kind = match i % 3 {
            0 => format!(
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{i}\n  namespace: d8-{name}\nspec:\n  selector: {{app: x{i}}}\n  ports:\n  - port: 80\n    targetPort: 8080\n"
            ),
            1 => format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: d8-{name}\n  labels:\n    heritage: deckhouse\ndata:\n  message: \"{{{{ .Values.{key}.message }}}}-{i}\"\n"
            ),
            _ => format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: secret-{i}\n  namespace: d8-{name}\ndata:\n  token: dG9rZW4=\n"
            ),
        };
        // Only the first ConfigMap depends on the settings: a change writes one object.
        let kind = if i > 1 {
            kind.replace(&format!("{{{{ .Values.{key}.message }}}}"), "fixed")
        } else {
            kind
        };
        t.push_str("---\n");
        t.push_str(&kind);
    }
    std::fs::write(root.join("templates/all.yaml"), t).unwrap();
}

#[tokio::main]
async fn main() {
    let modules: usize = std::env::var("BENCH_MODULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let resources: usize = std::env::var("BENCH_RESOURCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = apiserver::ApiServer::builder()
        .data_dir(dir.path().join("apiserver"))
        .crds(
            api::crds::all()
                .into_iter()
                .map(|c| serde_json::to_value(c).unwrap()),
        )
        .namespace("d8-system")
        .serve(listener)
        .await
        .unwrap();
    let kubeconfig = server.admin_kubeconfig();
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    let plain = Client::try_from(config.clone()).unwrap();
    let counts: Counts = Arc::default();
    let client = counting_client(config, counts.clone());
    let modules_dir = dir.path().join("modules");
    for i in 0..modules {
        module_files(&modules_dir, i, resources);
    }
    let embedded = module_controller::embedded::discover(&modules_dir).unwrap();
    let clock: Arc<dyn release_controller::Clock> = Arc::new(release_controller::SystemClock);
    let downloaded =
        module_controller::install::Downloaded::open(dir.path().join("downloaded")).unwrap();
    let manager = Manager::new(
        plain.clone(),
        downloaded,
        clock.clone(),
        Facts {
            bundle: "Default".into(),
            edition: "ee".into(),
            deckhouse_version: version_of("v1.69.3"),
            kubernetes_version: version_of("1.29.3"),
            bootstrapped: true,
            ..Default::default()
        },
    )
    .with_embedded(embedded.clone());
    let configs: Api<ModuleConfig> = Api::all(plain.clone());
    for m in &embedded {
        let c: ModuleConfig = serde_json::from_value(json!({
            "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
            "metadata": {"name": m.files.definition.name},
            "spec": {"enabled": true, "version": 1, "settings": {"message": "one"}}}))
        .unwrap();
        configs.create(&PostParams::default(), &c).await.unwrap();
    }
    manager.sync_modules().await.unwrap();
    let runtime = Runtime::new(
        client,
        ModuleDirs {
            embedded: embedded.clone(),
            downloaded: None,
        },
        clock,
    );

    println!("converge of {modules} modules x {resources} resources (embedded API server)");
    let mut rendered = String::new();
    let mut unchanged = 0.0;
    for (label, change) in [
        ("install", None),
        ("unchanged", None),
        ("one setting changed", Some("two")),
    ] {
        if let Some(message) = change {
            for m in &embedded {
                configs
                    .patch(
                        &m.files.definition.name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"settings": {"message": message}}})),
                    )
                    .await
                    .unwrap();
            }
        }
        take(&counts);
        let start = Instant::now();
        let results = runtime.converge().await.unwrap();
        let took = start.elapsed();
        let failed: Vec<String> = results
            .iter()
            .filter_map(|(m, r)| r.as_ref().err().map(|e| format!("{m}: {e}")))
            .collect();
        assert!(failed.is_empty(), "{failed:?}");
        let c = take(&counts);
        let writes: u64 = c
            .iter()
            .filter(|(v, _)| !matches!(v.as_str(), "GET" | "WATCH"))
            .map(|(_, n)| n)
            .sum();
        println!(
            "  {label:<20} {:>7.2} s  {:>6.1} ms/module  requests/module: {}  (writes: {writes})",
            took.as_secs_f64(),
            took.as_secs_f64() * 1000.0 / modules as f64,
            per_module(&c, modules),
        );
        if label == "unchanged" {
            unchanged = took.as_secs_f64();
            assert_eq!(writes, 0, "an unchanged converge wrote: {c:?}");
        }
        if label == "install" {
            for m in &embedded {
                let r = module_controller::runtime::release::Release::from_secret(
                    &serde_json::to_value(
                        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
                            plain.clone(),
                            "d8-system",
                        )
                        .get(&format!(
                            "sh.helm.release.v1.{}.v1",
                            m.files.definition.name
                        ))
                        .await
                        .unwrap(),
                    )
                    .unwrap(),
                )
                .unwrap();
                rendered.push_str(&r.manifest);
            }
        }
    }
    // The peer: kubectl's server-side apply of the same objects, twice: the first run takes
    // the fields over (it writes), the second is the no-op a stock client makes for an
    // unchanged chart — compare it with the unchanged converge above.
    let file = dir.path().join("all.yaml");
    std::fs::write(&file, &rendered).unwrap();
    for run in ["takes over", "no-op"] {
        let start = Instant::now();
        let out = tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "apply",
                "--server-side",
                "--field-manager=kubectl-bench",
                "--force-conflicts",
                "-f",
            ])
            .arg(&file)
            .output()
            .await
            .unwrap();
        let took = start.elapsed();
        if out.status.success() {
            println!(
                "  peer: kubectl apply --server-side of the same {} objects ({run}): {:.2} s ({:.1} ms/module)",
                modules * resources,
                took.as_secs_f64(),
                took.as_secs_f64() * 1000.0 / modules as f64
            );
            if run == "no-op" {
                println!(
                    "  ratio unchanged converge / kubectl no-op apply: {:.2}",
                    unchanged / took.as_secs_f64()
                );
            }
        } else {
            println!(
                "  peer: kubectl failed: {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .next()
                    .unwrap_or("")
            );
        }
    }
}
