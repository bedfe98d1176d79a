//! A TLS client connection whose incoming records are buffered by us, one record at a time.
//!
//! rustls' buffered connection reads into a deframer buffer that grows by doubling and shrinks
//! only on the next read, so a stream whose client stopped reading keeps up to 32 KiB of it
//! (`bench/README.md`). Here rustls' unbuffered API works on our buffer, and a read takes no
//! more than the rest of the record being received and the next record's header: once a record
//! is decrypted, at most those five bytes stay, and an empty buffer is freed.

use std::io;
use std::sync::Arc;

use bytes::{BufMut, Bytes};
use rustls::client::UnbufferedClientConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A TLS record's header: content type, version, length.
const HEADER: usize = 5;

/// An established TLS connection to a registry.
pub(super) struct Tls {
    tcp: TcpStream,
    conn: UnbufferedClientConnection,
    /// Received bytes not yet processed are `incoming[start..]`.
    incoming: Vec<u8>,
    start: usize,
}

/// What the connection needs next, as [`Tls::advance`] finds it.
enum Next {
    /// These bytes go to the server (handshake messages, or the encrypted data asked for).
    Send(Vec<u8>),
    /// More bytes from the server are needed.
    Receive,
    /// The plaintext of one record.
    Data(Bytes),
    /// The server ended the TLS session (`close_notify`).
    Closed,
    /// The handshake is complete.
    Established,
}

/// What [`Tls::advance`] is asked for.
enum Goal<'a, 'b> {
    Handshake,
    Read,
    /// Encrypting this (taken once encrypted).
    Write(&'a mut Option<&'b [u8]>),
}

