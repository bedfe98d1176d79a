//! The cache replica of `d8 up`: `d8 registry storage` as a child process, run the way the
//! syncer runs distribution in a cluster — its flags rendered from `RegistryStorage.spec`
//! (upstream, credentials resolved from `registry-resolved-auth`, CA, size), restarted when they
//! change, stopped when the object goes away (cache off, Unmanaged after the drain).
//!
//! On first start it makes what a cluster's `registry-storage-pki` and `registry-storage-access`
//! Secrets would hold: a CA, the replica's serving certificate for loopback, a client
//! certificate for the publish endpoint (the write listener requires one *and* push
//! credentials), and the node (pull) and push accounts. They are kept under `DATA_DIR/storage`
//! so a restart serves with the same ones.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use api::registry::{RESOLVED_AUTH_SECRET, RegistryStorage, RegistryStorageSpec, SINGLETON};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use registry_plan::Credentials;

/// CA of the replica's serving certificate and of publish-endpoint client certificates.
pub(crate) const CA_FILE: &str = "ca.crt";
const CERT_FILE: &str = "tls.crt";
const KEY_FILE: &str = "tls.key";
/// Client certificate for `d8 mirror push` to the publish endpoint.
pub(crate) const PUSH_CERT_FILE: &str = "push-client.crt";
/// Its key.
pub(crate) const PUSH_KEY_FILE: &str = "push-client.key";
/// The node (pull-only) account, `username:password`.
const PULL_FILE: &str = "pull";
/// The push account, `username:password`.
pub(crate) const PUSH_FILE: &str = "push";

/// Where the replica listens and what it is told.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// This node's name (the replica's identity).
    pub(crate) node: String,
    /// `DATA_DIR/storage`: PKI, accounts, the rendered upstream files, the store, the log.
    pub(crate) dir: PathBuf,
    /// Read listener (pulls, pull-through).
    pub(crate) read: SocketAddr,
    /// Write listener (the publish endpoint: client certificate and push credentials).
    pub(crate) write: SocketAddr,
    /// `/metrics` of the replica.
    pub(crate) metrics: SocketAddr,
    /// Kubeconfig for status, leader election and replication.
    pub(crate) kubeconfig: PathBuf,
    /// Root manifest digests of the expected set.
    pub(crate) expected_roots: Vec<String>,
    /// Bytes kept free on the filesystem (`--reserve`).
    pub(crate) reserve: Option<String>,
    /// Status and eligibility interval.
    pub(crate) interval: Duration,
}

/// What the controller needs to lay the replica out for agents.
#[derive(Clone, Debug)]
pub(crate) struct Access {
    /// CA of the serving certificate, PEM.
    pub(crate) ca_pem: String,
    /// The node account.
    pub(crate) node: Credentials,
}

fn name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

fn random_password() -> anyhow::Result<String> {
    let mut bytes = [0u8; 18];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading /dev/urandom")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(contents.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

fn issue(
    issuer: &CertifiedIssuer<'_, KeyPair>,
    mut params: CertificateParams,
) -> anyhow::Result<(String, String)> {
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let key = KeyPair::generate().context("generating a key")?;
    let cert = params
        .signed_by(&key, issuer)
        .context("signing a certificate")?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Makes the PKI and the accounts unless they exist; returns what the controller needs.
pub(crate) fn prepare(dir: &Path) -> anyhow::Result<Access> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if !dir.join(CA_FILE).exists() || !dir.join(PUSH_KEY_FILE).exists() {
        let mut params = CertificateParams::default();
        params.distinguished_name = name("d8-up-registry-storage-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().context("generating the CA key")?;
        let issuer = CertifiedIssuer::self_signed(params, key).context("self-signing the CA")?;

        let mut server = CertificateParams::default();
        server.distinguished_name = name("registry-storage");
        server.subject_alt_names = vec![
            SanType::IpAddress([127, 0, 0, 1].into()),
            SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()),
            SanType::DnsName("localhost".try_into().context("a DNS name")?),
        ];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let (cert, key) = issue(&issuer, server)?;
        write_private(&dir.join(KEY_FILE), &key)?;
        std::fs::write(dir.join(CERT_FILE), cert)?;

        let mut client = CertificateParams::default();
        client.distinguished_name = name("d8-mirror-push");
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let (cert, key) = issue(&issuer, client)?;
        std::fs::write(dir.join(PUSH_CERT_FILE), cert)?;
        // The CA last: its presence says the set is complete (the CA key is not kept).
        write_private(&dir.join(PUSH_KEY_FILE), &key)?;
        std::fs::write(dir.join(CA_FILE), issuer.pem())?;
    }
    for (file, user) in [(PULL_FILE, "node"), (PUSH_FILE, "push")] {
        let path = dir.join(file);
        if !path.exists() {
            write_private(&path, &format!("{user}:{}\n", random_password()?))?;
        }
    }
    let ca_pem = std::fs::read_to_string(dir.join(CA_FILE)).context("reading the storage CA")?;
    let pull = std::fs::read_to_string(dir.join(PULL_FILE)).context("reading the node account")?;
    let (username, password) = pull
        .trim()
        .split_once(':')
        .context("the node account file holds no username:password")?;
    Ok(Access {
        ca_pem,
        node: Credentials {
            username: username.to_owned(),
            password: password.to_owned(),
        },
    })
}

/// What `RegistryStorage.spec` asks of the replica: the flags that change with it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Wanted {
    /// `http(s)://host[:port][/path]`.
    upstream: Option<String>,
    /// `username:password` of the upstream.
    upstream_credentials: Option<String>,
    /// CA of the upstream, PEM.
    upstream_ca: Option<String>,
    /// `storage.size`.
    size: Option<String>,
}

