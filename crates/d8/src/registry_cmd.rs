//! `d8 registry …`: the registry module's components.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

/// Registry components.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// The node agent: every containerd pull on the node goes through it.
    Agent(Box<AgentArgs>),
    /// A cache replica: the store, the read ("5001") and write ("5003") listeners, pull-through
    /// from the upstream while one is held.
    Storage(Box<StorageArgs>),
    /// One garbage collection of a stopped replica's store (or a dry run of a live one's):
    /// the keep rules of the scheduled collection, with the versions and the expected set
    /// given on the command line.
    StorageGc(Box<StorageGcArgs>),
}

/// Flags of `d8 registry storage-gc`.
#[derive(Debug, clap::Args)]
pub(crate) struct StorageGcArgs {
    /// The store's directory.
    #[arg(long, default_value = "/opt/deckhouse/registry")]
    data_dir: PathBuf,
    /// Only report what would be deleted (safe while the replica runs).
    #[arg(long)]
    dry_run: bool,
    /// The platform repository (root scope of the tag pass).
    #[arg(long, default_value = "system/deckhouse")]
    repository: String,
    /// The deployed platform version; without it nothing is deleted.
    #[arg(long)]
    deployed: Option<String>,
    /// The previous platform version.
    #[arg(long)]
    previous: Option<String>,
    /// A root manifest digest of the expected set (repeatable); none = the set is unknown and
    /// only tags are judged, nothing is deleted.
    #[arg(long = "expected-root", value_name = "DIGEST")]
    expected_roots: Vec<String>,
}

