//! TLS record protection once the handshake is done, as kernel TLS does it: rustls negotiates
//! and hands over the traffic keys, and records are sealed and opened here, in buffers of ours.
//! A record is opened where it was received, so its plaintext is handed on without a copy; a
//! record is sealed with one copy of its plaintext, into the buffer that is written (rustls
//! sealed into an allocation of its own and copied the record out of it). TLS 1.3 and TLS 1.2,
//! with the AEAD suites rustls offers (AES-GCM, ChaCha20-Poly1305).

use std::ops::Range;

use ring::aead;
use rustls::{ConnectionTrafficSecrets, ProtocolVersion};

/// A record's header: content type, legacy version, length.
pub(crate) const HEADER: usize = 5;
/// The largest plaintext a record carries (RFC 8446, 5.1).
pub(crate) const MAX_PLAINTEXT: usize = 1 << 14;
/// The largest record payload taken from a peer: TLS 1.2's bound (RFC 5246, 6.2.3), which
/// covers TLS 1.3's (RFC 8446, 5.2); the plaintext is checked against [`MAX_PLAINTEXT`] once
/// opened.
pub(crate) const MAX_PAYLOAD: usize = MAX_PLAINTEXT + 2048;
/// TLS 1.2 AES-GCM sends the last 8 bytes of each record's nonce in the record.
const EXPLICIT_NONCE: usize = 8;
const TAG: usize = 16;

/// A record's content type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    ChangeCipherSpec,
    Alert,
    Handshake,
    ApplicationData,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Self::ChangeCipherSpec => 20,
            Self::Alert => 21,
            Self::Handshake => 22,
            Self::ApplicationData => 23,
        }
    }

    fn of(byte: u8) -> Option<Self> {
        Some(match byte {
            20 => Self::ChangeCipherSpec,
            21 => Self::Alert,
            22 => Self::Handshake,
            23 => Self::ApplicationData,
            _ => return None,
        })
    }
}

/// Why a record could not be sealed or opened.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum Error {
    #[error("the TLS session uses a protocol version the agent cannot protect records of")]
    Version,
    #[error("a TLS record failed to decrypt (bad_record_mac)")]
    Decrypt,
    #[error("the peer sent a TLS record over the size limit (record_overflow)")]
    Overflow,
    #[error("the peer sent a TLS record of an unexpected content type (unexpected_message)")]
    Unexpected,
    #[error("a TLS record could not be sealed")]
    Seal,
}

