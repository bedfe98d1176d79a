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

/// A replica whose write listener follows `ingress_ca_file` (`--ingress-client-ca`; it may not
/// exist yet), started and answering: (the replica, its write port, the CA of its serving
/// certificate). `dir` holds its files.
async fn replica(
    dir: &std::path::Path,
    ingress_ca_file: &std::path::Path,
) -> (Service, u16, String) {
    let pki = Certs::new("registry-storage-ca");
    let serving = pki.server(&[]);
    std::fs::write(dir.join("pull"), "node:node-pw\n").unwrap();
    for (name, text) in [
        ("distribution.crt", &serving.cert_pem),
        ("distribution.key", &serving.key_pem),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
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
        .arg(dir.join("data"))
        .arg(format!("--read-address=127.0.0.1:{read}"))
        .arg(format!("--write-address=127.0.0.1:{write}"))
        .arg(format!("--metrics-address=127.0.0.1:{}", free_port()))
        .arg("--pull-credentials-file")
        .arg(dir.join("pull"))
        .arg("--tls-cert")
        .arg(dir.join("distribution.crt"))
        .arg("--tls-key")
        .arg(dir.join("distribution.key"))
        .arg("--ingress-client-ca")
        .arg(ingress_ca_file);
    let mut replica =
        Service::spawn("d8 registry storage", command, dir.join("storage.log")).unwrap();
    let http = testkit::http_client(Some(&pki.ca_pem()));
    let ping = format!("https://127.0.0.1:{read}/v2/");
    testkit::process::wait_until(&mut replica, Duration::from_secs(30), || {
        let (http, ping) = (http.clone(), ping.clone());
        async move { http.get(&ping).send().await.is_ok() }
    })
    .await;
    (replica, write, pki.ca_pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forwarded_address_is_believed_only_behind_the_ingress_client_certificate() {
    let ingress_ca = Certs::new("registry-storage-ingress-client-ca");
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ingress-client-ca.crt");
    std::fs::write(&ca_file, ingress_ca.ca_pem()).unwrap();
    let (mut replica, write, ca) = replica(dir.path(), &ca_file).await;

    let ingress = ingress_ca.client("registry-storage-ingress-client");
    let stranger = Certs::new("someone-else").client("registry-storage-ingress-client");
    let not_a_client = ingress_ca.server(&[]);
    let forwarded = [("x-forwarded-for", "203.0.113.7, 10.0.0.1")];
    let real_ip = [("x-real-ip", "203.0.113.8")];
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

/// The registry controller writes `ingress-client-ca.crt` into the replicas' Secret after they
/// started, and renews it: the replica follows the file without a restart (before, it read the
/// file once at start and refused to start without it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ingress_client_ca_is_followed_as_its_file_appears_and_changes() {
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ingress-client-ca.crt");
    let (mut replica, write, ca) = replica(dir.path(), &ca_file).await;
    let first = Certs::new("registry-storage-ingress-client-ca");
    let second = Certs::new("registry-storage-ingress-client-ca");
    let from_first = first.client("registry-storage-ingress-client");
    let from_second = second.client("registry-storage-ingress-client");
    let forwarded = [("x-forwarded-for", "203.0.113.7")];
    let mut step = 0;
    let mut client_of = async |identity: &testkit::CertKey| {
        step += 1;
        let path = format!("/v2/follow/{step}/tags/list");
        assert_eq!(
            request(write, &ca, Some(identity), &path, &forwarded).await,
            404
        );
        logged_client(&replica, &path).await
    };
    // No CA yet: served, and the claim is not believed.
    assert_eq!(client_of(&from_first).await, "127.0.0.1");
    // The CA appears.
    std::fs::write(&ca_file, first.ca_pem()).unwrap();
    assert_eq!(client_of(&from_first).await, "203.0.113.7");
    // Renewed (a CA of another length, so the change shows whatever the clock's resolution).
    std::fs::write(&ca_file, format!("{}\n", second.ca_pem())).unwrap();
    assert_eq!(client_of(&from_second).await, "203.0.113.7");
    assert_eq!(client_of(&from_first).await, "127.0.0.1");
    replica.assert_running();
}
