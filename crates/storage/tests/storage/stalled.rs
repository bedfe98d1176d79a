//! A TLS client that stops reading a warm blob: how much of the file the replica reads ahead of
//! it. Whatever it has read and not sent sits in its memory for as long as the client stalls, and
//! a replica serves every node's pulls at once.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use storage::{Accounts, Listener, Tls};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

use crate::common::{self, NODE, Options};

/// Socket buffers on both ends (the kernel doubles them): small, so that the kernel's share is
/// small next to what the replica holds.
const SOCKET_BUFFER: u32 = 16 * 1024;

/// Bytes this thread has read through read-like system calls (`rchar`): the test runs on a
/// current-thread runtime, so the server's reads of the blob are counted here.
fn thread_rchar() -> u64 {
    std::fs::read_to_string("/proc/thread-self/io")
        .expect("/proc/thread-self/io")
        .lines()
        .find_map(|line| line.strip_prefix("rchar: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("rchar")
}

#[tokio::test]
async fn a_stalled_tls_client_pins_little_of_the_blob_in_the_replica() {
    let replica = common::start(Options::default()).await;
    let blob: Vec<u8> = (0..8u32 << 20).map(|i| (i % 251) as u8).collect();
    let digest = replica.store().put_bytes(&blob, None).expect("put");

    let ca = testkit::Certs::new("stalled-ca");
    let server = ca.server(&[]);
    let acceptor = storage::server::acceptor(&Tls {
        cert_pem: server.cert_pem,
        key_pem: server.key_pem,
        client_ca_pem: None,
        ingress_client_ca: None,
    })
    .expect("acceptor");
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_send_buffer_size(SOCKET_BUFFER).expect("sndbuf");
    socket.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let listener = socket.listen(8).expect("listen");
    let address = listener.local_addr().expect("address");
    let accounts = Accounts::new().with(NODE.0, NODE.1, storage::Access::Pull);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(storage::server::serve(
        listener,
        Some(acceptor),
        Listener::read(replica.registry.clone(), accounts),
        async {
            let _ = stopped.await;
        },
    ));

    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca.ca_pem().as_bytes()) {
        roots.add(cert.expect("CA")).expect("root");
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let client = TcpSocket::new_v4().expect("socket");
    client.set_recv_buffer_size(SOCKET_BUFFER).expect("rcvbuf");
    let tcp = client.connect(address).await.expect("connect");
    let mut stream = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .expect("handshake");
    let before = thread_rchar();
    let request = format!(
        "GET /v2/stalled/blobs/{digest} HTTP/1.1\r\nhost: replica\r\nauthorization: {}\r\n\r\n",
        common::basic(NODE)
    );
    stream.write_all(request.as_bytes()).await.expect("request");
    let mut head = [0u8; 64];
    let read = stream.read(&mut head).await.expect("response");
    assert!(
        head[..read].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head[..read])
    );
    // The client reads no more. Wait until the replica stops reading (under 1 KiB more, the
    // looks' own reads of /proc, in each of three looks 200 ms apart), for at most 20 s.
    let mut last = 0;
    let mut unchanged = 0;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = thread_rchar() - before;
        unchanged = if now < last + 1024 { unchanged + 1 } else { 0 };
        last = now;
        if unchanged == 3 {
            break;
        }
    }
    // Two reads of 32 KiB here: the socket buffers and rustls' queue hold the first, hyper's
    // queue the second. With 256 KiB reads and hyper's default queue, it had read 512 KiB.
    assert!(
        last <= 256 * 1024,
        "the replica read {last} bytes of the blob ahead of a client that stopped reading"
    );
    assert!(
        last >= 32 * 1024,
        "the replica read only {last} bytes: the reads were not counted (blocking pool?)"
    );
    eprintln!("read ahead of the stalled client: {last} bytes");
    drop(stream);
    let _ = stop.send(());
    let _ = serving.await;
}
