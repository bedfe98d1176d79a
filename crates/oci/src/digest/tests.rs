use super::*;
use proptest::prelude::*;

const EMPTY_SHA256: &str =
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const ABC_SHA256: &str = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
const ABC_SHA512: &str = "sha512:ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f";

#[test]
fn known_vectors() {
    assert_eq!(Digest::sha256(b"").to_string(), EMPTY_SHA256);
    assert_eq!(Digest::sha256(b"abc").to_string(), ABC_SHA256);
    assert_eq!(
        Digest::compute(Algorithm::Sha512, b"abc").to_string(),
        ABC_SHA512
    );
}

#[test]
fn parses_and_displays_canonical_form() {
    for s in [EMPTY_SHA256, ABC_SHA256, ABC_SHA512] {
        let d = Digest::parse(s).unwrap();
        assert_eq!(d.to_string(), s);
        assert_eq!(d.encoded(), s.split_once(':').unwrap().1);
    }
    assert_eq!(
        Digest::parse(ABC_SHA512).unwrap().algorithm(),
        Algorithm::Sha512
    );
}

#[test]
fn rejects_each_malformed_shape() {
    let hex64 = "a".repeat(64);
    let cases: Vec<(String, DigestError)> = vec![
        (String::new(), DigestError::Empty),
        (
            hex64.clone(),
            DigestError::MissingSeparator {
                input: hex64.clone(),
            },
        ),
        (
            format!(":{hex64}"),
            DigestError::InvalidAlgorithm {
                algorithm: String::new(),
            },
        ),
        (
            format!("SHA256:{hex64}"),
            DigestError::InvalidAlgorithm {
                algorithm: "SHA256".into(),
            },
        ),
        (
            format!("sha256+:{hex64}"),
            DigestError::InvalidAlgorithm {
                algorithm: "sha256+".into(),
            },
        ),
        (
            format!("md5:{hex64}"),
            DigestError::UnsupportedAlgorithm {
                algorithm: "md5".into(),
            },
        ),
        (
            format!("sha256+b64u:{hex64}"),
            DigestError::UnsupportedAlgorithm {
                algorithm: "sha256+b64u".into(),
            },
        ),
        (
            "sha256:abc".into(),
            DigestError::InvalidLength {
                algorithm: Algorithm::Sha256,
                expected: 64,
                actual: 3,
            },
        ),
        (
            format!("sha256:{hex64}0"),
            DigestError::InvalidLength {
                algorithm: Algorithm::Sha256,
                expected: 64,
                actual: 65,
            },
        ),
        (
            format!("sha512:{hex64}"),
            DigestError::InvalidLength {
                algorithm: Algorithm::Sha512,
                expected: 128,
                actual: 64,
            },
        ),
        (
            format!("sha256:{}", "A".repeat(64)),
            DigestError::InvalidHex {
                algorithm: Algorithm::Sha256,
            },
        ),
        (
            format!("sha256:{}", "g".repeat(64)),
            DigestError::InvalidHex {
                algorithm: Algorithm::Sha256,
            },
        ),
        (
            format!("sha256:{}é", "a".repeat(62)),
            DigestError::InvalidHex {
                algorithm: Algorithm::Sha256,
            },
        ),
        (
            format!("sha256:{hex64}:x"),
            DigestError::InvalidLength {
                algorithm: Algorithm::Sha256,
                expected: 64,
                actual: 66,
            },
        ),
    ];
    for (input, want) in cases {
        assert_eq!(Digest::parse(&input), Err(want), "input {input:?}");
    }
}

#[test]
fn error_messages_name_the_problem() {
    let e = Digest::parse("sha256:abc").unwrap_err();
    assert_eq!(
        e.to_string(),
        "sha256 digest must have 64 hex characters, found 3"
    );
    let e = Digest::parse("md5:00").unwrap_err();
    assert!(e.to_string().contains("only sha256 and sha512"), "{e}");
}

#[test]
fn verifier_accepts_chunked_content() {
    let mut v = Digest::parse(ABC_SHA256).unwrap().verifier();
    for chunk in [&b"a"[..], b"", b"bc"] {
        v.update(chunk);
    }
    assert_eq!(v.len(), 3);
    assert_eq!(v.finish().unwrap().to_string(), ABC_SHA256);
}

#[test]
fn verifier_reports_typed_mismatch() {
    let expected = Digest::parse(ABC_SHA256).unwrap();
    let mut v = Verifier::new(expected);
    v.update(b"abd");
    let err = v.finish().unwrap_err();
    assert_eq!(err.expected, expected);
    assert_eq!(err.actual, Digest::sha256(b"abd"));
    assert!(
        err.to_string()
            .starts_with("digest mismatch: expected sha256:ba78"),
        "{err}"
    );
}

#[test]
fn verifier_uses_the_expected_algorithm() {
    let expected = Digest::parse(ABC_SHA512).unwrap();
    let mut v = expected.verifier();
    v.update(b"abc");
    assert_eq!(v.finish(), Ok(expected));
}

#[test]
fn serde_uses_the_string_form() {
    let d = Digest::parse(ABC_SHA256).unwrap();
    let json = serde_json::to_string(&d).unwrap();
    assert_eq!(json, format!("\"{ABC_SHA256}\""));
    assert_eq!(serde_json::from_str::<Digest>(&json).unwrap(), d);
    let err = serde_json::from_str::<Digest>("\"sha256:zz\"").unwrap_err();
    assert!(err.to_string().contains("64 hex characters"), "{err}");
}

#[test]
fn hashing_a_large_buffer_is_fast_in_tests() {
    // 64 MiB must hash in well under a few seconds even in a debug build (sha2 is built with
    // opt-level 3); this guards the workspace profile setting.
    let data = vec![7u8; 64 << 20];
    let start = std::time::Instant::now();
    let mut v = Verifier::new(Digest::sha256(&data));
    for chunk in data.chunks(1 << 16) {
        v.update(chunk);
    }
    assert!(v.finish().is_ok());
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
}

fn any_digest() -> impl Strategy<Value = Digest> {
    prop_oneof![
        any::<[u8; 32]>().prop_map(Digest::Sha256),
        proptest::collection::vec(any::<u8>(), 64)
            .prop_map(|v| Digest::Sha512(v.try_into().expect("64 bytes"))),
    ]
}

proptest! {
    #[test]
    fn display_parse_round_trip(d in any_digest()) {
        prop_assert_eq!(Digest::parse(&d.to_string()), Ok(d));
    }

    #[test]
    fn order_matches_string_order_within_an_algorithm(a in any::<[u8; 32]>(), b in any::<[u8; 32]>()) {
        let (a, b) = (Digest::Sha256(a), Digest::Sha256(b));
        prop_assert_eq!(a.cmp(&b), a.to_string().cmp(&b.to_string()));
    }

    #[test]
    fn chunking_does_not_change_the_digest(data in proptest::collection::vec(any::<u8>(), 0..4096), cut in 0usize..4096) {
        let cut = cut.min(data.len());
        let mut h = Hasher::new(Algorithm::Sha256);
        h.update(&data[..cut]);
        h.update(&data[cut..]);
        prop_assert_eq!(h.finish(), Digest::sha256(&data));
    }

    #[test]
    fn parse_never_panics(s in "\\PC{0,200}") {
        let _ = Digest::parse(&s);
    }
}
