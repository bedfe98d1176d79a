//! Into a storage replica's publish endpoint over mTLS, then containerd pulls the release
//! through the agent with no upstream at all. The endpoint refuses pushes without a client
//! certificate or with wrong write credentials, and the messages say what to fix.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use registry_plan::expected::{Entry, ExpectedSet};
use registry_plan::{Backend, BackendName, Layout, Scheme};
use storage::{Accounts, Listener, Registry, Settings, Store, Tls};
use testkit::{Certs, Containerd};
use tokio::net::TcpListener;

use crate::common::{self, MODULES};

const PUSHER: (&str, &str) = ("d8-mirror", "write-password");
const NODE: (&str, &str) = ("node", "node-password");
/// The name containerd pulls through the agent by.
pub(crate) const AGENT_HOST: &str = "registry.d8-system.svc:5001";

pub(crate) struct Replica {
    pub(crate) registry: Registry,
    read: SocketAddr,
    write: SocketAddr,
    _dir: tempfile::TempDir,
    _stop: Vec<tokio::sync::oneshot::Sender<()>>,
}

async fn serve(
    listener: Listener,
    tls: Option<&Tls>,
) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let socket = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    let acceptor = tls.map(|t| storage::server::acceptor(t).expect("acceptor"));
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(storage::server::serve(socket, acceptor, listener, async {
        let _ = rx.await;
    }));
    (addr, tx)
}

/// A replica with no upstream: its write listener is the publish endpoint (TLS, client
/// certificates of `ca` required), its read listener serves nodes.
pub(crate) async fn replica(ca: &Certs) -> Replica {
    testkit::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        &dir.path().join("data"),
        storage::Limits {
            budget: None,
            reserve: Some(0),
        },
    )
    .unwrap();
    let registry = Registry::new(store, None, Settings::default());
    let server = ca.server(&[]);
    let tls = Tls {
        cert_pem: server.cert_pem.clone(),
        key_pem: server.key_pem.clone(),
        client_ca_pem: Some(ca.ca_pem()),
        ingress_client_ca: None,
    };
    let read_accounts = Accounts::new().with(NODE.0, NODE.1, storage::Access::Pull);
    let write_accounts = Accounts::new().with(PUSHER.0, PUSHER.1, storage::Access::Push);
    let (read, stop_read) = serve(Listener::read(registry.clone(), read_accounts), None).await;
    let (write, stop_write) = serve(
        Listener::write(registry.clone(), write_accounts, true),
        Some(&tls),
    )
    .await;
    Replica {
        registry,
        read,
        write,
        _dir: dir,
        _stop: vec![stop_read, stop_write],
    }
}

fn publish_endpoint(replica: &Replica, ca: &Certs) -> registry_client::Endpoint {
    registry_client::Endpoint::https(&replica.write.to_string())
        .path_prefix("system/deckhouse")
        .ca_pem(&ca.ca_pem())
}

/// The publish endpoint with a client certificate of `ca` and the write credentials.
pub(crate) fn push_endpoint(replica: &Replica, ca: &Certs) -> registry_client::Endpoint {
    let client = ca.client("d8-mirror");
    publish_endpoint(replica, ca)
        .client_identity(registry_client::ClientIdentity::new(
            client.cert_pem.clone(),
            client.key_pem.clone(),
        ))
        .credentials(registry_client::Credentials::new(PUSHER.0, PUSHER.1))
}

