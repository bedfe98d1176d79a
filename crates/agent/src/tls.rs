//! TLS connections whose records are buffered by us, one record at a time, both ways.
//!
//! rustls' buffered connection reads into a deframer buffer that grows by doubling and shrinks
//! only on the next read, and queues encrypted records until they are written: a stream whose
//! client stopped reading kept up to 32 KiB of the first and 33 KiB of the second
//! (`bench/README.md`). Here rustls' unbuffered API works on buffers of ours. A read takes no
//! more than the rest of the record being received and the next record's header: once a record
//! is decrypted, at most those five bytes stay, and an empty buffer is freed. What is sent is
//! encrypted by [`Tls::seal`] into bytes the caller writes with [`Tls::transmit`], so the
//! plaintext can go before the write waits for the peer. The same code serves the agent's
//! registry connections (client) and containerd's connections to it (server).

use std::io;
use std::sync::Arc;

use bytes::{BufMut, Bytes};
use rustls::client::UnbufferedClientConnection;
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A TLS record's header: content type, version, length.
const HEADER: usize = 5;

/// The client or the server end of rustls' unbuffered API (the two have the same methods but
/// no trait in common).
pub(crate) trait Side: Send {
    type Data;
    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, Self::Data>;
}

impl Side for UnbufferedClientConnection {
    type Data = rustls::client::ClientConnectionData;
    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }
}

impl Side for UnbufferedServerConnection {
    type Data = rustls::server::ServerConnectionData;
    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }
}

/// An established TLS connection.
pub(crate) struct Tls<S> {
    tcp: TcpStream,
    conn: S,
    /// Received bytes not yet processed are `incoming[start..]`.
    incoming: Vec<u8>,
    start: usize,
    /// Plaintext that arrived while something was being sent (a client's next request sent
    /// before the answer to the last one was), handed out by the next read.
    early: Option<Bytes>,
    /// What a read had to send (the answer to a key update) and has not sent yet: sent before
    /// anything else, so that a read given up half-way leaves the session whole.
    unsent: Vec<u8>,
}

