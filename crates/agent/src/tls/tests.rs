use std::future::Future;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::server::TlsStream;

use super::*;

#[test]
fn reads_stop_after_the_next_records_header() {
    assert_eq!(missing(&[]), 5);
    assert_eq!(missing(&[23, 3, 3]), 2);
    // A header announcing 10 bytes, 4 of them in: 6 more, then the next header.
    assert_eq!(missing(&[23, 3, 3, 0, 10, 1, 2, 3, 4]), 6 + 5);
    // A complete record and part of the next header.
    assert_eq!(missing(&[23, 3, 3, 0, 1, 9, 23, 3]), 3);
    // A complete record, then a header announcing 2 bytes.
    assert_eq!(missing(&[23, 3, 3, 0, 1, 9, 23, 3, 3, 0, 2]), 2 + 5);
}

/// A TLS server (`versions`) that runs `serve` on its one connection; the client's
/// configuration trusts it unless `trusted` is false.
async fn pair<F, Fut>(
    versions: &[&'static rustls::SupportedProtocolVersion],
    trusted: bool,
    serve: F,
) -> (
    io::Result<Tls<UnbufferedClientConnection>>,
    tokio::task::JoinHandle<()>,
)
where
    F: FnOnce(TlsStream<TcpStream>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let (config, client) = configs(versions, trusted);
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        if let Ok(tls) = acceptor.accept(tcp).await {
            serve(tls).await;
        }
    });
    let tcp = TcpStream::connect(address).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    (Tls::connect(tcp, client, name).await, task)
}

/// A server configuration (`versions`) with a certificate for `localhost` from a new CA, and a
/// client configuration that trusts that CA unless `trusted` is false.
pub(crate) fn configs(
    versions: &[&'static rustls::SupportedProtocolVersion],
    trusted: bool,
) -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    configs_with(crate::server::crypto_provider(), versions, trusted)
}

