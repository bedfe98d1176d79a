//! The committed CRDs in a real API server: manifests Deckhouse's schemas accept (written from
//! Deckhouse's documentation) apply with `kubectl`, and what Deckhouse's schemas refuse is
//! refused. Each test names the difference from Deckhouse it holds closed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use apiserver::{ApiServer, RunningServer};

struct Server {
    server: RunningServer,
    _data: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Server {
    /// The embedded API server on a loopback port, serving every CRD under `crds/`.
    async fn start() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let data = tempfile::tempdir().expect("data dir");
        let crds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../crds");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let server = ApiServer::builder()
            .data_dir(data.path())
            .crd_dir(&crds)
            .expect("crds/ loads")
            .serve(listener)
            .await
            .expect("server starts");
        Self {
            server,
            _data: data,
            home: tempfile::tempdir().expect("home"),
        }
    }

    /// `kubectl <args>` with `stdin`: (success, stdout, stderr).
    async fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        use tokio::io::AsyncWriteExt as _;
        let home: &Path = self.home.path();
        let mut child = tokio::process::Command::new("kubectl")
            .args(args)
            .arg("--kubeconfig")
            .arg(self.server.admin_kubeconfig())
            .arg("--cache-dir")
            .arg(home.join("cache"))
            .env("HOME", home)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("kubectl is installed (apt-get install kubectl)");
        let mut input = child.stdin.take().expect("stdin");
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).await.expect("write stdin");
        }
        drop(input);
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("kubectl finished in time")
            .expect("kubectl ran");
        let r = (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        eprintln!("$ kubectl {}\n{}{}", args.join(" "), r.1, r.2);
        r
    }

    async fn apply_ok(&self, manifest: &str) -> String {
        let (ok, out, err) = self.kubectl(&["apply", "-f", "-"], Some(manifest)).await;
        assert!(ok, "refused:\n{manifest}\n{err}");
        out
    }
}

/// ApplicationPackageVersion, CNIMigration and CNINodeMigration: Deckhouse's schemas do not
/// require `spec` (a CNINodeMigration is an empty marker named after its node; a draft
/// ApplicationPackageVersion has only a name).
#[tokio::test]
async fn kinds_without_a_required_spec_apply_without_one() {
    let s = Server::start().await;
    for manifest in [
        "apiVersion: deckhouse.io/v1alpha1
kind: ApplicationPackageVersion
metadata:
  name: main-nginx-v1.2.3
",
        "apiVersion: network.deckhouse.io/v1alpha1
kind: CNIMigration
metadata:
  name: cni-migration
",
        "apiVersion: network.deckhouse.io/v1alpha1
kind: CNINodeMigration
metadata:
  name: worker-0
",
    ] {
        let out = s.apply_ok(manifest).await;
        assert!(out.contains("created"), "{out}");
    }
}

/// ApplicationPackageVersion's `Repository` column reads `.spec.packageRepository`, as
/// Deckhouse's does: the cell stays empty even when `packageRepositoryName` is set.
#[tokio::test]
async fn application_package_version_columns_are_deckhouses() {
    let s = Server::start().await;
    s.apply_ok(
        "apiVersion: deckhouse.io/v1alpha1
kind: ApplicationPackageVersion
metadata:
  name: main-nginx-v1.2.3
spec:
  packageName: nginx
  packageRepositoryName: main
  packageVersion: v1.2.3
",
    )
    .await;
    let (ok, out, _) = s.kubectl(&["get", "apv", "main-nginx-v1.2.3"], None).await;
    assert!(ok);
    let mut lines = out.lines();
    let header = lines.next().unwrap_or_default();
    let row = lines.next().unwrap_or_default();
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(columns[..3], ["NAME", "PACKAGE", "REPOSITORY"], "{out}");
    let at = header.find("REPOSITORY").expect("column");
    let cell = row.get(at..at + "REPOSITORY".len()).unwrap_or_default();
    assert_eq!(
        cell.trim(),
        "",
        "the column does not read packageRepositoryName: {out}"
    );
    assert!(row.starts_with("main-nginx-v1.2.3   nginx"), "{out}");
}

/// RegistryNode and RegistryStorage: Deckhouse's schemas do not require `secretRef` under
/// `auth`, so an `auth` naming no Secret (anonymous access) applies, and reads back as written.
#[tokio::test]
async fn registry_auth_without_a_secret_ref_applies() {
    let s = Server::start().await;
    for manifest in [
        "apiVersion: deckhouse.io/v1alpha1
kind: RegistryNode
metadata:
  name: worker-0
spec:
  cache: false
  backends:
  - name: Upstream
    host: registry.example.com
    path: /deckhouse/ee
    auth: {}
    mirrors:
    - host: mirror.example.com
      auth: {}
",
        "apiVersion: deckhouse.io/v1alpha1
kind: RegistryStorage
metadata:
  name: registry
spec:
  upstream:
    host: registry.example.com
    auth: {}
",
    ] {
        let out = s.apply_ok(manifest).await;
        assert!(out.contains("created"), "{out}");
    }
    let node: api::registry::RegistryNode = {
        let (ok, out, err) = s
            .kubectl(&["get", "registrynode", "worker-0", "-o", "json"], None)
            .await;
        assert!(ok, "{err}");
        serde_json::from_str(&out).expect("a RegistryNode")
    };
    let auth = node.spec.backends[0].auth.as_ref().expect("auth kept");
    assert_eq!(auth.secret_ref, None);
}
