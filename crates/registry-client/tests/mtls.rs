//! A client certificate (`Endpoint::client_identity`) against a server of the test's own that
//! requires one: accepted with it, refused without it.

use std::sync::Arc;

use registry_client::{Client, ClientIdentity, Endpoint, Error};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use testkit::Certs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn mtls_server(ca: &Certs) -> std::net::SocketAddr {
    testkit::install_crypto();
    let server = ca.server(&[]);
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.ca_pem().as_bytes()).unwrap())
        .unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .unwrap();
    let chain = vec![CertificateDer::from_pem_slice(server.cert_pem.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(server.key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = vec![0u8; 4096];
                let mut head = Vec::new();
                while !head.ends_with(b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = tls
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                    )
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn client_certificate_is_presented_when_configured() {
    let ca = Certs::new("mtls CA");
    let addr = mtls_server(&ca).await;
    let client = Client::default();
    let endpoint = Endpoint::https(&addr.to_string()).ca_pem(&ca.ca_pem());

    let identity = ca.client("d8-mirror");
    let with = client
        .remote(
            endpoint
                .clone()
                .client_identity(ClientIdentity::new(&identity.cert_pem, &identity.key_pem)),
        )
        .unwrap();
    with.check().await.unwrap();

    let without = client.remote(endpoint).unwrap();
    let err = without
        .raw_request(http::Method::GET, "/v2/", None)
        .send()
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Connect { .. } | Error::Transport { .. }),
        "{err:?}"
    );
    assert!(err.retry_elsewhere());
    assert!(
        !format!("{without:?}{with:?}").contains("PRIVATE KEY"),
        "keys are never shown"
    );
}
