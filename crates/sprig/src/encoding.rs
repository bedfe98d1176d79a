//! `b64enc`, `b64dec`, `b32enc`, `b32dec`: Go's `StdEncoding`s, with their exact error texts
//! (sprig returns a decoding error's text as the result instead of failing).

use go_template::FuncMap;

use crate::fargs::str_to_str;

pub(crate) fn register(m: &mut FuncMap) {
    m.insert("b64enc".into(), str_to_str(|s| b64_encode(s.as_bytes())));
    m.insert(
        "b64dec".into(),
        str_to_str(|s| match b64_decode(s.as_bytes()) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(at) => format!("illegal base64 data at input byte {at}"),
        }),
    );
    m.insert("b32enc".into(), str_to_str(|s| b32_encode(s.as_bytes())));
    m.insert(
        "b32dec".into(),
        str_to_str(|s| match b32_decode(s.as_bytes()) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(at) => format!("illegal base32 data at input byte {at}"),
        }),
    );
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// `base64.StdEncoding.EncodeToString`.
pub(crate) fn b64_encode(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn b64_value(c: u8) -> Option<u32> {
    B64.iter().position(|&x| x == c).map(|p| p as u32)
}

/// `base64.StdEncoding.DecodeString`: `\r` and `\n` are skipped anywhere; the error is the
/// input offset Go's `CorruptInputError` reports.
pub(crate) fn b64_decode(src: &[u8]) -> Result<Vec<u8>, usize> {
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    let is_nl = |c: u8| c == b'\n' || c == b'\r';
    while si < src.len() {
        let mut quad = [0u32; 4];
        let mut len = 4;
        let mut j = 0;
        let mut trailing_err = None;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                // StdEncoding pads: a short final quantum is corrupt.
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if let Some(v) = b64_value(c) {
                quad[j] = v;
                j += 1;
                continue;
            }
            if is_nl(c) {
                continue;
            }
            if c != b'=' {
                return Err(si - 1);
            }
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    while si < src.len() && is_nl(src[si]) {
                        si += 1;
                    }
                    if si == src.len() {
                        return Err(src.len());
                    }
                    if src[si] != b'=' {
                        return Err(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < src.len() && is_nl(src[si]) {
                si += 1;
            }
            if si < src.len() {
                trailing_err = Some(si);
            }
            len = j;
            break;
        }
        let val = quad[0] << 18 | quad[1] << 12 | quad[2] << 6 | quad[3];
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        out.extend_from_slice(&bytes[..len - 1]);
        if let Some(at) = trailing_err {
            return Err(at);
        }
        if len < 4 {
            return Ok(out);
        }
    }
    Ok(out)
}

/// `base32.StdEncoding.EncodeToString`.
pub(crate) fn b32_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(5) * 8);
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let bits = buf.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        let chars = match chunk.len() {
            1 => 2,
            2 => 4,
            3 => 5,
            4 => 7,
            _ => 8,
        };
        for i in 0..8 {
            if i < chars {
                out.push(B32[((bits >> (35 - 5 * i)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `base32.StdEncoding.DecodeString`: newlines are removed first, offsets count what is left.
pub(crate) fn b32_decode(input: &[u8]) -> Result<Vec<u8>, usize> {
    let src: Vec<u8> = input
        .iter()
        .copied()
        .filter(|&c| c != b'\n' && c != b'\r')
        .collect();
    let olen = src.len();
    let mut rest: &[u8] = &src;
    let mut out = Vec::new();
    let mut end = false;
    while !rest.is_empty() && !end {
        let mut dbuf = [0u8; 8];
        let mut dlen = 8;
        let mut j = 0;
        while j < 8 {
            let Some((&c, tail)) = rest.split_first() else {
                return Err(olen - j);
            };
            rest = tail;
            if c == b'=' && j >= 2 && rest.len() < 8 {
                if rest.len() + j < 7 {
                    return Err(olen);
                }
                for k in 0..7 - j {
                    if rest.len() > k && rest[k] != b'=' {
                        return Err(olen - rest.len() + k - 1);
                    }
                }
                dlen = j;
                end = true;
                if matches!(dlen, 1 | 3 | 6) {
                    return Err(olen - rest.len() - 1);
                }
                break;
            }
            match B32.iter().position(|&x| x == c) {
                Some(v) => dbuf[j] = v as u8,
                None => return Err(olen - rest.len() - 1),
            }
            j += 1;
        }
        let d = dbuf;
        let bytes = [
            d[0] << 3 | d[1] >> 2,
            d[1] << 6 | d[2] << 1 | d[3] >> 4,
            d[3] << 4 | d[4] >> 1,
            d[4] << 7 | d[5] << 2 | d[6] >> 3,
            d[6] << 5 | d[7],
        ];
        let n = match dlen {
            8 => 5,
            7 => 4,
            5 => 3,
            4 => 2,
            _ => 1,
        };
        out.extend_from_slice(&bytes[..n]);
    }
    Ok(out)
}
