//! Just enough DER to write the certificates and keys sprig writes (in Go's field order and
//! encodings) and to read back the parts of a certificate a signed one needs.

/// A tag, length, value.
pub(crate) fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend_from_slice(&bytes);
    }
    out.extend_from_slice(content);
    out
}

pub(crate) fn seq(parts: &[&[u8]]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

/// An INTEGER from unsigned big-endian bytes (minimal, positive).
pub(crate) fn uint(bytes: &[u8]) -> Vec<u8> {
    let trimmed: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    let mut content = Vec::with_capacity(trimmed.len() + 1);
    if trimmed.first().is_none_or(|b| b & 0x80 != 0) {
        content.push(0);
    }
    content.extend_from_slice(&trimmed);
    tlv(0x02, &content)
}

pub(crate) fn small_int(n: u8) -> Vec<u8> {
    uint(&[n])
}

/// An OBJECT IDENTIFIER from its dotted arcs.
pub(crate) fn oid(arcs: &[u64]) -> Vec<u8> {
    let mut content = Vec::new();
    let mut push = |mut v: u64| {
        let mut tmp = vec![(v & 0x7f) as u8];
        v >>= 7;
        while v > 0 {
            tmp.push(0x80 | (v & 0x7f) as u8);
            v >>= 7;
        }
        tmp.reverse();
        content.extend_from_slice(&tmp);
    };
    push(arcs[0] * 40 + arcs[1]);
    for a in &arcs[2..] {
        push(*a);
    }
    tlv(0x06, &content)
}

pub(crate) fn bit_string(unused: u8, bytes: &[u8]) -> Vec<u8> {
    let mut content = vec![unused];
    content.extend_from_slice(bytes);
    tlv(0x03, &content)
}

pub(crate) fn octets(bytes: &[u8]) -> Vec<u8> {
    tlv(0x04, bytes)
}

pub(crate) const NULL: [u8; 2] = [0x05, 0x00];

/// A read TLV: its tag, its content, and the whole encoding.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tlv<'a> {
    pub(crate) tag: u8,
    pub(crate) content: &'a [u8],
    pub(crate) raw: &'a [u8],
}

/// Reads one TLV from the front of `input`; the rest follows.
pub(crate) fn read(input: &[u8]) -> Option<(Tlv<'_>, &[u8])> {
    let tag = *input.first()?;
    let first = *input.get(1)?;
    let (len, hdr) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for b in input.get(2..2 + n)? {
            len = len << 8 | usize::from(*b);
        }
        (len, 2 + n)
    };
    let end = hdr.checked_add(len)?;
    let raw = input.get(..end)?;
    Some((
        Tlv {
            tag,
            content: &raw[hdr..],
            raw,
        },
        &input[end..],
    ))
}

/// All TLVs inside a constructed value's content.
pub(crate) fn children(mut content: &[u8]) -> Option<Vec<Tlv<'_>>> {
    let mut out = Vec::new();
    while !content.is_empty() {
        let (t, rest) = read(content)?;
        out.push(t);
        content = rest;
    }
    Some(out)
}
