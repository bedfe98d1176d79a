//! Content digests (`algorithm:encoded`) and incremental verification.
//!
//! Only the two algorithms the OCI image-spec registers are accepted: `sha256` (64 lowercase hex
//! characters) and `sha512` (128). Anything else that matches the generic grammar is refused with
//! [`DigestError::UnsupportedAlgorithm`], so a digest that parses can always be verified.

use std::fmt;
use std::str::FromStr;

use sha2::Digest as _;

/// A digest algorithm this crate can compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Algorithm {
    /// SHA-256, the default everywhere.
    Sha256,
    /// SHA-512, allowed by the image-spec and checked by the conformance suite.
    Sha512,
}

impl Algorithm {
    /// The algorithm's name as written before the `:`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sha256 => "sha256",
            Self::Sha512 => "sha512",
        }
    }

    /// Length of the raw hash in bytes.
    pub fn output_len(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }

    /// Length of the hex-encoded part after the `:`.
    pub fn encoded_len(self) -> usize {
        self.output_len() * 2
    }

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "sha256" => Some(Self::Sha256),
            "sha512" => Some(Self::Sha512),
            _ => None,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a string is not a usable digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    /// The input was empty.
    #[error("digest is empty")]
    Empty,
    /// No `:` between algorithm and encoded part.
    #[error("digest {input:?} has no ':' between algorithm and hash")]
    MissingSeparator {
        /// The offending input (truncated to 80 characters).
        input: String,
    },
    /// The algorithm part does not match `[a-z0-9]+([+._-][a-z0-9]+)*`.
    #[error("digest algorithm {algorithm:?} is malformed")]
    InvalidAlgorithm {
        /// The algorithm part (truncated).
        algorithm: String,
    },
    /// A well-formed algorithm this crate does not implement.
    #[error("digest algorithm {algorithm:?} is not supported (only sha256 and sha512)")]
    UnsupportedAlgorithm {
        /// The algorithm part (truncated).
        algorithm: String,
    },
    /// The encoded part has the wrong length for its algorithm.
    #[error("{algorithm} digest must have {expected} hex characters, found {actual}")]
    InvalidLength {
        /// The algorithm.
        algorithm: Algorithm,
        /// The required number of hex characters.
        expected: usize,
        /// The number found.
        actual: usize,
    },
    /// The encoded part contains something other than lowercase hex.
    #[error("{algorithm} digest may only contain lowercase hex characters [0-9a-f]")]
    InvalidHex {
        /// The algorithm.
        algorithm: Algorithm,
    },
}

/// A content digest: the algorithm and the raw hash bytes.
///
/// `Copy`, allocation-free, ordered by algorithm then bytes (which for equal algorithms is the same
/// order as the hex strings). [`Display`](fmt::Display) gives the canonical `algorithm:hex` form.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Digest {
    /// `sha256:<64 hex>`.
    Sha256([u8; 32]),
    /// `sha512:<128 hex>`.
    Sha512([u8; 64]),
}

fn truncated(s: &str) -> String {
    s.chars().take(80).collect()
}

fn is_algorithm_grammar(s: &str) -> bool {
    // algorithm ::= component (separator component)*; component ::= [a-z0-9]+; separator ::= [+._-]
    !s.is_empty()
        && s.split(['+', '.', '_', '-']).all(|c| {
            !c.is_empty()
                && c.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

impl Digest {
    /// Parses `algorithm:encoded`, strictly: lowercase hex of exactly the algorithm's length.
    pub fn parse(s: &str) -> Result<Self, DigestError> {
        if s.is_empty() {
            return Err(DigestError::Empty);
        }
        let Some((alg, encoded)) = s.split_once(':') else {
            return Err(DigestError::MissingSeparator {
                input: truncated(s),
            });
        };
        if !is_algorithm_grammar(alg) {
            return Err(DigestError::InvalidAlgorithm {
                algorithm: truncated(alg),
            });
        }
        let algorithm =
            Algorithm::from_name(alg).ok_or_else(|| DigestError::UnsupportedAlgorithm {
                algorithm: truncated(alg),
            })?;
        Self::from_hex(algorithm, encoded)
    }

    /// Builds a digest from an algorithm and its lowercase hex encoding.
    pub fn from_hex(algorithm: Algorithm, encoded: &str) -> Result<Self, DigestError> {
        if encoded.len() != algorithm.encoded_len() {
            return Err(DigestError::InvalidLength {
                algorithm,
                expected: algorithm.encoded_len(),
                actual: encoded.chars().count(),
            });
        }
        if !encoded
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err(DigestError::InvalidHex { algorithm });
        }
        let invalid = || DigestError::InvalidHex { algorithm };
        Ok(match algorithm {
            Algorithm::Sha256 => {
                let mut out = [0u8; 32];
                hex::decode_to_slice(encoded, &mut out).map_err(|_| invalid())?;
                Self::Sha256(out)
            }
            Algorithm::Sha512 => {
                let mut out = [0u8; 64];
                hex::decode_to_slice(encoded, &mut out).map_err(|_| invalid())?;
                Self::Sha512(out)
            }
        })
    }

    /// The sha256 digest of `data`.
    pub fn sha256(data: &[u8]) -> Self {
        Self::compute(Algorithm::Sha256, data)
    }

    /// The digest of `data` with the given algorithm.
    pub fn compute(algorithm: Algorithm, data: &[u8]) -> Self {
        let mut h = Hasher::new(algorithm);
        h.update(data);
        h.finish()
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Self::Sha256(_) => Algorithm::Sha256,
            Self::Sha512(_) => Algorithm::Sha512,
        }
    }

    /// The raw hash bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Sha256(b) => b,
            Self::Sha512(b) => b,
        }
    }

    /// The lowercase hex part after the `:`.
    pub fn encoded(&self) -> String {
        hex::encode(self.as_bytes())
    }

    /// A verifier expecting this digest.
    pub fn verifier(&self) -> Verifier {
        Verifier::new(*self)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.algorithm(), self.encoded())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({self})")
    }
}