/// Renders the flags from the spec and the resolved credentials (key → `username:password`).
fn wanted(
    spec: &RegistryStorageSpec,
    resolved: &std::collections::BTreeMap<String, Vec<u8>>,
) -> anyhow::Result<Wanted> {
    let (upstream, upstream_credentials, upstream_ca) = match &spec.upstream {
        None => (None, None, None),
        Some(upstream) => {
            let scheme = match upstream.scheme {
                api::module_source::Scheme::Http => "http",
                api::module_source::Scheme::Https => "https",
            };
            let path = upstream.path_prefix();
            let credentials = match upstream.auth.as_ref().and_then(|a| a.secret_ref.as_ref()) {
                None => None,
                Some(reference) => {
                    let key = &reference.key;
                    let value = resolved.get(key).with_context(|| {
                        format!("{RESOLVED_AUTH_SECRET} has no key {key:?} yet")
                    })?;
                    let c =
                        registry_controller_plan::settings::decode(value).with_context(|| {
                            format!(
                                "{RESOLVED_AUTH_SECRET} key {key:?} is not base64 of user:password"
                            )
                        })?;
                    Some(format!("{}:{}\n", c.username, c.password))
                }
            };
            (
                Some(format!("{scheme}://{}{path}", upstream.host)),
                credentials,
                upstream.ca.clone(),
            )
        }
    };
    Ok(Wanted {
        upstream,
        upstream_credentials,
        upstream_ca,
        size: spec.store.as_ref().and_then(|s| s.size.clone()),
    })
}

/// Reads what the replica should run with; `None` = no RegistryStorage, no replica.
async fn observe(client: &Client) -> anyhow::Result<Option<Wanted>> {
    let storage: Api<RegistryStorage> = Api::all(client.clone());
    let Some(object) = storage
        .get_opt(SINGLETON)
        .await
        .context("reading RegistryStorage registry")?
    else {
        return Ok(None);
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), api::registry::NAMESPACE);
    let resolved = secrets
        .get_opt(RESOLVED_AUTH_SECRET)
        .await
        .context("reading Secret registry-resolved-auth")?
        .and_then(|s| s.data)
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    wanted(&object.spec, &resolved).map(Some)
}

/// The replica process and what it was started with.
struct Child {
    process: tokio::process::Child,
    wanted: Wanted,
}

