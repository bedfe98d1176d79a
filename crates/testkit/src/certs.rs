//! A private certificate authority with server and client certificates, for real TLS in tests.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct CertKey {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The PKCS#8 private key, PEM.
    pub key_pem: String,
}

/// Where [`CertKey::write`] put the files.
#[derive(Clone, Debug)]
pub struct CertPaths {
    /// `<name>.crt`
    pub cert: PathBuf,
    /// `<name>.key`
    pub key: PathBuf,
}

impl CertKey {
    /// Writes `<dir>/<name>.crt` and `<dir>/<name>.key` (mode 0600).
    pub fn write(&self, dir: &Path, name: &str) -> std::io::Result<CertPaths> {
        let paths = CertPaths {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&paths.cert, &self.cert_pem)?;
        write_private(&paths.key, self.key_pem.as_bytes())?;
        Ok(paths)
    }
}

/// A certificate authority that issues server certificates for loopback and client certificates.
pub struct Certs {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for Certs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certs").finish_non_exhaustive()
    }
}

impl Certs {
    /// A new CA named `common_name`.
    pub fn new(common_name: &str) -> Self {
        let mut params = CertificateParams::default();
        params.distinguished_name = name(common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("generate CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("self-sign CA");
        Self { issuer }
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        self.issuer.pem()
    }

    /// Writes the CA certificate to `path`.
    pub fn write_ca(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.ca_pem())
    }

    /// A server certificate for `127.0.0.1`, `::1`, `localhost` and any extra names (DNS
    /// names, or IP addresses).
    pub fn server(&self, extra_dns: &[&str]) -> CertKey {
        let mut sans = vec![
            SanType::IpAddress([127, 0, 0, 1].into()),
            SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()),
            SanType::DnsName("localhost".try_into().expect("dns name")),
        ];
        for name in extra_dns {
            sans.push(match name.parse::<std::net::IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName((*name).try_into().expect("dns name")),
            });
        }
        let mut params = CertificateParams::default();
        params.distinguished_name = name("localhost");
        params.subject_alt_names = sans;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// A client certificate whose subject common name is `common_name`.
    pub fn client(&self, common_name: &str) -> CertKey {
        let mut params = CertificateParams::default();
        params.distinguished_name = name(common_name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params)
    }

    fn issue(&self, mut params: CertificateParams) -> CertKey {
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate().expect("generate key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("sign certificate");
        CertKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

fn name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

/// Writes a file readable by its owner only.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};

    #[test]
    fn server_certificate_chains_to_the_ca_and_is_accepted_by_rustls() {
        let certs = Certs::new("testkit CA");
        let server = certs.server(&["registry.example"]);
        let ca = CertificateDer::from_pem_slice(certs.ca_pem().as_bytes()).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).unwrap();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let chain = vec![CertificateDer::from_pem_slice(server.cert_pem.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(server.key_pem.as_bytes()).unwrap();
        rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain.clone(), key)
            .unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            provider,
        )
        .build()
        .unwrap();
        use rustls::client::danger::ServerCertVerifier;
        for name in ["127.0.0.1", "localhost", "registry.example"] {
            let name = rustls_pki_types::ServerName::try_from(name).unwrap();
            verifier
                .verify_server_cert(
                    &chain[0],
                    &[],
                    &name,
                    &[],
                    rustls_pki_types::UnixTime::now(),
                )
                .unwrap();
        }
        let other = rustls_pki_types::ServerName::try_from("other.example").unwrap();
        assert!(
            verifier
                .verify_server_cert(
                    &chain[0],
                    &[],
                    &other,
                    &[],
                    rustls_pki_types::UnixTime::now()
                )
                .is_err()
        );
    }

    #[test]
    fn written_key_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let paths = Certs::new("ca")
            .client("node")
            .write(dir.path(), "client")
            .unwrap();
        let mode = std::fs::metadata(&paths.key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(
            std::fs::read_to_string(&paths.cert)
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE")
        );
    }
}