/// Flags of `d8 registry storage`.
///
/// Credentials are read from files (or the environment), never from the command line: a file
/// holds one `username:password` per line.
#[derive(Debug, clap::Args)]
pub(crate) struct StorageArgs {
    /// The store's directory.
    #[arg(long, default_value = "/opt/deckhouse/registry")]
    data_dir: PathBuf,
    /// Where the read listener (pull API, pull-through) listens.
    #[arg(long, default_value = "0.0.0.0:5001")]
    read_address: SocketAddr,
    /// Where the write listener (push API; the publish endpoint's backend) listens.
    #[arg(long, default_value = "0.0.0.0:5003")]
    write_address: SocketAddr,
    /// Serving certificate (PEM) of both listeners; without it they speak plain HTTP.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM) of the serving certificate.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// CA (PEM) whose client certificates the write listener requires, in addition to write
    /// credentials.
    #[arg(long, requires = "tls_cert")]
    client_ca: Option<PathBuf>,
    /// CA (PEM) of the ingress in front of the write listener (`/pki/ingress-client-ca.crt`):
    /// a client certificate is requested there, and on a connection presenting one from this CA
    /// the client address in `X-Forwarded-For` / `X-Real-IP` is believed; otherwise the socket's
    /// peer address is the client's. Re-read when the file changes; until it holds a
    /// certificate (it may not exist yet), no forwarded address is believed.
    #[arg(long, requires = "tls_cert")]
    ingress_client_ca: Option<PathBuf>,
    /// Accounts that may pull (the node account): `username:password` per line. Also read
    /// from the environment variable `D8_REGISTRY_PULL_CREDENTIALS`.
    #[arg(long)]
    pull_credentials_file: Option<PathBuf>,
    /// Accounts that may push and pull (the sync account, write credentials): `username:password`
    /// per line. Also read from the environment variable `D8_REGISTRY_PUSH_CREDENTIALS`.
    #[arg(long)]
    push_credentials_file: Option<PathBuf>,
    /// Accept every request without credentials (local experiments only).
    #[arg(long, conflicts_with_all = ["pull_credentials_file", "push_credentials_file"])]
    no_auth: bool,
    /// Offer the bearer token service on the read listener (`/auth/token`): challenges become
    /// `Bearer`, clients trade Basic credentials for 5-minute tokens; Basic keeps working.
    #[arg(long, conflicts_with = "no_auth")]
    token_auth: bool,
    /// The token signing key shared by the replicas (a file of at least 32 bytes), so each
    /// accepts the others' tokens; implies --token-auth. Without it a random key per process.
    #[arg(long, conflicts_with = "no_auth")]
    token_key_file: Option<PathBuf>,
    /// The upstream filled from on a miss, `https://host[:port][/path]`; none = authoritative.
    #[arg(long)]
    upstream: Option<String>,
    /// The upstream's credentials: a file holding `username:password`.
    #[arg(long, requires = "upstream")]
    upstream_credentials_file: Option<PathBuf>,
    /// CA (PEM) verifying the upstream, in addition to the system roots.
    #[arg(long, requires = "upstream")]
    upstream_ca: Option<PathBuf>,
    /// An upstream body that sends no byte for this long ends its fill.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    upstream_stall_timeout: Duration,
    /// An upstream body slower than BYTES per WINDOW ends its fill, and the next pull of the
    /// digest starts a fresh one (`0` for no floor).
    #[arg(long, default_value = "32Ki/30s", value_parser = parse_min_throughput)]
    upstream_min_throughput: MinThroughputArg,
    /// The local repository prefix mapped to the upstream's root.
    #[arg(long, default_value = "system/deckhouse")]
    upstream_prefix: String,
    /// `storage.size`: writes are refused beyond it (`BudgetExhausted`), e.g. `20Gi`.
    #[arg(long)]
    size: Option<String>,
    /// Bytes kept free on the filesystem (`ReserveExhausted` below it); default from capacity.
    #[arg(long)]
    reserve: Option<String>,
    /// This node's name (the replica's identity).
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
    /// Where `/metrics` is served (the store's gauges).
    #[arg(long, default_value = "127.0.0.1:4284")]
    metrics_address: SocketAddr,
    /// Kubeconfig for status, leader election and replication; none runs the replica alone.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// How other replicas reach this read listener, `host:port` (default: the read address).
    #[arg(long)]
    advertise_address: Option<String>,
    /// A root manifest digest of the expected set (repeatable): the leader fills it from the
    /// upstream, followers copy it from the leader, completeness is counted against it.
    #[arg(long = "expected-root", value_name = "DIGEST")]
    expected_roots: Vec<String>,
    /// CA (PEM) verifying the other replicas' serving certificates when copying from the leader.
    #[arg(long)]
    peer_ca: Option<PathBuf>,
    /// How often the disk is measured and copying resumed.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    sync_interval: Duration,
    /// How often leader eligibility is re-checked.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    eligibility_interval: Duration,
    /// Lease `registry-storage` duration.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    lease_duration: Duration,
    /// A leader that cannot renew for this long steps down.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    renew_deadline: Duration,
    /// How often the lease is acquired or renewed.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    retry_period: Duration,
    /// Blobs copied at a time.
    #[arg(long, default_value_t = 4)]
    parallelism: usize,
    /// Compute the expected set from the cluster (deployed and previous DeckhouseRelease, the
    /// images files in their release images read through this replica's read listener)
    /// instead of --expected-root; needs --kubeconfig.
    #[arg(long, requires = "kubeconfig")]
    expected_from_cluster: bool,
    /// Garbage collection schedule when `RegistryStorage.spec.garbageCollection` (resolved by
    /// the controller, re-read every minute) has none: five cron fields, the replica's time zone.
    #[arg(long, default_value = storage_kube::gc::DEFAULT_SCHEDULE)]
    gc_schedule: String,
    /// No scheduled garbage collection (`garbageCollection.enabled: false`).
    #[arg(long)]
    no_gc: bool,
    /// Scheduled collections only report what they would delete.
    #[arg(long)]
    gc_dry_run: bool,
    /// Content used (read, uploaded, referenced by a push) this recently is never collected.
    #[arg(long, default_value = "2m", value_parser = humantime::parse_duration)]
    gc_grace: Duration,
}

