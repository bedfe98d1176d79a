//! The agent's own PKI, generated on the node and never leaving it: a CA
//! (`CN=registry-agent-ca`, 175200 h) and a serving certificate (`CN=registry-agent`, SANs
//! `127.0.0.1`, `::1`, `localhost`, 87600 h). Both are reissued when a file is missing, unreadable,
//! or the serving certificate expires within 30 days; the CA key is discarded after signing.
//!
//! Keys are ECDSA P-256 rather than Deckhouse's RSA 2048: ring, our only crypto provider, cannot
//! generate RSA keys, and containerd verifies both.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

/// `ca.crt` in the PKI directory.
pub const CA_FILE: &str = "ca.crt";
/// `agent.crt` in the PKI directory.
pub const CERT_FILE: &str = "agent.crt";
/// `agent.key` in the PKI directory.
pub const KEY_FILE: &str = "agent.key";

const CA_LIFETIME_HOURS: i64 = 175_200;
const CERT_LIFETIME_HOURS: i64 = 87_600;
/// Reissue when the serving certificate would expire within this many days.
pub const RENEW_BEFORE_DAYS: u64 = 30;

/// Errors of the PKI.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A file could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Generating keys or certificates failed.
    #[error("generating the agent certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The stored key pair cannot be used for TLS.
    #[error("the agent certificate cannot be used for TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// The agent's certificate material, PEM.
#[derive(Clone)]
pub struct Pki {
    /// CA certificate: containerd trusts it through `proxy-ca.crt`.
    pub ca_pem: String,
    /// Serving certificate.
    pub cert_pem: String,
    /// Serving key.
    pub key_pem: String,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").finish_non_exhaustive()
    }
}

/// What [`ensure`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The files on disk were valid and kept.
    Kept,
    /// A new CA and certificate were written.
    Issued,
}

impl Pki {
    /// The rustls certified key for serving.
    pub fn certified_key(&self) -> Result<Arc<rustls::sign::CertifiedKey>, PkiError> {
        let provider = rustls::crypto::ring::default_provider();
        let chain = vec![certificate(&self.cert_pem)?];
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| rustls::Error::General(format!("agent key: {e}")))?;
        let key = provider.key_provider.load_private_key(key)?;
        Ok(Arc::new(rustls::sign::CertifiedKey::new(chain, key)))
    }

    /// Whether the serving certificate chains to the CA, names `127.0.0.1`, and is still valid
    /// at `at`.
    pub fn valid_at(&self, at: UnixTime) -> bool {
        let (Ok(ca), Ok(cert)) = (certificate(&self.ca_pem), certificate(&self.cert_pem)) else {
            return false;
        };
        let mut roots = rustls::RootCertStore::empty();
        if roots.add(ca).is_err() {
            return false;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let Ok(verifier) =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
        else {
            return false;
        };
        let name = ServerName::try_from("127.0.0.1").expect("literal address");
        verifier
            .verify_server_cert(&cert, &[], &name, &[], at)
            .is_ok()
            && self.certified_key().is_ok()
    }
}

fn certificate(pem: &str) -> Result<CertificateDer<'static>, rustls::Error> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .map_err(|e| rustls::Error::General(format!("certificate: {e}")))
}

/// Loads the PKI from `dir`, reissuing it when missing, broken or expiring within 30 days of
/// `now`. Directory 0700 and every file 0600, like all of the platform's state: other users read
/// nothing there (a non-root client that must trust the agent gets a copy of `ca.crt`).
pub fn ensure(dir: &Path, now: UnixTime) -> Result<(Pki, Outcome), PkiError> {
    let horizon = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        now.as_secs() + RENEW_BEFORE_DAYS * 24 * 3600,
    ));
    if let Some(pki) = load(dir)
        && pki.valid_at(horizon)
    {
        set_modes(dir)?;
        return Ok((pki, Outcome::Kept));
    }
    let pki = issue()?;
    std::fs::create_dir_all(dir).map_err(|source| io("creating", dir, source))?;
    write(dir, KEY_FILE, &pki.key_pem, 0o600)?;
    write(dir, CERT_FILE, &pki.cert_pem, 0o600)?;
    write(dir, CA_FILE, &pki.ca_pem, 0o600)?;
    set_modes(dir)?;
    Ok((pki, Outcome::Issued))
}

fn load(dir: &Path) -> Option<Pki> {
    let read = |name| std::fs::read_to_string(dir.join(name)).ok();
    Some(Pki {
        ca_pem: read(CA_FILE)?,
        cert_pem: read(CERT_FILE)?,
        key_pem: read(KEY_FILE)?,
    })
}

