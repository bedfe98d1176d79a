//! TLS connections whose records are buffered, sealed and opened by us, both ways.
//!
//! rustls' unbuffered API drives the handshake on buffers of ours; then rustls hands over the
//! traffic keys (its kernel-TLS interface, which also derives the next keys on a key update and
//! keeps the session tickets a server sends), and [`record`] protects the records. A read takes
//! the rest of the record being received and, when the socket has them, up to three more of the
//! size last seen and the header after them: a few records a system call, each opened where it
//! was received and its plaintext handed on in that buffer, with no copy. Once no complete
//! record is left in the buffer, what was received of the next moves to a buffer of its own, so
//! the read's buffer goes with the plaintexts handed on from it. What is sent is sealed by
//! [`Tls::seal`] into bytes the caller writes with [`Tls::transmit`] (or to [`Tls::tcp`] as they
//! are), one copy of the plaintext, so the plaintext can go before the write waits for the peer. The same code serves the
//! agent's registry connections (client) and containerd's connections to it (server).

use std::io;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, UnbufferedStatus};
use rustls::{AlertDescription, ExtractedSecrets, ProtocolVersion, SupportedCipherSuite};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod record;

use record::{HEADER, Kind, MAX_PAYLOAD, MAX_PLAINTEXT, Protection};

/// The largest post-handshake message taken (a session ticket is a few hundred bytes).
const MAX_MESSAGE: usize = 1 << 16;
/// Empty records taken in a row (as rustls takes them).
const MAX_EMPTY: u32 = 32;
/// A TLS 1.3 `KeyUpdate` that asks the peer for none in return.
const KEY_UPDATE_NOT_REQUESTED: [u8; 5] = [24, 0, 0, 1, 0];

/// The client or the server end of rustls' unbuffered API (the two have the same methods but
/// no trait in common).
pub(crate) trait Side: Send + Sized {
    type Data: Send;
    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, Self::Data>;
    /// The keys of an established session, and what derives the next ones.
    fn into_kernel(self)
    -> Result<(ExtractedSecrets, KernelConnection<Self::Data>), rustls::Error>;
    /// Takes the body of a `NewSessionTicket` the peer sent.
    fn ticket(kernel: &mut KernelConnection<Self::Data>, body: &[u8]) -> Result<(), rustls::Error>;
}

impl Side for UnbufferedClientConnection {
    type Data = ClientConnectionData;
    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }
    fn into_kernel(
        self,
    ) -> Result<(ExtractedSecrets, KernelConnection<Self::Data>), rustls::Error> {
        self.dangerous_into_kernel_connection()
    }
    fn ticket(kernel: &mut KernelConnection<Self::Data>, body: &[u8]) -> Result<(), rustls::Error> {
        kernel.handle_new_session_ticket(body)
    }
}

impl Side for UnbufferedServerConnection {
    type Data = ServerConnectionData;
    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, Self::Data> {
        self.process_tls_records(incoming)
    }
    fn into_kernel(
        self,
    ) -> Result<(ExtractedSecrets, KernelConnection<Self::Data>), rustls::Error> {
        self.dangerous_into_kernel_connection()
    }
    fn ticket(_: &mut KernelConnection<Self::Data>, _: &[u8]) -> Result<(), rustls::Error> {
        Err(rustls::Error::General(
            "a TLS client sent a session ticket".to_owned(),
        ))
    }
}

/// An established TLS connection.
pub(crate) struct Tls<S: Side> {
    tcp: TcpStream,
    kernel: KernelConnection<S::Data>,
    version: ProtocolVersion,
    /// Records sealed with one key before it must change (the suite's confidentiality limit).
    limit: u64,
    tx: Protection,
    rx: Protection,
    /// Received bytes not yet opened.
    incoming: BytesMut,
    /// The start of a post-handshake message that goes on in the next record.
    message: Vec<u8>,
    /// Sealed records a read had to send (the answer to a key update) and has not sent yet:
    /// they go before anything sealed later, so that a read given up half-way leaves the
    /// session whole.
    unsent: Vec<u8>,
    /// The peer ended the session (`close_notify`).
    closed: bool,
    /// Records in a row that carried nothing (bounded: each costs a decryption and no progress).
    empty: u32,
    /// The size on the wire of the last record opened: what the next ones are read ahead by.
    record: usize,
}

