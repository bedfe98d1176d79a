//! Oversized request headers: 431 on HTTP/1.1 and HTTP/2, TLS and plain, every time.

use storage::Tls;
use testkit::Certs;
use testkit::curl::{Protocol, get_with_header};

use crate::common::{self, Options};

#[tokio::test]
async fn oversized_headers_get_431_on_both_protocols_every_time() {
    let ca = Certs::new("headers-ca");
    let server = ca.server(&[]);
    let replica = common::start(Options {
        write_tls: Some(Tls {
            cert_pem: server.cert_pem.clone(),
            key_pem: server.key_pem.clone(),
            client_ca_pem: None,
            ingress_client_ca: None,
        }),
        ..Options::default()
    })
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let ca_file = scratch.path().join("ca.crt");
    ca.write_ca(&ca_file).unwrap();
    let tls = format!("https://127.0.0.1:{}/v2/", replica.write.port());
    let plain = format!("{}/v2/", replica.read_url());

    // curl (nghttp2) refuses to send an HTTP/2 header block of 64 KiB or more itself
    // ("REFUSED_STREAM, retrying" without a byte sent), so HTTP/2 is tried below that.
    let http1 = [20 << 10, 64 << 10];
    let http2 = [20 << 10, 48 << 10];
    let cases = [
        (tls.clone(), Some(ca_file.clone()), Protocol::Http1, http1),
        (tls, Some(ca_file), Protocol::Http2, http2),
        (plain.clone(), None, Protocol::Http1, http1),
        (plain, None, Protocol::Http2PriorKnowledge, http2),
    ];
    let outcomes = tokio::task::spawn_blocking(move || {
        cases
            .into_iter()
            .map(|(url, ca, protocol, sizes)| {
                let get =
                    |header| get_with_header(&url, ca.as_deref(), protocol, header, scratch.path());
                let small = get(("x-small", 1024));
                let big: Vec<_> = (0..40)
                    .map(|i| (sizes[i % 2], get(("x-big", sizes[i % 2]))))
                    .collect();
                (url, protocol, small, big)
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    for (url, protocol, small, big) in outcomes {
        assert_eq!(
            small,
            Ok(401),
            "{url} {protocol:?}: a 1 KiB header reaches the registry"
        );
        let not_431: Vec<_> = big.iter().filter(|(_, o)| *o != Ok(431)).collect();
        assert!(
            not_431.is_empty(),
            "{url} {protocol:?}: every oversized header gets 431: {not_431:?}"
        );
    }
}

/// HTTP/2 clients that do send 64 KiB and more of headers (the h2 library's, here through
/// reqwest) get the same 431.
#[tokio::test]
async fn a_64_kib_header_over_http2_gets_431() {
    let replica = common::start(Options::default()).await;
    let client = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    for size in [20 << 10, 64 << 10, 200 << 10] {
        let response = client
            .get(format!("{}/v2/", replica.read_url()))
            .header("x-big", "a".repeat(size))
            .send()
            .await
            .unwrap();
        assert_eq!(response.version(), reqwest::Version::HTTP_2);
        assert_eq!(response.status(), 431, "{size} bytes");
    }
}
