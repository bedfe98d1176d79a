//! The single-machine platform end to end, with its real cache replica: `d8 up` starts the
//! replica from RegistryStorage, the air-gap gate holds the upstream until the lease holder is
//! full, pushes go through the publish endpoint (client certificate and push credentials), and
//! the drain withdraws everything, replica included.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use testkit::image::Layout as ImageLayout;
use testkit::process::free_port;
use testkit::push::Registry;
use testkit::skopeo::{Access, Copy};
use testkit::{CertKey, Containerd, ImageBuilder, Upstream, UpstreamOptions};

use super::Up;
use crate::{kubectl, kubectl_ok};

const NODE: &str = "local";
/// The platform image (the expected set's first root), in the upstream as `dkp:v1`.
const PLATFORM: &str = "registry.d8-system.svc:5001/system/deckhouse:v1";
/// Pushed into the cache only (the expected set's second root); the upstream never has it.
const PUSHED: &str = "registry.d8-system.svc:5001/system/deckhouse:pushed";
/// Outside the expected set, in the upstream as `dkp/tool:v1`: it can only reach the cache by
/// being pulled through it.
const TOOL: &str = "registry.d8-system.svc:5001/system/deckhouse/tool:v1";

/// A `d8 up` and where to reach its parts.
struct Platform {
    up: Up,
    data: PathBuf,
    admin: PathBuf,
    controller_metrics: String,
    storage_read: String,
    storage_write: String,
}

impl Platform {
    fn start(dir: &Path, containerd: &Containerd, extra: &[String]) -> Self {
        let data = dir.join("data");
        let metrics = free_port();
        let read = format!("127.0.0.1:{}", free_port());
        let write = format!("127.0.0.1:{}", free_port());
        let mut args = vec![
            format!("--data-dir={}", data.display()),
            format!("--node-name={NODE}"),
            format!("--listen=127.0.0.1:{}", free_port()),
            format!("--agent-address=127.0.0.1:{}", free_port()),
            format!("--agent-metrics-address=127.0.0.1:{}", free_port()),
            format!("--metrics-address=127.0.0.1:{metrics}"),
            format!("--storage-read-address={read}"),
            format!("--storage-write-address={write}"),
            format!("--storage-metrics-address=127.0.0.1:{}", free_port()),
            // The default reserve keeps more free than a build machine has.
            "--storage-reserve=64Mi".to_owned(),
            format!(
                "--containerd-registry-dir={}",
                containerd.hosts_dir().display()
            ),
            "--interval=1s".to_owned(),
            "--without-release-engine".to_owned(),
        ];
        args.extend_from_slice(extra);
        let up = Up::start(&args, dir.join("up.log"));
        Self {
            up,
            admin: data.join("apiserver/kubeconfigs/admin.kubeconfig"),
            data,
            controller_metrics: format!("http://127.0.0.1:{metrics}/metrics"),
            storage_read: read,
            storage_write: write,
        }
    }

    async fn wait(&mut self, what: &str, mut ready: impl FnMut(&Self) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = self.up.child.as_mut().unwrap().try_wait() {
                panic!("{what}: d8 up exited ({status})\n{}", self.logs());
            }
            if ready(self) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: not within 60 s\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    fn logs(&self) -> String {
        format!(
            "----- d8 up -----\n{}\n----- cache replica -----\n{}",
            self.up.log(),
            std::fs::read_to_string(self.data.join("storage/replica.log")).unwrap_or_default()
        )
    }

    fn kubectl(&self, args: &[&str]) -> (bool, String) {
        let (ok, out, _) = kubectl(&self.admin, args);
        (ok, out)
    }

    fn exists(&self, args: &[&str]) -> bool {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        self.kubectl(&all).0
    }

    fn jsonpath(&self, args: &[&str], path: &str) -> String {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        let path = format!("jsonpath={path}");
        all.extend_from_slice(&["-o", &path]);
        self.kubectl(&all).1
    }

    /// The node's backends, in order.
    fn backends(&self) -> String {
        self.jsonpath(&["rnode", NODE], "{.spec.backends[*].name}")
    }

    /// The agent reports the node's current generation applied.
    fn applied(&self) -> bool {
        let out = self.jsonpath(
            &["rnode", NODE],
            "{.metadata.generation} {.status.observedGeneration} {.status.reconciled}",
        );
        let parts: Vec<&str> = out.split_whitespace().collect();
        matches!(parts.as_slice(), [g, o, "true"] if g == o)
    }

    fn address_published(&self) -> bool {
        self.exists(&["configmap", "-n", "d8-system", "registry-image-address"])
    }

    fn apply(&self, dir: &Path, name: &str, settings: &str) {
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!(
                "apiVersion: deckhouse.io/v1alpha1\nkind: ModuleConfig\nmetadata:\n  name: registry\nspec:\n  version: 1\n  enabled: true\n  settings:\n{settings}"
            ),
        )
        .unwrap();
        kubectl_ok(&self.admin, &["apply", "-f", &path.display().to_string()]);
    }

