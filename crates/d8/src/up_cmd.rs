//! `d8 up`: the whole platform on one machine, in one process. The embedded API server (state
//! in `--data-dir`), the local Node, the controllers `d8 controller` composes (registry
//! controller and release engine, under leader election) and the registry agent of this node
//! run as tasks side by side; Ctrl-C or SIGTERM stops them in reverse order and a restart on the
//! same directory carries on from the same state.
//!
//! On a fresh data directory the registry module starts Managed with the cache on and no
//! upstream — air-gapped, waiting for `d8 mirror push` into the cache replica's publish endpoint
//! — which works with no network at all (`--initial-registry=unmanaged` starts without a
//! configuration instead: the agent listens but writes nothing for containerd). The cache
//! replica is `d8 registry storage` as a child process, configured from RegistryStorage
//! ([`replica`]). `d8 webhook` runs as a task on a loopback port, registered with the API
//! server before anything else is written ([`admission_webhook`]).

mod admission_webhook;
mod replica;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::PostParams;
use kube::{Api, Client};

use crate::apiserver_cmd::platform_apiserver;
use crate::controller_cmd::{self, Composition};
use crate::release_cmd;

/// Flags of `d8 up`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Where all state lives: `apiserver/` (database, PKI, kubeconfigs) and `agent/` (the
    /// agent's PKI and layout cache).
    #[arg(long, default_value = "/var/lib/d8")]
    data_dir: PathBuf,
    /// This machine's Node name (default: the host name).
    #[arg(long, env = "NODE_NAME")]
    node_name: Option<String>,
    /// Address of the Kubernetes API (HTTPS).
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Address of the registry agent containerd pulls through (HTTPS).
    #[arg(long, default_value = "127.0.0.1:5001")]
    agent_address: SocketAddr,
    /// Where the agent serves `/metrics`.
    #[arg(long, default_value = "127.0.0.1:4286")]
    agent_metrics_address: SocketAddr,
    /// Where the controllers serve `/metrics`.
    #[arg(long, default_value = "127.0.0.1:4281")]
    metrics_address: SocketAddr,
    /// Where `d8 webhook` (admission and conversion of the platform's kinds) listens, HTTPS;
    /// port 0 picks a free one. Only the API server calls it.
    #[arg(long, default_value = "127.0.0.1:0")]
    webhook_address: SocketAddr,
    /// containerd's registry drop-in directory (containerd's `config_path`).
    #[arg(long, default_value = "/etc/containerd/registry.d")]
    containerd_registry_dir: PathBuf,
    /// The agent's PKI directory (default: `DATA_DIR/agent/pki`).
    #[arg(long)]
    pki_dir: Option<PathBuf>,
    /// The agent's copy of its last layout (default: `DATA_DIR/agent/layout.json`).
    #[arg(long)]
    layout_cache: Option<PathBuf>,
    /// Extra CA certificates the agent trusts for every registry (default:
    /// `DATA_DIR/agent/trust`).
    #[arg(long)]
    trust_dir: Option<PathBuf>,
    /// Time between two passes of the registry controller and of the agent's layout loop.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Do not run the release engine.
    #[arg(long)]
    without_release_engine: bool,
    /// The registry configuration written on first start (a fresh data directory):
    /// `air-gap` (Managed, cache on, no upstream) or `unmanaged` (none).
    #[arg(long, value_enum, default_value_t = InitialRegistry::AirGap)]
    initial_registry: InitialRegistry,
    /// Read listener of the cache replica (pulls; the agent's Storage backend).
    #[arg(long, default_value = "127.0.0.1:5002")]
    storage_read_address: SocketAddr,
    /// Write listener of the cache replica: the publish endpoint `d8 mirror push` pushes to
    /// (client certificate and push credentials under `DATA_DIR/storage`).
    #[arg(long, default_value = "127.0.0.1:5003")]
    storage_write_address: SocketAddr,
    /// Where the cache replica serves `/metrics`.
    #[arg(long, default_value = "127.0.0.1:4284")]
    storage_metrics_address: SocketAddr,
    /// Bytes the cache replica keeps free on its filesystem (`d8 registry storage --reserve`).
    #[arg(long)]
    storage_reserve: Option<String>,
    /// A root manifest digest of the image set the cache must hold before the upstream can be
    /// dropped (repeatable; `d8 registry storage --expected-root`).
    #[arg(long = "expected-root", value_name = "DIGEST")]
    expected_roots: Vec<String>,
}