fn command(settings: &Settings, wanted: &Wanted) -> anyhow::Result<tokio::process::Command> {
    let exe = std::env::current_exe().context("locating the d8 binary")?;
    let dir = &settings.dir;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("replica.log"))
        .context("opening the replica's log")?;
    let mut command = tokio::process::Command::new(exe);
    let path = |file: &str| dir.join(file).display().to_string();
    command
        .args(["registry", "storage", "--node-name", &settings.node])
        .arg(format!("--data-dir={}", path("data")))
        .arg(format!("--read-address={}", settings.read))
        .arg(format!("--write-address={}", settings.write))
        .arg(format!("--metrics-address={}", settings.metrics))
        .arg(format!("--tls-cert={}", path(CERT_FILE)))
        .arg(format!("--tls-key={}", path(KEY_FILE)))
        .arg(format!("--client-ca={}", path(CA_FILE)))
        .arg(format!("--peer-ca={}", path(CA_FILE)))
        .arg(format!("--pull-credentials-file={}", path(PULL_FILE)))
        .arg(format!("--push-credentials-file={}", path(PUSH_FILE)))
        .arg(format!("--kubeconfig={}", settings.kubeconfig.display()))
        .arg(format!("--advertise-address={}", settings.read))
        .arg(format!(
            "--sync-interval={}",
            humantime::format_duration(settings.interval)
        ))
        .arg(format!(
            "--eligibility-interval={}",
            humantime::format_duration(settings.interval)
        ))
        .arg(format!(
            "--retry-period={}",
            humantime::format_duration(settings.interval.min(Duration::from_secs(5)))
        ))
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().context("the replica's log")?)
        .stderr(log)
        .kill_on_drop(true);
    for root in &settings.expected_roots {
        command.arg(format!("--expected-root={root}"));
    }
    if let Some(reserve) = &settings.reserve {
        command.arg(format!("--reserve={reserve}"));
    }
    if let Some(size) = &wanted.size {
        command.arg(format!("--size={size}"));
    }
    if let Some(upstream) = &wanted.upstream {
        command.arg(format!("--upstream={upstream}"));
        match &wanted.upstream_credentials {
            Some(credentials) => {
                write_private(&dir.join("upstream-credentials"), credentials)?;
                command.arg(format!(
                    "--upstream-credentials-file={}",
                    path("upstream-credentials")
                ));
            }
            None => {
                let _ = std::fs::remove_file(dir.join("upstream-credentials"));
            }
        }
        if let Some(ca) = &wanted.upstream_ca {
            std::fs::write(dir.join("upstream-ca.crt"), ca).context("writing the upstream CA")?;
            command.arg(format!("--upstream-ca={}", path("upstream-ca.crt")));
        }
    } else {
        let _ = std::fs::remove_file(dir.join("upstream-credentials"));
    }
    Ok(command)
}

/// SIGTERM, then SIGKILL after 15 s.
async fn stop(child: &mut Child) {
    if let Some(pid) = child
        .process
        .id()
        .and_then(|id| rustix::process::Pid::from_raw(id as i32))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    match tokio::time::timeout(Duration::from_secs(15), child.process.wait()).await {
        Ok(_) => {}
        Err(_) => {
            tracing::warn!("the storage replica ignored SIGTERM for 15 s; killing it");
            let _ = child.process.kill().await;
        }
    }
}

/// The running replica's process id, so a `d8 up` that was killed (and could not stop its
/// child) finds the orphan on its next start instead of failing to bind its ports.
const PID_FILE: &str = "replica.pid";

/// Whether process `pid` is the replica of the store at `data_dir` (its command line says so).
fn is_our_replica(pid: u32, data_dir: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let data_arg = format!("--data-dir={}", data_dir.display());
    args.windows(2)
        .any(|w| w == [b"registry".as_slice(), b"storage".as_slice()])
        && args.contains(&data_arg.as_bytes())
}