/// Flags of `d8 registry agent` (Deckhouse's names and defaults).
#[derive(Debug, clap::Args)]
pub(crate) struct AgentArgs {
    /// Where the registry endpoint listens.
    #[arg(long, default_value = "127.0.0.1:5001")]
    listen_address: SocketAddr,
    /// The address containerd and the loop guard know the agent by (default: the listen address).
    #[arg(long)]
    advertise_address: Option<String>,
    /// Serve plain HTTP instead of TLS (local experiments only).
    #[arg(long)]
    plain_http: bool,
    /// Where /metrics is served.
    #[arg(long, default_value = "127.0.0.1:4286")]
    metrics_address: SocketAddr,
    /// containerd's registry drop-in directory.
    #[arg(long, default_value = "/etc/containerd/registry.d")]
    containerd_registry_dir: PathBuf,
    /// The agent's PKI directory (CA and serving certificate, generated on the node).
    #[arg(long, default_value = "/etc/kubernetes/registry-agent/pki")]
    pki_dir: PathBuf,
    /// The layout the node was installed with (used until the API has been reached).
    #[arg(
        long,
        default_value = "/etc/kubernetes/registry-agent/bootstrap-layout.json"
    )]
    bootstrap_layout: PathBuf,
    /// The on-disk copy of the last layout read from the API.
    #[arg(long, default_value = "/var/lib/deckhouse/registry-agent/layout.json")]
    layout_cache: PathBuf,
    /// Extra CA certificates trusted for every registry.
    #[arg(long, default_value = "/opt/deckhouse/share/ca-certificates")]
    trust_dir: PathBuf,
    /// How often the layout is re-read.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Longest one attempt at one registry may take, body included.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    forward_timeout: Duration,
    /// A registry that sends no bytes for this long is abandoned (containerd can then fall back).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    stall_timeout: Duration,
    /// A registry body slower than BYTES per WINDOW is abandoned and the rest asked of the next
    /// registry (`0` for no floor).
    #[arg(long, default_value = "32Ki/30s", value_parser = parse_min_throughput)]
    min_throughput: MinThroughputArg,
    /// The kubeconfig to read the node's RegistryNode with; it may appear later.
    #[arg(long, default_value = "/etc/kubernetes/registry-agent/kubeconfig")]
    kubeconfig: PathBuf,
    /// This node's name (its RegistryNode's name).
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
}

/// `--min-throughput`: `BYTES/WINDOW` (`32Ki/30s`), or `0` for none.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MinThroughputArg(Option<registry_client::MinThroughput>);

fn parse_min_throughput(value: &str) -> Result<MinThroughputArg, String> {
    if value.trim() == "0" {
        return Ok(MinThroughputArg(None));
    }
    let (bytes, window) = value
        .split_once('/')
        .ok_or_else(|| format!("{value:?}: expected BYTES/WINDOW, e.g. 32Ki/30s, or 0"))?;
    let bytes = registry_plan::budget::parse_quantity(bytes.trim()).map_err(|e| e.to_string())?;
    let window = humantime::parse_duration(window.trim()).map_err(|e| e.to_string())?;
    if window.is_zero() {
        return Err(format!("{value:?}: the window must be longer than 0"));
    }
    Ok(MinThroughputArg(Some(registry_client::MinThroughput {
        bytes,
        window,
    })))
}

/// Runs a registry component until Ctrl-C or SIGTERM.
pub(crate) async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Agent(args) => agent(*args).await,
        Command::Storage(args) => storage(*args).await,
        Command::StorageGc(args) => storage_gc(&args).await,
    }
}