/// The registry configuration of a fresh platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum InitialRegistry {
    /// Managed, cache on, no upstream: waiting for `d8 mirror push`.
    AirGap,
    /// No configuration: the registry module is Unmanaged.
    Unmanaged,
}

/// The `registry` ModuleConfig `d8 up` writes on first start with `--initial-registry=air-gap`.
fn air_gap_module_config() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "deckhouse.io/v1alpha1",
        "kind": "ModuleConfig",
        "metadata": {"name": "registry"},
        "spec": {
            "version": 1,
            "enabled": true,
            "settings": {
                "mode": "Managed",
                "storage": {"cache": true, "source": {"bundleRef": "d8-mirror-bundle"}},
            },
        },
    })
}

/// The release engine's flags as `d8 up` sets them (parsed, so defaults stay in one place).
#[derive(Debug, clap::Parser)]
struct EngineFlags {
    #[command(flatten)]
    engine: release_cmd::EngineArgs,
}

/// The module manager's flags as `d8 up` sets them.
#[derive(Debug, clap::Parser)]
struct ModuleFlags {
    #[command(flatten)]
    modules: crate::module_cmd::ManagerArgs,
}

/// Where `d8 up` installs modules downloaded from ModuleSources.
const DOWNLOADED_MODULES_DIR: &str = "downloaded-modules";

/// Node names are DNS subdomains (RFC 1123): refuse a host name that is not one up front.
fn check_node_name(name: &str) -> anyhow::Result<()> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    anyhow::ensure!(
        valid,
        "node name {name:?} is not a lowercase DNS name (RFC 1123); pass --node-name"
    );
    Ok(())
}

/// Creates Node `name` unless it exists (a restart finds it there); whether it created it.
async fn ensure_node(client: &Client, name: &str) -> anyhow::Result<bool> {
    let nodes: Api<Node> = Api::all(client.clone());
    if nodes.get_opt(name).await?.is_some() {
        return Ok(false);
    }
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
    }))?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e).with_context(|| format!("creating Node {name}")),
    }
}

/// Writes the air-gapped `registry` ModuleConfig unless one exists.
async fn write_initial_config(client: &Client) -> anyhow::Result<()> {
    let configs: Api<api::module_config::ModuleConfig> = Api::all(client.clone());
    if configs.get_opt("registry").await?.is_some() {
        return Ok(());
    }
    let object = as_kubectl_applied(air_gap_module_config());
    configs
        .patch(
            "registry",
            &kube::api::PatchParams::apply(KUBECTL_APPLY_MANAGER),
            &kube::api::Patch::Apply(&object),
        )
        .await
        .context("writing the initial ModuleConfig registry")?;
    Ok(())
}

/// The field manager of `kubectl apply --server-side`.
const KUBECTL_APPLY_MANAGER: &str = "kubectl";
/// Where client-side `kubectl apply` keeps what it applied last.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// `object` as `kubectl apply` would have left it, so that a later `kubectl apply` of the user's
/// manifest — client-side (three-way merge from the annotation) or `--server-side` (the same
/// field manager, which then owns and drops the fields the new manifest leaves out) — replaces
/// it cleanly.
fn as_kubectl_applied(mut object: serde_json::Value) -> serde_json::Value {
    let applied = object.to_string();
    object["metadata"]["annotations"] = serde_json::json!({ LAST_APPLIED: applied });
    object
}

/// `Managed` or `Unmanaged`, as the `registry` ModuleConfig says now.
/// The registry module's mode for the banner, and whether its settings run the cache replica.
async fn registry_mode(client: &Client) -> (String, bool) {
    let configs: Api<api::module_config::ModuleConfig> = Api::all(client.clone());
    match configs.get_opt("registry").await {
        Ok(Some(config)) => {
            let settings = config.spec.settings.as_ref();
            let mode = settings
                .and_then(|s| s.get("mode"))
                .and_then(|m| m.as_str())
                .unwrap_or("Unmanaged")
                .to_owned();
            let cache = settings.is_some_and(runs_cache);
            (mode, cache)
        }
        Ok(None) => ("Unmanaged (no ModuleConfig registry)".to_owned(), false),
        Err(e) => (format!("unknown ({e})"), false),
    }
}