/// One direction's keys and record sequence number.
pub(crate) struct Protection {
    key: aead::LessSafeKey,
    iv: [u8; aead::NONCE_LEN],
    seq: u64,
    version: Version,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Version {
    Tls13,
    /// TLS 1.2 with the nonce's last 8 bytes in each record (AES-GCM, RFC 5288).
    Tls12Explicit,
    /// TLS 1.2 with the nonce derived from the sequence number alone (ChaCha20, RFC 7905).
    Tls12,
}

impl Protection {
    /// The protection of records numbered from `seq` with `secrets`, for `version`.
    pub(crate) fn new(
        version: ProtocolVersion,
        seq: u64,
        secrets: ConnectionTrafficSecrets,
    ) -> Result<Self, Error> {
        let (algorithm, key, iv, gcm) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv, true),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv, true),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (&aead::CHACHA20_POLY1305, key, iv, false)
            }
            _ => return Err(Error::Version),
        };
        let version = match version {
            ProtocolVersion::TLSv1_3 => Version::Tls13,
            ProtocolVersion::TLSv1_2 if gcm => Version::Tls12Explicit,
            ProtocolVersion::TLSv1_2 => Version::Tls12,
            _ => return Err(Error::Version),
        };
        let key = aead::UnboundKey::new(algorithm, key.as_ref()).map_err(|_| Error::Version)?;
        Ok(Self {
            key: aead::LessSafeKey::new(key),
            iv: iv.as_ref().try_into().map_err(|_| Error::Version)?,
            seq,
            version,
        })
    }

    /// Records sealed or opened so far (the next one's sequence number).
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// The size of a sealed record of `len` bytes of plaintext, header included.
    pub(crate) fn sealed_len(&self, len: usize) -> usize {
        let content_type = usize::from(self.version == Version::Tls13);
        HEADER + self.explicit_nonce() + len + content_type + TAG
    }

    /// The bytes of the nonce each record carries.
    fn explicit_nonce(&self) -> usize {
        match self.version {
            Version::Tls12Explicit => EXPLICIT_NONCE,
            Version::Tls13 | Version::Tls12 => 0,
        }
    }

    /// Appends to `out` one record of `kind` carrying `plaintext` (at most [`MAX_PLAINTEXT`]).
    pub(crate) fn seal(
        &mut self,
        kind: Kind,
        plaintext: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        if plaintext.len() > MAX_PLAINTEXT {
            return Err(Error::Seal);
        }
        let nonce = self.nonce();
        let at = out.len();
        let len = self.sealed_len(plaintext.len()) - HEADER;
        let outer = match self.version {
            Version::Tls13 => Kind::ApplicationData,
            _ => kind,
        };
        out.reserve(HEADER + len);
        out.push(outer.byte());
        out.extend_from_slice(&[3, 3]);
        out.extend_from_slice(&(len as u16).to_be_bytes());
        let aad = match self.version {
            Version::Tls13 => Aad::header(&out[at..]),
            _ => Aad::tls12(self.seq, kind, plaintext.len()),
        };
        out.extend_from_slice(&nonce[aead::NONCE_LEN - self.explicit_nonce()..]);
        let start = out.len();
        out.extend_from_slice(plaintext);
        if self.version == Version::Tls13 {
            out.push(kind.byte());
        }
        let tag = self
            .key
            .seal_in_place_separate_tag(
                aead::Nonce::assume_unique_for_key(nonce),
                aad.as_aad(),
                &mut out[start..],
            )
            .map_err(|_| Error::Seal)?;
        out.extend_from_slice(tag.as_ref());
        self.seq += 1;
        Ok(())
    }

    /// Opens the whole record `record` (header included) where it lies: its content type and
    /// where in `record` its plaintext now is.
    pub(crate) fn open(&mut self, record: &mut [u8]) -> Result<(Kind, Range<usize>), Error> {
        let (header, payload) = record.split_at_mut(HEADER);
        if payload.len() > MAX_PAYLOAD {
            return Err(Error::Overflow);
        }
        let outer = Kind::of(header[0]).ok_or(Error::Unexpected)?;
        if header[1..3] != [3, 3] {
            return Err(Error::Unexpected);
        }
        let nonce = self.nonce();
        let opened = match self.version {
            Version::Tls13 => {
                if outer != Kind::ApplicationData {
                    return Err(Error::Unexpected);
                }
                let plain = self
                    .key
                    .open_in_place(
                        aead::Nonce::assume_unique_for_key(nonce),
                        Aad::header(header).as_aad(),
                        payload,
                    )
                    .map_err(|_| Error::Decrypt)?;
                // The content type is the last byte that is not padding.
                let end = plain
                    .iter()
                    .rposition(|&b| b != 0)
                    .ok_or(Error::Unexpected)?;
                let kind = Kind::of(plain[end]).ok_or(Error::Unexpected)?;
                (kind, HEADER..HEADER + end)
            }
            Version::Tls12Explicit | Version::Tls12 => {
                let explicit = self.explicit_nonce();
                let len = payload
                    .len()
                    .checked_sub(explicit + TAG)
                    .ok_or(Error::Decrypt)?;
                let mut nonce = nonce;
                nonce[aead::NONCE_LEN - explicit..].copy_from_slice(&payload[..explicit]);
                let aad = Aad::tls12(self.seq, outer, len);
                self.key
                    .open_within(
                        aead::Nonce::assume_unique_for_key(nonce),
                        aad.as_aad(),
                        payload,
                        explicit..,
                    )
                    .map_err(|_| Error::Decrypt)?;
                (outer, HEADER..HEADER + len)
            }
        };
        if opened.1.len() > MAX_PLAINTEXT {
            return Err(Error::Overflow);
        }
        self.seq += 1;
        Ok(opened)
    }

    /// The next record's nonce: the IV with the sequence number XORed into its last 8 bytes
    /// (TLS 1.3, and rustls' choice of TLS 1.2 AES-GCM's explicit part, which it handed over
    /// as the IV's last 8 bytes).
    fn nonce(&self) -> [u8; aead::NONCE_LEN] {
        let mut nonce = self.iv;
        let seq = self.seq.to_be_bytes();
        for (n, s) in nonce[aead::NONCE_LEN - 8..].iter_mut().zip(seq) {
            *n ^= s;
        }
        nonce
    }
}

/// The additional data of a record: its header (TLS 1.3), or TLS 1.2's pseudo-header of the
/// sequence number, content type, version and plaintext length.
struct Aad {
    bytes: [u8; 13],
    len: usize,
}

impl Aad {
    fn header(header: &[u8]) -> Self {
        let mut bytes = [0; 13];
        bytes[..HEADER].copy_from_slice(&header[..HEADER]);
        Self { bytes, len: HEADER }
    }

    fn tls12(seq: u64, kind: Kind, len: usize) -> Self {
        let mut bytes = [0; 13];
        bytes[..8].copy_from_slice(&seq.to_be_bytes());
        bytes[8] = kind.byte();
        bytes[9..11].copy_from_slice(&[3, 3]);
        bytes[11..].copy_from_slice(&(len as u16).to_be_bytes());
        Self { bytes, len: 13 }
    }

    fn as_aad(&self) -> aead::Aad<&[u8]> {
        aead::Aad::from(&self.bytes[..self.len])
    }
}

#[cfg(test)]
mod tests;
