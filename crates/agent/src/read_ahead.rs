//! Read-ahead under the agent's upstream TLS, one TLS record at a time.
//!
//! rustls hands its transport at most 4 KiB to fill while a record is coming in, so a blob read
//! straight from the socket costs four to five `read(2)` calls per 16 KiB record. [`ReadAhead`]
//! follows the record headers going by and reads the rest of the current record and the next
//! header in one call, then hands them out from memory as rustls asks. A read never goes past
//! the next header, so once rustls has a record's plaintext nothing is left over here: a blob
//! stream whose client is slow to read keeps no extra buffer (`agent_pull`'s RSS per stream),
//! and the buffer is released whenever it is drained.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, BytesMut};
use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tower_service::Service;

/// A TLS record header: content type, version, length.
const HEADER: usize = 5;
/// The most one read takes: the largest record TLS allows (2^14 bytes of plaintext and 2048 of
/// expansion) with its header, and the next header.
const MAX_READ: usize = HEADER + (1 << 14) + 2048 + HEADER;

/// Where the bytes read so far stand among TLS records.
#[derive(Clone, Copy, Debug, Default)]
struct Framing {
    /// Bytes of the current record's body still to come; 0 when a header comes next.
    body_left: usize,
    /// The next record's header, as far as it came.
    header: [u8; HEADER],
    header_len: usize,
}

impl Framing {
    /// Follows `bytes`, which came right after everything seen so far.
    fn advance(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.body_left > 0 {
                let n = self.body_left.min(bytes.len());
                self.body_left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (HEADER - self.header_len).min(bytes.len());
            self.header[self.header_len..self.header_len + n].copy_from_slice(&bytes[..n]);
            self.header_len += n;
            bytes = &bytes[n..];
            if self.header_len == HEADER {
                self.body_left = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                self.header_len = 0;
            }
        }
    }

    /// How much the next read may take: the rest of the current record and the next header;
    /// the largest record while the length of the coming one is unknown.
    fn next_read(&self) -> usize {
        let wanted = if self.body_left > 0 {
            self.body_left + HEADER
        } else {
            MAX_READ - self.header_len
        };
        wanted.min(MAX_READ)
    }
}

/// A TCP stream read a TLS record at a time; see the [module documentation](self).
#[derive(Debug)]
pub(crate) struct ReadAhead {
    tcp: TcpStream,
    buffered: BytesMut,
    framing: Framing,
    /// Off: reads go straight to the socket, as rustls asks (the bench's baseline).
    enabled: bool,
}

impl ReadAhead {
    fn with(tcp: TcpStream, enabled: bool) -> Self {
        Self {
            tcp,
            buffered: BytesMut::new(),
            framing: Framing::default(),
            enabled,
        }
    }
}

/// Whether upstream sockets are read ahead: yes, unless `D8_AGENT_BENCH_PLAIN_READS` is set —
/// a switch for `agent_pull`'s side-by-side runs only, not a supported setting.
pub(crate) fn enabled() -> bool {
    std::env::var_os("D8_AGENT_BENCH_PLAIN_READS").is_none()
}