/// [`configs`] with `provider`'s suites.
fn configs_with(
    provider: rustls::crypto::CryptoProvider,
    versions: &[&'static rustls::SupportedProtocolVersion],
    trusted: bool,
) -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    let ca = testkit::Certs::new("agent TLS test CA");
    let server = ca.server(&[]);
    let provider = Arc::new(provider);
    let mut config = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            CertificateDer::pem_slice_iter(server.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .unwrap(),
            PrivateKeyDer::from_pem_slice(server.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    config.enable_secret_extraction = true;
    let mut roots = rustls::RootCertStore::empty();
    if trusted {
        roots
            .add(CertificateDer::from_pem_slice(ca.ca_pem().as_bytes()).unwrap())
            .unwrap();
    }
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.enable_secret_extraction = true;
    (Arc::new(config), Arc::new(client))
}

/// `len` bytes of a pattern that shows where a byte was lost or repeated.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

async fn read_all<S: Side>(tls: &mut Tls<S>) -> io::Result<Vec<u8>> {
    let mut all = Vec::new();
    loop {
        let chunk = tls.read().await?;
        if chunk.is_empty() {
            return Ok(all);
        }
        all.extend_from_slice(&chunk);
    }
}

async fn write_and_close(mut tls: impl AsyncWrite + Unpin, bytes: &[u8]) {
    tls.write_all(bytes).await.unwrap();
    tls.shutdown().await.unwrap();
}

#[test]
fn a_buffer_holds_a_record_once_its_header_and_payload_are_in() {
    assert!(!holds_record(&[]));
    assert!(!holds_record(&[23, 3, 3, 0]));
    assert!(!holds_record(&[23, 3, 3, 0, 2, 9]));
    assert!(holds_record(&[23, 3, 3, 0, 2, 9, 9]));
    assert!(holds_record(&[23, 3, 3, 0, 0, 23]));
}

#[tokio::test]
async fn a_stream_is_received_a_few_records_a_read_with_no_copy_and_no_buffer_kept() {
    // rustls' records: 16 KiB of plaintext, its content type and a 16-byte tag.
    const RECORD: usize = HEADER + MAX_PLAINTEXT + 1 + 16;
    let data = pattern(1 << 20);
    let sent = data.clone();
    let (written_tx, written_rx) = tokio::sync::oneshot::channel();
    let (tls, server) = pair(
        &[&rustls::version::TLS13],
        true,
        move |mut tls| async move {
            tls.write_all(&sent[..256 * 1024]).await.unwrap();
            tls.flush().await.unwrap();
            let _ = written_tx.send(());
            write_and_close(tls, &sent[256 * 1024..]).await;
        },
    )
    .await;
    let mut tls = tls.unwrap();
    written_rx.await.unwrap();
    let mut received = Vec::new();
    let mut last = Bytes::new();
    let (mut ahead, mut in_place) = (0, 0);
    loop {
        let chunk = tls.read().await.unwrap();
        if chunk.is_empty() {
            break;
        }
        // A read takes the record it completes and at most three more.
        assert!(tls.incoming.len() <= READ_AHEAD * RECORD + HEADER);
        if holds_record(&tls.incoming) {
            ahead += 1;
        } else {
            // With every record of a read handed on, what is left of the next one is in a
            // buffer of its own size: the read's buffer goes with the plaintexts.
            assert_eq!(tls.incoming.capacity(), tls.incoming.len());
        }
        // A record opened where it was read: its plaintext follows the one before in the same
        // buffer, past that one's content type and tag and its own header.
        if chunk.as_ptr() as usize == last.as_ptr() as usize + RECORD {
            in_place += 1;
        }
        received.extend_from_slice(&chunk);
        last = chunk;
    }
    // The server sent far more than a record, so reads found several records waiting.
    assert!(
        ahead > 0 && in_place > 0,
        "{ahead} reads ahead, {in_place} in place"
    );
    assert!(received == data, "the stream came out different");
    server.await.unwrap();
}

#[tokio::test]
async fn tls_1_2_servers_work_alike() {
    let data = pattern(100_000);
    let sent = data.clone();
    let (tls, server) = pair(&[&rustls::version::TLS12], true, move |tls| async move {
        write_and_close(tls, &sent).await;
    })
    .await;
    let mut tls = tls.unwrap();
    assert!(read_all(&mut tls).await.unwrap() == data);
    server.await.unwrap();
}

#[tokio::test]
async fn a_key_update_mid_stream_is_answered_and_the_stream_goes_on() {
    let data = pattern(200_000);
    let sent = data.clone();
    let (tls, server) = pair(
        &[&rustls::version::TLS13],
        true,
        move |mut tls| async move {
            tls.write_all(&sent[..100_000]).await.unwrap();
            tls.get_mut().1.refresh_traffic_keys().unwrap();
            tls.write_all(&sent[100_000..]).await.unwrap();
            tls.flush().await.unwrap();
            // The client's answer to the key update, then its data under its new keys.
            let mut request = [0u8; 4];
            tls.read_exact(&mut request).await.unwrap();
            assert_eq!(&request, b"next");
            write_and_close(tls, b"done").await;
        },
    )
    .await;
    let mut tls = tls.unwrap();
    let mut received = Vec::new();
    while received.len() < data.len() {
        received.extend_from_slice(&tls.read().await.unwrap());
    }
    assert!(received == data);
    tls.send(b"next").await.unwrap();
    assert_eq!(read_all(&mut tls).await.unwrap(), b"done");
    server.await.unwrap();
}

#[tokio::test]
async fn a_close_without_close_notify_is_an_unexpected_eof() {
    let (tls, server) = pair(&[&rustls::version::TLS13], true, |mut tls| async move {
        tls.write_all(b"partial").await.unwrap();
        tls.flush().await.unwrap();
        let (tcp, _) = tls.into_inner();
        drop(tcp);
    })
    .await;
    let mut tls = tls.unwrap();
    assert_eq!(&tls.read().await.unwrap()[..], b"partial");
    let error = tls.read().await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "{error}");
    server.await.unwrap();
}

#[tokio::test]
async fn an_untrusted_server_fails_the_handshake_with_rustls_words() {
    let (tls, _server) = pair(&[&rustls::version::TLS13], false, |_| async {}).await;
    let error = tls.err().expect("the handshake must fail");
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    assert!(
        error.to_string().contains("invalid peer certificate"),
        "{error}"
    );
}

#[tokio::test]
async fn requests_reach_the_server_and_answers_come_back_on_one_connection() {
    let (tls, server) = pair(&[&rustls::version::TLS13], true, |mut tls| async move {
        for answer in [&b"first"[..], b"second"] {
            let mut request = [0u8; 3];
            tls.read_exact(&mut request).await.unwrap();
            assert_eq!(&request, b"GET");
            tls.write_all(answer).await.unwrap();
            tls.flush().await.unwrap();
        }
        tls.shutdown().await.unwrap();
    })
    .await;
    let mut tls = tls.unwrap();
    for answer in [&b"first"[..], b"second"] {
        tls.send(b"GET").await.unwrap();
        assert_eq!(&tls.read().await.unwrap()[..], answer);
    }
    server.await.unwrap();
}

/// What one end reads until the peer ends the session, each read sent back at once.
async fn echo_tokio(mut tls: impl AsyncRead + AsyncWrite + Unpin) {
    let mut buffer = vec![0; 40_000];
    loop {
        let n = tls.read(&mut buffer).await.unwrap();
        if n == 0 {
            break;
        }
        tls.write_all(&buffer[..n]).await.unwrap();
    }
    tls.shutdown().await.unwrap();
}

/// Sends `pieces`, each as it is, and the end of the session; returns what came back.
async fn exchange_tokio(
    mut tls: impl AsyncRead + AsyncWrite + Unpin,
    pieces: &[Vec<u8>],
) -> Vec<u8> {
    for piece in pieces {
        tls.write_all(piece).await.unwrap();
    }
    tls.flush().await.unwrap();
    let expected: usize = pieces.iter().map(Vec::len).sum();
    let mut back = vec![0; expected];
    tls.read_exact(&mut back).await.unwrap();
    tls.shutdown().await.unwrap();
    back
}

#[tokio::test]
async fn every_suite_carries_data_both_ways_as_client_and_as_server() {
    use rustls::crypto::ring::cipher_suite::*;
    let pieces = vec![
        b"x".to_vec(),
        pattern(20_000),
        pattern(70_000),
        b"end".to_vec(),
    ];
    let sent = pieces.concat();
    for suite in [
        TLS13_AES_128_GCM_SHA256,
        TLS13_AES_256_GCM_SHA384,
        TLS13_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ] {
        let name = suite.suite();
        let provider = rustls::crypto::CryptoProvider {
            cipher_suites: vec![suite],
            ..crate::server::crypto_provider()
        };
        let (server, client) = configs_with(provider, &[suite.version()], true);

        // The agent as the client of a rustls server.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(server.clone());
        let peer = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            echo_tokio(acceptor.accept(tcp).await.unwrap()).await;
        });
        let tcp = TcpStream::connect(address).await.unwrap();
        let name_ = ServerName::try_from("localhost").unwrap();
        let mut tls = Tls::connect(tcp, client.clone(), name_).await.unwrap();
        assert_eq!(tls.kernel.negotiated_cipher_suite().suite(), name);
        for piece in &pieces {
            tls.send(piece).await.unwrap();
        }
        let mut back = Vec::new();
        while back.len() < sent.len() {
            let data = tls.read().await.unwrap();
            assert!(!data.is_empty(), "{name:?}: the echo ended early");
            back.extend_from_slice(&data);
        }
        assert!(back == sent, "{name:?}: the client got back other bytes");
        tls.close_notify().await.unwrap();
        assert!(tls.read().await.unwrap().is_empty(), "{name:?}");
        peer.await.unwrap();

        // The agent as the server of a rustls client.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let ours = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = Tls::accept(tcp, server).await.unwrap();
            loop {
                let data = tls.read().await.unwrap();
                if data.is_empty() {
                    break;
                }
                tls.send(&data).await.unwrap();
            }
            tls.close_notify().await.unwrap();
        });
        let connector = tokio_rustls::TlsConnector::from(client);
        let tcp = TcpStream::connect(address).await.unwrap();
        let peer = connector
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        let back = exchange_tokio(peer, &pieces).await;
        assert!(back == sent, "{name:?}: the client got back other bytes");
        ours.await.unwrap();
    }
}

