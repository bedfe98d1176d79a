//! Assembly: the builder, first-start PKI and credentials, kubeconfig files, TLS and the
//! accept loop, and the background controllers.

use crate::auth::{Credential, Identity, User, random_hex};
use crate::core::{Core, WriteOpts};
use crate::error::Error;
use crate::handlers::{AppState, AuthIndex, PeerCert};
use crate::pki::{self, Ca, Issued, KubeconfigAuth};
use crate::store::Store;
use crate::validate::{AllowAll, Converter, NoConversion, Validator};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

/// The embedded API server. Start one with [`ApiServer::builder`].
#[derive(Debug)]
pub struct ApiServer;

impl ApiServer {
    /// A builder with defaults: TLS, the admin user only, no CRDs, everything admitted.
    pub fn builder() -> Builder {
        Builder {
            data_dir: None,
            encryption_config: None,
            crds: Vec::new(),
            validator: Box::new(AllowAll),
            converter: Box::new(NoConversion),
            users: Vec::new(),
            sans: Vec::new(),
            tls: true,
            watch_history: 10_000,
            bookmark_interval: Duration::from_secs(30),
            namespaces: Vec::new(),
            request_log: None,
        }
    }
}

/// Configures and starts an [`ApiServer`].
pub struct Builder {
    data_dir: Option<PathBuf>,
    crds: Vec<Value>,
    validator: Box<dyn Validator>,
    converter: Box<dyn Converter>,
    users: Vec<User>,
    sans: Vec<String>,
    tls: bool,
    watch_history: usize,
    bookmark_interval: Duration,
    namespaces: Vec<String>,
    request_log: Option<crate::RequestLog>,
    encryption_config: Option<PathBuf>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("data_dir", &self.data_dir)
            .field("crds", &self.crds.len())
            .field("users", &self.users)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

fn parse_documents(text: &str, origin: &str) -> Result<Vec<Value>, Error> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| Error::Crd {
        name: origin.to_string(),
        message: e.to_string(),
    })?;
    Ok(docs
        .into_iter()
        .flat_map(|d| match d.get("kind").and_then(Value::as_str) {
            Some("List") | Some("CustomResourceDefinitionList") => d
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            _ => vec![d],
        })
        .filter(|d| !d.is_null())
        .collect())
}

impl Builder {
    /// Where the database, certificates, credentials and kubeconfigs live (required).
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Serves a CRD (created, or updated if it differs, at start-up).
    pub fn crd(mut self, crd: Value) -> Self {
        self.crds.push(crd);
        self
    }

    /// Serves several CRDs.
    pub fn crds(mut self, crds: impl IntoIterator<Item = Value>) -> Self {
        self.crds.extend(crds);
        self
    }

    /// Serves the CRDs in a YAML (or JSON) text, one or more documents.
    pub fn crd_yaml(mut self, text: &str) -> Result<Self, Error> {
        let docs = parse_documents(text, "<yaml>")?;
        self.crds.extend(
            docs.into_iter().filter(|d| {
                d.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
            }),
        );
        Ok(self)
    }