/// What the handshake needs next.
enum Step {
    Send(Vec<u8>),
    Receive,
    Established,
}

impl Tls<UnbufferedClientConnection> {
    /// Completes a handshake with `name` over `tcp`. `config` must allow secret extraction.
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
    /// Completes a client's handshake over `tcp`. `config` must allow secret extraction.
    pub(crate) async fn accept(
        tcp: TcpStream,
        config: Arc<rustls::ServerConfig>,
    ) -> io::Result<Self> {
        let conn = UnbufferedServerConnection::new(config).map_err(tls_error)?;
        Self::handshake(tcp, conn).await
    }
}

impl<S: Side> Tls<S> {
    async fn handshake(mut tcp: TcpStream, mut conn: S) -> io::Result<Self> {
        let mut incoming = BytesMut::new();
        loop {
            match step(&mut conn, &mut incoming)? {
                Step::Send(bytes) => tcp.write_all(&bytes).await?,
                Step::Receive => {
                    receive(
                        &mut tcp,
                        &mut incoming,
                        0,
                        "the peer closed the connection during the handshake",
                    )
                    .await?;
                }
                Step::Established => break,
            }
        }
        let (secrets, kernel) = conn.into_kernel().map_err(tls_error)?;
        let version = kernel.protocol_version();
        let limit = match kernel.negotiated_cipher_suite() {
            SupportedCipherSuite::Tls12(suite) => suite.common.confidentiality_limit,
            SupportedCipherSuite::Tls13(suite) => suite.common.confidentiality_limit,
        };
        let (tx_seq, tx) = secrets.tx;
        let (rx_seq, rx) = secrets.rx;
        Ok(Self {
            tcp,
            version,
            limit,
            tx: Protection::new(version, tx_seq, tx).map_err(other)?,
            rx: Protection::new(version, rx_seq, rx).map_err(other)?,
            kernel,
            // What the peer sent after the handshake, in a buffer of its own size.
            incoming: BytesMut::from(&incoming[..]),
            message: Vec::new(),
            unsent: Vec::new(),
            closed: false,
            empty: 0,
            record: 0,
        })
    }

    /// `pieces` of plaintext sealed into records (each piece into records of its own), after
    /// whatever a read left unsent: the bytes to [`transmit`](Self::transmit) before anything
    /// sealed later.
    pub(crate) fn seal(&mut self, pieces: &[&[u8]]) -> io::Result<Vec<u8>> {
        let mut sealed = std::mem::take(&mut self.unsent);
        let records: usize = pieces.iter().map(|p| p.len().div_ceil(MAX_PLAINTEXT)).sum();
        let bytes: usize = pieces.iter().map(|p| p.len()).sum();
        sealed.reserve(records * self.tx.sealed_len(0) + bytes);
        for record in pieces.iter().flat_map(|p| p.chunks(MAX_PLAINTEXT)) {
            self.seal_record(Kind::ApplicationData, record, &mut sealed)?;
        }
        Ok(sealed)
    }