    /// A gauge of the controllers' `/metrics`.
    async fn metric(&self, line_prefix: &str) -> Option<String> {
        let text = testkit::http_client(None)
            .get(&self.controller_metrics)
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(line_prefix))
            .map(|v| v.trim().to_owned())
    }

    /// Whether something answers on the replica's read listener.
    fn replica_listening(&self) -> bool {
        std::net::TcpStream::connect(&self.storage_read).is_ok()
    }
}

fn upstream_settings(upstream: &Upstream, password: &str, cache: bool) -> String {
    format!(
        "    mode: Managed\n    primary:\n      upstream:\n        scheme: HTTP\n        host: \"{host}\"\n        path: /dkp\n        auth:\n          username: license-token\n          password: {password}\n    storage:\n      cache: {cache}\n      source:\n        bundleRef: e2e\n",
        host = upstream.host()
    )
}

const AIR_GAP: &str = "    mode: Managed\n    storage:\n      cache: true\n      source:\n        bundleRef: e2e\n        expectedDigests: 2\n";

/// Every file under `dir` with its bytes, but the agent's own layout cache.
fn files(dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if !path.ends_with("agent/layout.json") {
            out.insert(path.display().to_string(), std::fs::read(&path).unwrap());
        }
    }
}

fn node_files(platform: &Platform, containerd: &Containerd) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    files(&containerd.hosts_dir(), &mut out);
    files(&platform.data.join("agent"), &mut out);
    out
}

async fn push_sentinel(upstream: &Upstream, images: &ImageLayout) {
    let channel = ImageBuilder::new("channel").layer(100).build(images);
    Registry::of(upstream)
        .push_image("dkp/release-channel", Some("stable"), &channel)
        .await
        .unwrap();
}