/// Whether registry settings run the cache replica: Managed with `storage.cache: true`.
fn runs_cache(settings: &serde_json::Value) -> bool {
    settings.get("mode").and_then(|m| m.as_str()) == Some("Managed")
        && settings
            .pointer("/storage/cache")
            .and_then(|c| c.as_bool())
            .unwrap_or(false)
}

/// Waits (at most `limit`) until something accepts connections on `address`: the banner's
/// printed push must not meet a replica still starting.
async fn wait_listening(address: SocketAddr, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if tokio::net::TcpStream::connect(address).await.is_ok() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// The API server's `EncryptionConfiguration`, under `DATA_DIR/apiserver`.
const ENCRYPTION_CONFIG: &str = "encryption-config.yaml";

/// Runs the platform until Ctrl-C or SIGTERM.
pub(crate) async fn run(args: Args) -> anyhow::Result<()> {
    // Listen for the signal from the start: a stop during start-up still stops cleanly.
    let signal = tokio::spawn(crate::shutdown_signal());
    let node = match &args.node_name {
        Some(name) => name.clone(),
        None => controller_cmd::hostname().context("no host name: pass --node-name")?,
    };
    check_node_name(&node)?;
    let data_dir = &args.data_dir;
    let agent_dir = data_dir.join("agent");
    let pki_dir = args
        .pki_dir
        .clone()
        .unwrap_or_else(|| agent_dir.join("pki"));
    let layout_cache = args
        .layout_cache
        .clone()
        .unwrap_or_else(|| agent_dir.join("layout.json"));
    let trust_dir = args
        .trust_dir
        .clone()
        .unwrap_or_else(|| agent_dir.join("trust"));
    crate::private_state::make_private(data_dir)?;
    std::fs::create_dir_all(&agent_dir)
        .with_context(|| format!("creating {}", agent_dir.display()))?;
    // Secrets are sealed at rest with a key made on the first start (rotation: docs/apiserver.md).
    let encryption = data_dir.join("apiserver").join(ENCRYPTION_CONFIG);
    apiserver::ensure_encryption_config(&encryption).context("the API server's encryption key")?;

    // The API server.
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    // The rules kube-apiserver runs itself in Deckhouse stay in process; `d8 webhook` answers
    // the rest over HTTPS once registered (below).
    let server = platform_apiserver(
        apiserver::ApiServer::builder().data_dir(data_dir.join("apiserver")),
        admission::Verdicts::ApiServer,
    )
    .encryption_config(&encryption)
    .user(apiserver::User::registry_agent(&node))
    .serve(listener)
    .await
    .context("starting the API server")?;
    let admin_kubeconfig = server.admin_kubeconfig().to_owned();
    let agent_kubeconfig = server
        .kubeconfig(&format!("system:registry-agent:{node}"))
        .context("the API server wrote no kubeconfig for the agent")?
        .to_owned();
    let admin = crate::kube_client::client(Some(&admin_kubeconfig)).await?;
    // The webhook, registered before any write of ours (see `webhook`).
    let webhook_server = admission_webhook::start(data_dir, args.webhook_address, admin.clone())
        .await
        .context("starting the admission webhook")?;
    let fresh = ensure_node(&admin, &node).await?;
    if fresh && args.initial_registry == InitialRegistry::AirGap {
        write_initial_config(&admin).await?;
    }
    let storage_dir = data_dir.join("storage");
    let storage_access = replica::prepare(&storage_dir).context("the cache replica's PKI")?;

    // The registry agent of this node.
    let agent = agent::run::start(
        agent::run::Config {
            listen: args.agent_address,
            advertise: None,
            plain_http: false,
            metrics: Some(args.agent_metrics_address),
            containerd_registry_dir: args.containerd_registry_dir.clone(),
            pki_dir: pki_dir.clone(),
            trust_dir: Some(trust_dir),
            bootstrap_layout: None,
            layout_cache,
            interval: args.interval,
            timeouts: registry_client::Timeouts::default(),
            min_throughput: Some(registry_client::MinThroughput::DEFAULT),
        },
        agent_kube::KubeNodeApi::new(&node, agent_kube::Connection::Kubeconfig(agent_kubeconfig)),
    )
    .await
    .context("starting the registry agent")?;
    let agent_ca = pki_dir.join(agent::pki::CA_FILE);

    // The controllers, reading release channels through the agent.
    let engine = if args.without_release_engine {
        None
    } else {
        let flags = <EngineFlags as clap::Parser>::try_parse_from([
            "d8 up".to_owned(),
            format!("--registry={}", agent.address),
            format!("--registry-ca={}", agent_ca.display()),
            "--embedded".to_owned(),
        ])
        .context("release engine flags")?;
        Some(release_cmd::engine(admin.clone(), &flags.engine)?)
    };
    // The module manager: modules from ModuleSources, installed under DATA_DIR.
    let downloaded_modules = data_dir.join(DOWNLOADED_MODULES_DIR);
    let module_flags = <ModuleFlags as clap::Parser>::try_parse_from([
        "d8 up".to_owned(),
        format!("--downloaded-modules-dir={}", downloaded_modules.display()),
    ])
    .context("module manager flags")?;
    let modules = crate::module_cmd::manager(admin.clone(), &module_flags.modules)?;
    let metrics = controller_cmd::bind_metrics(args.metrics_address).await?;
    let controller_metrics = metrics.local_addr()?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut controllers = tokio::spawn(controller_cmd::lead(
        admin.clone(),
        Composition {
            identity: node.clone(),
            registry: registry_controller::Options {
                interval: args.interval,
                storage: registry_controller::StorageOptions {
                    scheme: api::module_source::Scheme::Https,
                    ca: Some(storage_access.ca_pem.clone()),
                    credentials: Some(storage_access.node.clone()),
                    replicas: vec![(node.clone(), args.storage_read_address.to_string())],
                },
                // One static node running containerd: the module's prerequisites hold.
                cluster: registry_controller::ClusterSource::Fixed(
                    registry_controller::ClusterFacts::static_with("Containerd"),
                ),
                ..Default::default()
            },
            engine,
            metrics_address: controller_metrics,
            utilities: controller_cmd::Utilities {
                documentation: Some(utilities::documentation::Options::new(&downloaded_modules)),
                // One machine runs no Deployments: the manager runs in the controller.
                cni_migration: Some(Default::default()),
                packages: package_controller::controller::Options {
                    packages_dir: downloaded_modules.join(".packages"),
                    deckhouse_version: module_flags.modules.deckhouse_version(),
                    ..Default::default()
                },
                ..Default::default()
            },
            secure_metrics: None,
        },
        modules,
        metrics,
        {
            let mut stopped = stopped.clone();
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            }
        },
    ));
    // The cache replica, following RegistryStorage.
    let replica = tokio::spawn(replica::supervise(
        admin.clone(),
        replica::Settings {
            node: node.clone(),
            dir: storage_dir.clone(),
            read: args.storage_read_address,
            write: args.storage_write_address,
            metrics: args.storage_metrics_address,
            kubeconfig: admin_kubeconfig.clone(),
            expected_roots: args.expected_roots.clone(),
            reserve: args.storage_reserve.clone(),
            interval: args.interval,
        },
        async move {
            let mut stopped = stopped;
            let _ = stopped.wait_for(|s| *s).await;
        },
    ));

    let (mode, cache) = registry_mode(&admin).await;
    if cache && !wait_listening(args.storage_write_address, Duration::from_secs(30)).await {
        tracing::warn!(address = %args.storage_write_address, "the cache replica's publish endpoint is not listening yet");
    }
    let agent_metrics = agent
        .metrics_address
        .map(|a| format!("http://{a}/metrics"))
        .unwrap_or_default();
    let registry_dir = args.containerd_registry_dir.display();
    let admin_path = admin_kubeconfig.display();
    let storage = storage_dir.display();
    print(&format!(
        "d8 up: node {node}, state in {data}
  Kubernetes API      {url}
  admin kubeconfig    {admin_path}
  registry agent      https://{agent_address} (CA {ca})
  containerd drop-in  {registry_dir}/{default}/hosts.toml (containerd's config_path: {registry_dir})
  cache replica       https://{read} (pulls), https://{write} (publish endpoint), CA {storage}/{storage_ca}, log {storage}/replica.log
  metrics             http://{controller_metrics}/metrics (controllers), {agent_metrics} (agent), http://{storage_metrics}/metrics (cache)
  admission webhook   https://{webhook_address} (d8 webhook, CA {data}/{webhook_dir}/ca.crt)
  registry module     {mode}
  modules             {downloaded} (from ModuleSources; enable one with a ModuleConfig)
Air-gapped (the default): bundle your images (d8 mirror pull --image REF BUNDLE), push the bundle
into the cache, then pull them through the agent:
  d8 mirror push BUNDLE {write}/system/deckhouse --tls-ca-file {storage}/{storage_ca} \\
    --tls-cert {storage}/{push_cert} --tls-key {storage}/{push_key} -u push -p \"$(cut -d: -f2 {storage}/{push_file})\"
To pull through a real upstream instead (the cache fills on demand):
  kubectl --kubeconfig {admin_path} apply -f examples/moduleconfig-registry.yaml
Once ConfigMap d8-system/registry-image-address exists:
  ctr -n k8s.io images pull --hosts-dir {registry_dir} registry.d8-system.svc:5001/system/deckhouse/<image>
Ctrl-C stops.
",
        data = data_dir.display(),
        downloaded = downloaded_modules.display(),
        url = server.url(),
        agent_address = agent.address,
        ca = agent_ca.display(),
        default = agent::dropin::DEFAULT_HOST,
        read = args.storage_read_address,
        write = args.storage_write_address,
        storage_metrics = args.storage_metrics_address,
        storage_ca = replica::CA_FILE,
        push_cert = replica::PUSH_CERT_FILE,
        push_key = replica::PUSH_KEY_FILE,
        push_file = replica::PUSH_FILE,
        webhook_address = webhook_server.address,
        webhook_dir = admission_webhook::DIR,
    ))?;
    tracing::info!(%node, url = server.url(), agent = %agent.address, "platform running");

    let outcome = tokio::select! {
        _ = signal => Ok(()),
        ended = &mut controllers => match ended {
            Ok(Ok(())) => Err(anyhow::anyhow!("the controllers stopped on their own")),
            Ok(Err(e)) => Err(e.context("the controllers failed")),
            Err(e) => Err(anyhow::anyhow!("the controllers panicked: {e}")),
        },
    };
    tracing::info!("stopping: controllers, cache replica, webhook, agent, API server");
    let _ = stop.send(true);
    if !controllers.is_finished() {
        let _ = controllers.await;
    }
    let _ = replica.await;
    webhook_server.stop().await;
    agent.stop().await;
    server.shutdown().await;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_waits_for_the_replica_only_when_settings_run_it() {
        let air_gap = air_gap_module_config();
        let table = [
            (air_gap["spec"]["settings"].clone(), true),
            (
                serde_json::json!({"mode": "Managed", "storage": {"cache": false}}),
                false,
            ),
            (serde_json::json!({"mode": "Managed"}), false),
            (
                serde_json::json!({"mode": "Unmanaged", "storage": {"cache": true}}),
                false,
            ),
        ];
        for (settings, expected) in table {
            assert_eq!(runs_cache(&settings), expected, "{settings}");
        }
    }

    #[test]
    fn node_names_must_be_dns_names() {
        for good in ["local", "node-1", "a.b.c", "n0"] {
            assert!(check_node_name(good).is_ok(), "{good}");
        }
        for bad in ["", "Node", "-a", "a-", "a..b", "a_b", &"x".repeat(254)] {
            let error = check_node_name(bad).unwrap_err().to_string();
            assert!(error.contains("--node-name"), "{bad}: {error}");
        }
    }

    #[test]
    fn the_engine_flags_parse() {
        let flags = <EngineFlags as clap::Parser>::try_parse_from([
            "d8 up",
            "--registry=127.0.0.1:5001",
            "--registry-ca=/tmp/ca.crt",
            "--embedded",
        ]);
        assert!(flags.is_ok(), "{flags:?}");
    }
}
