//! A private CA and one certificate it signs, kept as four PEM texts (`ca.crt`, `ca.key`,
//! `tls.crt`, `tls.key`) in a directory or in the keys of a Secret: [`plan`] decides, purely,
//! whether to issue, keep or renew them; [`renew_for`] makes what it decides; [`ensure`] keeps
//! them in a directory (every file `0600`).
//!
//! The leaf is a serving certificate for the names a client dials ([`Leaf::Serving`]: the
//! webhooks `d8 controller` and `d8 up` keep) or a client certificate ([`Leaf::Client`]: the
//! one the publish Ingress presents to the registry cache replicas, which the registry
//! controller keeps). Either is renewed 30 days before its end from the same CA; the CA a year
//! before its end, with a new leaf.
//!
//! Pure but for [`ensure`]'s files: no runtime, no sockets.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// How long a CA is valid.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 86_400);
/// How long a serving (or client) certificate is valid.
pub const SERVING_VALIDITY: Duration = Duration::from_secs(365 * 86_400);
/// A serving (or client) certificate is renewed this long before it expires.
pub const RENEW_SERVING_BEFORE: Duration = Duration::from_secs(30 * 86_400);
/// A CA is renewed (and the serving certificate with it) this long before it expires.
pub const RENEW_CA_BEFORE: Duration = Duration::from_secs(365 * 86_400);

/// The files, by name.
pub const CA_CERT: &str = "ca.crt";
/// The CA's key.
pub const CA_KEY: &str = "ca.key";
/// The serving certificate (then the CA: the chain), or the client certificate.
pub const TLS_CERT: &str = "tls.crt";
/// The leaf's key.
pub const TLS_KEY: &str = "tls.key";
/// The CA's common name for the webhooks' serving certificates ([`renew`], [`ensure`]).
pub const WEBHOOK_CA: &str = "d8-webhook-ca";

/// What the CA signs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaf<'a> {
    /// A serving certificate (extended key usage `serverAuth`) naming exactly these DNS names
    /// or IP addresses; the first is its common name. Its file holds the chain (then the CA).
    Serving(&'a [String]),
    /// A client certificate (extended key usage `clientAuth`) with this common name and no
    /// other names. Its file holds it alone.
    Client(&'a str),
}

impl Leaf<'_> {
    /// The names the certificate must carry (a client certificate: none).
    fn names(&self) -> &[String] {
        match self {
            Leaf::Serving(names) => names,
            Leaf::Client(_) => &[],
        }
    }
}

/// A CA of its own and what it signs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile<'a> {
    /// The CA's common name.
    pub ca: &'a str,
    /// The certificate it signs.
    pub leaf: Leaf<'a>,
}

/// Why the certificates cannot be made or kept.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A file or the directory cannot be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// rcgen cannot make a certificate.
    #[error("making a certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// What is found on disk about one certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// When it expires.
    pub not_after: SystemTime,
    /// The DNS names and IP addresses it names.
    pub names: Vec<String>,
}

/// What [`plan`] decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Both are in order.
    Keep,
    /// A new leaf (serving or client) certificate from the same CA (whoever trusts the CA —
    /// a registered `caBundle`, a replica's `ingress-client-ca.crt` — keeps trusting it).
    Serving,
    /// A new CA and a new leaf (issued the first time; whoever trusts the CA must be told).
    All,
}

/// The decision: a missing, unreadable or expiring CA renews everything; a missing or expiring
/// leaf certificate, or one that does not name exactly `names` (a client certificate: none),
/// renews the leaf.
pub fn plan(
    ca: Option<&Found>,
    serving: Option<&Found>,
    names: &[String],
    now: SystemTime,
) -> Renewal {
    let expiring = |f: &Found, before: Duration| {
        f.not_after
            .duration_since(now)
            .map_or(true, |left| left < before)
    };
    if ca.is_none_or(|ca| expiring(ca, RENEW_CA_BEFORE)) {
        return Renewal::All;
    }
    let mut wanted: Vec<&String> = names.iter().collect();
    wanted.sort();
    match serving {
        Some(s) if !expiring(s, RENEW_SERVING_BEFORE) => {
            let mut has: Vec<&String> = s.names.iter().collect();
            has.sort();
            if has == wanted {
                Renewal::Keep
            } else {
                Renewal::Serving
            }
        }
        _ => Renewal::Serving,
    }
}