    /// Serves every CRD in the `*.yaml`, `*.yml` and `*.json` files of `dir`.
    pub fn crd_dir(mut self, dir: impl AsRef<Path>) -> Result<Self, Error> {
        let dir = dir.as_ref();
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(Error::io(dir))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
            })
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(Error::io(&f))?;
            let docs = parse_documents(&text, &f.display().to_string())?;
            self.crds.extend(docs.into_iter().filter(|d| {
                d.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
            }));
        }
        Ok(self)
    }

    /// The validation hook run on every write (e.g. the platform's `api::validate`).
    pub fn validator(mut self, v: impl Validator) -> Self {
        self.validator = Box::new(v);
        self
    }

    /// The conversion between served versions of custom resources (default: only `apiVersion`
    /// changes, as with a CRD's `strategy: None`).
    pub fn converter(mut self, c: impl Converter) -> Self {
        self.converter = Box::new(c);
        self
    }

    /// Adds a client identity; a kubeconfig is written for it. `admin` is always present.
    pub fn user(mut self, user: User) -> Self {
        self.users.push(user);
        self
    }

    /// Adds a name or IP address to the serving certificate.
    pub fn san(mut self, name: impl Into<String>) -> Self {
        self.sans.push(name.into());
        self
    }

    /// Serves plain HTTP instead of HTTPS (tests only: tokens cross the wire in clear).
    pub fn plain_http(mut self) -> Self {
        self.tls = false;
        self
    }

    /// How many changes a watch can resume across (older versions get 410 Gone).
    pub fn watch_history(mut self, n: usize) -> Self {
        self.watch_history = n.max(1);
        self
    }

    /// How often watches that allow bookmarks get one.
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.bookmark_interval = d.max(Duration::from_millis(10));
        self
    }

    /// Records every request (user, verb, resource, subresource, namespace, name, verdict) in
    /// `log` — for tests comparing what a component calls with what its Role grants.
    pub fn request_log(mut self, log: crate::RequestLog) -> Self {
        self.request_log = Some(log);
        self
    }

    /// Encrypts objects at rest as the `EncryptionConfiguration` file at `path` says
    /// (kube-apiserver's `--encryption-provider-config`).
    pub fn encryption_config(mut self, path: impl Into<PathBuf>) -> Self {
        self.encryption_config = Some(path.into());
        self
    }

    /// A namespace to create at start-up (besides `default`, `kube-system`, `kube-public`,
    /// `kube-node-lease`).
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.namespaces.push(ns.into());
        self
    }

    /// Starts serving on `listener`. Returns once the server accepts requests.
    pub async fn serve(self, listener: TcpListener) -> Result<RunningServer, Error> {
        let dir = self
            .data_dir
            .clone()
            .ok_or_else(|| Error::Config("data_dir is required".into()))?;
        let addr = listener.local_addr().map_err(Error::io("listener"))?;
        let (pki_dir, cfg_dir) = (dir.join("pki"), dir.join("kubeconfigs"));
        for d in [&dir, &pki_dir, &pki_dir.join("users"), &cfg_dir] {
            std::fs::create_dir_all(d).map_err(Error::io(d))?;
            std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .map_err(Error::io(d))?;
        }
        let ca = Ca::load_or_create(&pki_dir)?;
        let host = if addr.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            addr.ip().to_string()
        };
        let url = match (self.tls, addr.ip().is_ipv6() && !addr.ip().is_unspecified()) {
            (true, true) => format!("https://[{host}]:{}", addr.port()),
            (true, false) => format!("https://{host}:{}", addr.port()),
            (false, true) => format!("http://[{host}]:{}", addr.port()),
            (false, false) => format!("http://{host}:{}", addr.port()),
        };
        let mut sans = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        if !sans.contains(&host) {
            sans.push(host.clone());
        }
        sans.extend(self.sans.iter().cloned());
        let serving = pki::serving_cert(&pki_dir, &ca, &sans)?;

        let sealer = match &self.encryption_config {
            Some(path) => crate::encryption::Sealer::load(path)?,
            None => crate::encryption::Sealer::default(),
        };
        let store = tokio::task::spawn_blocking({
            let path = dir.join("state.redb");
            let history = self.watch_history;
            move || Store::open(&path, history, sealer)
        })
        .await
        .map_err(|e| Error::Db(e.to_string()))??;
        let core = Arc::new(Core::new(store, self.validator, self.converter)?);
        {
            let core = core.clone();
            let namespaces = self.namespaces.clone();
            let crds = self.crds.clone();
            tokio::task::spawn_blocking(move || seed(&core, &namespaces, &crds))
                .await
                .map_err(|e| Error::Db(e.to_string()))??;
        }

        let mut users = vec![User::admin()];
        for u in self.users {
            users.retain(|x| x.name != u.name);
            users.push(u);
        }
        let (identities, kubeconfigs, tokens) = credentials(&dir, &ca, users, &url, self.tls)?;
        let state = Arc::new(AppState {
            core: core.clone(),
            auth: AuthIndex::new(&identities),
            bookmark_interval: self.bookmark_interval,
            request_log: self.request_log.clone(),
        });
        let app = crate::handlers::router(state);
        let tls = if self.tls {
            Some(tls_acceptor(&ca, &serving)?)
        } else {
            None
        };
        let controllers = vec![
            tokio::spawn(crate::gc::run(core.clone())),
            // Subscribed now, before the first request: no ClusterRole write goes unseen.
            tokio::spawn(crate::aggregation::run(
                core.clone(),
                core.store.hub().receiver(),
            )),
        ];
        let (stop_tx, stop_rx) = oneshot::channel();
        let task = tokio::spawn(accept_loop(listener, tls, app, stop_rx, controllers));
        tracing::info!(%url, data_dir = %dir.display(), "embedded API server listening");
        Ok(RunningServer {
            addr,
            url,
            kubeconfigs,
            tokens,
            ca_pem: self.tls.then(|| ca.cert_pem.clone()),
            stop: Some(stop_tx),
            task: Some(task),
        })
    }
}

/// kube-apiserver's bootstrap ClusterRoles and binding, the ones this server seeds.
const BOOTSTRAP_POLICY: &str = include_str!("bootstrap_policy.yaml");

