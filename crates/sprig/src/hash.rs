//! `sha1sum`, `sha256sum`, `sha512sum` (lowercase hex) and `adler32sum` (decimal).

use go_template::FuncMap;
use sha1::Digest as _;

use crate::fargs::str_to_str;

pub(crate) fn register(m: &mut FuncMap) {
    m.insert(
        "sha1sum".into(),
        str_to_str(|s| hex::encode(sha1::Sha1::digest(s.as_bytes()))),
    );
    m.insert(
        "sha256sum".into(),
        str_to_str(|s| hex::encode(sha2::Sha256::digest(s.as_bytes()))),
    );
    m.insert(
        "sha512sum".into(),
        str_to_str(|s| hex::encode(sha2::Sha512::digest(s.as_bytes()))),
    );
    m.insert(
        "adler32sum".into(),
        str_to_str(|s| adler32(s.as_bytes()).to_string()),
    );
}

/// Go's `hash/adler32.Checksum`.
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes is the most that can be summed before b may overflow a u32.
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    b << 16 | a
}
