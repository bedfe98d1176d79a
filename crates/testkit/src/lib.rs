//! Real parts for tests: upstream registries (Debian's `docker-registry`), deterministic OCI
//! images, a private containerd, skopeo, and certificates.
//!
//! Every part starts real software on loopback ports it picks, keeps its log, prints the log
//! when the test fails, and stops on drop. A missing tool is a test failure that names the
//! Debian package to install, never a silent skip. This crate is a dev-dependency only.

pub mod certs;
#[cfg(feature = "kube")]
pub mod cluster;
pub mod containerd;
pub mod curl;
pub mod faulty;
pub mod image;
pub mod netns;
pub mod process;
pub mod push;
pub mod skopeo;
pub mod upstream;

pub use certs::{CertKey, Certs};
#[cfg(feature = "kube")]
pub use cluster::Cluster;
pub use containerd::Containerd;
pub use faulty::{Fault, FaultyUpstream, Seen};
pub use image::{Blob, Image, ImageBuilder, Index};
pub use upstream::{Credentials, Upstream, UpstreamOptions};

/// Installs ring as rustls's process-wide crypto provider (idempotent).
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A reqwest client trusting the system roots, or only `ca_pem` when given.
pub fn http_client(ca_pem: Option<&str>) -> reqwest::Client {
    install_crypto();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(300))
        .redirect(reqwest::redirect::Policy::none());
    if let Some(pem) = ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes()).expect("CA PEM");
        builder = builder.tls_certs_only(certs);
    }
    builder.build().expect("reqwest client")
}
