use rustls::crypto::cipher::{AeadKey, Iv};

use super::*;

const KEY: [u8; 32] = [7; 32];
const IV: [u8; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];

fn secrets(chacha: bool) -> ConnectionTrafficSecrets {
    let (key, iv) = (AeadKey::from(KEY), Iv::new(IV));
    if chacha {
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv }
    } else {
        ConnectionTrafficSecrets::Aes256Gcm { key, iv }
    }
}

/// A sealing and an opening end with the same keys, for each version and AEAD.
fn ends() -> Vec<(&'static str, Protection, Protection)> {
    let mut ends = Vec::new();
    for (name, version, chacha) in [
        ("TLS 1.3 AES-GCM", ProtocolVersion::TLSv1_3, false),
        ("TLS 1.3 ChaCha20", ProtocolVersion::TLSv1_3, true),
        ("TLS 1.2 AES-GCM", ProtocolVersion::TLSv1_2, false),
        ("TLS 1.2 ChaCha20", ProtocolVersion::TLSv1_2, true),
    ] {
        ends.push((
            name,
            Protection::new(version, 0, secrets(chacha)).unwrap(),
            Protection::new(version, 0, secrets(chacha)).unwrap(),
        ));
    }
    ends
}

/// A record sealed by hand, as another TLS 1.3 implementation may send it: `inner` is the
/// plaintext, content type and padding.
fn tls13_record(seq: u64, inner: &[u8]) -> Vec<u8> {
    let key = aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_256_GCM, &KEY).unwrap());
    let mut nonce = IV;
    for (n, s) in nonce[4..].iter_mut().zip(seq.to_be_bytes()) {
        *n ^= s;
    }
    let len = ((inner.len() + TAG) as u16).to_be_bytes();
    let header = [23, 3, 3, len[0], len[1]];
    let mut payload = inner.to_vec();
    key.seal_in_place_append_tag(
        aead::Nonce::assume_unique_for_key(nonce),
        aead::Aad::from(header),
        &mut payload,
    )
    .unwrap();
    [&header[..], &payload].concat()
}

#[test]
fn sealed_records_open_where_they_lie_in_every_version() {
    for (name, mut sealer, mut opener) in ends() {
        let pieces: [(Kind, Vec<u8>); 4] = [
            (Kind::ApplicationData, b"GET /v2/ HTTP/1.1\r\n\r\n".to_vec()),
            (Kind::ApplicationData, Vec::new()),
            (
                Kind::ApplicationData,
                (0..MAX_PLAINTEXT).map(|i| i as u8).collect(),
            ),
            (Kind::Alert, vec![1, 0]),
        ];
        let mut wire = Vec::new();
        for (kind, plaintext) in &pieces {
            let before = wire.len();
            sealer.seal(*kind, plaintext, &mut wire).unwrap();
            assert_eq!(
                wire.len() - before,
                sealer.sealed_len(plaintext.len()),
                "{name}"
            );
        }
        let mut at = 0;
        for (kind, plaintext) in &pieces {
            let len = usize::from(u16::from_be_bytes([wire[at + 3], wire[at + 4]]));
            let record = &mut wire[at..at + HEADER + len];
            assert_ne!(
                &record[HEADER..],
                &plaintext[..],
                "{name}: sent in the clear"
            );
            let (opened, range) = opener.open(record).unwrap();
            assert_eq!((opened, &record[range]), (*kind, &plaintext[..]), "{name}");
            at += HEADER + len;
        }
        assert_eq!((sealer.seq(), opener.seq()), (4, 4), "{name}");
    }
}

