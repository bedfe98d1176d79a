//! The certificate functions: what sprig's `getBaseCertTemplate` and Go's
//! `x509.CreateCertificate` put into a certificate, in their order.

use go_template::{Func, FuncMap, Signature, Ty, Value};
use sha1::Digest as _;

use super::keys::{Key, pem_decode, pem_encode};
use super::{CERTIFICATE, Certificate};
use crate::date::{GoTime, Loc};
use crate::der;
use crate::encoding::b64_decode;
use crate::fargs::{call_err, int_arg, str_arg};
use crate::random::random_bytes;

const CA_SIG: &[Ty] = &[Ty::String, Ty::Int];
const CA_KEY_SIG: &[Ty] = &[Ty::String, Ty::Int, Ty::String];
const SELF_SIG: &[Ty] = &[Ty::String, Ty::List, Ty::List, Ty::Int];
const SELF_KEY_SIG: &[Ty] = &[Ty::String, Ty::List, Ty::List, Ty::Int, Ty::String];
const SIGNED_SIG: &[Ty] = &[
    Ty::String,
    Ty::List,
    Ty::List,
    Ty::Int,
    Ty::Object(CERTIFICATE),
];
const SIGNED_KEY_SIG: &[Ty] = &[
    Ty::String,
    Ty::List,
    Ty::List,
    Ty::Int,
    Ty::Object(CERTIFICATE),
    Ty::String,
];

pub(super) fn register(m: &mut FuncMap) {
    let f = |sig: &'static [Ty], body: fn(&[Value]) -> Result<Certificate, String>| {
        Func::new(Signature::fixed(sig), move |a: &[Value]| {
            body(a).map(Certificate::value).map_err(call_err)
        })
    };
    m.insert(
        "genCA".into(),
        f(CA_SIG, |a| {
            let key = rsa_2048()?;
            ca(str_arg(a, 0), int_arg(a, 1), &key)
        }),
    );
    m.insert(
        "genCAWithKey".into(),
        f(CA_KEY_SIG, |a| {
            let key =
                Key::parse_pem(str_arg(a, 2)).map_err(|e| format!("parsing private key: {e}"))?;
            ca(str_arg(a, 0), int_arg(a, 1), &key)
        }),
    );
    m.insert(
        "genSelfSignedCert".into(),
        f(SELF_SIG, |a| {
            let key = rsa_2048()?;
            let t = Template::base(str_arg(a, 0), &a[1], &a[2], int_arg(a, 3))?;
            issue(&t, &key, None, &key)
        }),
    );
    m.insert(
        "genSelfSignedCertWithKey".into(),
        f(SELF_KEY_SIG, |a| {
            let key =
                Key::parse_pem(str_arg(a, 4)).map_err(|e| format!("parsing private key: {e}"))?;
            let t = Template::base(str_arg(a, 0), &a[1], &a[2], int_arg(a, 3))?;
            issue(&t, &key, None, &key)
        }),
    );
    m.insert(
        "genSignedCert".into(),
        f(SIGNED_SIG, |a| {
            let key = rsa_2048()?;
            signed(a, &key)
        }),
    );
    m.insert(
        "genSignedCertWithKey".into(),
        f(SIGNED_KEY_SIG, |a| {
            let key =
                Key::parse_pem(str_arg(a, 5)).map_err(|e| format!("parsing private key: {e}"))?;
            signed(a, &key)
        }),
    );
    m.insert(
        "buildCustomCert".into(),
        Func::new(
            Signature::fixed(&[Ty::String, Ty::String]),
            |a: &[Value]| {
                build_custom(str_arg(a, 0), str_arg(a, 1))
                    .map(Certificate::value)
                    .map_err(call_err)
            },
        ),
    );
}

fn rsa_2048() -> Result<Key, String> {
    super::keys::generate_rsa(2048).map_err(|e| format!("error generating rsa key: {e}"))
}

fn build_custom(b64cert: &str, b64key: &str) -> Result<Certificate, String> {
    let cert = b64_decode(b64cert.as_bytes()).map_err(|_| "unable to decode base64 certificate")?;
    let key = b64_decode(b64key.as_bytes()).map_err(|_| "unable to decode base64 private key")?;
    let cert = String::from_utf8_lossy(&cert).into_owned();
    let key = String::from_utf8_lossy(&key).into_owned();
    let (_, der) = pem_decode(&cert).ok_or("unable to decode certificate")?;
    Parsed::read(&der).map_err(|e| format!("error parsing certificate: decodedCert.Bytes: {e}"))?;
    Key::parse_pem(&key).map_err(|e| format!("error parsing private key: {e}"))?;
    Ok(Certificate { cert, key })
}