    /// Writes what [`seal`](Self::seal) returned.
    pub(crate) async fn transmit(&mut self, sealed: &[u8]) -> io::Result<()> {
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

    /// Seals and sends `plaintext`.
    pub(crate) async fn send(&mut self, plaintext: &[u8]) -> io::Result<()> {
        let sealed = self.seal(&[plaintext])?;
        self.transmit(&sealed).await
    }

    /// Sends `close_notify` (the TCP connection stays open).
    pub(crate) async fn close_notify(&mut self) -> io::Result<()> {
        let mut sealed = std::mem::take(&mut self.unsent);
        self.seal_record(Kind::Alert, &[1, 0], &mut sealed)?;
        self.transmit(&sealed).await
    }

    /// The TCP connection underneath; what [`seal`](Self::seal) returned may be written to it
    /// directly.
    pub(crate) fn tcp(&mut self) -> &mut TcpStream {
        &mut self.tcp
    }

    /// The plaintext of the next record that carries any; empty once the peer ended the
    /// session cleanly. A connection closed without `close_notify` is an `UnexpectedEof`.
    /// Cancel-safe: a read given up loses nothing received, and what it had to send goes
    /// before the next write.
    pub(crate) async fn read(&mut self) -> io::Result<Bytes> {
        loop {
            self.flush_unsent().await?;
            if let Some(data) = self.open()? {
                return Ok(data);
            }
            if self.closed {
                return Ok(Bytes::new());
            }
            receive(
                &mut self.tcp,
                &mut self.incoming,
                READ_AHEAD * self.record,
                "the peer closed the connection without a TLS close_notify",
            )
            .await?;
        }
    }

    /// Opens the complete records received until one carries data.
    fn open(&mut self) -> io::Result<Option<Bytes>> {
        while !self.closed {
            let Some(header) = self.incoming.get(..HEADER) else {
                break;
            };
            let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
            if len > MAX_PAYLOAD {
                return Err(invalid(record::Error::Overflow));
            }
            let end = HEADER + len;
            if end > self.incoming.len() {
                break;
            }
            let (kind, range) = self.rx.open(&mut self.incoming[..end]).map_err(invalid)?;
            // The record leaves the buffer; what follows it stays, in the same allocation until
            // no complete record is left in it: the rest then moves to a buffer of its own, so
            // that the one the plaintexts are handed on in goes with them.
            let record = self.incoming.split_to(end);
            self.record = end;
            if !holds_record(&self.incoming) {
                self.incoming = BytesMut::from(&self.incoming[..]);
            }
            match kind {
                Kind::ApplicationData if !self.message.is_empty() => {
                    return Err(invalid(record::Error::Unexpected));
                }
                // RFC 8446, 5.1: handshake records are never empty.
                Kind::Handshake if range.is_empty() => {
                    return Err(invalid(record::Error::Unexpected));
                }
                Kind::ApplicationData if range.is_empty() => {
                    self.empty += 1;
                    if self.empty > MAX_EMPTY {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "the peer sent too many empty TLS records in a row",
                        ));
                    }
                }
                Kind::ApplicationData => {
                    self.empty = 0;
                    // The plaintext stays where it was opened: no copy.
                    return Ok(Some(record.freeze().slice(range)));
                }
                Kind::Alert => self.alert(&record[range])?,
                Kind::Handshake => self.post_handshake(&record[range])?,
                Kind::ChangeCipherSpec => return Err(invalid(record::Error::Unexpected)),
            }
        }
        Ok(None)
    }

    /// An alert: `close_notify` ends the session; a warning is passed over where TLS allows it;
    /// anything else is the error it names.
    fn alert(&mut self, alert: &[u8]) -> io::Result<()> {
        match *alert {
            [_, 0] => {
                self.closed = true;
                Ok(())
            }
            [1, 90] => Ok(()),
            [1, _] if self.version == ProtocolVersion::TLSv1_2 => Ok(()),
            [_, description] => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the peer sent the TLS alert {:?}",
                    AlertDescription::from(description)
                ),
            )),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the peer sent a malformed TLS alert",
            )),
        }
    }

    /// Handshake messages after the handshake: session tickets, key updates, and (TLS 1.2) a
    /// server's invitation to renegotiate, which is declined by not taking it up.
    fn post_handshake(&mut self, fragment: &[u8]) -> io::Result<()> {
        self.message.extend_from_slice(fragment);
        while let Some(&[kind, a, b, c]) = self.message.get(..4) {
            let len = u32::from_be_bytes([0, a, b, c]) as usize;
            if len > MAX_MESSAGE {
                return Err(invalid(record::Error::Overflow));
            }
            if self.message.len() < 4 + len {
                return Ok(());
            }
            let message: Vec<u8> = self.message.drain(..4 + len).collect();
            let body = &message[4..];
            match kind {
                4 if self.version == ProtocolVersion::TLSv1_3 => {
                    S::ticket(&mut self.kernel, body).map_err(tls_error)?;
                }
                24 if self.version == ProtocolVersion::TLSv1_3 => {
                    // The keys change after this record: nothing may follow in it.
                    if !self.message.is_empty() {
                        return Err(invalid(record::Error::Unexpected));
                    }
                    self.key_update(body)?;
                }
                0 if self.version == ProtocolVersion::TLSv1_2 && body.is_empty() => {}
                _ => return Err(invalid(record::Error::Unexpected)),
            }
        }
        Ok(())
    }

    /// The peer's keys change; when it asks, ours change too, announced before anything else
    /// this side sends.
    fn key_update(&mut self, body: &[u8]) -> io::Result<()> {
        let requested = match body {
            [0] => false,
            [1] => true,
            _ => return Err(invalid(record::Error::Unexpected)),
        };
        let (seq, secrets) = self.kernel.update_rx_secret().map_err(tls_error)?;
        self.rx = Protection::new(self.version, seq, secrets).map_err(other)?;
        if requested {
            let mut unsent = std::mem::take(&mut self.unsent);
            self.update_tx(&mut unsent)?;
            self.unsent = unsent;
        }
        Ok(())
    }

    /// Appends one record of `kind`, changing the keys first when the `KeyUpdate` is the last
    /// record their limit allows.
    fn seal_record(&mut self, kind: Kind, plaintext: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        if self.tx.seq() + 1 >= self.limit {
            self.update_tx(out)?;
        }
        self.tx.seal(kind, plaintext, out).map_err(other)
    }

    /// Appends a `KeyUpdate` (TLS 1.3) sealed with the current keys, and takes the next ones.
    fn update_tx(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        if self.version != ProtocolVersion::TLSv1_3 {
            return Err(io::Error::other(
                "the TLS 1.2 session sent as many records as its keys allow",
            ));
        }
        self.tx
            .seal(Kind::Handshake, &KEY_UPDATE_NOT_REQUESTED, out)
            .map_err(other)?;
        let (seq, secrets) = self.kernel.update_tx_secret().map_err(tls_error)?;
        self.tx = Protection::new(self.version, seq, secrets).map_err(other)?;
        Ok(())
    }
}

