//! A client that stops reading: how much of an endless response the server pulls from its body
//! with and without `Bounds::http1_buffer`. Socket buffers are made small on both ends so the
//! kernel's share is small next to what hyper queues.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::StreamBody;
use hyper::body::Frame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

const CHUNK: usize = 16 * 1024;
const SOCKET_BUFFER: u32 = 16 * 1024;

/// Bytes the body has handed to the server once the stalled transfer stops growing.
async fn pulled_with(bounds: http_serve::Bounds) -> u64 {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(SOCKET_BUFFER).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(8).unwrap();
    let address = listener.local_addr().unwrap();
    let pulled = Arc::new(AtomicU64::new(0));
    let counter = pulled.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(http_serve::serve(
        listener,
        None,
        bounds,
        move |_| {
            let counter = counter.clone();
            hyper::service::service_fn(move |_request| {
                let counter = counter.clone();
                let chunks = futures_util::stream::repeat_with(move || {
                    counter.fetch_add(CHUNK as u64, Ordering::SeqCst);
                    Ok::<_, Infallible>(Frame::data(Bytes::from(vec![7u8; CHUNK])))
                });
                async move { Ok::<_, Infallible>(http::Response::new(StreamBody::new(chunks))) }
            })
        },
        async {
            let _ = stopped.await;
        },
    ));

    let client = TcpSocket::new_v4().unwrap();
    client.set_recv_buffer_size(SOCKET_BUFFER).unwrap();
    let mut stream = client.connect(address).await.unwrap();
    stream
        .write_all(b"GET /blob HTTP/1.1\r\nhost: test\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 512];
    let read = stream.read(&mut head).await.unwrap();
    assert!(head[..read].starts_with(b"HTTP/1.1 200"), "{head:?}");
    // The client reads no more. Wait until the server stops pulling (the count unchanged for
    // three looks 200 ms apart), for at most 20 s.
    let mut last = u64::MAX;
    let mut unchanged = 0;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = pulled.load(Ordering::SeqCst);
        unchanged = if now == last { unchanged + 1 } else { 0 };
        last = now;
        if unchanged == 3 {
            break;
        }
    }
    drop(stream);
    let _ = stop.send(());
    let _ = server.await;
    last
}

#[tokio::test]
async fn a_stalled_client_pins_at_most_the_bound_of_response_in_the_server() {
    let bounded = pulled_with(http_serve::Bounds {
        http1_buffer: Some(16 * 1024),
        ..Default::default()
    })
    .await;
    let unbounded = pulled_with(http_serve::Bounds::default()).await;
    // Kernel buffers (a few times SOCKET_BUFFER on loopback) plus one queued chunk: 64 KiB
    // here. hyper's default queues up to 16 chunks (256 KiB) on top: 288 KiB.
    assert!(
        bounded <= 96 * 1024,
        "bounded server pulled {bounded} bytes for a stalled client"
    );
    assert!(
        unbounded >= bounded + 128 * 1024,
        "the default pulled {unbounded} bytes, the bounded one {bounded}: the bound changed nothing"
    );
}
