//! The suite against our own registries: the cache replica's write listener (the publish
//! endpoint: TLS, a client certificate and write credentials) with every profile, its read
//! listener (pull and discovery, with pull credentials) and the agent in front of it (pull and
//! discovery, anonymous as containerd is). Deviations are listed in
//! [`conformance::deviations`]; the hostile requests of the suite run against each.
//!
//! `cargo nextest run -p conformance ours --no-capture` prints the per-check reports.

use std::net::SocketAddr;
use std::time::Duration;

use conformance::{Deviations, Outcome, Report, Settings, deviations};
use registry_client::{ClientIdentity, Credentials, Endpoint};
use registry_plan::{Backend, BackendName, Layout, Scheme};
use storage::{Access, Accounts, Limits, Listener, Registry, Store, Tls};
use testkit::Certs;
use tokio::net::TcpListener;

const NODE: (&str, &str) = ("node", "node-password");
const PUSHER: (&str, &str) = ("pusher", "push-password");

/// A replica: the read listener over plain HTTP, the write listener as the publish endpoint.
struct Replica {
    read: SocketAddr,
    write: SocketAddr,
    ca: Certs,
    _dir: tempfile::TempDir,
}

async fn serve(listener: Listener, tls: Option<&Tls>) -> SocketAddr {
    let socket = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = socket.local_addr().unwrap();
    let acceptor = tls.map(|t| storage::server::acceptor(t).unwrap());
    tokio::spawn(storage::server::serve(
        socket,
        acceptor,
        listener,
        std::future::pending(),
    ));
    address
}

async fn replica() -> Replica {
    testkit::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        budget: None,
        reserve: Some(0),
    };
    let store = Store::open(&dir.path().join("data"), limits).unwrap();
    let registry = Registry::new(store, None, storage::Settings::default());
    let read_accounts =
        Accounts::new()
            .with(NODE.0, NODE.1, Access::Pull)
            .with(PUSHER.0, PUSHER.1, Access::Push);
    let write_accounts = Accounts::new().with(PUSHER.0, PUSHER.1, Access::Push);
    let ca = Certs::new("conformance publish CA");
    let server = ca.server(&[]);
    let tls = Tls {
        cert_pem: server.cert_pem,
        key_pem: server.key_pem,
        client_ca_pem: Some(ca.ca_pem()),
        ingress_client_ca: None,
    };
    let read = serve(Listener::read(registry.clone(), read_accounts), None).await;
    let write = serve(Listener::write(registry, write_accounts, true), Some(&tls)).await;
    Replica {
        read,
        write,
        ca,
        _dir: dir,
    }
}

impl Replica {
    /// The publish endpoint as `d8 mirror push` reaches it.
    fn publish(&self) -> Endpoint {
        let client = self.ca.client("d8-mirror");
        Endpoint::from_url(&format!("https://{}", self.write))
            .unwrap()
            .ca_pem(&self.ca.ca_pem())
            .client_identity(ClientIdentity::new(client.cert_pem, client.key_pem))
            .credentials(Credentials::new(PUSHER.0, PUSHER.1))
    }

    fn pull(&self) -> Endpoint {
        Endpoint::from_url(&format!("http://{}", self.read))
            .unwrap()
            .credentials(Credentials::new(NODE.0, NODE.1))
    }
}

async fn run(settings: Settings, registry: &str) -> Report {
    let report = conformance::run(&settings).await.expect("suite setup");
    eprintln!("conformance against {registry}:\n{report}");
    let failures = report.failures();
    assert!(
        failures.is_empty(),
        "{registry}: {} checks failed:\n{}",
        failures.len(),
        failures
            .iter()
            .map(|r| format!("  {}: {:?}", r.id, r.outcome))
            .collect::<Vec<_>>()
            .join("\n")
    );
    report
}

fn assert_passed(report: &Report, ids: &[&str]) {
    for id in ids {
        let result = report.get(id).unwrap_or_else(|| panic!("{id} ran"));
        assert_eq!(result.outcome, Outcome::Pass, "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publish_endpoint_conforms() {
    let replica = replica().await;
    let settings = Settings::new(replica.publish()).deviations(deviations::d8_storage_write());
    let report = run(settings, "the replica's publish endpoint").await;
    assert_passed(
        &report,
        &[
            "pull.manifest.get-by-tag",
            "pull.blob.range.suffix",
            "discovery.tags.link-pagination",
            "discovery.referrers.filter",
            "push.blob.chunked",
            "push.manifest.subject-header",
            "management.delete.manifest",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_listener_conforms() {
    let replica = replica().await;
    let settings = Settings::new(replica.pull())
        .read_only(replica.publish())
        .deviations(deviations::d8_storage_read());
    let report = run(settings, "the replica's read listener").await;
    assert_passed(
        &report,
        &[
            "pull.manifest.get-by-tag",
            "pull.blob.range.suffix",
            "discovery.tags.n-last",
            "discovery.referrers.list",
        ],
    );
    assert!(
        report.get("push.blob.chunked").is_none(),
        "pull and discovery only"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_in_front_of_the_cache_conforms() {
    let replica = replica().await;
    let storage = registry_plan::Endpoint {
        scheme: Scheme::Http,
        host: replica.read.to_string(),
        path: "/system/deckhouse".into(),
        ca: None,
        auth: Some(registry_plan::Credentials {
            username: NODE.0.into(),
            password: NODE.1.into(),
        }),
    };
    let layout = Layout {
        cache: true,
        backends: vec![Backend {
            name: BackendName::Storage,
            endpoint: storage,
            mirrors: vec![],
        }],
        additional_routes: vec![],
    };
    let dir = tempfile::tempdir().unwrap();
    let bootstrap = dir.path().join("bootstrap-layout.json");
    std::fs::write(&bootstrap, serde_json::to_vec(&layout).unwrap()).unwrap();
    let trust = dir.path().join("trust");
    std::fs::create_dir_all(&trust).unwrap();
    let config = agent::run::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        plain_http: false,
        metrics: None,
        containerd_registry_dir: dir.path().join("registry.d"),
        pki_dir: dir.path().join("pki"),
        trust_dir: Some(trust),
        bootstrap_layout: Some(bootstrap),
        layout_cache: dir.path().join("cache/layout.json"),
        interval: Duration::from_secs(30),
        timeouts: registry_client::Timeouts::default(),
        min_throughput: None,
    };
    let agent = agent::run::start(config, agent::run::NoApi)
        .await
        .expect("the agent starts");
    // containerd's view: the agent's CA, no credentials of its own.
    let endpoint = Endpoint::from_url(&format!("https://{}", agent.address))
        .unwrap()
        .ca_pem(&agent.ca_pem);
    let settings = Settings::new(endpoint)
        .under("system/deckhouse")
        .read_only(replica.publish())
        .deviations(deviations::d8_agent());
    let report = run(settings, "the agent").await;
    assert_passed(
        &report,
        &[
            "pull.manifest.get-by-tag",
            "pull.blob.range.suffix",
            "discovery.tags.n-last",
            "discovery.referrers.filter",
        ],
    );
}

#[test]
fn our_deviation_lists_name_distinct_checks() {
    for list in [
        deviations::d8_storage_write(),
        deviations::d8_storage_read(),
        deviations::d8_agent(),
    ] {
        let mut ids: Vec<_> = list.entries.iter().map(|d| d.check).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), list.entries.len(), "{}", list.registry);
    }
    let _ = Deviations::none();
}