/// The certificates in service.
#[derive(Clone)]
pub struct ServingCertificate {
    /// The CA (PEM): the `caBundle` of the registration.
    pub ca_pem: String,
    /// The serving certificate's chain file.
    pub cert_file: PathBuf,
    /// The serving key's file.
    pub key_file: PathBuf,
    /// What [`ensure`] renewed.
    pub renewal: Renewal,
}

impl std::fmt::Debug for ServingCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCertificate")
            .field("cert_file", &self.cert_file)
            .field("renewal", &self.renewal)
            .finish_non_exhaustive()
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CertError + '_ {
    move |source| CertError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads a PEM certificate (its first one); `None` when it is not a certificate.
fn found(pem: &[u8]) -> Option<Found> {
    use x509_parser::extensions::GeneralName;
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).ok()?;
    let cert = pem.parse_x509().ok()?;
    let not_after = u64::try_from(cert.validity().not_after.timestamp()).ok()?;
    let names = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(d) => Some(d.to_string()),
                GeneralName::IPAddress(ip) => match ip.len() {
                    4 => <[u8; 4]>::try_from(*ip)
                        .ok()
                        .map(|b| std::net::IpAddr::from(b).to_string()),
                    16 => <[u8; 16]>::try_from(*ip)
                        .ok()
                        .map(|b| std::net::IpAddr::from(b).to_string()),
                    _ => None,
                },
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Some(Found {
        not_after: SystemTime::UNIX_EPOCH + Duration::from_secs(not_after),
        names,
    })
}

/// The four PEM texts of a CA and its serving certificate, wherever they are kept (files in a
/// directory, keys of a Secret). Empty text stands for a missing one.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Pems {
    /// The CA's certificate ([`CA_CERT`]).
    pub ca_crt: String,
    /// The CA's key ([`CA_KEY`]).
    pub ca_key: String,
    /// The serving certificate, then the CA ([`TLS_CERT`]).
    pub tls_crt: String,
    /// The serving key ([`TLS_KEY`]).
    pub tls_key: String,
}

impl std::fmt::Debug for Pems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pems")
            .field("ca_crt", &self.ca_crt)
            .field("tls_crt", &self.tls_crt)
            .finish_non_exhaustive()
    }
}

/// Makes or renews what [`plan`] decides for a webhook serving `names` at `now`
/// ([`renew_for`] with CA [`WEBHOOK_CA`]).
pub fn renew(
    current: &Pems,
    names: &[String],
    now: SystemTime,
) -> Result<(Pems, Renewal), CertError> {
    renew_for(
        current,
        &Profile {
            ca: WEBHOOK_CA,
            leaf: Leaf::Serving(names),
        },
        now,
    )
}

/// Makes or renews what [`plan`] decides for `profile` at `now`: `current` with a new leaf
/// certificate, or with a new CA and leaf, or as it is. A CA whose key is missing or unusable
/// counts as missing; so does a leaf without its key, or one whose key is not its own.
pub fn renew_for(
    current: &Pems,
    profile: &Profile<'_>,
    now: SystemTime,
) -> Result<(Pems, Renewal), CertError> {
    let ca_usable = KeyPair::from_pem(&current.ca_key).is_ok();
    let ca = found(current.ca_crt.as_bytes()).filter(|_| ca_usable);
    let leaf = found(current.tls_crt.as_bytes()).filter(|_| {
        KeyPair::from_pem(&current.tls_key).is_ok_and(|key| {
            public_key(current.tls_crt.as_bytes()).as_deref() == Some(key.public_key_raw())
        })
    });
    let renewal = plan(ca.as_ref(), leaf.as_ref(), profile.leaf.names(), now);
    let mut next = current.clone();
    if renewal == Renewal::All {
        let (ca_crt, ca_key) = new_ca(profile.ca, now)?;
        next.ca_crt = ca_crt;
        next.ca_key = ca_key;
    }
    if renewal != Renewal::Keep {
        let (tls_crt, tls_key) = new_leaf(&next.ca_crt, &next.ca_key, profile.leaf, now)?;
        next.tls_crt = tls_crt;
        next.tls_key = tls_key;
    }
    Ok((next, renewal))
}

