//! Keys and certificates checked with real `openssl`, compared in shape with what Helm's
//! own functions produce; AES interoperability with Helm both ways; the random functions'
//! shapes.

#[path = "sprig2/mini.rs"]
mod mini;

use std::path::Path;
use std::process::Command;

fn funcs() -> go_template::FuncMap {
    sprig::funcs()
}

fn eval(snippet: &str) -> String {
    mini::eval(&funcs(), snippet).unwrap_or_else(|e| panic!("{snippet}: {e}"))
}

fn openssl(args: &[&str], dir: &Path) -> String {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The shape of a certificate as `openssl x509 -text` shows it: version, signature
/// algorithm, key type and size, extensions with their criticality and values (serials,
/// dates and key ids left out).
fn cert_shape(text: &str) -> Vec<String> {
    let mut shape = Vec::new();
    let mut lines = text.lines().map(str::trim).peekable();
    while let Some(l) = lines.next() {
        if l.starts_with("Version:")
            || l.starts_with("Signature Algorithm:")
            || l.starts_with("Public Key Algorithm:")
            || l.starts_with("Public-Key:")
            || l.starts_with("Subject:")
            || l.starts_with("Issuer:")
        {
            shape.push(l.to_owned());
        }
        if l.starts_with("X509v3") {
            shape.push(l.to_owned());
            if !l.contains("Key Identifier")
                && let Some(v) = lines.peek()
            {
                shape.push(format!("  {v}"));
            }
        }
    }
    shape
}

fn write(dir: &Path, name: &str, content: &str) {
    std::fs::write(dir.join(name), content).expect("write");
}

const CHAIN: &str = r#"{{- $ca := genCA "my-ca" 365 -}}
{{- $leaf := genSignedCert "leaf.example" (list "10.0.0.1" "::1") (list "a.example" "b.example") 30 $ca -}}
{{- $self := genSelfSignedCert "" (list "127.0.0.1") nil 1 -}}
ca.pem: {{ $ca.Cert | b64enc }}
ca.key: {{ $ca.Key | b64enc }}
leaf.pem: {{ $leaf.Cert | b64enc }}
leaf.key: {{ $leaf.Key | b64enc }}
self.pem: {{ $self.Cert | b64enc }}
"#;

fn decode_lines(out: &str) -> Vec<(String, String)> {
    out.lines()
        .filter_map(|l| l.split_once(": "))
        .filter(|(k, _)| k.ends_with(".pem") || k.ends_with(".key"))
        .map(|(k, v)| {
            let bytes = base64_decode(v.trim());
            (k.to_owned(), String::from_utf8(bytes).expect("PEM text"))
        })
        .collect()
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("base64")
}

fn our_chain() -> Vec<(String, String)> {
    let funcs = funcs();
    let ca = funcs["genCA"].clone();
    let signed = funcs["genSignedCert"].clone();
    let selfsigned = funcs["genSelfSignedCert"].clone();
    let mut env = NoEnv;
    let v = |s: &str| go_template::Value::string(s);
    let ca = (ca.body)(&mut env, &[v("my-ca"), go_template::Value::Int(365)]).expect("genCA");
    let leaf = (signed.body)(
        &mut env,
        &[
            v("leaf.example"),
            go_template::Value::list(vec![v("10.0.0.1"), v("::1")]),
            go_template::Value::list(vec![v("a.example"), v("b.example")]),
            go_template::Value::Int(30),
            ca.clone(),
        ],
    )
    .expect("genSignedCert");
    let selfs = (selfsigned.body)(
        &mut env,
        &[
            v(""),
            go_template::Value::list(vec![v("127.0.0.1")]),
            go_template::Value::Nil,
            go_template::Value::Int(1),
        ],
    )
    .expect("genSelfSignedCert");
    let field = |c: &go_template::Value, f: &str| match c {
        go_template::Value::Object(o) => mini::show(&o.field(f).expect("field")),
        _ => panic!("not a certificate"),
    };
    vec![
        ("ca.pem".into(), field(&ca, "Cert")),
        ("ca.key".into(), field(&ca, "Key")),
        ("leaf.pem".into(), field(&leaf, "Cert")),
        ("leaf.key".into(), field(&leaf, "Key")),
        ("self.pem".into(), field(&selfs, "Cert")),
    ]
}

struct NoEnv;

impl go_template::Env for NoEnv {
    fn execute_template(
        &mut self,
        _: &str,
        _: &go_template::Value,
    ) -> Result<String, go_template::CallError> {
        unreachable!()
    }
    fn execute_text(
        &mut self,
        _: &str,
        _: &str,
        _: &go_template::Value,
    ) -> Result<String, go_template::CallError> {
        unreachable!()
    }
}

fn shapes(files: &[(String, String)]) -> Vec<Vec<String>> {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, content) in files {
        write(dir.path(), name, content);
    }
    let verify = openssl(&["verify", "-CAfile", "ca.pem", "leaf.pem"], dir.path());
    assert_eq!(verify.trim(), "leaf.pem: OK");
    openssl(&["rsa", "-check", "-noout", "-in", "leaf.key"], dir.path());
    openssl(&["rsa", "-check", "-noout", "-in", "ca.key"], dir.path());
    ["ca.pem", "leaf.pem", "self.pem"]
        .iter()
        .map(|f| cert_shape(&openssl(&["x509", "-noout", "-text", "-in", f], dir.path())))
        .collect()
}