/// An agent whose only backend is `replica` (no upstream at all), writing `containerd`'s
/// drop-in; keep `dir` while it runs.
pub(crate) async fn agent_of(
    replica: &Replica,
    containerd: &Containerd,
    dir: &std::path::Path,
) -> agent::run::Running {
    let layout = Layout {
        cache: true,
        backends: vec![Backend {
            name: BackendName::Storage,
            endpoint: registry_plan::Endpoint {
                scheme: Scheme::Http,
                host: replica.read.to_string(),
                path: "/system/deckhouse".into(),
                ca: None,
                auth: Some(registry_plan::Credentials {
                    username: NODE.0.into(),
                    password: NODE.1.into(),
                }),
            },
            mirrors: vec![],
        }],
        additional_routes: vec![],
    };
    let bootstrap = dir.join("bootstrap-layout.json");
    std::fs::write(&bootstrap, serde_json::to_vec(&layout).unwrap()).unwrap();
    let trust = dir.join("trust");
    std::fs::create_dir_all(&trust).unwrap();
    agent::run::start(
        agent::run::Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            advertise: None,
            plain_http: false,
            metrics: None,
            containerd_registry_dir: containerd.hosts_dir(),
            pki_dir: dir.join("pki"),
            trust_dir: Some(trust),
            bootstrap_layout: Some(bootstrap),
            layout_cache: dir.join("cache/layout.json"),
            interval: Duration::from_secs(30),
            timeouts: registry_client::Timeouts {
                connect: Duration::from_secs(2),
                response_headers: Duration::from_secs(10),
                stall: Duration::from_secs(5),
                total: Some(Duration::from_secs(60)),
            },
            min_throughput: None,
        },
        agent::run::NoApi,
    )
    .await
    .expect("agent starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_pushed_over_mtls_serves_containerd_through_the_agent_alone() {
    let source = common::source(48 << 10).await;
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    mirror::pull(&common::pull_options(&source, &bundle), &common::quiet())
        .await
        .expect("pull");
    let ca = Certs::new("registry-push-ca");
    let replica = replica(&ca).await;
    // The release as the replica counts it: every manifest and blob of the image set.
    let release = ExpectedSet {
        entries: source
            .expected
            .iter()
            .map(|e| e.digest.clone())
            .chain(source.blobs.iter().cloned())
            .map(Entry::Digest)
            .collect(),
    };
    let platform = oci::Repository::parse("system/deckhouse").unwrap();
    let before = replica
        .registry
        .store()
        .completeness(&platform, &release, None);
    assert!(!before.full && before.held == 0, "{before:?}");
    let client = ca.client("d8-mirror");

    // No client certificate: refused at the handshake, and the message says what to pass.
    let anonymous = publish_endpoint(&replica, &ca)
        .credentials(registry_client::Credentials::new(PUSHER.0, PUSHER.1));
    let err = mirror::push(&common::push_options(anonymous, &bundle), &common::quiet())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("requires a client certificate") && message.contains("--tls-cert"),
        "{message}"
    );

    // A certificate but the wrong password: refused, naming the flags.
    let wrong = publish_endpoint(&replica, &ca)
        .client_identity(registry_client::ClientIdentity::new(
            client.cert_pem.clone(),
            client.key_pem.clone(),
        ))
        .credentials(registry_client::Credentials::new(PUSHER.0, "guessed"));
    let err = mirror::push(&common::push_options(wrong, &bundle), &common::quiet())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("refused the credentials") && message.contains("--registry-password"),
        "{message}"
    );
    // No credentials at all.
    let nameless = publish_endpoint(&replica, &ca).client_identity(
        registry_client::ClientIdentity::new(client.cert_pem.clone(), client.key_pem.clone()),
    );
    let err = mirror::push(&common::push_options(nameless, &bundle), &common::quiet())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("requires credentials"), "{err}");
    assert!(
        replica.registry.store().blobs().unwrap().is_empty(),
        "nothing was stored by refused pushes"
    );

    // Certificate and write credentials: the whole bundle goes in.
    let mut options = common::push_options(push_endpoint(&replica, &ca), &bundle);
    options.chunk_size = 1 << 16; // exercise chunked uploads into the replica too
    let summary = mirror::push(&options, &common::quiet())
        .await
        .expect("push");
    assert!(
        summary.uploaded > 0 && summary.manifests_pushed > 0,
        "{summary:?}"
    );

    // The replica holds the release's whole image set and counts itself full (what it reports
    // in RegistryStorage.status.replicas[]).
    let store = replica.registry.store();
    let after = store.completeness(&platform, &release, None);
    assert!(
        after.full && after.held == after.declared && after.declared == release.entries.len(),
        "{after:?}"
    );
    for e in &source.expected {
        let repo = if e.repo.is_empty() {
            "system/deckhouse".to_owned()
        } else {
            format!("system/deckhouse/{}", e.repo)
        };
        let repository = oci::Repository::parse(&repo).unwrap();
        let digest = oci::Digest::parse(&e.digest).unwrap();
        assert!(
            store.has_manifest(&repository, &digest),
            "{repo}@{}",
            e.digest
        );
    }
    for blob in &source.blobs {
        let digest = oci::Digest::parse(blob).unwrap();
        assert!(
            store.blob_size(&digest).is_some(),
            "blob {blob} in the replica"
        );
    }

    // The agent knows only the replica: no upstream backend at all.
    let containerd = Containerd::start().await;
    let agent_dir = tempfile::tempdir().unwrap();
    let agent = agent_of(&replica, &containerd, agent_dir.path()).await;

    // containerd pulls every image of the release, by tag or digest, as a cluster would.
    let mut pulled = BTreeSet::new();
    for e in &source.expected {
        if !pulled.insert((e.repo.clone(), e.digest.clone())) {
            continue;
        }
        let name = if e.repo.is_empty() {
            format!("{AGENT_HOST}/system/deckhouse")
        } else {
            format!("{AGENT_HOST}/system/deckhouse/{}", e.repo)
        };
        let reference = if e.reference.starts_with("sha256:") {
            format!("{name}@{}", e.reference)
        } else {
            format!("{name}:{}", e.reference)
        };
        containerd
            .pull(&reference)
            .await
            .expect_success(&format!("pull {reference}"));
    }
    assert!(pulled.len() > 20, "{} images pulled", pulled.len());
    for module in MODULES {
        assert!(
            pulled
                .iter()
                .any(|(repo, _)| repo == &format!("modules/{module}"))
        );
    }
    agent.stop().await;
}