#[tokio::test]
async fn unmanaged_managed_cache_air_gap_push_and_back_on_the_single_machine_platform() {
    let mut upstream = Upstream::start(UpstreamOptions::default()).await;
    let images = ImageLayout::new(&upstream.scratch_dir().join("images")).unwrap();
    let registry = Registry::of(&upstream);
    push_sentinel(&upstream, &images).await;
    let platform_image = ImageBuilder::new("platform").layer(200_000).build(&images);
    registry
        .push_image("dkp", Some("v1"), &platform_image)
        .await
        .unwrap();
    let tool = ImageBuilder::new("tool").layer(50_000).build(&images);
    registry
        .push_image("dkp/tool", Some("v1"), &tool)
        .await
        .unwrap();
    let pushed = ImageBuilder::new("pushed").layer(80_000).build(&images);
    images.tag(&pushed.manifest, "pushed").unwrap();

    let containerd = Containerd::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut p = Platform::start(
        dir.path(),
        &containerd,
        &[
            "--initial-registry=unmanaged".to_owned(),
            format!("--expected-root={}", platform_image.digest()),
            format!("--expected-root={}", pushed.digest()),
        ],
    );
    p.wait("step 1 (Unmanaged): d8 up is up", |p| {
        p.up.log().contains("Ctrl-C stops.")
    })
    .await;
    let hosts = containerd.hosts_dir().join("_default/hosts.toml");

    // 1. Unmanaged: nothing for containerd, no RegistryStorage, no replica.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!hosts.exists(), "step 1 (Unmanaged): a drop-in was written");
    assert!(
        !p.exists(&["rstor", "registry"]) && !p.exists(&["rnode", NODE]),
        "step 1 (Unmanaged): registry objects exist"
    );
    assert!(
        !p.replica_listening(),
        "step 1 (Unmanaged): a cache replica runs"
    );

    // 2. Managed with an upstream, cache off: the address is published only once the agent
    //    applied, and containerd pulls through the agent.
    p.apply(
        dir.path(),
        "direct",
        &upstream_settings(&upstream, "one", false),
    );
    let mut published_before_applied = false;
    p.wait(
        "step 2 (Managed, cache off): the image address is published",
        |p| {
            let published = p.address_published();
            // Sampled in this order, an address seen before the agent applied is a violation.
            if published && !p.applied() {
                published_before_applied = true;
            }
            published
        },
    )
    .await;
    assert!(
        !published_before_applied,
        "step 2: registry-image-address appeared before the agent applied its RegistryNode"
    );
    assert!(
        hosts.exists(),
        "step 2: the agent wrote containerd's drop-in"
    );
    assert_eq!(
        p.backends(),
        "Upstream",
        "step 2: cache off lays out [Upstream]"
    );
    containerd
        .pull(PLATFORM)
        .await
        .expect_success("step 2: pull through the agent from the upstream");

    // 2b. Changing the credentials (accepted by the probe) and adding a RegistryUpstream change
    //     no file on the node except the agent's own cache.
    let before = node_files(&p, &containerd);
    let auth_before = p.jsonpath(
        &["secret", "-n", "d8-system", "registry-resolved-auth"],
        "{.data.upstream}",
    );
    p.apply(
        dir.path(),
        "direct-2",
        &upstream_settings(&upstream, "two", false),
    );
    p.wait("step 2b: the new credentials are resolved", |p| {
        let now = p.jsonpath(
            &["secret", "-n", "d8-system", "registry-resolved-auth"],
            "{.data.upstream}",
        );
        !now.is_empty() && now != auth_before
    })
    .await;
    let route = dir.path().join("route.yaml");
    std::fs::write(
        &route,
        format!(
            "apiVersion: deckhouse.io/v1alpha1\nkind: RegistryUpstream\nmetadata:\n  name: quay\nspec:\n  match: quay.example:5000\n  upstream:\n    scheme: HTTP\n    host: \"{}\"\n    path: /dkp\n",
            upstream.host()
        ),
    )
    .unwrap();
    kubectl_ok(&p.admin, &["apply", "-f", &route.display().to_string()]);
    p.wait("step 2b: the agent applied the route", |p| {
        p.jsonpath(&["rnode", NODE], "{.spec.additionalRoutes[*].match}") == "quay.example:5000"
            && p.applied()
    })
    .await;
    // One more agent interval, so a credential re-read would have had its chance to write.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        before,
        node_files(&p, &containerd),
        "step 2b: a credential change or a RegistryUpstream changed a file on the node"
    );
    containerd
        .pull("quay.example:5000/tool:v1")
        .await
        .expect_success("step 2b: the RegistryUpstream's host is pulled through its route");

    // 3. Cache on: the replica starts, nodes ask Storage first, pulls fill the cache.
    p.apply(
        dir.path(),
        "cache",
        &upstream_settings(&upstream, "two", true),
    );
    p.wait(
        "step 3 (cache on): nodes get [Storage, Upstream] and apply it",
        |p| p.backends() == "Storage Upstream" && p.applied() && p.replica_listening(),
    )
    .await;
    containerd.clear().await;
    containerd
        .pull(TOOL)
        .await
        .expect_success("step 3: pull through the agent and the cache");
    containerd
        .pull(PLATFORM)
        .await
        .expect_success("step 3: pull the platform image through the cache");

    // 4. The upstream is removed before the cache holds the expected set: it is held.
    p.apply(dir.path(), "air-gap", AIR_GAP);
    p.wait(
        "step 4 (air gap asked, not full): the transition is held",
        |p| {
            p.jsonpath(&["rcfg", "registry"], "{.spec.primary}")
                .is_empty()
        },
    )
    .await;
    let mut held = None;
    for _ in 0..40 {
        held = p.metric("d8_registry_air_gap_transition_held ").await;
        if held.as_deref() == Some("1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        held.as_deref(),
        Some("1"),
        "step 4: d8_registry_air_gap_transition_held\n{}",
        p.logs()
    );
    assert_eq!(
        p.backends(),
        "Storage Upstream",
        "step 4: the upstream is held for nodes"
    );
    assert!(
        !p.jsonpath(&["rstor", "registry"], "{.spec.upstream.host}")
            .is_empty(),
        "step 4: the upstream is held for the cache"
    );
    containerd.clear().await;
    containerd
        .pull(PLATFORM)
        .await
        .expect_success("step 4: pulls keep working while the upstream is held");

    // 5. The rest of the set is pushed to the publish endpoint: client certificate and push
    //    credentials. Without the certificate the push is refused.
    let storage = p.data.join("storage");
    let ca = std::fs::read_to_string(storage.join("ca.crt")).unwrap();
    let push_account = std::fs::read_to_string(storage.join("push")).unwrap();
    let (user, password) = push_account.trim().split_once(':').unwrap();
    let credentials = testkit::Credentials::new(user, password);
    let destination = format!("docker://{}/system/deckhouse:pushed", p.storage_write);
    let no_cert_dir = dir.path().join("no-client-cert");
    std::fs::create_dir_all(&no_cert_dir).unwrap();
    std::fs::write(no_cert_dir.join("ca.crt"), &ca).unwrap();
    let refused = Copy::new(&images.skopeo_ref("pushed"), &destination)
        .destination_access(Access {
            credentials: Some(credentials.clone()),
            cert_dir: Some(no_cert_dir),
        })
        .run()
        .await;
    assert!(
        !refused.success,
        "step 5: a push without a client certificate was accepted"
    );
    let client = CertKey {
        cert_pem: std::fs::read_to_string(storage.join("push-client.crt")).unwrap(),
        key_pem: std::fs::read_to_string(storage.join("push-client.key")).unwrap(),
    };
    Copy::new(&images.skopeo_ref("pushed"), &destination)
        .destination_access(
            Access::anonymous()
                .with_credentials(Some(credentials))
                .with_client_cert(&dir.path().join("push-certs"), &ca, &client),
        )
        .run()
        .await
        .expect_success("step 5: skopeo push to the publish endpoint");

    // 6. The lease holder is full: the upstream is dropped from the cache and every node at once.
    p.wait(
        "step 6: the upstream is dropped once the leader is full",
        |p| {
            p.backends() == "Storage"
                && p.jsonpath(&["rstor", "registry"], "{.spec.upstream.host}")
                    .is_empty()
                && p.applied()
        },
    )
    .await;
    assert_eq!(
        p.metric("d8_registry_air_gap_transition_held ")
            .await
            .as_deref(),
        Some("0"),
        "step 6: the transition is no longer held"
    );
    // It stays dropped, also while the replica restarts without it and the lease changes hands.
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            p.backends(),
            "Storage",
            "step 6: the dropped upstream came back\n{}",
            p.logs()
        );
    }

    // 7. Pulls work with the upstream stopped: the set, and what was pulled through before.
    upstream.stop();
    containerd.clear().await;
    for image in [PLATFORM, PUSHED, TOOL] {
        let outcome = containerd.pull(image).await;
        assert!(
            outcome.success,
            "step 7: pull {image} with the upstream stopped: {outcome:?}\n{}",
            p.logs()
        );
    }

    // 8. Back to Unmanaged. An air-gapped cluster has nowhere to send workloads back to, so an
    //    upstream is configured again first; then the drain withdraws everything.
    let mut again = Upstream::start(UpstreamOptions::default()).await;
    let again_images = ImageLayout::new(&again.scratch_dir().join("images")).unwrap();
    push_sentinel(&again, &again_images).await;
    p.apply(
        dir.path(),
        "reconnect",
        &upstream_settings(&again, "two", true),
    );
    p.wait("step 8: the new upstream is in effect", |p| {
        p.jsonpath(&["rcfg", "registry"], "{.status.effectiveUpstream.host}") == again.host()
    })
    .await;
    p.apply(dir.path(), "unmanaged", "    mode: Unmanaged\n");
    p.wait("step 8 (Unmanaged): the image address goes at once", |p| {
        !p.address_published()
    })
    .await;
    p.wait("step 8 (Unmanaged): the drain withdraws everything", |p| {
        !p.exists(&["rnode", NODE])
            && !p.exists(&["rstor", "registry"])
            && !p.exists(&["rcfg", "registry"])
            && !p.exists(&["secret", "-n", "d8-system", "registry-resolved-auth"])
            && !p.exists(&["secret", "-n", "d8-system", "registry-drain"])
            && !hosts.exists()
            && !p.replica_listening()
    })
    .await;
    let status = p.up.terminate().await;
    assert!(status.success(), "SIGTERM: {status}\n{}", p.logs());
    again.stop();
}