/// What the connection needs next, as [`Tls::advance`] finds it.
enum Next {
    /// These bytes go to the peer (handshake messages, or the encrypted data asked for).
    Send(Vec<u8>),
    /// More bytes from the peer are needed.
    Receive,
    /// The plaintext of one record.
    Data(Bytes),
    /// The peer ended the TLS session (`close_notify`).
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

impl Tls<UnbufferedClientConnection> {
    /// Completes a handshake with `name` over `tcp`.
    pub(crate) async fn connect(
        tcp: TcpStream,
        config: Arc<rustls::ClientConfig>,
        name: ServerName<'static>,
    ) -> io::Result<Self> {
        let conn = UnbufferedClientConnection::new(config, name).map_err(tls_error)?;
        Self::handshake(tcp, conn).await
    }
}

impl Tls<UnbufferedServerConnection> {
    /// Completes a client's handshake over `tcp`.
    pub(crate) async fn accept(
        tcp: TcpStream,
        config: Arc<rustls::ServerConfig>,
    ) -> io::Result<Self> {
        let conn = UnbufferedServerConnection::new(config).map_err(tls_error)?;
        Self::handshake(tcp, conn).await
    }
}

impl<S: Side> Tls<S> {
    async fn handshake(tcp: TcpStream, conn: S) -> io::Result<Self> {
        let mut tls = Self {
            tcp,
            conn,
            incoming: Vec::new(),
            start: 0,
            early: None,
            unsent: Vec::new(),
        };
        loop {
            match tls.advance(Goal::Handshake)? {
                Next::Send(bytes) => tls.tcp.write_all(&bytes).await?,
                Next::Receive => {
                    tls.receive("the peer closed the connection during the handshake")
                        .await?;
                }
                Next::Established => return Ok(tls),
                Next::Data(_) | Next::Closed => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "the peer sent data before the handshake ended",
                    ));
                }
            }
        }
    }

    /// `plaintext` encrypted, with whatever else the session has to send before it: the bytes
    /// to [`transmit`](Self::transmit).
    pub(crate) fn seal(&mut self, plaintext: &[u8]) -> io::Result<Vec<u8>> {
        let mut pending = Some(plaintext);
        let mut sealed = Vec::new();
        loop {
            match self.advance(Goal::Write(&mut pending))? {
                Next::Send(bytes) => {
                    if sealed.is_empty() {
                        sealed = bytes;
                    } else {
                        sealed.extend_from_slice(&bytes);
                    }
                    if pending.is_none() {
                        return Ok(sealed);
                    }
                }
                Next::Closed => {
                    return Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "the peer ended the TLS session",
                    ));
                }
                Next::Receive | Next::Data(_) | Next::Established => {
                    return Err(io::Error::other("the TLS session cannot send yet"));
                }
            }
        }
    }

    /// Writes what [`seal`](Self::seal) returned.
    pub(crate) async fn transmit(&mut self, sealed: &[u8]) -> io::Result<()> {
        self.flush_unsent().await?;
        self.tcp.write_all(sealed).await
    }

    /// Sends what a read left unsent. Cancel-safe: what is not written stays.
    async fn flush_unsent(&mut self) -> io::Result<()> {
        while !self.unsent.is_empty() {
            let n = self.tcp.write(&self.unsent).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.unsent.drain(..n);
        }
        Ok(())
    }

    /// Encrypts and sends `plaintext`.
    pub(crate) async fn send(&mut self, plaintext: &[u8]) -> io::Result<()> {
        let sealed = self.seal(plaintext)?;
        self.transmit(&sealed).await
    }

    /// Sends `close_notify` (the TCP connection stays open).
    pub(crate) async fn close_notify(&mut self) -> io::Result<()> {
        let mut sealed = Vec::new();
        if let ConnectionState::WriteTraffic(mut write) =
            self.conn.process(&mut []).state.map_err(tls_error)?
        {
            let size = match write.queue_close_notify(&mut []) {
                Err(EncryptError::InsufficientSize(size)) => size.required_size,
                _ => 0,
            };
            sealed.resize(size, 0);
            let n = write.queue_close_notify(&mut sealed).map_err(other)?;
            sealed.truncate(n);
        }
        self.transmit(&sealed).await
    }

    /// The TCP connection underneath.
    pub(crate) fn tcp(&mut self) -> &mut TcpStream {
        &mut self.tcp
    }

    /// The plaintext of the next record; empty once the peer ended the session cleanly. A
    /// connection closed without `close_notify` is an `UnexpectedEof`. Cancel-safe: a read
    /// given up loses nothing received, and what it had to send goes before the next write.
    pub(crate) async fn read(&mut self) -> io::Result<Bytes> {
        if let Some(early) = self.early.take() {
            return Ok(early);
        }
        loop {
            self.flush_unsent().await?;
            match self.advance(Goal::Read)? {
                Next::Send(bytes) => self.unsent.extend_from_slice(&bytes),
                Next::Receive => {
                    self.receive("the peer closed the connection without a TLS close_notify")
                        .await?;
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
            let UnbufferedStatus { mut discard, state } =
                self.conn.process(&mut self.incoming[self.start..]);
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
                        let data = Bytes::copy_from_slice(record.payload);
                        match &goal {
                            Goal::Write(_) => {
                                self.early = Some(match self.early.take() {
                                    Some(early) => [&early[..], &data[..]].concat().into(),
                                    None => data,
                                });
                                None
                            }
                            _ => Some(Next::Data(data)),
                        }
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

    /// One read from the peer, of no more than what completes the first incomplete record
    /// and the header after it. The end of the stream is an `UnexpectedEof` saying `at_end`.
    async fn receive(&mut self, at_end: &'static str) -> io::Result<()> {
        let want = missing(&self.incoming[self.start..]);
        if self.start > 0 {
            let mut kept = Vec::with_capacity(self.incoming.len() - self.start + want);
            kept.extend_from_slice(&self.incoming[self.start..]);
            self.incoming = kept;
            self.start = 0;
        } else {
            self.incoming.reserve_exact(want);
        }
        let n = self
            .tcp
            .read_buf(&mut (&mut self.incoming).limit(want))
            .await?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, at_end));
        }
        Ok(())
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
pub(crate) mod tests;
