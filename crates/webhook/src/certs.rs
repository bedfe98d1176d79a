//! A private CA and a serving certificate kept in one directory, for a webhook that the API
//! server reaches by a name or address it knows: `ca.crt` (the `caBundle` to register),
//! `ca.key`, `tls.crt`, `tls.key` — every file `0600`. [`ensure`] makes what is missing and
//! renews what is close to expiry (or no longer names the wanted hosts), so calling it at
//! every start and now and then while running keeps a certificate in service; [`plan`] is the
//! decision, pure.
//!
//! `d8 up` keeps `d8 webhook`'s certificate with it; any component that needs a self-made
//! serving certificate (the chart's webhooks) calls the same function.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// How long a CA is valid.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 86_400);
/// How long a serving certificate is valid.
pub const SERVING_VALIDITY: Duration = Duration::from_secs(365 * 86_400);
/// A serving certificate is renewed this long before it expires.
pub const RENEW_SERVING_BEFORE: Duration = Duration::from_secs(30 * 86_400);
/// A CA is renewed (and the serving certificate with it) this long before it expires.
pub const RENEW_CA_BEFORE: Duration = Duration::from_secs(365 * 86_400);

/// The files, by name.
pub const CA_CERT: &str = "ca.crt";
/// The CA's key.
pub const CA_KEY: &str = "ca.key";
/// The serving certificate (then the CA: the chain).
pub const TLS_CERT: &str = "tls.crt";
/// The serving key.
pub const TLS_KEY: &str = "tls.key";

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

/// What [`ensure`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Both are in order.
    Keep,
    /// A new serving certificate from the same CA (the registered `caBundle` stays valid).
    Serving,
    /// A new CA and a new serving certificate (the `caBundle` must be registered again).
    All,
}

/// The decision: a missing, unreadable or expiring CA renews everything; a missing or expiring
/// serving certificate, or one that does not name exactly `names`, renews the serving one.
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

/// Makes or renews what [`plan`] decides for `names` at `now`: `current` with a new serving
/// certificate, or with a new CA and serving certificate, or as it is.
pub fn renew(
    current: &Pems,
    names: &[String],
    now: SystemTime,
) -> Result<(Pems, Renewal), CertError> {
    let ca_usable = KeyPair::from_pem(&current.ca_key).is_ok();
    let ca = found(current.ca_crt.as_bytes()).filter(|_| ca_usable);
    let serving = found(current.tls_crt.as_bytes()).filter(|_| !current.tls_key.is_empty());
    let renewal = plan(ca.as_ref(), serving.as_ref(), names, now);
    let mut next = current.clone();
    if renewal == Renewal::All {
        let (ca_crt, ca_key) = new_ca(now)?;
        next.ca_crt = ca_crt;
        next.ca_key = ca_key;
    }
    if renewal != Renewal::Keep {
        let (tls_crt, tls_key) = new_serving(&next.ca_crt, &next.ca_key, names, now)?;
        next.tls_crt = tls_crt;
        next.tls_key = tls_key;
    }
    Ok((next, renewal))
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

/// A new CA: (certificate, key).
fn new_ca(now: SystemTime) -> Result<(String, String), CertError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, "d8-webhook-ca");
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

/// A new serving certificate for `names` signed by the CA: (chain, key).
fn new_serving(
    ca_pem: &str,
    ca_key: &str,
    names: &[String],
    now: SystemTime,
) -> Result<(String, String), CertError> {
    let issuer = Issuer::from_ca_cert_pem(ca_pem, KeyPair::from_pem(ca_key)?)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().map(String::as_str).unwrap_or("d8-webhook"),
    );
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut params, now, SERVING_VALIDITY);
    let cert = params.signed_by(&key, &issuer)?;
    Ok((format!("{}{ca_pem}", cert.pem()), key.serialize_pem()))
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
