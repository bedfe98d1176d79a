//! Certificates: a CA, the serving certificate and client certificates, kept in the data dir,
//! and kubeconfig files that carry them.

use crate::error::Error;
use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::path::{Path, PathBuf};

/// The CA that signs the serving certificate and every client certificate.
pub(crate) struct Ca {
    pub(crate) cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

/// A certificate with its private key, both PEM.
#[derive(Clone)]
pub(crate) struct Issued {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
    /// SHA-256 of the certificate's DER: how the server recognizes the client.
    pub(crate) fingerprint: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// SHA-256 of a certificate's DER, hex.
pub(crate) fn fingerprint(der: &[u8]) -> String {
    hex_encode(ring::digest::digest(&ring::digest::SHA256, der).as_ref())
}

pub(crate) fn hex_encode(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    p.distinguished_name
        .push(DnType::CommonName, "d8-apiserver-ca");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p
}

pub(crate) fn write_private(path: &Path, data: &str) -> Result<(), Error> {
    use std::io::Write as _;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension("tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts.open(&tmp).map_err(Error::io(&tmp))?;
    f.write_all(data.as_bytes()).map_err(Error::io(&tmp))?;
    f.sync_all().map_err(Error::io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(Error::io(path))
}

fn read(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path)(e)),
    }
}

impl Ca {
    /// Loads `ca.crt`/`ca.key` from `dir`, creating them on first start.
    pub(crate) fn load_or_create(dir: &Path) -> Result<Self, Error> {
        let (crt, key) = (dir.join("ca.crt"), dir.join("ca.key"));
        if let (Some(cert_pem), Some(key_pem)) = (read(&crt)?, read(&key)?) {
            let kp = KeyPair::from_pem(&key_pem)?;
            return Ok(Self {
                cert_pem,
                issuer: Issuer::new(ca_params(), kp),
            });
        }
        let kp = KeyPair::generate()?;
        let cert = ca_params().self_signed(&kp)?;
        write_private(&key, &kp.serialize_pem())?;
        write_private(&crt, &cert.pem())?;
        Ok(Self {
            cert_pem: cert.pem(),
            issuer: Issuer::new(ca_params(), kp),
        })
    }

    /// Issues a certificate: a server certificate for `sans`, or a client certificate for
    /// user `cn` in `groups` (as the Organization, the way Kubernetes reads groups).
    pub(crate) fn issue(
        &self,
        cn: &str,
        groups: &[String],
        sans: &[String],
        server: bool,
    ) -> Result<Issued, Error> {
        let mut p = CertificateParams::new(sans.to_vec())?;
        p.distinguished_name.push(DnType::CommonName, cn);
        for g in groups {
            p.distinguished_name
                .push(DnType::OrganizationName, g.as_str());
        }
        if server {
            p.subject_alt_names = sans
                .iter()
                .map(|s| match s.parse::<std::net::IpAddr>() {
                    Ok(ip) => Ok(SanType::IpAddress(ip)),
                    Err(_) => s.clone().try_into().map(SanType::DnsName),
                })
                .collect::<Result<_, _>>()?;
        }
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let kp = KeyPair::generate()?;
        let cert = p.signed_by(&kp, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: kp.serialize_pem(),
            fingerprint: fingerprint(cert.der()),
        })
    }
}

/// The serving certificate in `dir`, reissued when missing or when the SANs changed.
pub(crate) fn serving_cert(dir: &Path, ca: &Ca, sans: &[String]) -> Result<Issued, Error> {
    let (crt, key, san_file) = (
        dir.join("server.crt"),
        dir.join("server.key"),
        dir.join("server.sans"),
    );
    let want = sans.join(",");
    if let (Some(cert_pem), Some(key_pem), Some(have)) =
        (read(&crt)?, read(&key)?, read(&san_file)?)
        && have == want
    {
        return Ok(Issued {
            cert_pem,
            key_pem,
            fingerprint: String::new(),
        });
    }
    let issued = ca.issue("d8-apiserver", &[], sans, true)?;
    write_private(&key, &issued.key_pem)?;
    write_private(&crt, &issued.cert_pem)?;
    write_private(&san_file, &want)?;
    Ok(issued)
}

/// How a kubeconfig authenticates.
#[derive(Debug, Clone)]
pub(crate) enum KubeconfigAuth<'a> {
    Token(&'a str),
    Cert(&'a Issued),
}

/// Writes a kubeconfig for `user` to `path`.
pub(crate) fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: Option<&str>,
    user: &str,
    auth: KubeconfigAuth<'_>,
) -> Result<PathBuf, Error> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let cluster = match ca_pem {
        Some(ca) => format!(
            "    server: {server}\n    certificate-authority-data: {}\n",
            b64(ca)
        ),
        None => format!("    server: {server}\n"),
    };
    let creds = match auth {
        KubeconfigAuth::Token(t) => format!("    token: {t}\n"),
        KubeconfigAuth::Cert(c) => format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(&c.cert_pem),
            b64(&c.key_pem)
        ),
    };
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: d8\n  cluster:\n{cluster}users:\n- name: {user}\n  user:\n{creds}contexts:\n- name: {user}@d8\n  context:\n    cluster: d8\n    user: {user}\n    namespace: default\ncurrent-context: {user}@d8\n"
    );
    write_private(path, &text)?;
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_survives_reload_and_serving_cert_follows_sans() {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::load_or_create(dir.path()).unwrap();
        let again = Ca::load_or_create(dir.path()).unwrap();
        assert_eq!(ca.cert_pem, again.cert_pem);
        let s1 = serving_cert(
            dir.path(),
            &again,
            &["localhost".into(), "127.0.0.1".into()],
        )
        .unwrap();
        let s2 = serving_cert(
            dir.path(),
            &again,
            &["localhost".into(), "127.0.0.1".into()],
        )
        .unwrap();
        assert_eq!(s1.cert_pem, s2.cert_pem);
        let s3 = serving_cert(dir.path(), &again, &["localhost".into()]).unwrap();
        assert_ne!(s1.cert_pem, s3.cert_pem);
        let c = again
            .issue("admin", &["system:masters".into()], &[], false)
            .unwrap();
        assert_eq!(c.fingerprint.len(), 64);
    }
}