#[tokio::test]
async fn a_session_ticket_the_server_sent_resumes_the_next_connection() {
    let (server, client) = configs(&[&rustls::version::TLS13], true);
    let acceptor = tokio_rustls::TlsAcceptor::from(server);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let peer = tokio::spawn(async move {
        let mut kinds = Vec::new();
        for _ in 0..2 {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            kinds.push(tls.get_ref().1.handshake_kind());
            write_and_close(&mut tls, b"hello").await;
        }
        kinds
    });
    for _ in 0..2 {
        let tcp = TcpStream::connect(address).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = Tls::connect(tcp, client.clone(), name).await.unwrap();
        assert_eq!(read_all(&mut tls).await.unwrap(), b"hello");
    }
    use rustls::HandshakeKind::{Full, Resumed};
    assert_eq!(peer.await.unwrap(), [Some(Full), Some(Resumed)]);
}

#[tokio::test]
async fn keys_that_reach_their_limit_are_changed_and_the_peer_reads_on() {
    let data = pattern(5 * MAX_PLAINTEXT + 10);
    let expected = data.clone();
    let (tls, server) = pair(
        &[&rustls::version::TLS13],
        true,
        move |mut tls| async move {
            let mut received = vec![0; expected.len()];
            tls.read_exact(&mut received).await.unwrap();
            assert!(received == expected, "the server read other bytes");
            write_and_close(tls, b"done").await;
        },
    )
    .await;
    let mut tls = tls.unwrap();
    tls.limit = 3;
    tls.send(&data).await.unwrap();
    // Three records per key, the key update that ends each key's use among them: the six
    // records take two updates, and the last keys sealed two.
    assert_eq!(tls.tx.seq(), 2);
    assert_eq!(read_all(&mut tls).await.unwrap(), b"done");
    server.await.unwrap();
}