async fn agent(args: AgentArgs) -> anyhow::Result<()> {
    let config = agent::run::Config {
        listen: args.listen_address,
        advertise: args.advertise_address,
        plain_http: args.plain_http,
        metrics: Some(args.metrics_address),
        containerd_registry_dir: args.containerd_registry_dir,
        pki_dir: args.pki_dir,
        trust_dir: Some(args.trust_dir),
        bootstrap_layout: Some(args.bootstrap_layout),
        layout_cache: args.layout_cache,
        interval: args.interval,
        timeouts: registry_client::Timeouts {
            stall: args.stall_timeout,
            total: Some(args.forward_timeout),
            ..registry_client::Timeouts::default()
        },
        min_throughput: args.min_throughput.0,
    };
    let api = agent_kube::KubeNodeApi::new(
        &args.node_name,
        agent_kube::Connection::Kubeconfig(args.kubeconfig),
    );
    let running = agent::run::start(config, api)
        .await
        .context("starting the registry agent")?;
    tracing::info!(address = %running.address, node = %args.node_name, "registry agent listening");
    crate::shutdown_signal().await;
    running.stop().await;
    Ok(())
}

/// Environment variable with pull accounts (`username:password` per line).
const PULL_CREDENTIALS_ENV: &str = "D8_REGISTRY_PULL_CREDENTIALS";
/// Environment variable with push accounts (`username:password` per line).
const PUSH_CREDENTIALS_ENV: &str = "D8_REGISTRY_PUSH_CREDENTIALS";

fn read_text(path: &std::path::Path, what: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {what} {}", path.display()))
}

/// `username:password` lines; blank lines and `#` comments skipped. Errors name the line, never
/// its content.
fn credential_lines(text: &str, origin: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        match line.split_once(':') {
            Some((user, password)) if !user.is_empty() && !password.is_empty() => {
                out.push((user.to_owned(), password.to_owned()));
            }
            _ => anyhow::bail!(
                "{origin}, line {}: expected username:password (both non-empty)",
                n + 1
            ),
        }
    }
    Ok(out)
}

fn accounts_from(
    file: Option<&std::path::Path>,
    env: &str,
    what: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if let Some(path) = file {
        out.extend(credential_lines(
            &read_text(path, what)?,
            &path.display().to_string(),
        )?);
    }
    if let Ok(text) = std::env::var(env) {
        out.extend(credential_lines(&text, &format!("${env}"))?);
    }
    Ok(out)
}

