//! The cipher suite a TLS listener settles on: its own preference, AES-128-GCM first.

use std::sync::Arc;

use rustls::CipherSuite;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use storage::Tls;
use testkit::Certs;

use crate::common::{self, Options};

/// Handshakes with the replica's TLS listener as a client offering `suites` in that order;
/// returns the suite the connection settled on.
async fn negotiated(
    replica: &common::Replica,
    ca: &Certs,
    suites: Vec<rustls::SupportedCipherSuite>,
) -> CipherSuite {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.ca_pem().as_bytes()) {
        roots.add(cert.expect("CA")).expect("root");
    }
    let provider = rustls::crypto::CryptoProvider {
        cipher_suites: suites,
        ..rustls::crypto::ring::default_provider()
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(replica.write)
        .await
        .expect("connect");
    let name = ServerName::try_from("127.0.0.1").expect("name");
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("handshake");
    stream
        .get_ref()
        .1
        .negotiated_cipher_suite()
        .expect("suite")
        .suite()
}

#[tokio::test]
async fn a_client_listing_aes_256_first_gets_aes_128_gcm_and_others_still_connect() {
    let ca = Certs::new("tls-ca");
    let server = ca.server(&[]);
    let replica = common::start(Options {
        write_tls: Some(Tls {
            cert_pem: server.cert_pem,
            key_pem: server.key_pem,
            client_ca_pem: None,
            ingress_client_ca: None,
        }),
        ..Options::default()
    })
    .await;
    // rustls' own order, as reqwest and skopeo-like OpenSSL clients (curl) send it.
    let client_order = rustls::crypto::ring::default_provider().cipher_suites;
    assert_eq!(
        client_order[0].suite(),
        CipherSuite::TLS13_AES_256_GCM_SHA384,
        "the premise: the client lists AES-256-GCM first"
    );
    assert_eq!(
        negotiated(&replica, &ca, client_order).await,
        CipherSuite::TLS13_AES_128_GCM_SHA256
    );
    let chacha_only = rustls::crypto::ring::default_provider()
        .cipher_suites
        .into_iter()
        .filter(|s| s.suite() == CipherSuite::TLS13_CHACHA20_POLY1305_SHA256)
        .collect();
    assert_eq!(
        negotiated(&replica, &ca, chacha_only).await,
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
    );
}