#[test]
fn certificates_verify_and_match_helms_shape() {
    let ours = our_chain();
    for (name, pem) in &ours {
        let block = if name.ends_with(".key") {
            "RSA PRIVATE KEY"
        } else {
            "CERTIFICATE"
        };
        assert!(
            pem.starts_with(&format!("-----BEGIN {block}-----\n")),
            "{pem}"
        );
        assert!(pem.ends_with(&format!("-----END {block}-----\n")), "{pem}");
    }
    let out =
        helm_oracle::helm_template(&[("templates/c.yaml", CHAIN)], "", &[]).expect("helm renders");
    let helms = decode_lines(&out);
    let (ours, helms) = (shapes(&ours), shapes(&helms));
    assert_eq!(ours, helms);
    // What the shape holds, so that a change on both sides is still seen.
    let leaf = ours[1].join("\n");
    assert!(leaf.contains("Public-Key: (2048 bit)"), "{leaf}");
    assert!(
        leaf.contains(
            "DNS:a.example, DNS:b.example, IP Address:10.0.0.1, IP Address:0:0:0:0:0:0:0:1"
        ),
        "{leaf}"
    );
    assert!(leaf.contains("X509v3 Authority Key Identifier"), "{leaf}");
    assert!(ours[0].join("\n").contains("CA:TRUE"));
    assert!(
        ours[2]
            .join("\n")
            .contains("X509v3 Subject Alternative Name: critical")
    );
}

#[test]
fn private_keys_are_sprigs_pem_blocks_and_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "rsa",
            "RSA PRIVATE KEY",
            vec!["rsa", "-check", "-noout", "-in", "k.pem"],
            "4096 bit",
        ),
        (
            "ecdsa",
            "EC PRIVATE KEY",
            vec!["ec", "-check", "-noout", "-in", "k.pem"],
            "256 bit",
        ),
        (
            "ed25519",
            "PRIVATE KEY",
            vec!["pkey", "-noout", "-in", "k.pem"],
            "ED25519",
        ),
        (
            "dsa",
            "DSA PRIVATE KEY",
            vec!["dsa", "-noout", "-in", "k.pem"],
            "2048 bit",
        ),
    ];
    for (kind, block, check, size) in cases {
        let pem = eval(&format!("{{{{ genPrivateKey {kind:?} }}}}"));
        assert!(
            pem.starts_with(&format!("-----BEGIN {block}-----\n")),
            "{pem}"
        );
        write(dir.path(), "k.pem", &pem);
        openssl(&check, dir.path());
        let text = openssl(&["pkey", "-noout", "-text", "-in", "k.pem"], dir.path());
        assert!(text.contains(size), "{kind}: {text}");
        if kind != "dsa" {
            // Each kind of key also signs certificates.
            let snippet = format!(
                "{{{{ (genSelfSignedCertWithKey \"k\" nil (list \"x.example\") 1 (genPrivateKey {kind:?})).Cert }}}}"
            );
            write(dir.path(), "c.pem", &eval(&snippet));
            openssl(&["verify", "-CAfile", "c.pem", "c.pem"], dir.path());
        }
    }
    let dsa_ca = mini::eval(
        &funcs(),
        r#"{{ genCAWithKey "x" 1 (genPrivateKey "dsa") }}"#,
    );
    assert_eq!(
        dsa_ca,
        Err("error calling genCAWithKey: error creating certificate: x509: certificate private key does not implement crypto.Signer".into())
    );
}