impl AsyncRead for ReadAhead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.enabled {
            return Pin::new(&mut this.tcp).poll_read(cx, out);
        }
        if this.buffered.is_empty() {
            let wanted = this.framing.next_read();
            if out.remaining() >= wanted {
                let before = out.filled().len();
                ready!(Pin::new(&mut this.tcp).poll_read(cx, out))?;
                this.framing.advance(&out.filled()[before..]);
                return Poll::Ready(Ok(()));
            }
            this.buffered.reserve(wanted);
            loop {
                ready!(this.tcp.poll_read_ready(cx))?;
                match this
                    .tcp
                    .try_read_buf(&mut (&mut this.buffered).limit(wanted))
                {
                    Ok(_) => break,
                    // The readiness was stale: polling again registers the waker.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            this.framing.advance(&this.buffered);
        }
        // Still nothing buffered is the end of the stream: `out` stays empty.
        let n = this.buffered.len().min(out.remaining());
        out.put_slice(&this.buffered[..n]);
        this.buffered.advance(n);
        if this.buffered.is_empty() {
            this.buffered = BytesMut::new();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for ReadAhead {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

impl Connection for ReadAhead {
    fn connected(&self) -> Connected {
        self.tcp.connected()
    }
}

/// hyper's TCP connector, its connections wrapped in [`ReadAhead`] (on when the flag is).
#[derive(Clone, Debug)]
pub(crate) struct Connector(pub(crate) HttpConnector, pub(crate) bool);

impl Service<Uri> for Connector {
    type Response = TokioIo<ReadAhead>;
    type Error = <HttpConnector as Service<Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        let enabled = self.1;
        Box::pin(async move {
            let tcp = connecting.await?.into_inner();
            Ok(TokioIo::new(ReadAhead::with(tcp, enabled)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// TLS-framed records with bodies of `sizes` bytes.
    fn records(sizes: &[usize]) -> Vec<u8> {
        let mut wire = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            wire.extend_from_slice(&[23, 3, 3]);
            wire.extend_from_slice(&u16::try_from(size).unwrap().to_be_bytes());
            wire.extend((0..size).map(|j| ((i * 31 + j * 7) % 251) as u8));
        }
        wire
    }

    #[test]
    fn reads_end_after_the_next_header() {
        let mut framing = Framing::default();
        assert_eq!(
            framing.next_read(),
            MAX_READ,
            "nothing known: a whole record"
        );
        let wire = records(&[16 * 1024 + 17, 100, 0, 300]);
        // The first header and a few body bytes.
        framing.advance(&wire[..HEADER + 10]);
        assert_eq!(framing.next_read(), 16 * 1024 + 17 - 10 + HEADER);
        // The rest of the first record and the next header, as that read would take them.
        let first_end = HEADER + 16 * 1024 + 17;
        framing.advance(&wire[HEADER + 10..first_end + HEADER]);
        assert_eq!(framing.next_read(), 100 + HEADER);
        // A header split across reads.
        framing.advance(&wire[first_end + HEADER..first_end + HEADER + 100 + 2]);
        assert_eq!(framing.header_len, 2);
        assert_eq!(framing.next_read(), MAX_READ - 2);
        // The empty record's header, then the last record's.
        framing.advance(&wire[first_end + HEADER + 102..wire.len() - 300]);
        assert_eq!(framing.next_read(), 300 + HEADER);
        framing.advance(&wire[wire.len() - 300..]);
        assert_eq!((framing.body_left, framing.header_len), (0, 0));
        assert_eq!(framing.next_read(), MAX_READ, "at a record boundary again");
    }

    #[test]
    fn nonsense_lengths_stay_bounded() {
        let mut framing = Framing::default();
        framing.advance(b"HTTP/1.1 200 OK\r\n");
        assert!(framing.next_read() <= MAX_READ);
        assert!(framing.next_read() > 0);
    }

    /// Sends `wire` in `piece`-byte writes and reads it through `ReadAhead` in `ask`-byte reads,
    /// as rustls does.
    async fn relayed(wire: Vec<u8>, piece: usize, ask: usize) {
        relayed_with(wire, piece, ask, true).await;
    }

    async fn relayed_with(wire: Vec<u8>, piece: usize, ask: usize, enabled: bool) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let writer = {
            let wire = wire.clone();
            tokio::spawn(async move {
                let (mut socket, _) = listener.accept().await.unwrap();
                for part in wire.chunks(piece) {
                    socket.write_all(part).await.unwrap();
                }
            })
        };
        let mut stream = ReadAhead::with(TcpStream::connect(address).await.unwrap(), enabled);
        let mut received = Vec::new();
        let mut buf = vec![0; ask];
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            received.extend_from_slice(&buf[..n]);
        }
        writer.await.unwrap();
        assert_eq!(stream.buffered.capacity(), 0, "nothing kept once drained");
        assert_eq!(received.len(), wire.len());
        assert!(received == wire, "the bytes come out as they went in");
    }

    #[tokio::test]
    async fn records_come_out_whole_and_in_order() {
        let sizes: Vec<usize> = (0..80)
            .map(|i| [16 * 1024 + 17, 5, 0, 4000][i % 4])
            .collect();
        relayed(records(&sizes), 5000, 4096).await;
        relayed(records(&sizes), 100_000, 4096).await;
    }

    #[tokio::test]
    async fn switched_off_reads_go_straight_to_the_socket() {
        let sizes: Vec<usize> = (0..40).map(|i| [16 * 1024 + 17, 5][i % 2]).collect();
        relayed_with(records(&sizes), 5000, 4096, false).await;
    }

    #[tokio::test]
    async fn large_asks_and_other_protocols_pass_through() {
        let plain: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
        relayed(plain.clone(), 7000, 4096).await;
        relayed(plain, 7000, MAX_READ * 2).await;
    }

    #[tokio::test]
    async fn an_empty_stream_ends_at_once() {
        relayed(Vec::new(), 1, 4096).await;
    }
}
