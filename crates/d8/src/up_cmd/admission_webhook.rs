//! `d8 webhook` inside `d8 up`: a task of the same process (like the agent), on a loopback
//! HTTPS port, with a certificate from `DATA_DIR/webhook` ([`webhook::certs`]) and registered
//! with the embedded API server — so every write of our kinds goes through the HTTPS path a
//! cluster uses, while the server keeps in process only the rules kube-apiserver runs itself in
//! Deckhouse ([`admission::Verdicts`]): no rule answers twice.
//!
//! A task rather than a child process: nothing to supervise or restart separately, the
//! certificate and the registration share the process's lifetime, and a stop is ordered with
//! the rest. Ordering is what avoids deadlocks: the server listens before anything is
//! registered, and the registration (re-)writes the stored configuration before `d8 up` writes
//! anything of its own — a configuration left by the previous run (failurePolicy `Fail`, an old
//! port) never stands between `d8 up` and its writes, and writing webhook configurations or CRDs
//! calls no webhook. The webhook reads its facts from the API server, which calls webhooks
//! outside its store's write lock and from blocking threads, so the two never wait for each
//! other.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;

/// Where the certificate is kept, under the data directory.
pub(crate) const DIR: &str = "webhook";

/// How often the certificate is checked for renewal while running.
const RENEWAL_CHECK: Duration = Duration::from_secs(3600);

/// The running webhook.
pub(crate) struct Running {
    /// Where it listens.
    pub(crate) address: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Stops serving and renewing.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Starts the webhook on `listen` and registers it through `admin`.
pub(crate) async fn start(
    data_dir: &Path,
    listen: SocketAddr,
    admin: kube::Client,
) -> anyhow::Result<Running> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let address = listener.local_addr()?;
    let dir = data_dir.join(DIR);
    let names = vec![address.ip().to_string()];
    let serving = webhook::certs::ensure(&dir, &names, SystemTime::now())
        .context("the webhook's certificate")?;
    let files = webhook::CertificateFiles::load(&serving.cert_file, &serving.key_file)
        .context("loading the webhook's certificate")?;
    let handler = webhook::Webhook::new(Arc::new(webhook::KubeFacts::new(admin.clone())))
        .keeping(admission::Verdicts::Webhook);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let server = tokio::spawn(webhook::serve(
        listener,
        files,
        handler,
        until_stopped(stopped.clone()),
    ));
    let base_url = format!("https://{address}");
    webhook::registration::register(&admin, &base_url, &serving.ca_pem)
        .await
        .context("registering the webhook with the API server")?;
    tracing::info!(%address, "admission webhook registered");
    let renewal = tokio::spawn(keep_renewed(
        dir,
        names,
        admin,
        base_url,
        until_stopped(stopped),
    ));
    Ok(Running {
        address,
        stop,
        tasks: vec![server, renewal],
    })
}

/// Renews the certificate before it expires; a new CA is registered again (the server picks the
/// new files up at its next handshake).
async fn keep_renewed(
    dir: std::path::PathBuf,
    names: Vec<String>,
    admin: kube::Client,
    base_url: String,
    stopped: impl std::future::Future<Output = ()>,
) {
    let check = async {
        let mut ticks = tokio::time::interval(RENEWAL_CHECK);
        ticks.tick().await;
        // A new CA whose registration failed: tried again at the next tick.
        let mut unregistered: Option<String> = None;
        loop {
            ticks.tick().await;
            match webhook::certs::ensure(&dir, &names, SystemTime::now()) {
                Ok(serving) if serving.renewal == webhook::certs::Renewal::All => {
                    unregistered = Some(serving.ca_pem);
                }
                Ok(serving) if serving.renewal == webhook::certs::Renewal::Serving => {
                    tracing::info!("the webhook's serving certificate was renewed");
                }
                Ok(_) => {}
                Err(error) => tracing::error!(%error, "the webhook's certificate is not renewed"),
            }
            if let Some(ca) = &unregistered {
                match webhook::registration::register(&admin, &base_url, ca).await {
                    Ok(()) => {
                        tracing::info!("the webhook's new CA is registered");
                        unregistered = None;
                    }
                    Err(error) => tracing::error!(%error, "the webhook's new CA is not registered"),
                }
            }
        }
    };
    tokio::select! {
        _ = stopped => {}
        _ = check => {}
    }
}