/// The raw public key of the first certificate in `pem`.
fn public_key(pem: &[u8]) -> Option<Vec<u8>> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).ok()?;
    let cert = pem.parse_x509().ok()?;
    Some(cert.public_key().subject_public_key.data.to_vec())
}

/// Writes `data` to `path` with mode `0600`, atomically (a reader sees the old or the new file).
fn write_private(path: &Path, data: &str) -> Result<(), CertError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io(&tmp))?;
    file.write_all(data.as_bytes()).map_err(io(&tmp))?;
    file.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

fn validity(params: &mut CertificateParams, now: SystemTime, lifetime: Duration) {
    // A minute back: a clock a little behind the API server's still accepts it.
    params.not_before = (now - Duration::from_secs(60)).into();
    params.not_after = (now + lifetime).into();
}

/// A new CA named `common_name`: (certificate, key).
fn new_ca(common_name: &str, now: SystemTime) -> Result<(String, String), CertError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut params, now, CA_VALIDITY);
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A new leaf certificate signed by the CA: (certificate file, key). A serving certificate's
/// file holds the chain, a client certificate's itself.
fn new_leaf(
    ca_pem: &str,
    ca_key: &str,
    leaf: Leaf<'_>,
    now: SystemTime,
) -> Result<(String, String), CertError> {
    let issuer = Issuer::from_ca_cert_pem(ca_pem, KeyPair::from_pem(ca_key)?)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(leaf.names().to_vec())?;
    let (common_name, usage) = match leaf {
        Leaf::Serving(names) => (
            names.first().map(String::as_str).unwrap_or("d8-webhook"),
            ExtendedKeyUsagePurpose::ServerAuth,
        ),
        Leaf::Client(name) => (name, ExtendedKeyUsagePurpose::ClientAuth),
    };
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    validity(&mut params, now, SERVING_VALIDITY);
    let cert = params.signed_by(&key, &issuer)?;
    let file = match leaf {
        Leaf::Serving(_) => format!("{}{ca_pem}", cert.pem()),
        Leaf::Client(_) => cert.pem(),
    };
    Ok((file, key.serialize_pem()))
}

/// Makes or renews the CA and the serving certificate for `names` (DNS names or IP addresses)
/// in `dir` (created `0700`), as [`plan`] decides at `now`.
pub fn ensure(
    dir: &Path,
    names: &[String],
    now: SystemTime,
) -> Result<ServingCertificate, CertError> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(dir))?;
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    let current = Pems {
        ca_crt: read(CA_CERT),
        ca_key: read(CA_KEY),
        tls_crt: read(TLS_CERT),
        tls_key: read(TLS_KEY),
    };
    let (next, renewal) = renew(&current, names, now)?;
    if renewal == Renewal::All {
        write_private(&dir.join(CA_KEY), &next.ca_key)?;
        write_private(&dir.join(CA_CERT), &next.ca_crt)?;
    }
    if renewal != Renewal::Keep {
        // The key first: a reload that sees the new certificate finds its key in place.
        write_private(&dir.join(TLS_KEY), &next.tls_key)?;
        write_private(&dir.join(TLS_CERT), &next.tls_crt)?;
    }
    Ok(ServingCertificate {
        ca_pem: next.ca_crt,
        cert_file: dir.join(TLS_CERT),
        key_file: dir.join(TLS_KEY),
        renewal,
    })
}

#[cfg(test)]
mod tests;
