//! Randomness: `randAlphaNum`, `randAlpha`, `randAscii`, `randNumeric` (goutils'
//! crypto-random strings), `randBytes`, `randInt`, `shuffle`, `uuidv4`. All from the operating
//! system's random source, as sprig's are (crypto/rand); `randInt` and `shuffle` use
//! math/rand in Go, which gives no guarantee a chart could rely on either.

use go_template::{Func, FuncMap, Signature, Ty, Value};

use crate::encoding::b64_encode;
use crate::fargs::{call_err, int_arg, str_to_str};

const ALPHA: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const DIGITS: &[u8] = b"0123456789";

pub(crate) fn register(m: &mut FuncMap) {
    let charset = |set: &'static [u8]| {
        Func::new(Signature::fixed(&[Ty::Int]), move |args: &[Value]| {
            Ok(Value::string(random_string(int_arg(args, 0), set)))
        })
    };
    m.insert("randAlphaNum".into(), charset(ALNUM));
    m.insert("randAlpha".into(), charset(ALPHA));
    m.insert("randNumeric".into(), charset(DIGITS));
    m.insert("randAscii".into(), charset(ascii()));
    m.insert(
        "randBytes".into(),
        Func::new(Signature::fixed(&[Ty::Int]), |args: &[Value]| {
            let n = usize::try_from(int_arg(args, 0))
                .map_err(|_| call_err("runtime error: makeslice: len out of range"))?;
            Ok(Value::string(b64_encode(&random_bytes(n))))
        }),
    );
    m.insert(
        "randInt".into(),
        Func::new(Signature::fixed(&[Ty::Int, Ty::Int]), |args: &[Value]| {
            let (min, max) = (int_arg(args, 0), int_arg(args, 1));
            let span = max.checked_sub(min).filter(|s| *s > 0);
            let span = span.ok_or_else(|| call_err("invalid argument to Intn"))?;
            Ok(Value::Int(min + below(span as u64) as i64))
        }),
    );
    m.insert("shuffle".into(), str_to_str(shuffle));
    m.insert(
        "uuidv4".into(),
        Func::new(Signature::fixed(&[]), |_: &[Value]| {
            Ok(Value::string(uuid_v4()))
        }),
    );
}

fn ascii() -> &'static [u8] {
    const ASCII: [u8; 95] = {
        let mut a = [0u8; 95];
        let mut i = 0;
        while i < 95 {
            a[i] = 32 + i as u8;
            i += 1;
        }
        a
    };
    &ASCII
}

/// `n` bytes from the operating system's random source.
pub(crate) fn random_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    // Without a random source nothing sprig does with randomness is sound: Go panics too.
    getrandom::fill(&mut buf).expect("the operating system's random source");
    buf
}

/// A uniform number in `0..n` (`n > 0`), by rejection.
pub(crate) fn below(n: u64) -> u64 {
    let zone = u64::MAX - (u64::MAX % n);
    loop {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b).expect("the operating system's random source");
        let v = u64::from_le_bytes(b);
        if v < zone {
            return v % n;
        }
    }
}

/// `count` characters drawn from `set`; "" for a count below 1 (goutils' error, which sprig
/// drops).
fn random_string(count: i64, set: &[u8]) -> String {
    (0..count.max(0))
        .map(|_| set[below(set.len() as u64) as usize] as char)
        .collect()
}

/// The string's characters in a random order (Fisher-Yates over runes).
fn shuffle(s: &str) -> String {
    let mut chars: Vec<char> = s.chars().collect();
    for i in (1..chars.len()).rev() {
        let j = below(i as u64 + 1) as usize;
        chars.swap(i, j);
    }
    chars.into_iter().collect()
}

/// A random (version 4, RFC 4122 variant) UUID in its lowercase hyphenated form.
fn uuid_v4() -> String {
    let mut b = random_bytes(16);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}