impl FromStr for Digest {
    type Err = DigestError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// An incremental hasher for either algorithm.
#[derive(Clone)]
pub enum Hasher {
    /// SHA-256 state.
    Sha256(sha2::Sha256),
    /// SHA-512 state.
    Sha512(sha2::Sha512),
}

impl fmt::Debug for Hasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Hasher").field(&self.algorithm()).finish()
    }
}

impl Hasher {
    /// A fresh hasher.
    pub fn new(algorithm: Algorithm) -> Self {
        match algorithm {
            Algorithm::Sha256 => Self::Sha256(sha2::Sha256::new()),
            Algorithm::Sha512 => Self::Sha512(sha2::Sha512::new()),
        }
    }

    /// The algorithm being computed.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Self::Sha256(_) => Algorithm::Sha256,
            Self::Sha512(_) => Algorithm::Sha512,
        }
    }

    /// Feeds a chunk.
    pub fn update(&mut self, chunk: &[u8]) {
        match self {
            Self::Sha256(h) => h.update(chunk),
            Self::Sha512(h) => h.update(chunk),
        }
    }

    /// The digest of everything fed so far.
    pub fn finish(self) -> Digest {
        match self {
            Self::Sha256(h) => Digest::Sha256(h.finalize().into()),
            Self::Sha512(h) => Digest::Sha512(h.finalize().into()),
        }
    }
}

/// The content did not hash to the digest it was fetched or pushed under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("digest mismatch: expected {expected}, content hashes to {actual}")]
pub struct DigestMismatch {
    /// The digest the content was supposed to have.
    pub expected: Digest,
    /// The digest the content actually has.
    pub actual: Digest,
}

/// Checks streamed content against an expected digest.
///
/// Feed every chunk with [`update`](Self::update), then call [`finish`](Self::finish); content is
/// only trustworthy once `finish` returned `Ok`.
#[derive(Debug, Clone)]
pub struct Verifier {
    expected: Digest,
    hasher: Hasher,
    len: u64,
}

impl Verifier {
    /// A verifier for `expected`, hashing with its algorithm.
    pub fn new(expected: Digest) -> Self {
        Self {
            expected,
            hasher: Hasher::new(expected.algorithm()),
            len: 0,
        }
    }

    /// The digest the content must have.
    pub fn expected(&self) -> Digest {
        self.expected
    }

    /// Feeds a chunk.
    pub fn update(&mut self, chunk: &[u8]) {
        self.len += chunk.len() as u64;
        self.hasher.update(chunk);
    }

    /// Number of bytes fed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no bytes were fed yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Compares the hash of everything fed with the expected digest.
    #[allow(
        clippy::result_large_err,
        reason = "two inline digests (130 bytes) once per blob; boxing buys nothing"
    )]
    pub fn finish(self) -> Result<Digest, DigestMismatch> {
        let actual = self.hasher.finish();
        if actual == self.expected {
            Ok(actual)
        } else {
            Err(DigestMismatch {
                expected: self.expected,
                actual,
            })
        }
    }
}

#[cfg(test)]
mod tests;