#[test]
fn with_key_certificates_keep_the_given_key() {
    let key = eval(r#"{{ genPrivateKey "ecdsa" }}"#);
    let funcs = funcs();
    let mut env = NoEnv;
    let ca = (funcs["genCAWithKey"].body)(
        &mut env,
        &[
            go_template::Value::string("ca"),
            go_template::Value::Int(1),
            go_template::Value::string(key.as_str()),
        ],
    )
    .expect("genCAWithKey");
    let go_template::Value::Object(o) = &ca else {
        panic!()
    };
    assert_eq!(mini::show(&o.field("Key").expect("Key")), key);
    let leaf = (funcs["genSignedCertWithKey"].body)(
        &mut env,
        &[
            go_template::Value::string("leaf"),
            go_template::Value::Nil,
            go_template::Value::Nil,
            go_template::Value::Int(1),
            ca.clone(),
            go_template::Value::string(eval(r#"{{ genPrivateKey "ed25519" }}"#)),
        ],
    )
    .expect("genSignedCertWithKey");
    let dir = tempfile::tempdir().expect("tempdir");
    let go_template::Value::Object(l) = &leaf else {
        panic!()
    };
    write(
        dir.path(),
        "ca.pem",
        &mini::show(&o.field("Cert").expect("Cert")),
    );
    write(
        dir.path(),
        "leaf.pem",
        &mini::show(&l.field("Cert").expect("Cert")),
    );
    let v = openssl(&["verify", "-CAfile", "ca.pem", "leaf.pem"], dir.path());
    assert_eq!(v.trim(), "leaf.pem: OK");
    // buildCustomCert accepts what the generators wrote.
    let b64 = |s: &str| go_template::Value::string(eval(&format!("{{{{ b64enc {s:?} }}}}")));
    let built = (funcs["buildCustomCert"].body)(
        &mut env,
        &[
            b64(&mini::show(&l.field("Cert").expect("Cert"))),
            b64(&mini::show(&l.field("Key").expect("Key"))),
        ],
    );
    assert!(built.is_ok(), "{built:?}");
}

#[test]
fn aes_interoperates_with_helm_both_ways() {
    let secret = "s3cr3t password that is longer than thirty-two bytes";
    let plain = "hello, world: sixteen+ bytes of text";
    let ours = eval(&format!("{{{{ encryptAES {secret:?} {plain:?} }}}}"));
    assert_ne!(
        ours,
        eval(&format!("{{{{ encryptAES {secret:?} {plain:?} }}}}")),
        "a fresh IV each time"
    );
    let snippet = format!(
        "{{{{ decryptAES {secret:?} {ours:?} }}}}|{{{{ encryptAES {secret:?} {plain:?} }}}}"
    );
    let helm = helm_oracle::eval(&[&snippet], "")
        .remove(0)
        .expect("helm renders");
    let (helm_decrypted, helm_encrypted) = helm.split_once('|').expect("two parts");
    assert_eq!(helm_decrypted, plain);
    assert_eq!(
        eval(&format!(
            "{{{{ decryptAES {secret:?} {helm_encrypted:?} }}}}"
        )),
        plain
    );
}

#[test]
fn random_functions_have_sprigs_shapes() {
    let check = |snippet: &str, len: usize, ok: fn(char) -> bool| {
        let a = eval(snippet);
        let b = eval(snippet);
        assert_eq!(a.chars().count(), len, "{snippet}: {a}");
        assert!(a.chars().all(ok), "{snippet}: {a}");
        assert_ne!(a, b, "{snippet} twice");
    };
    check("{{ randAlphaNum 40 }}", 40, |c| c.is_ascii_alphanumeric());
    check("{{ randAlpha 40 }}", 40, |c| c.is_ascii_alphabetic());
    check("{{ randNumeric 40 }}", 40, |c| c.is_ascii_digit());
    check("{{ randAscii 40 }}", 40, |c| (' '..='~').contains(&c));
    assert_eq!(eval("{{ randAlphaNum 0 }}|{{ randAlpha -3 }}"), "|");
    let bytes = eval("{{ randBytes 33 }}");
    assert_eq!(base64_decode(&bytes).len(), 33);
    assert_eq!(
        mini::eval(&funcs(), "{{ randBytes -1 }}"),
        Err("error calling randBytes: runtime error: makeslice: len out of range".into())
    );
    let uuid = eval("{{ uuidv4 }}");
    let parts: Vec<&str> = uuid.split('-').collect();
    assert_eq!(
        parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
        [8, 4, 4, 4, 12],
        "{uuid}"
    );
    assert!(
        parts[2].starts_with('4') && "89ab".contains(&parts[3][..1]),
        "{uuid}"
    );
    assert_ne!(uuid, eval("{{ uuidv4 }}"));
    for _ in 0..50 {
        let n: i64 = eval("{{ randInt -2 3 }}").parse().expect("int");
        assert!((-2..3).contains(&n));
    }
    assert_eq!(
        mini::eval(&funcs(), "{{ randInt 3 3 }}"),
        Err("error calling randInt: invalid argument to Intn".into())
    );
    let mut shuffled: Vec<char> = eval(r#"{{ shuffle "héllo wörld" }}"#).chars().collect();
    shuffled.sort_unstable();
    let mut want: Vec<char> = "héllo wörld".chars().collect();
    want.sort_unstable();
    assert_eq!(shuffled, want);
    let hash = eval(r#"{{ bcrypt "pw" }}"#);
    assert!(hash.starts_with("$2a$10$") && hash.len() == 60, "{hash}");
    assert!(bcrypt::verify("pw", &hash).unwrap_or(false));
    let ht = eval(r#"{{ htpasswd "admin" "pw" }}"#);
    assert!(ht.starts_with("admin:$2a$10$"), "{ht}");
}

#[test]
fn now_prints_like_go_with_its_monotonic_reading() {
    let now = eval("{{ now }}");
    // 2026-12-01 18:40:15.65837118 +0000 UTC m=+0.033273594
    let (wall, mono) = now.split_once(" m=+").expect("monotonic part");
    assert!(
        mono.split_once('.').is_some_and(|(_, ns)| ns.len() == 9),
        "{now}"
    );
    assert_eq!(wall.split(' ').count(), 4, "{now}");
    assert_eq!(eval("{{ ago (now) }}"), "0s");
}