/// Creates the standard namespaces, the bootstrap RBAC policy (`BOOTSTRAP_POLICY`, aggregated),
/// and the given CRDs (updating CRDs whose spec changed).
fn seed(core: &Core, namespaces: &[String], crds: &[Value]) -> Result<(), Error> {
    let reg = core.registry();
    let ns_def = reg
        .get("", "namespaces")
        .ok_or_else(|| Error::Config("namespaces missing".into()))?;
    let crd_def = reg
        .get("apiextensions.k8s.io", "customresourcedefinitions")
        .ok_or_else(|| Error::Config("customresourcedefinitions missing".into()))?;
    let base = ["default", "kube-system", "kube-public", "kube-node-lease"];
    for ns in base
        .iter()
        .map(|s| (*s).to_string())
        .chain(namespaces.iter().cloned())
    {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        match core.create(&ns_def, "v1", None, obj, WriteOpts::default()) {
            Ok(_) => {}
            Err(e) if e.reason == "AlreadyExists" => {}
            Err(e) => return Err(Error::Config(format!("namespace {ns}: {e}"))),
        }
    }
    // kube-apiserver's bootstrap policy: ClusterRoles `cluster-admin`, `admin`, `edit`, `view`
    // (and the roles aggregated into them), `cluster-admin` bound to group `system:masters`.
    let policy: Vec<Value> = serde_saphyr::from_str(BOOTSTRAP_POLICY)
        .map_err(|e| Error::Config(format!("bootstrap policy: {e}")))?;
    for object in policy {
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let resource = if kind == "ClusterRole" {
            "clusterroles"
        } else {
            "clusterrolebindings"
        };
        let def = reg
            .get("rbac.authorization.k8s.io", resource)
            .ok_or_else(|| Error::Config(format!("{resource} missing")))?;
        let name = crate::meta::get(&object, "name")
            .unwrap_or_default()
            .to_owned();
        match core.create(&def, "v1", None, object, WriteOpts::default()) {
            Ok(_) => {}
            Err(e) if e.reason == "AlreadyExists" => {}
            Err(e) => return Err(Error::Config(format!("{kind} {name}: {e}"))),
        }
    }
    // Aggregated before the first request, kept up to date by `aggregation::run` after.
    crate::aggregation::pass(core)
        .map_err(|e| Error::Config(format!("ClusterRole aggregation: {e}")))?;
    for crd in crds {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let crd_err = |e: crate::ApiError| Error::Crd {
            name: name.clone(),
            message: e.message,
        };
        match core.get(&crd_def, "v1", None, &name) {
            Err(e) if e.code == 404 => {
                core.create(&crd_def, "v1", None, crd.clone(), WriteOpts::default())
                    .map_err(crd_err)?;
            }
            Err(e) => return Err(crd_err(e)),
            Ok(existing) if existing.get("spec") != crd.get("spec") => {
                let mut updated = existing.clone();
                updated["spec"] = crd.get("spec").cloned().unwrap_or(json!({}));
                for f in ["labels", "annotations"] {
                    if let Some(v) = crd.pointer(&format!("/metadata/{f}")) {
                        updated["metadata"][f] = v.clone();
                    }
                }
                core.update(
                    &crd_def,
                    "v1",
                    None,
                    &name,
                    updated,
                    None,
                    WriteOpts::default(),
                )
                .map_err(crd_err)?;
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

fn file_name(user: &str) -> String {
    user.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

type Credentials = (
    Vec<Identity>,
    BTreeMap<String, PathBuf>,
    BTreeMap<String, String>,
);

/// Loads or creates every user's token and certificate; writes their kubeconfigs.
fn credentials(
    dir: &Path,
    ca: &Ca,
    users: Vec<User>,
    url: &str,
    tls: bool,
) -> Result<Credentials, Error> {
    let ids_path = dir.join("identities.json");
    let stored: Vec<Identity> = match std::fs::read(&ids_path) {
        Ok(b) => serde_json::from_slice(&b)
            .map_err(|e| Error::Config(format!("{}: {e}", ids_path.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io(&ids_path)(e)),
    };
    let (mut ids, mut kubeconfigs, mut tokens) = (Vec::new(), BTreeMap::new(), BTreeMap::new());
    for user in users {
        let fname = file_name(&user.name);
        let prev = stored.iter().find(|i| i.user.name == user.name);
        let token = prev
            .map(|p| p.token.clone())
            .unwrap_or_else(|| random_hex(32));
        let mut cert: Option<Issued> = None;
        if user.credential == Credential::ClientCert {
            let (crt, key) = (
                dir.join("pki/users").join(format!("{fname}.crt")),
                dir.join("pki/users").join(format!("{fname}.key")),
            );
            let reuse = match (
                prev.and_then(|p| p.cert_fingerprint.clone()),
                std::fs::read_to_string(&crt),
                std::fs::read_to_string(&key),
            ) {
                (Some(fp), Ok(c), Ok(k)) if prev.is_some_and(|p| p.user.groups == user.groups) => {
                    Some(Issued {
                        cert_pem: c,
                        key_pem: k,
                        fingerprint: fp,
                    })
                }
                _ => None,
            };
            cert = Some(match reuse {
                Some(c) => c,
                None => {
                    let c = ca.issue(&user.name, &user.groups, &[], false)?;
                    pki::write_private(&crt, &c.cert_pem)?;
                    pki::write_private(&key, &c.key_pem)?;
                    c
                }
            });
        }
        let auth = match (&cert, tls) {
            (Some(c), true) => KubeconfigAuth::Cert(c),
            _ => KubeconfigAuth::Token(&token),
        };
        let path = pki::write_kubeconfig(
            &dir.join("kubeconfigs").join(format!("{fname}.kubeconfig")),
            url,
            tls.then_some(ca.cert_pem.as_str()),
            &user.name,
            auth,
        )?;
        kubeconfigs.insert(user.name.clone(), path);
        tokens.insert(user.name.clone(), token.clone());
        ids.push(Identity {
            user,
            token,
            cert_fingerprint: cert.map(|c| c.fingerprint),
        });
    }
    let text = serde_json::to_string_pretty(&ids).map_err(|e| Error::Config(e.to_string()))?;
    pki::write_private(&ids_path, &text)?;
    Ok((ids, kubeconfigs, tokens))
}

fn tls_acceptor(ca: &Ca, serving: &Issued) -> Result<tokio_rustls::TlsAcceptor, Error> {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let pem_err = |what: &str| {
        let what = what.to_string();
        move |e: rustls_pki_types::pem::Error| Error::Pem {
            path: PathBuf::from(&what),
            message: e.to_string(),
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(pem_err("pki/server.crt"))?;
    let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes())
        .map_err(pem_err("pki/server.key"))?;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca.cert_pem.as_bytes()) {
        roots.add(c.map_err(pem_err("pki/ca.crt"))?)?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .map_err(|e| Error::Config(format!("client certificate verifier: {e}")))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(cfg)))
}

async fn serve_conn<S>(io: S, peer: Option<String>, app: axum::Router)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tower::ServiceExt as _;
    let svc = hyper::service::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(PeerCert(peer.clone()));
        app.clone().oneshot(req)
    });
    let builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    if let Err(e) = builder
        .serve_connection(hyper_util::rt::TokioIo::new(io), svc)
        .await
    {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: axum::Router,
    mut stop: oneshot::Receiver<()>,
    controllers: Vec<JoinHandle<()>>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            r = listener.accept() => {
                let (tcp, _) = match r {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                let app = app.clone();
                match tls.clone() {
                    None => {
                        conns.spawn(serve_conn(tcp, None, app));
                    }
                    Some(acceptor) => {
                        conns.spawn(async move {
                            let tls = match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                                Ok(Ok(s)) => s,
                                Ok(Err(e)) => {
                                    tracing::debug!(error = %e, "TLS handshake failed");
                                    return;
                                }
                                Err(_) => return,
                            };
                            let peer = tls.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| pki::fingerprint(c));
                            serve_conn(tls, peer, app).await;
                        });
                    }
                }
            }
        }
    }
    for controller in controllers {
        controller.abort();
        let _ = controller.await;
    }
    conns.shutdown().await;
}

/// A running server; dropping it stops the server.
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    url: String,
    kubeconfigs: BTreeMap<String, PathBuf>,
    tokens: BTreeMap<String, String>,
    ca_pem: Option<String>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl RunningServer {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL clients use (`https://127.0.0.1:<port>`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The kubeconfig file written for `user`.
    pub fn kubeconfig(&self, user: &str) -> Option<&Path> {
        self.kubeconfigs.get(user).map(PathBuf::as_path)
    }

    /// The administrator's kubeconfig file.
    pub fn admin_kubeconfig(&self) -> &Path {
        self.kubeconfigs
            .get("admin")
            .map(PathBuf::as_path)
            .unwrap_or(Path::new(""))
    }

    /// Every user's kubeconfig file.
    pub fn kubeconfigs(&self) -> &BTreeMap<String, PathBuf> {
        &self.kubeconfigs
    }

    /// The bearer token of `user`.
    pub fn token(&self, user: &str) -> Option<&str> {
        self.tokens.get(user).map(String::as_str)
    }

    /// The CA certificate (PEM) clients must trust; `None` for plain HTTP.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// Stops accepting, closes every connection and the database.
    pub async fn shutdown(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        // Blocking database work still in flight holds the store; let it finish.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    /// Runs until the server stops (it stops only on [`RunningServer::shutdown`] or drop).
    pub async fn wait(mut self) {
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}