fn storage_config(args: &StorageArgs) -> anyhow::Result<storage::run::Config> {
    use storage::{Access, Accounts};
    let pull = accounts_from(
        args.pull_credentials_file.as_deref(),
        PULL_CREDENTIALS_ENV,
        "pull credentials",
    )?;
    let push = accounts_from(
        args.push_credentials_file.as_deref(),
        PUSH_CREDENTIALS_ENV,
        "push credentials",
    )?;
    let (read_accounts, write_accounts) = if args.no_auth {
        (Accounts::open(), Accounts::open())
    } else {
        if pull.is_empty() && push.is_empty() {
            anyhow::bail!(
                "no accounts: give --pull-credentials-file / --push-credentials-file (or ${PULL_CREDENTIALS_ENV} / ${PUSH_CREDENTIALS_ENV}), or --no-auth for local experiments"
            );
        }
        let mut read = Accounts::new();
        let mut write = Accounts::new();
        for (user, password) in &pull {
            read = read.with(user, password, Access::Pull);
        }
        for (user, password) in &push {
            read = read.with(user, password, Access::Push);
            write = write.with(user, password, Access::Push);
        }
        let lifetime = storage::auth::token::DEFAULT_LIFETIME;
        if let Some(path) = &args.token_key_file {
            let secret = std::fs::read(path)
                .with_context(|| format!("--token-key-file {}", path.display()))?;
            if secret.len() < 32 {
                anyhow::bail!(
                    "--token-key-file {}: the key has {} bytes; at least 32 are needed",
                    path.display(),
                    secret.len()
                );
            }
            read = read.with_tokens(storage::auth::TokenKey::new(&secret, lifetime));
        } else if args.token_auth {
            let key = storage::auth::TokenKey::random(lifetime)
                .map_err(|_| anyhow::anyhow!("no randomness for the token key"))?;
            read = read.with_tokens(key);
        }
        (read, write)
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(storage::Tls {
            cert_pem: read_text(cert, "--tls-cert")?,
            key_pem: read_text(key, "--tls-key")?,
            client_ca_pem: args
                .client_ca
                .as_deref()
                .map(|p| read_text(p, "--client-ca"))
                .transpose()?,
            // Followed, and may not exist yet: the registry controller writes this key of the
            // mounted Secret once the cache is on.
            ingress_client_ca: args
                .ingress_client_ca
                .as_deref()
                .map(http_serve::ca::CaFile::watch),
        }),
        _ => None,
    };
    let upstream = match &args.upstream {
        Some(url) => {
            let mut endpoint = registry_client::Endpoint::from_url(url)
                .with_context(|| "--upstream: expected https://host[:port][/path]")?;
            if let Some(path) = &args.upstream_ca {
                endpoint = endpoint.ca_pem(&read_text(path, "--upstream-ca")?);
            }
            if let Some(path) = &args.upstream_credentials_file {
                let lines = credential_lines(
                    &read_text(path, "--upstream-credentials-file")?,
                    &path.display().to_string(),
                )?;
                let [(user, password)] = lines.as_slice() else {
                    anyhow::bail!(
                        "{}: expected exactly one username:password line",
                        path.display()
                    );
                };
                endpoint = endpoint.credentials(registry_client::Credentials::new(user, password));
            }
            let remote = registry_client::Client::new(registry_client::Config {
                timeouts: registry_client::Timeouts {
                    stall: args.upstream_stall_timeout,
                    ..registry_client::Timeouts::default()
                },
                min_throughput: args.upstream_min_throughput.0,
                ..registry_client::Config::default()
            })
            .remote(endpoint)
            .context("--upstream")?;
            Some(storage::Upstream {
                remote,
                prefix: args.upstream_prefix.trim_matches('/').to_owned(),
            })
        }
        None => None,
    };
    let quantity = |flag: &str, value: &Option<String>| -> anyhow::Result<Option<u64>> {
        value
            .as_deref()
            .map(registry_plan::budget::parse_quantity)
            .transpose()
            .with_context(|| flag.to_owned())
    };
    Ok(storage::run::Config {
        data_dir: args.data_dir.clone(),
        read_address: args.read_address,
        write_address: args.write_address,
        tls,
        read_accounts,
        write_accounts,
        upstream,
        limits: storage::Limits {
            budget: quantity("--size", &args.size)?,
            reserve: quantity("--reserve", &args.reserve)?,
        },
        settings: storage::Settings::default(),
        node: args.node_name.clone(),
        metrics_address: Some(args.metrics_address),
    })
}

/// The first account of `file` / `env` (the account replication pulls from the leader with).
fn first_account(
    file: Option<&std::path::Path>,
    env: &str,
) -> anyhow::Result<Option<registry_client::Credentials>> {
    Ok(accounts_from(file, env, "credentials")?
        .into_iter()
        .next()
        .map(|(user, password)| registry_client::Credentials::new(user, password)))
}

