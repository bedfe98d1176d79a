//! The serving certificate from two PEM files, re-read when either changes on disk (a
//! cert-manager or Deckhouse rotation), so a rotated certificate is served without a restart.
//! A pair that does not load (half-written, key and certificate not matching) leaves the
//! previous one in service and is retried at the next handshake.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a certificate pair does not load.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable PEM.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// rustls refuses the pair.
    #[error("the certificate and key do not make a serving pair: {0}")]
    Pair(#[from] rustls::Error),
}

/// What identifies one version of the files: modification times and sizes.
type Stamp = Option<(SystemTime, u64, SystemTime, u64)>;

fn stamp(cert: &Path, key: &Path) -> Stamp {
    let meta = |p: &Path| {
        let m = std::fs::metadata(p).ok()?;
        Some((m.modified().ok()?, m.len()))
    };
    let (c, k) = (meta(cert)?, meta(key)?);
    Some((c.0, c.1, k.0, k.1))
}

/// The certificate served, from files.
#[derive(Debug)]
pub struct CertificateFiles {
    cert: PathBuf,
    key: PathBuf,
    current: Mutex<(Stamp, Arc<CertifiedKey>)>,
}

impl CertificateFiles {
    /// Loads the pair; fails when it does not load now.
    pub fn load(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Result<Arc<Self>, TlsError> {
        let (cert, key) = (cert.into(), key.into());
        let stamp = stamp(&cert, &key);
        let pair = read_pair(&cert, &key)?;
        Ok(Arc::new(Self {
            cert,
            key,
            current: Mutex::new((stamp, pair)),
        }))
    }

    /// The pair to serve: re-read when the files changed since the last load.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let now = stamp(&self.cert, &self.key);
        if now.is_some() && now != current.0 {
            match read_pair(&self.cert, &self.key) {
                Ok(pair) => {
                    tracing::info!(cert = %self.cert.display(), "serving certificate reloaded");
                    *current = (now, pair);
                }
                Err(error) => {
                    tracing::warn!(%error, "new serving certificate not loaded; keeping the previous one");
                }
            }
        }
        current.1.clone()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn read_pair(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
    let pem_error = |path: &Path, message: String| TlsError::Pem {
        path: path.to_path_buf(),
        message,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(cert)?)
        .collect::<Result<_, _>>()
        .map_err(|e| pem_error(cert, e.to_string()))?;
    if certs.is_empty() {
        return Err(pem_error(cert, "no certificate in the file".into()));
    }
    let private =
        PrivateKeyDer::from_pem_slice(&read(key)?).map_err(|e| pem_error(key, e.to_string()))?;
    let provider = rustls::crypto::ring::default_provider();
    Ok(Arc::new(CertifiedKey::from_der(certs, private, &provider)?))
}

impl ResolvesServerCert for CertificateFiles {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// A TLS acceptor (TLS 1.2+, HTTP/2 and HTTP/1.1 as kube-apiserver speaks them) serving the
/// files' certificate.
pub fn acceptor(certificate: Arc<CertificateFiles>) -> tokio_rustls::TlsAcceptor {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("ring supports the default protocol versions")
    .with_no_client_auth()
    .with_cert_resolver(certificate);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}