/// Stops a replica left behind by a previous `d8 up` (SIGTERM, SIGKILL after 15 s). Only the
/// process named in the pid file, and only if its command line is a replica of this store.
async fn reap_orphan(dir: &Path) {
    let path = dir.join(PID_FILE);
    let Some(pid) = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
    else {
        return;
    };
    let _ = std::fs::remove_file(&path);
    if !is_our_replica(pid, &dir.join("data")) {
        return;
    }
    let Some(raw) = rustix::process::Pid::from_raw(pid as i32) else {
        return;
    };
    tracing::warn!(
        pid,
        "stopping the storage replica a previous d8 up left running"
    );
    let _ = rustix::process::kill_process(raw, rustix::process::Signal::TERM);
    for _ in 0..150 {
        if !is_our_replica(pid, &dir.join("data")) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = rustix::process::kill_process(raw, rustix::process::Signal::KILL);
}

/// Keeps the replica in line with `RegistryStorage` until `shutdown` resolves, then stops it.
pub(crate) async fn supervise(
    client: Client,
    settings: Settings,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    reap_orphan(&settings.dir).await;
    let mut child: Option<Child> = None;
    let mut tick = tokio::time::interval(settings.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tick.tick() => {}
        }
        let wanted = match observe(&client).await {
            Ok(wanted) => wanted,
            Err(error) => {
                // Keep what runs: a read error is not a reason to stop serving.
                tracing::warn!(
                    error = format!("{error:#}"),
                    "storage replica: keeping the current one"
                );
                continue;
            }
        };
        if let Some(running) = &mut child {
            match running.process.try_wait() {
                Ok(Some(status)) => {
                    tracing::warn!(%status, "the storage replica exited; starting it again");
                    child = None;
                }
                Ok(None) if Some(&running.wanted) == wanted.as_ref() => continue,
                Ok(None) | Err(_) => {
                    tracing::info!("RegistryStorage changed: stopping the storage replica");
                    stop(running).await;
                    child = None;
                }
            }
        }
        let Some(wanted) = wanted else { continue };
        match command(&settings, &wanted).and_then(|mut c| c.spawn().context("spawning")) {
            Ok(process) => {
                tracing::info!(
                    read = %settings.read,
                    write = %settings.write,
                    upstream = wanted.upstream.as_deref().unwrap_or("none (authoritative)"),
                    "storage replica started"
                );
                if let Some(pid) = process.id() {
                    let _ = std::fs::write(settings.dir.join(PID_FILE), pid.to_string());
                }
                child = Some(Child { process, wanted });
            }
            Err(error) => {
                tracing::warn!(
                    error = format!("{error:#}"),
                    "cannot start the storage replica"
                );
            }
        }
    }
    if let Some(mut running) = child {
        stop(&mut running).await;
    }
    let _ = std::fs::remove_file(settings.dir.join(PID_FILE));
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::registry::{SecretRefAuth, Store, Upstream};

    fn spec(upstream: Option<Upstream<SecretRefAuth>>) -> RegistryStorageSpec {
        RegistryStorageSpec {
            upstream,
            store: Some(Store {
                path: None,
                size: Some("2Gi".into()),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_flags_follow_the_spec_and_resolve_credentials() {
        let upstream = Upstream {
            scheme: api::module_source::Scheme::Http,
            host: "127.0.0.1:5000".into(),
            path: Some("/dkp/".into()),
            auth: Some(SecretRefAuth::to(RESOLVED_AUTH_SECRET, "upstream")),
            ..Default::default()
        };
        let resolved = [("upstream".to_owned(), b"dTpw".to_vec())].into(); // base64("u:p")
        let w = wanted(&spec(Some(upstream.clone())), &resolved).unwrap();
        assert_eq!(w.upstream.as_deref(), Some("http://127.0.0.1:5000/dkp"));
        assert_eq!(w.upstream_credentials.as_deref(), Some("u:p\n"));
        assert_eq!(w.size.as_deref(), Some("2Gi"));

        let w = wanted(&spec(None), &resolved).unwrap();
        assert_eq!((w.upstream, w.upstream_credentials), (None, None));

        let error = wanted(&spec(Some(upstream)), &Default::default())
            .unwrap_err()
            .to_string();
        assert!(error.contains("no key \"upstream\""), "{error}");
    }

    #[tokio::test]
    async fn an_orphaned_replica_of_this_store_is_stopped_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        // A stand-in with a replica's command line (perl-base is on every Debian system).
        let mut orphan = std::process::Command::new("perl")
            .args(["-e", "sleep 30", "registry", "storage"])
            .arg(format!("--data-dir={}", data.display()))
            .spawn()
            .unwrap();
        // Another process with a matching pid file entry but another command line is left alone.
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        std::fs::write(dir.path().join(PID_FILE), other.id().to_string()).unwrap();
        reap_orphan(dir.path()).await;
        assert!(
            other.try_wait().unwrap().is_none(),
            "a stranger was signalled"
        );
        assert!(!dir.path().join(PID_FILE).exists());

        std::fs::write(dir.path().join(PID_FILE), orphan.id().to_string()).unwrap();
        // Right after fork the child still shows this test's command line, until it execs.
        for _ in 0..100 {
            if is_our_replica(orphan.id(), &data) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(is_our_replica(orphan.id(), &data));
        reap_orphan(dir.path()).await;
        let status = orphan.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(15), "stopped with SIGTERM: {status}");
        other.kill().unwrap();
        let _ = other.wait();
    }

    #[test]
    fn prepare_makes_the_pki_once_and_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = prepare(dir.path()).unwrap();
        assert_eq!(first.node.username, "node");
        assert!(first.node.password.len() >= 32);
        assert!(first.ca_pem.contains("BEGIN CERTIFICATE"));
        let second = prepare(dir.path()).unwrap();
        assert_eq!(first.ca_pem, second.ca_pem);
        assert_eq!(first.node, second.node);
        use std::os::unix::fs::PermissionsExt;
        for private in [KEY_FILE, PUSH_KEY_FILE, PULL_FILE, PUSH_FILE] {
            let mode = std::fs::metadata(dir.path().join(private))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{private} is private");
        }
    }
}
