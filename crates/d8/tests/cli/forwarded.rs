//! `d8 registry storage --ingress-client-ca`: the write listener believes a forwarded client
//! address (`X-Forwarded-For`, `X-Real-IP`) only from a connection presenting the ingress's
//! client certificate; every other request is served and logged by its socket's address.

use std::process::Command;
use std::time::Duration;

use base64::Engine;
use testkit::Certs;
use testkit::process::{Service, free_port};

/// The status a client presenting `identity` (if any) gets for `path` on the write listener,
/// sending the forwarded-address `headers`.
async fn request(
    write: u16,
    server_ca: &str,
    identity: Option<&testkit::CertKey>,
    path: &str,
    headers: &[(&str, &str)],
) -> u16 {
    testkit::install_crypto();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .tls_certs_only(reqwest::Certificate::from_pem_bundle(server_ca.as_bytes()).unwrap());
    if let Some(identity) = identity {
        let pem = format!("{}{}", identity.cert_pem, identity.key_pem);
        builder = builder.identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap());
    }
    let mut request = builder
        .build()
        .unwrap()
        .get(format!("https://127.0.0.1:{write}{path}"))
        .header(
            "authorization",
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode("mirror:mirror-pw")
            ),
        );
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request
        .send()
        .await
        .expect("the request is served")
        .status()
        .as_u16()
}

/// The client address of the access-log line for `path` (waits for it).
async fn logged_client(replica: &Service, path: &str) -> String {
    let needle = format!("path=\"{path}\"");
    for _ in 0..100 {
        let log = strip_ansi(&replica.log());
        if let Some(line) = log.lines().find(|l| l.contains(&needle)) {
            let client = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("client="))
                .unwrap_or_else(|| panic!("no client in {line}"));
            return client.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no access-log line for {path}:\n{}", replica.log());
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// (case, client certificate, forwarded-address headers, address in the access log)
type Case<'a> = (
    &'a str,
    Option<&'a testkit::CertKey>,
    &'a [(&'a str, &'a str)],
    &'a str,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forwarded_address_is_believed_only_behind_the_ingress_client_certificate() {
    let pki = Certs::new("registry-storage-ca");
    let ingress_ca = Certs::new("registry-storage-ingress-client-ca");
    let serving = pki.server(&[]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pull"), "node:node-pw\n").unwrap();
    for (name, text) in [
        ("distribution.crt", &serving.cert_pem),
        ("distribution.key", &serving.key_pem),
        ("ingress-client-ca.crt", &ingress_ca.ca_pem()),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let (read, write) = (free_port(), free_port());
    let mut command = Command::new(env!("CARGO_BIN_EXE_d8"));
    command
        .env("RUST_LOG", "info")
        .env("D8_REGISTRY_PUSH_CREDENTIALS", "mirror:mirror-pw")
        .args([
            "registry",
            "storage",
            "--node-name",
            "master-0",
            "--reserve=0",
        ])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg(format!("--read-address=127.0.0.1:{read}"))
        .arg(format!("--write-address=127.0.0.1:{write}"))
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--pull-credentials-file")
        .arg(dir.path().join("pull"))
        .arg("--tls-cert")
        .arg(dir.path().join("distribution.crt"))
        .arg("--tls-key")
        .arg(dir.path().join("distribution.key"))
        .arg("--ingress-client-ca")
        .arg(dir.path().join("ingress-client-ca.crt"));
    let mut replica = Service::spawn(
        "d8 registry storage",
        command,
        dir.path().join("storage.log"),
    )
    .unwrap();
    let http = testkit::http_client(Some(&pki.ca_pem()));
    let ping = format!("https://127.0.0.1:{read}/v2/");
    testkit::process::wait_until(&mut replica, Duration::from_secs(30), || {
        let (http, ping) = (http.clone(), ping.clone());
        async move { http.get(&ping).send().await.is_ok() }
    })
    .await;

    let ingress = ingress_ca.client("registry-storage-ingress-client");
    let stranger = Certs::new("someone-else").client("registry-storage-ingress-client");
    let not_a_client = ingress_ca.server(&[]);
    let forwarded = [("x-forwarded-for", "203.0.113.7, 10.0.0.1")];
    let real_ip = [("x-real-ip", "203.0.113.8")];
    let ca = pki.ca_pem();
    let cases: [Case; 6] = [
        ("ingress", Some(&ingress), &forwarded, "203.0.113.7"),
        ("ingress-real-ip", Some(&ingress), &real_ip, "203.0.113.8"),
        ("ingress-no-header", Some(&ingress), &[], "127.0.0.1"),
        ("no-certificate", None, &forwarded, "127.0.0.1"),
        ("another-ca", Some(&stranger), &forwarded, "127.0.0.1"),
        (
            "server-certificate",
            Some(&not_a_client),
            &real_ip,
            "127.0.0.1",
        ),
    ];
    for (case, identity, headers, want) in cases {
        let path = format!("/v2/realip/{case}/tags/list");
        let status = request(write, &ca, identity, &path, headers).await;
        // Served either way (an empty repository): the claim is not believed, nothing refused.
        assert_eq!(status, 404, "{case}");
        assert_eq!(logged_client(&replica, &path).await, want, "{case}");
    }
    replica.assert_running();
}
