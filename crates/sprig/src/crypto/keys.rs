//! Private keys as sprig writes and reads them: PEM blocks `RSA PRIVATE KEY` (PKCS#1),
//! `EC PRIVATE KEY` (SEC 1, with the curve and the public key), `DSA PRIVATE KEY` (sprig's own
//! ASN.1 sequence) and `PRIVATE KEY` (PKCS#8, Ed25519); the public key and signing for
//! certificates.

use ring::rand::SystemRandom;
use ring::signature::{self as sig, KeyPair as _};

use crate::der;
use crate::encoding::{b64_decode, b64_encode};
use crate::random::random_bytes;

const RSA_ENCRYPTION: &[u64] = &[1, 2, 840, 113_549, 1, 1, 1];
const EC_PUBLIC_KEY: &[u64] = &[1, 2, 840, 10045, 2, 1];
const P256: &[u64] = &[1, 2, 840, 10045, 3, 1, 7];
const P384: &[u64] = &[1, 3, 132, 0, 34];
const ED25519: &[u64] = &[1, 3, 101, 112];

/// A private key sprig can hold.
#[derive(Clone, Debug)]
pub(crate) enum Key {
    /// PKCS#1 DER.
    Rsa(Vec<u8>),
    /// SEC 1 DER (with parameters and public key) and its curve.
    Ec { sec1: Vec<u8>, p384: bool },
    /// The 32-byte seed.
    Ed25519([u8; 32]),
    /// sprig's `DSAKeyFormat` DER.
    Dsa(Vec<u8>),
}

/// Go's `pem.EncodeToMemory`.
pub(crate) fn pem_encode(kind: &str, der: &[u8]) -> String {
    let b64 = b64_encode(der);
    let mut out = format!("-----BEGIN {kind}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {kind}-----\n"));
    out
}

/// The first PEM block in `text` (Go's `pem.Decode`, without headers): type and bytes.
pub(crate) fn pem_decode(text: &str) -> Option<(String, Vec<u8>)> {
    let mut rest = text;
    loop {
        let start = rest.find("-----BEGIN ")?;
        let after = &rest[start + 11..];
        let type_end = after.find("-----")?;
        let kind = &after[..type_end];
        let body_start = &after[type_end + 5..];
        let end_marker = format!("-----END {kind}-----");
        if let Some(end) = body_start.find(&end_marker)
            && !kind.contains('\n')
        {
            let body: Vec<u8> = body_start[..end]
                .bytes()
                .filter(|b| !b.is_ascii_whitespace())
                .collect();
            if let Ok(bytes) = b64_decode(&body) {
                return Some((kind.to_owned(), bytes));
            }
        }
        rest = body_start;
    }
}

fn rsa_generate(bits: usize) -> Result<Vec<u8>, String> {
    use rsa::pkcs1::EncodeRsaPrivateKey as _;
    let key = rsa::PrivateKey::new(&mut getrandom::SysRng, bits).map_err(|e| e.to_string())?;
    let der = key.to_pkcs1_der().map_err(|e| e.to_string())?;
    Ok(der.as_bytes().to_vec())
}

/// A new RSA key of `bits` (sprig: 2048 for certificates, 4096 for `genPrivateKey`).
pub(crate) fn generate_rsa(bits: usize) -> Result<Key, String> {
    rsa_generate(bits).map(Key::Rsa)
}