impl Tls {
    /// Completes a handshake with `name` over `tcp`.
    pub(super) async fn connect(
        tcp: TcpStream,
        config: Arc<rustls::ClientConfig>,
        name: ServerName<'static>,
    ) -> io::Result<Self> {
        let conn = UnbufferedClientConnection::new(config, name).map_err(tls_error)?;
        let mut tls = Self {
            tcp,
            conn,
            incoming: Vec::new(),
            start: 0,
        };
        loop {
            match tls.advance(Goal::Handshake)? {
                Next::Send(bytes) => tls.tcp.write_all(&bytes).await?,
                Next::Receive => {
                    if tls.receive().await? == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the server closed the connection",
                        ));
                    }
                }
                Next::Established => return Ok(tls),
                Next::Data(_) | Next::Closed => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "the server sent data before the handshake ended",
                    ));
                }
            }
        }
    }

    /// Encrypts and sends `plaintext` (one request head: it fits a record).
    pub(super) async fn send(&mut self, plaintext: &[u8]) -> io::Result<()> {
        let mut pending = Some(plaintext);
        loop {
            match self.advance(Goal::Write(&mut pending))? {
                Next::Send(bytes) => {
                    self.tcp.write_all(&bytes).await?;
                    if pending.is_none() {
                        return Ok(());
                    }
                }
                Next::Receive => {
                    if self.receive().await? == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::BrokenPipe,
                            "the registry closed the connection",
                        ));
                    }
                }
                Next::Data(_) | Next::Closed | Next::Established => {
                    return Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "the registry sent data or closed the TLS session before the request",
                    ));
                }
            }
        }
    }

    /// The plaintext of the next record; empty once the server ended the session cleanly. A
    /// connection closed without `close_notify` is an `UnexpectedEof`.
    pub(super) async fn read(&mut self) -> io::Result<Bytes> {
        loop {
            match self.advance(Goal::Read)? {
                Next::Send(bytes) => self.tcp.write_all(&bytes).await?,
                Next::Receive => {
                    if self.receive().await? == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the registry closed the connection without a TLS close_notify",
                        ));
                    }
                }
                Next::Data(bytes) => return Ok(bytes),
                Next::Closed => return Ok(Bytes::new()),
                Next::Established => {}
            }
        }
    }

    /// Processes what was received until the connection needs something done for `goal`.
    fn advance(&mut self, goal: Goal<'_, '_>) -> io::Result<Next> {
        let mut outgoing = Vec::new();
        let mut goal = goal;
        loop {
            let UnbufferedStatus { mut discard, state } = self
                .conn
                .process_tls_records(&mut self.incoming[self.start..]);
            let next = match state.map_err(tls_error)? {
                ConnectionState::EncodeTlsData(mut encode) => {
                    let at = outgoing.len();
                    match encode.encode(&mut []) {
                        Err(EncodeError::InsufficientSize(size)) => {
                            outgoing.resize(at + size.required_size, 0);
                            encode.encode(&mut outgoing[at..]).map_err(other)?;
                        }
                        result => {
                            result.map_err(other)?;
                        }
                    }
                    None
                }
                ConnectionState::TransmitTlsData(transmit) => {
                    transmit.done();
                    Some(Next::Send(std::mem::take(&mut outgoing)))
                }
                ConnectionState::BlockedHandshake => Some(Next::Receive),
                ConnectionState::WriteTraffic(mut write) => match &mut goal {
                    Goal::Handshake => Some(Next::Established),
                    Goal::Read => Some(Next::Receive),
                    Goal::Write(pending) => match pending.take() {
                        Some(plaintext) => {
                            let size = match write.encrypt(plaintext, &mut []) {
                                Err(EncryptError::InsufficientSize(size)) => size.required_size,
                                Err(e) => return Err(other(e)),
                                Ok(_) => 0,
                            };
                            let at = outgoing.len();
                            outgoing.resize(at + size, 0);
                            let n = write
                                .encrypt(plaintext, &mut outgoing[at..])
                                .map_err(other)?;
                            outgoing.truncate(at + n);
                            Some(Next::Send(std::mem::take(&mut outgoing)))
                        }
                        None => Some(Next::Receive),
                    },
                },
                ConnectionState::ReadTraffic(mut read) => match read.next_record() {
                    Some(Ok(record)) => {
                        discard += record.discard;
                        Some(Next::Data(Bytes::copy_from_slice(record.payload)))
                    }
                    Some(Err(e)) => return Err(tls_error(e)),
                    None => None,
                },
                ConnectionState::PeerClosed | ConnectionState::Closed => Some(Next::Closed),
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "an unexpected TLS state",
                    ));
                }
            };
            self.start += discard;
            if self.start > 0 && self.incoming.len() - self.start <= HEADER {
                // Records were taken and at most a header is left: the buffer they came in
                // goes (and with nothing left, no buffer stays at all).
                self.incoming = self.incoming[self.start..].to_vec();
                self.start = 0;
            }
            if let Some(next) = next {
                return Ok(next);
            }
        }
    }

    /// One read from the server, of no more than what completes the first incomplete record
    /// and the header after it. The number of bytes read: 0 at the end of the stream.
    async fn receive(&mut self) -> io::Result<usize> {
        let want = missing(&self.incoming[self.start..]);
        if self.start > 0 {
            let mut kept = Vec::with_capacity(self.incoming.len() - self.start + want);
            kept.extend_from_slice(&self.incoming[self.start..]);
            self.incoming = kept;
            self.start = 0;
        } else {
            self.incoming.reserve_exact(want);
        }
        self.tcp
            .read_buf(&mut (&mut self.incoming).limit(want))
            .await
    }
}

/// How many bytes after `received` complete its first incomplete record, plus the next
/// record's header (or complete a partial header, when the records end in one).
fn missing(received: &[u8]) -> usize {
    let mut at = 0;
    loop {
        let Some(header) = received.get(at..at + HEADER) else {
            return at + HEADER - received.len();
        };
        let end = at + HEADER + usize::from(u16::from_be_bytes([header[3], header[4]]));
        if end > received.len() {
            return end - received.len() + HEADER;
        }
        at = end;
    }
}

fn tls_error(error: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, error)
}

fn other(error: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::other(error)
}

#[cfg(test)]
mod tests;
