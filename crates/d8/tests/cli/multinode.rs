//! Several nodes on one machine (issue #18): network namespaces on a bridge of their own
//! (`testkit::netns`) — `api` running `d8 apiserver`, `upstream` where docker-registry is
//! reached, three control-plane nodes running the cache replicas, two workers each with its own
//! containerd and its own `127.0.0.1:5001` agent. Every component is started from the chart
//! rendered by our renderer: the replicas from DaemonSet `registry-storage`, the agents from the
//! static pod in ConfigMap `registry-node-bootstrap` (arguments, env, volume mounts mapped to
//! the node's directories, the binary's default paths checked to lie under a mount). Only the
//! timings are shortened so that the test runs in well under a minute.
//!
//! Layout and how to run it: docs/install.md ("Several nodes on one machine").

mod pod;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use testkit::netns::{Network, Node};
use testkit::process::Service;
use testkit::{ImageBuilder, Upstream, UpstreamOptions};

const D8: &str = env!("CARGO_BIN_EXE_d8");
const UPSTREAM_PORT: u16 = 5000;

fn chart() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../charts/deckhouse")
        .display()
        .to_string()
}

/// `d8 module render` of the chart with `set`, as documents.
fn render(set: &[String]) -> Vec<serde_json::Value> {
    let mut command = std::process::Command::new(D8);
    command.args(["module", "render"]).arg(chart()).args([
        "--release-name",
        "deckhouse",
        "-n",
        "d8-system",
    ]);
    for value in set {
        command.args(["--set", value]);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "render: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    pod::documents(&String::from_utf8_lossy(&output.stdout))
}

/// kubectl run on node `api` (the API server is reached over the network).
fn kubectl(api: &Node, kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let output = api
        .command(testkit::process::require_tool(
            "kubectl",
            "kubernetes-client",
        ))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn apply(api: &Node, kubeconfig: &Path, dir: &Path, name: &str, yaml: &str) {
    let file = dir.join(name);
    std::fs::write(&file, yaml).unwrap();
    let (ok, out, err) = kubectl(
        api,
        kubeconfig,
        &["apply", "-f", &file.display().to_string()],
    );
    assert!(ok, "apply {name}: {out}{err}");
}

/// `(node, role, full)` of every replica entry of RegistryStorage `registry`.
fn replicas(api: &Node, kubeconfig: &Path) -> Vec<(String, String, bool)> {
    let (ok, out, _) = kubectl(
        api,
        kubeconfig,
        &[
            "get",
            "registrystorages.deckhouse.io",
            "registry",
            "-o",
            "json",
        ],
    );
    if !ok {
        return Vec::new();
    }
    let value: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    value["status"]["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["node"].as_str().unwrap_or_default().to_owned(),
                r["role"].as_str().unwrap_or_default().to_owned(),
                r["full"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// The holder of Lease `d8-system/registry-storage`.
fn lease_holder(api: &Node, kubeconfig: &Path) -> String {
    let (_, out, _) = kubectl(
        api,
        kubeconfig,
        &[
            "get",
            "lease",
            "-n",
            "d8-system",
            "registry-storage",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    );
    out.trim().to_owned()
}

async fn until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Successful blob GETs per digest in docker-registry's access log: what the upstream served.
fn upstream_blob_gets(log: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for line in log.lines() {
        let Some(request) = line.split('"').nth(1) else {
            continue;
        };
        let status = line.split('"').nth(2).unwrap_or_default().trim();
        if let Some(path) = request.strip_prefix("GET ")
            && let Some((_, digest)) = path.split_once("/blobs/")
            && status.starts_with("200")
        {
            let digest = digest.split_whitespace().next().unwrap_or_default();
            *counts.entry(digest.to_owned()).or_default() += 1;
        }
    }
    counts
}

/// The Secret `registry-storage` as files (the secret volume of every replica).
fn storage_secret(dir: &Path, admin: &Path, replica_ips: &[String]) -> PathBuf {
    let secret = dir.join("registry-storage-secret");
    std::fs::create_dir_all(&secret).unwrap();
    let ca = testkit::Certs::new("registry-ca");
    let names: Vec<&str> = replica_ips.iter().map(String::as_str).collect();
    let server = ca.server(&names);
    std::fs::write(secret.join("tls.crt"), &server.cert_pem).unwrap();
    std::fs::write(secret.join("tls.key"), &server.key_pem).unwrap();
    std::fs::write(secret.join("ca.crt"), ca.ca_pem()).unwrap();
    // The CA of the ingress's client certificate (Secret registry-storage-ingress-client).
    std::fs::write(secret.join("ingress-client-ca.crt"), ca.ca_pem()).unwrap();
    std::fs::write(secret.join("pull"), "node:node-pw\n").unwrap();
    std::fs::write(secret.join("push"), "sync:sync-pw\n").unwrap();
    std::fs::write(secret.join("token.key"), [7u8; 48]).unwrap();
    std::fs::write(secret.join("upstream"), "up:up-pw\n").unwrap();
    std::fs::copy(admin, secret.join("kubeconfig")).unwrap();
    secret
}

/// What the registry controller writes for a worker in Managed mode with the cache on and an
/// upstream: `[Storage(leader, the others as mirrors), Upstream]`.
fn registry_node(node: &str, leader: &str, others: &[String], upstream: &str) -> String {
    let auth = |s: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    let mut mirrors = String::new();
    for other in others {
        mirrors.push_str(&format!(
            "        - {{scheme: HTTPS, host: \"{other}\", path: /system/deckhouse, auth: {{secretRef: {{name: registry-resolved-auth, key: storage}}}}}}\n"
        ));
    }
    format!(
        "apiVersion: v1
kind: Secret
metadata: {{name: registry-resolved-auth, namespace: d8-system}}
data:
  storage: {storage}
  upstream: {upstream_auth}
---
apiVersion: deckhouse.io/v1alpha1
kind: RegistryNode
metadata: {{name: {node}}}
spec:
  cache: true
  backends:
    - name: Storage
      scheme: HTTPS
      host: \"{leader}\"
      path: /system/deckhouse
      auth: {{secretRef: {{name: registry-resolved-auth, key: storage}}}}
      mirrors:
{mirrors}    - name: Upstream
      scheme: HTTP
      host: \"{upstream}\"
      path: /deckhouse/ee
      auth: {{secretRef: {{name: registry-resolved-auth, key: upstream}}}}
",
        storage = auth(&auth("node:node-pw")),
        upstream_auth = auth(&auth("up:up-pw")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_nodes_pull_through_the_cache_and_a_cut_leader_costs_no_pull_and_no_refetch() {
    if let Some(reason) = Network::unavailable() {
        eprintln!("skipped: {reason}");
        return;
    }
    testkit::install_crypto();
    let dir = tempfile::tempdir().unwrap();

    // The upstream: a release whose images_digests.json names two components.
    let upstream = Upstream::start(UpstreamOptions::default().basic_auth("up", "up-pw")).await;
    let layout = testkit::image::Layout::new(&dir.path().join("layout")).unwrap();
    let components: Vec<_> = ["controller", "webhook"]
        .iter()
        .map(|name| {
            ImageBuilder::new(name)
                .uncompressed()
                .layers(&[12 << 20, 40_000])
                .build(&layout)
        })
        .collect();
    let digests = serde_json::json!({"common": {
        "controller": components[0].digest(), "webhook": components[1].digest(),
    }});
    let release = ImageBuilder::new("deckhouse v1.70.0")
        .files(&[(
            "deckhouse/modules/images_digests.json",
            digests.to_string().as_bytes(),
        )])
        .build(&layout);
    let push = testkit::push::Registry::of(&upstream);
    for component in &components {
        push.push_image("deckhouse/ee", None, component)
            .await
            .unwrap();
    }
    push.push_image("deckhouse/ee", Some("v1.70.0"), &release)
        .await
        .unwrap();
    // Every blob of the set, the release image's own included: fetched from the upstream once,
    // by the leader (the followers read the release image from their store or the leader).
    let set_blobs: Vec<String> = components
        .iter()
        .chain([&release])
        .flat_map(|image| image.blobs().map(|b| b.digest.clone()).collect::<Vec<_>>())
        .collect();
    let pushed = upstream_blob_gets(&upstream.log());

    // The machines.
    let mut network = Network::create();
    let api = network.node("api");
    let up = network.node("upstream");
    let masters: Vec<Node> = (0..3)
        .map(|i| network.node(&format!("master-{i}")))
        .collect();
    let workers: Vec<Node> = (0..2)
        .map(|i| network.node(&format!("worker-{i}")))
        .collect();
    let upstream_address: std::net::SocketAddr = upstream.host().parse().unwrap();
    let exposed = up.expose(UPSTREAM_PORT, upstream_address).await;
    let upstream_host = exposed.address().to_string();

    // The API server on node `api`, reached by everyone at https://<api ip>:6443.
    let api_dir = dir.path().join("api");
    let mut command = api.command(D8);
    command
        .args(["apiserver", "--data-dir"])
        .arg(api_dir.join("data"))
        .arg(format!("--listen={}:6443", api.ip()));
    for worker in &workers {
        command.args(["--agent-node", worker.name()]);
    }
    std::fs::create_dir_all(&api_dir).unwrap();
    let mut apiserver = Service::spawn("d8 apiserver", command, api_dir.join("log")).unwrap();
    let admin = api_dir.join("data/kubeconfigs/admin.kubeconfig");
    testkit::process::wait_until(&mut apiserver, Duration::from_secs(30), || {
        let ready = admin.exists() && kubectl(&api, &admin, &["get", "--raw", "/healthz"]).0;
        async move { ready }
    })
    .await;
    apply(
        &api,
        &admin,
        dir.path(),
        "cluster.yaml",
        "apiVersion: deckhouse.io/v1alpha1
kind: RegistryStorage
metadata: {name: registry}
spec: {}
---
apiVersion: deckhouse.io/v1alpha1
kind: DeckhouseRelease
metadata: {name: v1.70.0}
spec: {version: v1.70.0}
",
    );
    let (ok, out, err) = kubectl(
        &api,
        &admin,
        &[
            "patch",
            "deckhouserelease",
            "v1.70.0",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Deployed"}}"#,
        ],
    );
    assert!(ok, "{out}{err}");

    // The chart, rendered with this cluster's upstream.
    let docs = render(&[
        format!("registry.cache.upstream.url=http://{upstream_host}/deckhouse/ee"),
        "registry.cache.upstream.credentials=true".to_owned(),
    ]);

    // Cache replicas on the masters, from DaemonSet registry-storage.
    let daemonset = pod::object(&docs, "DaemonSet", "registry-storage").expect("DaemonSet");
    let master_ips: Vec<String> = masters.iter().map(|m| m.ip().to_string()).collect();
    let secret = storage_secret(dir.path(), &admin, &master_ips);
    let storage_help = help(&["registry", "storage", "--help"]);
    let mut replica_services = Vec::new();
    for master in &masters {
        let node_dir = dir.path().join(master.name());
        std::fs::create_dir_all(node_dir.join("data")).unwrap();
        let fields = BTreeMap::from([
            ("spec.nodeName", master.name().to_owned()),
            ("status.podIP", master.ip().to_string()),
        ]);
        let volumes = BTreeMap::from([("data", node_dir.join("data")), ("config", secret.clone())]);
        let command = pod::node_command(
            pod::pod_spec(daemonset),
            "registry-storage",
            &fields,
            &volumes,
        )
        .unwrap();
        let defaults = pod::default_paths(
            &command.args,
            &pod::path_defaults(&storage_help),
            &command.mounts,
        )
        .unwrap();
        let mut process = master.command(D8);
        process
            .args(&command.args)
            .args(&defaults)
            .envs(&command.env)
            .env("RUST_LOG", "info")
            // Test timings (Deckhouse's are 15 s / 30 s / 20 s / 5 s) and a reserve the test
            // machine's disk can afford.
            .args(["--sync-interval=200ms", "--eligibility-interval=300ms"])
            .args([
                "--lease-duration=2s",
                "--renew-deadline=1500ms",
                "--retry-period=200ms",
            ])
            .arg("--reserve=64Mi");
        replica_services.push(
            Service::spawn(
                &format!("registry-storage on {}", master.name()),
                process,
                node_dir.join("storage.log"),
            )
            .unwrap(),
        );
    }
    until(
        "three full replicas, one leader",
        Duration::from_secs(40),
        || {
            let r = replicas(&api, &admin);
            r.len() == 3
                && r.iter().all(|(_, _, full)| *full)
                && r.iter().filter(|(_, role, _)| role == "Leader").count() == 1
        },
    )
    .await;
    let leader_name = lease_holder(&api, &admin);
    let leader = masters
        .iter()
        .position(|m| m.name() == leader_name)
        .unwrap_or_else(|| panic!("lease holder {leader_name:?} is no master"));
    let filled = upstream_blob_gets(&upstream.log());
    for blob in &set_blobs {
        let served =
            filled.get(blob).copied().unwrap_or(0) - pushed.get(blob).copied().unwrap_or(0);
        assert_eq!(
            served, 1,
            "{blob} was fetched {served} times from the upstream: the leader fetches it once, the followers copy it"
        );
    }

    // Workers: containerd and the agent of the static pod in ConfigMap registry-node-bootstrap.
    let bootstrap = pod::object(&docs, "ConfigMap", "registry-node-bootstrap").expect("ConfigMap");
    let static_pod: serde_json::Value =
        serde_saphyr::from_str(bootstrap["data"]["registry-agent.yaml"].as_str().unwrap()).unwrap();
    let agent_help = help(&["registry", "agent", "--help"]);
    let others: Vec<String> = masters
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != leader)
        .map(|(_, m)| format!("{}:5001", m.ip()))
        .collect();
    let mut nodes = Vec::new();
    for worker in &workers {
        apply(
            &api,
            &admin,
            dir.path(),
            &format!("{}.yaml", worker.name()),
            &registry_node(
                worker.name(),
                &format!("{}:5001", masters[leader].ip()),
                &others,
                &upstream_host,
            ),
        );
        let node_dir = dir.path().join(worker.name());
        for sub in ["agent-config", "state", "trust"] {
            std::fs::create_dir_all(node_dir.join(sub)).unwrap();
        }
        std::fs::copy(
            api_dir.join(format!(
                "data/kubeconfigs/system-registry-agent-{}.kubeconfig",
                worker.name()
            )),
            node_dir.join("agent-config/kubeconfig"),
        )
        .unwrap();
        std::fs::copy(
            secret.join("ca.crt"),
            node_dir.join("trust/registry-ca.crt"),
        )
        .unwrap();
        let containerd = testkit::Containerd::start_in_netns(worker.netns()).await;
        let fields = BTreeMap::from([("spec.nodeName", worker.name().to_owned())]);
        let volumes = BTreeMap::from([
            ("agent-config", node_dir.join("agent-config")),
            ("containerd-registry", containerd.hosts_dir()),
            ("agent-state", node_dir.join("state")),
            ("trust", node_dir.join("trust")),
        ]);
        let command = pod::node_command(
            pod::pod_spec(&static_pod),
            "registry-agent",
            &fields,
            &volumes,
        )
        .unwrap();
        let defaults = pod::default_paths(
            &command.args,
            &pod::path_defaults(&agent_help),
            &command.mounts,
        )
        .unwrap();
        let mut process = worker.command(D8);
        process
            .args(&command.args)
            .args(&defaults)
            .envs(&command.env)
            .env("RUST_LOG", "info")
            .args(["--interval=1s", "--stall-timeout=3s"]);
        let mut agent = Service::spawn(
            &format!("registry-agent on {}", worker.name()),
            process,
            node_dir.join("agent.log"),
        )
        .unwrap();
        let hosts = containerd.hosts_dir().join("_default/hosts.toml");
        testkit::process::wait_until(&mut agent, Duration::from_secs(30), || {
            let written = hosts.exists();
            async move { written }
        })
        .await;
        nodes.push((containerd, agent));
    }

    // Every worker pulls the release through its own 127.0.0.1:5001.
    for (containerd, _) in &nodes {
        containerd
            .pull("registry.d8-system.svc:5001/system/deckhouse:v1.70.0")
            .await
            .expect_success("the release image through the agent");
    }

    // The leader's link slows down, both workers pull a component, and the leader is cut off
    // once both are part-way through. Part-way is any byte of the layer: the shaped link need
    // not share itself fairly, and one worker can take most of the layer before the other has a
    // megabyte (the likely reading of a CI run where waiting for a megabyte each timed out: one
    // worker's 12 MiB were in after 3.3 s, the other's 2.2 s later, at the link's full rate).
    masters[leader].limit_egress("40mbit");
    let reference = format!(
        "registry.d8-system.svc:5001/system/deckhouse@{}",
        components[0].digest()
    );
    let pulls = async {
        let (a, b) = tokio::join!(nodes[0].0.pull(&reference), nodes[1].0.pull(&reference));
        [a, b]
    };
    let cut = async {
        until("both workers mid-pull", Duration::from_secs(20), || {
            nodes.iter().all(|(c, _)| c.ingesting_bytes() > 0)
        })
        .await;
        masters[leader].cut();
        std::time::Instant::now()
    };
    let (outcomes, cut_at) = tokio::join!(pulls, cut);
    for outcome in outcomes {
        outcome.expect_success("the component, finished through the other replicas");
    }

    eprintln!(
        "in-flight pulls finished {:?} after the cut",
        cut_at.elapsed()
    );

    // Every worker pulls everything again at once, while the RegistryNodes still name the cut
    // leader first (nothing rewrites them here): the agents tried it during the cut pulls and
    // now try it after the others, so no pull waits for its connect (10 s) or response-headers
    // (30 s) timeout. The bound: each pull within 5 s (each takes well under a second on
    // the test network).
    const FAST: Duration = Duration::from_secs(5);
    let pull_all = async |containerd: &testkit::Containerd| {
        containerd.clear().await;
        for component in &components {
            let started = std::time::Instant::now();
            containerd
                .pull(&format!(
                    "registry.d8-system.svc:5001/system/deckhouse@{}",
                    component.digest()
                ))
                .await
                .expect_success("a component after the leader's link went down");
            let took = started.elapsed();
            eprintln!("pull after the cut: {took:?}");
            assert!(
                took < FAST,
                "a pull after the cut took {took:?}: it waited on the cut leader"
            );
        }
    };
    tokio::join!(pull_all(&nodes[0].0), pull_all(&nodes[1].0));
    for (_, agent) in &nodes {
        let log = agent.log();
        assert!(
            log.contains("tried after the others for a while"),
            "the agent avoided the cut leader: {log}"
        );
    }

    // The lease moves to a full replica still on the network.
    until("another replica leads", Duration::from_secs(15), || {
        let holder = lease_holder(&api, &admin);
        !holder.is_empty() && holder != leader_name
    })
    .await;
    let new_leader = lease_holder(&api, &admin);
    assert!(
        replicas(&api, &admin)
            .iter()
            .any(|(node, _, full)| *node == new_leader && *full),
        "the new leader {new_leader} is full"
    );
    eprintln!("lease moved {:?} after the cut", cut_at.elapsed());

    // Nothing was fetched twice from the upstream.
    let served = upstream_blob_gets(&upstream.log());
    for blob in &set_blobs {
        let count = served.get(blob).copied().unwrap_or(0) - pushed.get(blob).copied().unwrap_or(0);
        assert_eq!(
            count, 1,
            "{blob} was fetched {count} times from the upstream"
        );
    }
    drop(nodes);
    drop(replica_services);
    drop(apiserver);
    drop(exposed);
    drop(network);
}

/// `d8 ARGS` output (a `--help`).
fn help(args: &[&str]) -> String {
    let output = std::process::Command::new(D8).args(args).output().unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}