#[tokio::test]
async fn a_fatal_alert_from_the_peer_is_an_error_naming_it() {
    let (tls, server) = pair(&[&rustls::version::TLS13], true, |mut tls| async move {
        let mut buffer = [0; 16];
        assert!(tls.read(&mut buffer).await.is_err());
        let _ = tls.flush().await;
    })
    .await;
    let mut tls = tls.unwrap();
    // A record no key sealed.
    let mut forged = vec![23, 3, 3, 0, 32];
    forged.resize(HEADER + 32, 0x5a);
    tls.tcp().write_all(&forged).await.unwrap();
    let error = tls.read().await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    assert!(error.to_string().contains("BadRecordMac"), "{error}");
    server.await.unwrap();
}

/// The agent's own TLS at both ends of a connection: (client, server).
async fn own_pair() -> (
    Tls<UnbufferedClientConnection>,
    Tls<UnbufferedServerConnection>,
) {
    let (server, client) = configs(&[&rustls::version::TLS13], true);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let accepted = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        Tls::accept(tcp, server).await.unwrap()
    });
    let tcp = TcpStream::connect(address).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let client = Tls::connect(tcp, client, name).await.unwrap();
    (client, accepted.await.unwrap())
}

/// Sends `count` records of `kind` with nothing in them, then `data`.
async fn send_empty<S: Side>(tls: &mut Tls<S>, kind: Kind, count: usize, data: &[u8]) {
    let mut sealed = Vec::new();
    for _ in 0..count {
        tls.seal_record(kind, &[], &mut sealed).unwrap();
    }
    sealed.extend(tls.seal(&[data]).unwrap());
    tls.transmit(&sealed).await.unwrap();
}

#[tokio::test]
async fn empty_records_are_passed_over_up_to_a_bound_and_empty_handshake_records_refused() {
    let (mut client, mut server) = own_pair().await;
    send_empty(
        &mut client,
        Kind::ApplicationData,
        MAX_EMPTY as usize,
        b"data",
    )
    .await;
    assert_eq!(&server.read().await.unwrap()[..], b"data");
    send_empty(
        &mut client,
        Kind::ApplicationData,
        MAX_EMPTY as usize + 1,
        b"data",
    )
    .await;
    let error = server.read().await.unwrap_err();
    assert!(error.to_string().contains("too many empty"), "{error}");

    let (mut client, mut server) = own_pair().await;
    send_empty(&mut client, Kind::Handshake, 1, b"data").await;
    let error = server.read().await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    assert!(error.to_string().contains("unexpected_message"), "{error}");
}