fn generate_ec() -> Result<Key, String> {
    let rng = SystemRandom::new();
    let pkcs8 = sig::EcdsaKeyPair::generate_pkcs8(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
        .map_err(|e| e.to_string())?;
    let pair =
        sig::EcdsaKeyPair::from_pkcs8(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|e| e.to_string())?;
    // ring's PKCS#8 holds SEC 1 without the curve: read the scalar back out of it.
    let scalar = pkcs8_ec_scalar(pkcs8.as_ref()).ok_or("unreadable generated key")?;
    Ok(Key::Ec {
        sec1: sec1(&scalar, P256, pair.public_key().as_ref()),
        p384: false,
    })
}

fn pkcs8_ec_scalar(pkcs8: &[u8]) -> Option<Vec<u8>> {
    let (info, _) = der::read(pkcs8)?;
    let fields = der::children(info.content)?;
    let inner = fields.get(2)?;
    let (ec, _) = der::read(inner.content)?;
    let ec_fields = der::children(ec.content)?;
    Some(ec_fields.get(1)?.content.to_vec())
}

fn sec1(scalar: &[u8], curve: &[u64], public: &[u8]) -> Vec<u8> {
    der::seq(&[
        &der::small_int(1),
        &der::octets(scalar),
        &der::tlv(0xa0, &der::oid(curve)),
        &der::tlv(0xa1, &der::bit_string(0, public)),
    ])
}

fn generate_dsa() -> Result<Key, String> {
    let components = dsa::Components::try_generate_from_rng_with_key_size(
        &mut getrandom::SysRng,
        dsa::KeySize::DSA_2048_256,
    )
    .map_err(|e| e.to_string())?;
    let key =
        dsa::SigningKey::try_generate_from_rng_with_components(&mut getrandom::SysRng, components)
            .map_err(|e| e.to_string())?;
    let public = key.verifying_key();
    let c = public.components();
    Ok(Key::Dsa(der::seq(&[
        &der::small_int(0),
        &der::uint(&c.p().to_be_bytes()),
        &der::uint(&c.q().to_be_bytes()),
        &der::uint(&c.g().to_be_bytes()),
        &der::uint(&public.y().to_be_bytes()),
        &der::uint(&key.x().to_be_bytes()),
    ])))
}

/// `genPrivateKey`: the PEM of a new key, or sprig's message.
pub(crate) fn generate_pem(kind: &str) -> String {
    let key = match kind {
        "" | "rsa" => generate_rsa(4096),
        "dsa" => generate_dsa(),
        "ecdsa" => generate_ec(),
        "ed25519" => {
            let mut seed = [0u8; 32];
            seed.copy_from_slice(&random_bytes(32));
            Ok(Key::Ed25519(seed))
        }
        _ => return format!("Unknown type {kind}"),
    };
    match key {
        Ok(k) => k.pem(),
        Err(e) => format!("failed to generate private key: {e}"),
    }
}

fn ed25519_pkcs8(seed: &[u8; 32]) -> Vec<u8> {
    der::seq(&[
        &der::small_int(0),
        &der::seq(&[&der::oid(ED25519)]),
        &der::octets(&der::octets(seed)),
    ])
}

impl Key {
    /// The PEM block sprig writes for this key.
    pub(crate) fn pem(&self) -> String {
        match self {
            Key::Rsa(d) => pem_encode("RSA PRIVATE KEY", d),
            Key::Ec { sec1, .. } => pem_encode("EC PRIVATE KEY", sec1),
            Key::Dsa(d) => pem_encode("DSA PRIVATE KEY", d),
            Key::Ed25519(seed) => pem_encode("PRIVATE KEY", &ed25519_pkcs8(seed)),
        }
    }

    /// sprig's `parsePrivateKeyPEM`, with its error texts.
    pub(crate) fn parse_pem(text: &str) -> Result<Key, String> {
        let (kind, bytes) = pem_decode(text).ok_or("no PEM data in input")?;
        if kind == "PRIVATE KEY" {
            return parse_pkcs8(&bytes).map_err(|e| format!("decoding PEM as PKCS#8: {e}"));
        }
        let Some(algo) = kind.strip_suffix(" PRIVATE KEY") else {
            return Err(format!("no private key data in PEM block of type {kind}"));
        };
        match algo {
            "RSA" => {
                sig::RsaKeyPair::from_der(&bytes)
                    .map_err(|e| format!("parsing RSA private key from PEM: {e}"))?;
                Ok(Key::Rsa(bytes))
            }
            "EC" => parse_sec1(&bytes, None)
                .map_err(|e| format!("parsing EC private key from PEM: {e}")),
            "DSA" => {
                let ok = der::read(&bytes)
                    .and_then(|(t, _)| der::children(t.content))
                    .is_some_and(|f| f.len() == 6 && f.iter().all(|x| x.tag == 0x02));
                if !ok {
                    return Err("parsing DSA private key from PEM: asn1: structure error".into());
                }
                Ok(Key::Dsa(bytes))
            }
            _ => Err(format!("invalid private key type {kind}")),
        }
    }

    /// The `SubjectPublicKeyInfo` DER and the key bytes inside it.
    pub(crate) fn spki(&self) -> Result<(Vec<u8>, Vec<u8>), String> {
        let (alg, public) = match self {
            Key::Rsa(d) => {
                let pair = sig::RsaKeyPair::from_der(d).map_err(|e| e.to_string())?;
                (
                    der::seq(&[&der::oid(RSA_ENCRYPTION), &der::NULL]),
                    pair.public().as_ref().to_vec(),
                )
            }
            Key::Ec { .. } => {
                let (pair, curve) = self.ec_pair()?;
                (
                    der::seq(&[&der::oid(EC_PUBLIC_KEY), &der::oid(curve)]),
                    pair.public_key().as_ref().to_vec(),
                )
            }
            Key::Ed25519(seed) => {
                let pair =
                    sig::Ed25519KeyPair::from_seed_unchecked(seed).map_err(|e| e.to_string())?;
                (
                    der::seq(&[&der::oid(ED25519)]),
                    pair.public_key().as_ref().to_vec(),
                )
            }
            Key::Dsa(_) => {
                return Err("x509: unsupported public key type: *dsa.PublicKey".into());
            }
        };
        Ok((der::seq(&[&alg, &der::bit_string(0, &public)]), public))
    }

    fn ec_pair(&self) -> Result<(sig::EcdsaKeyPair, &'static [u64]), String> {
        let Key::Ec { sec1, p384 } = self else {
            return Err("not an EC key".into());
        };
        let (alg, curve) = if *p384 {
            (&sig::ECDSA_P384_SHA384_ASN1_SIGNING, P384)
        } else {
            (&sig::ECDSA_P256_SHA256_ASN1_SIGNING, P256)
        };
        let pkcs8 = der::seq(&[
            &der::small_int(0),
            &der::seq(&[&der::oid(EC_PUBLIC_KEY), &der::oid(curve)]),
            &der::octets(sec1),
        ]);
        let pair = sig::EcdsaKeyPair::from_pkcs8(alg, &pkcs8, &SystemRandom::new())
            .map_err(|e| e.to_string())?;
        Ok((pair, curve))
    }

    /// The signature algorithm Go picks for this key, and the signature over `tbs`.
    pub(crate) fn sign(&self, tbs: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
        let rng = SystemRandom::new();
        match self {
            Key::Rsa(d) => {
                let pair = sig::RsaKeyPair::from_der(d).map_err(|e| e.to_string())?;
                let mut out = vec![0u8; pair.public().modulus_len()];
                pair.sign(&sig::RSA_PKCS1_SHA256, &rng, tbs, &mut out)
                    .map_err(|e| e.to_string())?;
                let alg = der::seq(&[&der::oid(&[1, 2, 840, 113_549, 1, 1, 11]), &der::NULL]);
                Ok((alg, out))
            }
            Key::Ec { p384, .. } => {
                let (pair, _) = self.ec_pair()?;
                let s = pair.sign(&rng, tbs).map_err(|e| e.to_string())?;
                let arc = if *p384 { 3 } else { 2 };
                let alg = der::seq(&[&der::oid(&[1, 2, 840, 10045, 4, 3, arc])]);
                Ok((alg, s.as_ref().to_vec()))
            }
            Key::Ed25519(seed) => {
                let pair =
                    sig::Ed25519KeyPair::from_seed_unchecked(seed).map_err(|e| e.to_string())?;
                let alg = der::seq(&[&der::oid(ED25519)]);
                Ok((alg, pair.sign(tbs).as_ref().to_vec()))
            }
            Key::Dsa(_) => {
                Err("x509: certificate private key does not implement crypto.Signer".into())
            }
        }
    }
}

fn oid_is(t: &der::Tlv<'_>, arcs: &[u64]) -> bool {
    t.raw == der::oid(arcs).as_slice()
}

fn parse_sec1(bytes: &[u8], curve_hint: Option<bool>) -> Result<Key, String> {
    let bad = || "x509: failed to parse EC private key".to_owned();
    let (t, _) = der::read(bytes).ok_or_else(bad)?;
    let fields = der::children(t.content).ok_or_else(bad)?;
    let mut p384 = curve_hint;
    for f in &fields {
        if f.tag == 0xa0 {
            let (curve, _) = der::read(f.content).ok_or_else(bad)?;
            if oid_is(&curve, P256) {
                p384 = Some(false);
            } else if oid_is(&curve, P384) {
                p384 = Some(true);
            } else {
                return Err("x509: unknown elliptic curve".into());
            }
        }
    }
    let p384 = p384.ok_or_else(bad)?;
    let key = Key::Ec {
        sec1: bytes.to_vec(),
        p384,
    };
    key.ec_pair().map_err(|_| bad())?;
    Ok(key)
}

fn parse_pkcs8(bytes: &[u8]) -> Result<Key, String> {
    let bad = || "x509: failed to parse private key".to_owned();
    let (t, _) = der::read(bytes).ok_or_else(bad)?;
    let fields = der::children(t.content).ok_or_else(bad)?;
    let (alg, key) = (
        fields.get(1).ok_or_else(bad)?,
        fields.get(2).ok_or_else(bad)?,
    );
    let alg_fields = der::children(alg.content).ok_or_else(bad)?;
    let alg_oid = alg_fields.first().ok_or_else(bad)?;
    if oid_is(alg_oid, RSA_ENCRYPTION) {
        sig::RsaKeyPair::from_der(key.content).map_err(|e| e.to_string())?;
        return Ok(Key::Rsa(key.content.to_vec()));
    }
    if oid_is(alg_oid, EC_PUBLIC_KEY) {
        let curve = alg_fields.get(1).ok_or_else(bad)?;
        let hint = if oid_is(curve, P384) {
            Some(true)
        } else if oid_is(curve, P256) {
            Some(false)
        } else {
            return Err("x509: unknown elliptic curve".into());
        };
        return parse_sec1(key.content, hint);
    }
    if oid_is(alg_oid, ED25519) {
        let (inner, _) = der::read(key.content).ok_or_else(bad)?;
        let seed: [u8; 32] = inner
            .content
            .try_into()
            .map_err(|_| "x509: invalid Ed25519 private key length".to_owned())?;
        return Ok(Key::Ed25519(seed));
    }
    Err("x509: PKCS#8 wrapping contained private key with unknown algorithm".into())
}
