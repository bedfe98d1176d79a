//! Sprig's crypto: `bcrypt`, `htpasswd`, `derivePassword` (Master Password), `genPrivateKey`,
//! the certificate functions (`genCA`, `genSelfSignedCert`, `genSignedCert`, their `WithKey`
//! forms, `buildCustomCert`) and `encryptAES`/`decryptAES`.
//!
//! Certificates are written field by field as Go's `x509.CreateCertificate` writes them for
//! sprig's template (serial below 2^128, CN-only subject, key usages, server and client auth,
//! basic constraints, a SHA-1 subject key id on CAs, the CA's key id on signed certificates,
//! DNS names then IPs), signed with `ring`. RSA keys come from the `rsa` crate (sprig's 4096
//! and 2048 bits), ECDSA P-256 and Ed25519 from `ring`, DSA from the `dsa` crate.

mod aes_cbc;
mod cert;
mod keys;
mod master_password;

use std::rc::Rc;

use go_template::{CallError, Func, FuncMap, Object, Signature, Ty, Value};

use crate::fargs::{call_err, int_arg, str_arg};

/// sprig's `certificate` struct type.
const CERTIFICATE: &str = "sprig.certificate";

pub(crate) fn register(m: &mut FuncMap) {
    let f = |sig: Signature, body: fn(&[Value]) -> Result<Value, CallError>| Func::new(sig, body);
    m.insert(
        "bcrypt".into(),
        f(Signature::fixed(&[Ty::String]), |a| {
            Ok(Value::string(bcrypt_hash(str_arg(a, 0))))
        }),
    );
    m.insert(
        "htpasswd".into(),
        f(Signature::fixed(&[Ty::String, Ty::String]), |a| {
            let user = str_arg(a, 0);
            Ok(Value::string(if user.contains(':') {
                format!("invalid username: {user}")
            } else {
                format!("{user}:{}", bcrypt_hash(str_arg(a, 1)))
            }))
        }),
    );
    m.insert(
        "derivePassword".into(),
        f(
            Signature::fixed(&[Ty::Int, Ty::String, Ty::String, Ty::String, Ty::String]),
            |a| {
                Ok(Value::string(master_password::derive(
                    int_arg(a, 0) as u32,
                    str_arg(a, 1),
                    str_arg(a, 2),
                    str_arg(a, 3),
                    str_arg(a, 4),
                )))
            },
        ),
    );
    m.insert(
        "genPrivateKey".into(),
        f(Signature::fixed(&[Ty::String]), |a| {
            Ok(Value::string(keys::generate_pem(str_arg(a, 0))))
        }),
    );
    m.insert(
        "encryptAES".into(),
        f(Signature::fixed(&[Ty::String, Ty::String]), |a| {
            Ok(Value::string(aes_cbc::encrypt(
                str_arg(a, 0),
                str_arg(a, 1),
            )))
        }),
    );
    m.insert(
        "decryptAES".into(),
        f(Signature::fixed(&[Ty::String, Ty::String]), |a| {
            aes_cbc::decrypt(str_arg(a, 0), str_arg(a, 1))
                .map(Value::string)
                .map_err(call_err)
        }),
    );
    cert::register(m);
}

fn bcrypt_hash(password: &str) -> String {
    if password.len() > 72 {
        return "failed to encrypt string with bcrypt: bcrypt: password length exceeds 72 bytes"
            .into();
    }
    match bcrypt::hash_with_result(password, 10) {
        Ok(h) => h.format_for_version(bcrypt::Version::TwoA),
        Err(e) => format!("failed to encrypt string with bcrypt: {e}"),
    }
}

/// sprig's `certificate{Cert, Key}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Certificate {
    pub(crate) cert: String,
    pub(crate) key: String,
}

impl Certificate {
    fn value(self) -> Value {
        Value::Object(Rc::new(self))
    }

    /// The certificate inside a `sprig.certificate` argument.
    fn from_value(v: &Value) -> Certificate {
        match v {
            Value::Object(o) => o
                .as_any()
                .and_then(|a| a.downcast_ref::<Certificate>())
                .cloned(),
            _ => None,
        }
        .unwrap_or(Certificate {
            cert: String::new(),
            key: String::new(),
        })
    }
}

impl Object for Certificate {
    fn type_name(&self) -> String {
        CERTIFICATE.into()
    }

    fn kind_name(&self) -> &'static str {
        "struct"
    }

    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Cert" => Some(Value::string(self.cert.as_str())),
            "Key" => Some(Value::string(self.key.as_str())),
            _ => None,
        }
    }

    fn format(&self) -> String {
        format!("{{{} {}}}", self.cert, self.key)
    }

    fn to_json(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({"Cert": self.cert, "Key": self.key}))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn equals(&self, other: &dyn Object) -> Option<bool> {
        let o = other.as_any()?.downcast_ref::<Certificate>()?;
        Some(self == o)
    }
}