#[test]
fn a_changed_byte_or_a_record_out_of_turn_does_not_open() {
    for (name, mut sealer, _) in ends() {
        let mut first = Vec::new();
        sealer
            .seal(Kind::ApplicationData, b"first", &mut first)
            .unwrap();
        let mut second = Vec::new();
        sealer
            .seal(Kind::ApplicationData, b"second", &mut second)
            .unwrap();
        // Every byte is covered: the header (TLS 1.3's additional data is the header, TLS 1.2's
        // has the content type), the payload, the tag.
        let header = if name.starts_with("TLS 1.3") { 4 } else { 0 };
        for at in [header, HEADER + 1, first.len() - 1] {
            let mut opener = ends().into_iter().find(|end| end.0 == name).unwrap().2;
            let mut changed = first.clone();
            changed[at] ^= 1;
            assert_eq!(
                opener.open(&mut changed),
                Err(Error::Decrypt),
                "{name}, byte {at}"
            );
        }
        let mut opener = ends().into_iter().find(|end| end.0 == name).unwrap().2;
        assert_eq!(
            opener.open(&mut second.clone()),
            Err(Error::Decrypt),
            "{name}"
        );
        // A record that did not open does not count: the right one opens after it.
        let (_, range) = opener.open(&mut first).unwrap();
        assert_eq!(&first[range], b"first", "{name}");
        let (_, range) = opener.open(&mut second).unwrap();
        assert_eq!(&second[range], b"second", "{name}");
    }
}

#[test]
fn tls_1_3_padding_is_taken_off_and_a_record_of_padding_alone_refused() {
    let mut opener = Protection::new(ProtocolVersion::TLSv1_3, 0, secrets(false)).unwrap();
    let mut record = tls13_record(0, b"data\x17\0\0\0\0");
    let (kind, range) = opener.open(&mut record).unwrap();
    assert_eq!(
        (kind, &record[range]),
        (Kind::ApplicationData, &b"data"[..])
    );
    let mut record = tls13_record(1, b"\x16\0\0");
    let (kind, range) = opener.open(&mut record).unwrap();
    assert_eq!((kind, range.len()), (Kind::Handshake, 0));
    let mut record = tls13_record(2, &[0; 8]);
    assert_eq!(opener.open(&mut record), Err(Error::Unexpected));
}

#[test]
fn oversized_records_are_refused_either_way() {
    let (_, mut sealer, _) = ends().remove(0);
    let mut out = Vec::new();
    assert_eq!(
        sealer.seal(Kind::ApplicationData, &vec![0; MAX_PLAINTEXT + 1], &mut out),
        Err(Error::Seal)
    );
    let mut opener = Protection::new(ProtocolVersion::TLSv1_3, 0, secrets(false)).unwrap();
    let mut inner = vec![b'x'; MAX_PLAINTEXT + 1];
    inner.push(23);
    assert_eq!(
        opener.open(&mut tls13_record(0, &inner)),
        Err(Error::Overflow)
    );
    let mut huge = vec![23, 3, 3, 0xff, 0xff];
    huge.resize(HEADER + 0xffff, 0);
    assert_eq!(opener.open(&mut huge), Err(Error::Overflow));
}

#[test]
fn tls_1_3_records_all_say_application_data_outside() {
    let (_, mut sealer, _) = ends().remove(0);
    let mut wire = Vec::new();
    sealer
        .seal(Kind::Handshake, &[24, 0, 0, 1, 0], &mut wire)
        .unwrap();
    assert_eq!(wire[..3], [23, 3, 3]);
    let (_, mut tls12, _) = ends().remove(2);
    let mut wire = Vec::new();
    tls12.seal(Kind::Alert, &[1, 0], &mut wire).unwrap();
    assert_eq!(wire[..3], [21, 3, 3]);
}

proptest::proptest! {
    #[test]
    fn whatever_a_peer_sends_is_opened_or_refused_never_a_panic(
        end in 0usize..4,
        record in proptest::collection::vec(proptest::num::u8::ANY, 0..600),
        header in proptest::array::uniform5(proptest::num::u8::ANY),
    ) {
        let (_, _, mut opener) = ends().remove(end);
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(&record);
        let _ = opener.open(&mut bytes);
    }

    #[test]
    fn any_plaintext_comes_out_as_it_went_in(
        end in 0usize..4,
        kind in proptest::sample::select(vec![Kind::ApplicationData, Kind::Handshake, Kind::Alert]),
        plaintext in proptest::collection::vec(proptest::num::u8::ANY, 0..3000),
    ) {
        let (_, mut sealer, mut opener) = ends().remove(end);
        let mut wire = Vec::new();
        sealer.seal(kind, &plaintext, &mut wire).unwrap();
        let (opened, range) = opener.open(&mut wire).unwrap();
        proptest::prop_assert_eq!(opened, kind);
        proptest::prop_assert_eq!(&wire[range], &plaintext[..]);
    }
}