/// A new CA and serving certificate; the CA key is dropped when this returns.
pub fn issue() -> Result<Pki, PkiError> {
    let now = time::OffsetDateTime::now_utc();
    let mut ca = CertificateParams::default();
    ca.distinguished_name = common_name("registry-agent-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = now - time::Duration::hours(1);
    ca.not_after = now + time::Duration::hours(CA_LIFETIME_HOURS);
    let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;

    let mut server = CertificateParams::default();
    server.distinguished_name = common_name("registry-agent");
    server.subject_alt_names = vec![
        SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()),
        SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()),
        SanType::DnsName("localhost".try_into()?),
    ];
    server.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::ContentCommitment,
    ];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    server.not_before = now - time::Duration::hours(1);
    server.not_after = now + time::Duration::hours(CERT_LIFETIME_HOURS);
    let key = KeyPair::generate()?;
    let cert = server.signed_by(&key, &issuer)?;
    Ok(Pki {
        ca_pem: issuer.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> PkiError {
    PkiError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

/// Writes atomically (temp file, fsync, rename) with `mode`.
fn write(dir: &Path, name: &str, content: &str, mode: u32) -> Result<(), PkiError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    let temp = dir.join(format!(".{name}.tmp"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&temp)
        .map_err(|source| io("creating", &temp, source))?;
    file.write_all(content.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|source| io("writing", &temp, source))?;
    set_mode(&temp, mode)?;
    std::fs::rename(&temp, &path).map_err(|source| io("renaming", &path, source))
}

fn set_modes(dir: &Path) -> Result<(), PkiError> {
    set_mode(dir, 0o700)?;
    set_mode(&dir.join(CERT_FILE), 0o600)?;
    set_mode(&dir.join(CA_FILE), 0o600)?;
    set_mode(&dir.join(KEY_FILE), 0o600)
}

fn set_mode(path: &Path, mode: u32) -> Result<(), PkiError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|source| io("setting the mode of", path, source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn now() -> UnixTime {
        UnixTime::now()
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn first_start_issues_then_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let pki_dir = dir.path().join("pki");
        let (first, outcome) = ensure(&pki_dir, now()).unwrap();
        assert_eq!(outcome, Outcome::Issued);
        assert_eq!(mode(&pki_dir), 0o700);
        assert_eq!(mode(&pki_dir.join(CA_FILE)), 0o600);
        assert_eq!(mode(&pki_dir.join(KEY_FILE)), 0o600);
        let (second, outcome) = ensure(&pki_dir, now()).unwrap();
        assert_eq!(outcome, Outcome::Kept);
        assert_eq!(first.cert_pem, second.cert_pem);
        assert!(
            !std::fs::read_dir(&pki_dir).unwrap().any(|e| {
                let name = e.unwrap().file_name();
                name.to_string_lossy().contains("ca.key")
            }),
            "the CA key is not kept"
        );
    }

    #[test]
    fn reissued_within_thirty_days_of_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let (first, _) = ensure(dir.path(), now()).unwrap();
        let in_ten_years = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
            now().as_secs() + CERT_LIFETIME_HOURS as u64 * 3600 - 10 * 24 * 3600,
        ));
        let (second, outcome) = ensure(dir.path(), in_ten_years).unwrap();
        assert_eq!(outcome, Outcome::Issued);
        assert_ne!(first.ca_pem, second.ca_pem);
    }

    #[test]
    fn broken_or_missing_files_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        ensure(dir.path(), now()).unwrap();
        std::fs::write(dir.path().join(CERT_FILE), "garbage").unwrap();
        assert_eq!(ensure(dir.path(), now()).unwrap().1, Outcome::Issued);
        std::fs::remove_file(dir.path().join(KEY_FILE)).unwrap();
        assert_eq!(ensure(dir.path(), now()).unwrap().1, Outcome::Issued);
        // A certificate from another CA is not accepted either.
        let other = issue().unwrap();
        std::fs::write(dir.path().join(CA_FILE), other.ca_pem).unwrap();
        assert_eq!(ensure(dir.path(), now()).unwrap().1, Outcome::Issued);
    }

    #[test]
    fn certificate_serves_loopback_names_only() {
        let pki = issue().unwrap();
        assert!(pki.valid_at(now()));
        let ca = certificate(&pki.ca_pem).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let cert = certificate(&pki.cert_pem).unwrap();
        for (name, ok) in [
            ("localhost", true),
            ("::1", true),
            ("127.0.0.1", true),
            ("node.example", false),
        ] {
            let name = ServerName::try_from(name).unwrap();
            assert_eq!(
                verifier
                    .verify_server_cert(&cert, &[], &name, &[], now())
                    .is_ok(),
                ok
            );
        }
    }
}