fn sync_config(
    args: &StorageArgs,
    running: &storage::run::Running,
) -> anyhow::Result<storage_kube::sync::Config> {
    let roots = args
        .expected_roots
        .iter()
        .map(|d| {
            oci::Digest::parse(d).with_context(|| format!("--expected-root {d:?}: not a digest"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let address = match &args.advertise_address {
        Some(a) => a.clone(),
        None if running.read_address.ip().is_unspecified() => anyhow::bail!(
            "--advertise-address is required with --kubeconfig when --read-address is {}: other replicas must know where to copy from",
            args.read_address
        ),
        None => running.read_address.to_string(),
    };
    let mut election = storage_kube::election::Config::new(&args.node_name);
    election.lease.lease_duration = args.lease_duration;
    election.lease.renew_deadline = args.renew_deadline;
    election.lease.retry_period = args.retry_period;
    election.recheck = args.eligibility_interval;
    let credentials =
        match first_account(args.push_credentials_file.as_deref(), PUSH_CREDENTIALS_ENV)? {
            Some(c) => Some(c),
            None => first_account(args.pull_credentials_file.as_deref(), PULL_CREDENTIALS_ENV)?,
        };
    Ok(storage_kube::sync::Config {
        election,
        address,
        repository: oci::Repository::parse(args.upstream_prefix.trim_matches('/'))
            .with_context(|| format!("--upstream-prefix {:?}", args.upstream_prefix))?,
        roots,
        leader: storage_kube::sync::LeaderAccess {
            scheme: if args.tls_cert.is_some() {
                registry_client::Scheme::Https
            } else {
                registry_client::Scheme::Http
            },
            ca_pem: args
                .peer_ca
                .as_deref()
                .map(|p| read_text(p, "--peer-ca"))
                .transpose()?,
            credentials,
        },
        parallelism: args.parallelism.max(1),
        interval: args.sync_interval,
    })
}

async fn storage(args: StorageArgs) -> anyhow::Result<()> {
    let config = storage_config(&args)?;
    let upstream = config.upstream.clone();
    let running = storage::run::start(config)
        .await
        .context("starting the storage replica")?;
    let schedule = storage_kube::gc::Schedule::parse(&args.gc_schedule)?;
    let mut collector = None;
    let sync = match &args.kubeconfig {
        Some(path) => {
            let sync_config = sync_config(&args, &running)?;
            let client = crate::kube_client::client(Some(path)).await?;
            let cluster = args
                .expected_from_cluster
                .then(|| storage_kube::sync::ClusterSet::new(own_source(&sync_config, &running)));
            if !args.no_gc {
                let keep = match &cluster {
                    Some(c) => storage_kube::gc::Keep::Cluster(c.source.clone()),
                    None => storage_kube::gc::Keep::Fixed {
                        deployed: None,
                        previous: None,
                        roots: sync_config.roots.clone(),
                    },
                };
                let mut gc = storage_kube::gc::Config::new(
                    &args.node_name,
                    sync_config.repository.clone(),
                    keep,
                );
                gc.dry_run = args.gc_dry_run;
                gc.grace = args.gc_grace;
                collector = Some(storage_kube::gc::spawn(
                    client.clone(),
                    running.registry.store().clone(),
                    schedule,
                    gc,
                ));
            }
            Some(
                storage_kube::sync::spawn_with_cluster_set(
                    client,
                    running.registry.clone(),
                    upstream,
                    sync_config,
                    cluster,
                )
                .context("starting leader election")?,
            )
        }
        None => None,
    };
    tracing::info!(
        node = %args.node_name,
        read = %running.read_address,
        write = %running.write_address,
        metrics = ?running.metrics_address,
        "registry storage listening"
    );
    crate::shutdown_signal().await;
    if let Some(collector) = collector {
        collector.abort();
    }
    if let Some(sync) = sync {
        sync.shutdown().await;
    }
    running.stop().await;
    Ok(())
}

/// Release images are read through the replica's own read listener: from the store, or
/// filled from the upstream while one is held.
fn own_source(
    config: &storage_kube::sync::Config,
    running: &storage::run::Running,
) -> storage_kube::expected::Source {
    let mut endpoint =
        registry_client::Endpoint::new(config.leader.scheme, &own_address(running.read_address));
    if let Some(ca) = &config.leader.ca_pem {
        endpoint = endpoint.ca_pem(ca);
    }
    if let Some(credentials) = &config.leader.credentials {
        endpoint = endpoint.credentials(credentials.clone());
    }
    let remote = registry_client::Client::new(registry_client::Config::default())
        .remote(endpoint)
        .unwrap_or_else(|e| unreachable!("a host:port endpoint is valid: {e}"));
    storage_kube::expected::Source::registry(remote, config.repository.to_string())
}

/// Where the replica reaches its own read listener: the listen address itself, or loopback when
/// it listens on every address. In a cluster the chart binds `$(POD_IP):5001`, where nothing
/// answers on 127.0.0.1.
fn own_address(read: SocketAddr) -> String {
    match read.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => format!("127.0.0.1:{}", read.port()),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => format!("[::1]:{}", read.port()),
        _ => read.to_string(),
    }
}

#[cfg(test)]
#[test]
fn own_address_is_the_listen_address_unless_it_is_every_address() {
    for (read, own) in [
        ("0.0.0.0:5001", "127.0.0.1:5001"),
        ("[::]:5001", "[::1]:5001"),
        ("10.0.0.4:5001", "10.0.0.4:5001"),
        ("127.0.0.1:6001", "127.0.0.1:6001"),
        ("[fd00::4]:5001", "[fd00::4]:5001"),
    ] {
        assert_eq!(own_address(read.parse().unwrap()), own, "{read}");
    }
}

async fn storage_gc(args: &StorageGcArgs) -> anyhow::Result<()> {
    let roots = args
        .expected_roots
        .iter()
        .map(|d| {
            oci::Digest::parse(d).with_context(|| format!("--expected-root {d:?}: not a digest"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let options = storage::gc::Options {
        root: oci::Repository::parse(args.repository.trim_matches('/'))
            .with_context(|| format!("--repository {:?}", args.repository))?,
        deployed: args.deployed.clone(),
        previous: args.previous.clone(),
        keep: (!roots.is_empty()).then(|| registry_plan::expected::ExpectedSet {
            entries: roots
                .iter()
                .map(|d| registry_plan::expected::Entry::Digest(d.to_string()))
                .collect(),
        }),
        dry_run: args.dry_run,
        grace: Duration::ZERO,
    };
    let data_dir = args.data_dir.clone();
    let report = tokio::task::spawn_blocking(move || {
        // A dry run leaves a live replica's writes in progress alone; a real run takes the
        // store's lock, so it is refused while a replica runs on the directory (the replica
        // tracks which blobs are in use inside its own process).
        let store = if options.dry_run {
            storage::Store::inspect(&data_dir)?
        } else {
            storage::Store::open(&data_dir, storage::Limits::default())?
        };
        storage::gc::collect(&store, &options)
    })
    .await
    .context("the collection task")??;
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    for (repository, tag) in &report.tags {
        writeln!(out, "tag       {repository}:{tag}")?;
    }
    for (repository, digest) in &report.manifests {
        writeln!(out, "manifest  {repository}@{digest}")?;
    }
    for digest in &report.blobs {
        writeln!(out, "blob      {digest}")?;
    }
    writeln!(out, "{report}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_files_are_read_strictly_and_errors_hide_content() {
        let lines = credential_lines("# accounts\nnode:p1\n\nsync:p:2\r\n", "f").unwrap();
        assert_eq!(
            lines,
            vec![
                ("node".to_owned(), "p1".to_owned()),
                ("sync".to_owned(), "p:2".to_owned())
            ]
        );
        let error = credential_lines("node:ok\nsecretwithoutcolon\n", "f")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("line 2") && !error.contains("secretwithoutcolon"),
            "{error}"
        );
        assert!(credential_lines(":nouser", "f").is_err());
        assert!(credential_lines("nopassword:", "f").is_err());
    }

    #[test]
    fn min_throughput_is_bytes_per_window_or_zero() {
        let default = parse_min_throughput("32Ki/30s").unwrap().0;
        assert_eq!(default, Some(registry_client::MinThroughput::DEFAULT));
        let fast = parse_min_throughput("1Mi / 1m").unwrap().0.unwrap();
        assert_eq!(
            (fast.bytes, fast.window),
            (1 << 20, Duration::from_secs(60))
        );
        assert_eq!(parse_min_throughput("0").unwrap().0, None);
        for wrong in ["32Ki", "32Ki/0s", "lots/30s", "32Ki/soon"] {
            assert!(parse_min_throughput(wrong).is_err(), "{wrong}");
        }
    }
}