fn signed(a: &[Value], key: &Key) -> Result<Certificate, String> {
    let ca = Certificate::from_value(&a[4]);
    let (_, ca_der) = pem_decode(&ca.cert).ok_or("unable to decode certificate")?;
    let parent = Parsed::read(&ca_der)
        .map_err(|e| format!("error parsing certificate: decodedSignerCert.Bytes: {e}"))?;
    let signer = Key::parse_pem(&ca.key).map_err(|e| format!("error parsing private key: {e}"))?;
    let t = Template::base(str_arg(a, 0), &a[1], &a[2], int_arg(a, 3))?;
    issue(&t, key, Some(&parent), &signer)
}

fn ca(cn: &str, days: i64, key: &Key) -> Result<Certificate, String> {
    let mut t = Template::base(cn, &Value::Nil, &Value::Nil, days)?;
    t.ca = true;
    issue(&t, key, None, key)
}

/// sprig's certificate template.
struct Template {
    cn: String,
    ips: Vec<Vec<u8>>,
    dns: Vec<String>,
    not_before: i64,
    not_after: i64,
    serial: Vec<u8>,
    ca: bool,
}

impl Template {
    fn base(cn: &str, ips: &Value, dns: &Value, days: i64) -> Result<Template, String> {
        let list = |v: &Value| match v {
            Value::List(l) => l.as_ref().clone(),
            _ => Vec::new(),
        };
        let mut ip_bytes = Vec::new();
        for ip in list(ips) {
            let Value::String(s) = &ip else {
                return Err(format!("error parsing ip: {} is not a string", go_v(&ip)));
            };
            ip_bytes.push(parse_ip(s).ok_or_else(|| format!("error parsing ip: {s}"))?);
        }
        let mut names = Vec::new();
        for name in list(dns) {
            let Value::String(s) = &name else {
                return Err(format!(
                    "error processing alternate dns name: {} is not a string",
                    go_v(&name)
                ));
            };
            names.push(s.to_string());
        }
        let now = GoTime::now();
        let valid = days.wrapping_mul(86_400_000_000_000);
        Ok(Template {
            cn: cn.to_owned(),
            ips: ip_bytes,
            dns: names,
            not_before: now.unix,
            not_after: now.add(valid).unix,
            serial: random_bytes(16),
            ca: false,
        })
    }
}

/// `%v` of a list element that is not a string.
fn go_v(v: &Value) -> String {
    match v {
        Value::Nil => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(n) | Value::Int64(n) => n.to_string(),
        Value::Float(f) => {
            if f.fract() == 0.0 && f.abs() < 1e21 {
                format!("{f}")
            } else {
                format!("{f:e}").replace("e", "e+")
            }
        }
        Value::Object(o) => o.format(),
        other => format!("{other:?}"),
    }
}

/// Go's `net.ParseIP`: IPv4 dotted quads, IPv6 (IPv4-mapped ones count as IPv4). Certificates
/// hold IPv4 addresses as 4 bytes.
fn parse_ip(s: &str) -> Option<Vec<u8>> {
    if let Ok(v4) = s.parse::<std::net::Ipv4Addr>() {
        return Some(v4.octets().to_vec());
    }
    if s.contains('%') {
        return None;
    }
    let v6 = s.parse::<std::net::Ipv6Addr>().ok()?;
    Some(match v6.to_ipv4_mapped() {
        Some(v4) => v4.octets().to_vec(),
        None => v6.octets().to_vec(),
    })
}

/// What a signed certificate needs from its parent.
struct Parsed {
    subject: Vec<u8>,
    spki: Vec<u8>,
    skid: Option<Vec<u8>>,
}

impl Parsed {
    fn read(der_bytes: &[u8]) -> Result<Parsed, String> {
        let malformed = || "x509: malformed certificate".to_owned();
        let (cert, _) = der::read(der_bytes).ok_or_else(malformed)?;
        let parts = der::children(cert.content).ok_or_else(malformed)?;
        let tbs = parts.first().ok_or_else(malformed)?;
        let mut fields = der::children(tbs.content).ok_or_else(malformed)?;
        if fields.first().is_some_and(|f| f.tag == 0xa0) {
            fields.remove(0);
        }
        // serial, signature, issuer, validity, subject, spki, then optional parts.
        if fields.len() < 6 {
            return Err(malformed());
        }
        let mut skid = None;
        if let Some(ext) = fields.iter().find(|f| f.tag == 0xa3) {
            let (list, _) = der::read(ext.content).ok_or_else(malformed)?;
            for e in der::children(list.content).ok_or_else(malformed)? {
                let ef = der::children(e.content).ok_or_else(malformed)?;
                if ef
                    .first()
                    .is_some_and(|o| o.raw == der::oid(&[2, 5, 29, 14]).as_slice())
                    && let Some(value) = ef.last()
                {
                    let (id, _) = der::read(value.content).ok_or_else(malformed)?;
                    skid = Some(id.content.to_vec());
                }
            }
        }
        Ok(Parsed {
            subject: fields[4].raw.to_vec(),
            spki: fields[5].raw.to_vec(),
            skid,
        })
    }
}