#[tokio::test]
async fn d8_up_starts_air_gapped_with_a_cache_replica_and_serves_what_is_pushed() {
    let scratch = tempfile::tempdir().unwrap();
    let images = ImageLayout::new(&scratch.path().join("images")).unwrap();
    let image = ImageBuilder::new("offline").layer(60_000).build(&images);
    images.tag(&image.manifest, "v1").unwrap();
    let containerd = Containerd::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut p = Platform::start(dir.path(), &containerd, &[]);
    p.wait("d8 up is up", |p| p.up.log().contains("Ctrl-C stops."))
        .await;
    assert!(
        p.up.log().contains("registry module     Managed"),
        "the default is Managed:\n{}",
        p.logs()
    );
    // Managed, cache on, no upstream: nodes ask the cache only, and the replica serves TLS.
    p.wait("the node is laid out on the cache and applied", |p| {
        p.backends() == "Storage" && p.applied() && p.replica_listening()
    })
    .await;
    assert!(
        p.jsonpath(&["rstor", "registry"], "{.spec.upstream}")
            .is_empty(),
        "no upstream in the air-gapped default"
    );
    assert!(
        p.jsonpath(&["mc", "registry"], "{.spec.settings.storage.cache}") == "true",
        "the default ModuleConfig is in the API for the operator to see"
    );

    // `d8 mirror push`'s path: the publish endpoint with the generated client certificate.
    let storage = p.data.join("storage");
    let ca = std::fs::read_to_string(storage.join("ca.crt")).unwrap();
    let account = std::fs::read_to_string(storage.join("push")).unwrap();
    let (user, password) = account.trim().split_once(':').unwrap();
    let client = CertKey {
        cert_pem: std::fs::read_to_string(storage.join("push-client.crt")).unwrap(),
        key_pem: std::fs::read_to_string(storage.join("push-client.key")).unwrap(),
    };
    Copy::new(
        &images.skopeo_ref("v1"),
        &format!("docker://{}/system/deckhouse/offline:v1", p.storage_write),
    )
    .destination_access(
        Access::anonymous()
            .with_credentials(Some(testkit::Credentials::new(user, password)))
            .with_client_cert(&dir.path().join("certs"), &ca, &client),
    )
    .run()
    .await
    .expect_success("push to the publish endpoint");
    containerd
        .pull("registry.d8-system.svc:5001/system/deckhouse/offline:v1")
        .await
        .expect_success("pull the pushed image through the agent, no upstream anywhere");
    let status = p.up.terminate().await;
    assert!(status.success(), "SIGTERM: {status}\n{}", p.logs());
    assert!(!p.replica_listening(), "the cache replica stops with d8 up");
}