/// Processes what was received in the handshake until it needs something done.
fn step<S: Side>(conn: &mut S, incoming: &mut BytesMut) -> io::Result<Step> {
    let mut outgoing = Vec::new();
    loop {
        let UnbufferedStatus { discard, state } = conn.process(&mut incoming[..]);
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
                Some(Step::Send(std::mem::take(&mut outgoing)))
            }
            ConnectionState::BlockedHandshake => Some(Step::Receive),
            // Receiving stops at the header after the record that ended the handshake, so
            // whatever the peer sent after it is still unread here and goes to the records.
            ConnectionState::WriteTraffic(_) => Some(Step::Established),
            ConnectionState::ReadTraffic(_)
            | ConnectionState::PeerClosed
            | ConnectionState::Closed => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the peer sent data before the handshake ended",
                ));
            }
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "an unexpected TLS state",
                ));
            }
        };
        incoming.advance(discard);
        if let Some(next) = next {
            return Ok(next);
        }
    }
}

/// One read from the peer into `incoming`: what completes its first incomplete record and the
/// header after it, and up to `ahead` bytes more when the socket has them. The end of the stream
/// is an `UnexpectedEof` saying `at_end`.
async fn receive(
    tcp: &mut TcpStream,
    incoming: &mut BytesMut,
    ahead: usize,
    at_end: &'static str,
) -> io::Result<()> {
    let want = missing(incoming) + ahead;
    if incoming.capacity() - incoming.len() < want {
        let mut fresh = BytesMut::with_capacity(incoming.len() + want);
        fresh.extend_from_slice(incoming);
        *incoming = fresh;
    }
    if tcp.read_buf(&mut incoming.limit(want)).await? == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, at_end));
    }
    Ok(())
}

/// Records read beyond the one being completed, when the socket has them.
const READ_AHEAD: usize = 3;

/// Whether `received` starts with a complete record.
fn holds_record(received: &[u8]) -> bool {
    received.get(..HEADER).is_some_and(|header| {
        HEADER + usize::from(u16::from_be_bytes([header[3], header[4]])) <= received.len()
    })
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

fn invalid(error: record::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, error)
}

fn other(error: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::other(error)
}

#[cfg(test)]
pub(crate) mod tests;