fn name(cn: &str) -> Vec<u8> {
    if cn.is_empty() {
        return der::seq(&[]);
    }
    let printable = cn
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b" '()+,-./:=?".contains(&b));
    let value = der::tlv(if printable { 0x13 } else { 0x0c }, cn.as_bytes());
    let atv = der::seq(&[&der::oid(&[2, 5, 4, 3]), &value]);
    der::seq(&[&der::tlv(0x31, &atv)])
}

fn time(unix: i64) -> Vec<u8> {
    let c = GoTime::from_unix(unix).in_loc(Loc::Utc).civil();
    let rest = format!(
        "{:02}{:02}{:02}{:02}{:02}Z",
        c.month, c.day, c.hour, c.min, c.sec
    );
    if (1950..2050).contains(&c.year) {
        der::tlv(0x17, format!("{:02}{rest}", c.year % 100).as_bytes())
    } else {
        der::tlv(0x18, format!("{:04}{rest}", c.year).as_bytes())
    }
}

fn extension(arcs: &[u64], critical: bool, value: &[u8]) -> Vec<u8> {
    let crit = if critical {
        vec![0x01, 0x01, 0xff]
    } else {
        Vec::new()
    };
    der::seq(&[&der::oid(arcs), &crit, &der::octets(value)])
}

/// `x509.CreateCertificate(template, parent, signee's public key, signer)`, PEM-encoded with
/// the signee's key, as sprig's `getCertAndKey`.
fn issue(
    t: &Template,
    key: &Key,
    parent: Option<&Parsed>,
    signer: &Key,
) -> Result<Certificate, String> {
    let created = |e: String| format!("error creating certificate: {e}");
    if matches!(signer, Key::Dsa(_)) {
        return Err(created(
            "x509: certificate private key does not implement crypto.Signer".into(),
        ));
    }
    let (spki, public) = key.spki().map_err(created)?;
    let subject = name(&t.cn);
    let issuer = parent.map_or_else(|| subject.clone(), |p| p.subject.clone());
    if let Some(p) = parent {
        let (signer_spki, _) = signer.spki().map_err(created)?;
        if signer_spki != p.spki {
            return Err(created(
                "x509: provided PrivateKey doesn't match parent's PublicKey".into(),
            ));
        }
    }
    let mut exts: Vec<Vec<u8>> = Vec::new();
    let usage: u8 = if t.ca { 0xa4 } else { 0xa0 };
    let unused = usage.trailing_zeros() as u8;
    exts.push(extension(
        &[2, 5, 29, 15],
        true,
        &der::bit_string(unused, &[usage]),
    ));
    let eku = der::seq(&[
        &der::oid(&[1, 3, 6, 1, 5, 5, 7, 3, 1]),
        &der::oid(&[1, 3, 6, 1, 5, 5, 7, 3, 2]),
    ]);
    exts.push(extension(&[2, 5, 29, 37], false, &eku));
    let bc = if t.ca {
        der::seq(&[&[0x01, 0x01, 0xff]])
    } else {
        der::seq(&[])
    };
    exts.push(extension(&[2, 5, 29, 19], true, &bc));
    if t.ca {
        let skid = sha1::Sha1::digest(&public);
        exts.push(extension(&[2, 5, 29, 14], false, &der::octets(&skid)));
    }
    if let Some(akid) = parent.and_then(|p| p.skid.as_ref())
        && issuer != subject
    {
        exts.push(extension(
            &[2, 5, 29, 35],
            false,
            &der::seq(&[&der::tlv(0x80, akid)]),
        ));
    }
    if !t.dns.is_empty() || !t.ips.is_empty() {
        let mut names = Vec::new();
        for d in &t.dns {
            names.extend(der::tlv(0x82, d.as_bytes()));
        }
        for ip in &t.ips {
            names.extend(der::tlv(0x87, ip));
        }
        exts.push(extension(
            &[2, 5, 29, 17],
            t.cn.is_empty(),
            &der::tlv(0x30, &names),
        ));
    }
    let (sig_alg, _) = signer.sign(b"").map_err(created)?;
    let tbs = der::seq(&[
        &der::tlv(0xa0, &der::small_int(2)),
        &der::uint(&t.serial),
        &sig_alg,
        &issuer,
        &der::seq(&[&time(t.not_before), &time(t.not_after)]),
        &subject,
        &spki,
        &der::tlv(
            0xa3,
            &der::seq(&exts.iter().map(Vec::as_slice).collect::<Vec<_>>()),
        ),
    ]);
    let (alg, signature) = signer.sign(&tbs).map_err(created)?;
    let cert = der::seq(&[&tbs, &alg, &der::bit_string(0, &signature)]);
    Ok(Certificate {
        cert: pem_encode("CERTIFICATE", &cert),
        key: key.pem(),
    })
}
