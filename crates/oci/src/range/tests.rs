use super::*;
use proptest::prelude::*;

fn outcome(header: Option<&str>, len: u64) -> (u16, Option<String>) {
    let o = evaluate(header, len);
    (o.status(), o.content_range(len))
}

#[test]
fn evaluation_table() {
    let s = |x: &str| Some(x.to_owned());
    // (Range header, blob length, (status, Content-Range))
    type Case<'a> = (Option<&'a str>, u64, (u16, Option<String>));
    let cases: &[Case<'_>] = &[
        (None, 2000, (200, None)),
        // The conformance suite's cases.
        (
            Some("bytes=500-1499"),
            2000,
            (206, s("bytes 500-1499/2000")),
        ),
        (Some("bytes=500-"), 2000, (206, s("bytes 500-1999/2000"))),
        (Some("bytes=-500"), 2000, (206, s("bytes 1500-1999/2000"))),
        (Some("bytes=2000-"), 2000, (416, s("bytes */2000"))),
        (Some("bytes=2000-2999"), 2000, (416, s("bytes */2000"))),
        // Clamping and edges.
        (Some("bytes=0-0"), 2000, (206, s("bytes 0-0/2000"))),
        (
            Some("bytes=1999-99999"),
            2000,
            (206, s("bytes 1999-1999/2000")),
        ),
        (Some("bytes=-99999"), 2000, (206, s("bytes 0-1999/2000"))),
        (Some("bytes=-0"), 2000, (416, s("bytes */2000"))),
        (Some("bytes=0-"), 0, (416, s("bytes */0"))),
        (Some("bytes=-1"), 0, (416, s("bytes */0"))),
        (
            Some("bytes=99999999999999999999999-"),
            10,
            (416, s("bytes */10")),
        ),
        (
            Some("bytes=0-99999999999999999999999"),
            10,
            (206, s("bytes 0-9/10")),
        ),
        (Some(" Bytes = 1 - 2 "), 10, (206, s("bytes 1-2/10"))),
        (Some("bytes=1-2,"), 10, (206, s("bytes 1-2/10"))),
        // Ignored: another unit, malformed syntax, last < first, several ranges.
        (Some("items=0-3"), 10, (200, None)),
        (Some("bytes"), 10, (200, None)),
        (Some("bytes="), 10, (200, None)),
        (Some("bytes=-"), 10, (200, None)),
        (Some("bytes=a-b"), 10, (200, None)),
        (Some("bytes=5-2"), 10, (200, None)),
        (Some("bytes=+1-2"), 10, (200, None)),
        (Some("bytes=0-1,4-5"), 10, (200, None)),
        (Some("bytes=20-,30-"), 10, (200, None)),
    ];
    for (header, len, want) in cases {
        assert_eq!(&outcome(*header, *len), want, "{header:?} of {len}");
    }
}

#[test]
fn parse_errors() {
    assert_eq!(parse_range("items=0-1"), Err(RangeError::NotBytes));
    assert_eq!(parse_range("0-1"), Err(RangeError::NotBytes));
    assert_eq!(
        parse_range("bytes=x"),
        Err(RangeError::Malformed {
            value: "bytes=x".into()
        })
    );
    assert_eq!(
        parse_range("bytes=0-1, -5, 7-").unwrap(),
        [
            RangeSpec::FromTo { first: 0, last: 1 },
            RangeSpec::Suffix { len: 5 },
            RangeSpec::From { first: 7 }
        ]
    );
}

#[test]
fn content_range_answers() {
    let ok = |v: &str| ContentRange::parse(v).unwrap_or_else(|e| panic!("{v}: {e}"));
    assert_eq!(
        ok("bytes 0-99/1000"),
        ContentRange {
            range: Some(ByteRange { start: 0, end: 99 }),
            complete_length: Some(1000)
        }
    );
    assert_eq!(
        ok("bytes 0-99/*"),
        ContentRange {
            range: Some(ByteRange { start: 0, end: 99 }),
            complete_length: None
        }
    );
    assert_eq!(
        ok("bytes */1000"),
        ContentRange {
            range: None,
            complete_length: Some(1000)
        }
    );
    for v in ["bytes 0-99/1000", "bytes 5-5/*", "bytes */0"] {
        assert_eq!(ok(v).to_string(), v);
    }
    for bad in [
        "0-99/1000",
        "bytes 99-0/1000",
        "bytes 0-1000/1000",
        "bytes */*",
        "bytes 0-/10",
        "bytes a-b/10",
        "bytes 0-1",
    ] {
        assert!(
            matches!(
                ContentRange::parse(bad),
                Err(RangeError::MalformedContentRange { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn upload_ranges() {
    assert_eq!(
        parse_upload_range("0-999"),
        Ok(ByteRange { start: 0, end: 999 })
    );
    assert_eq!(parse_upload_range("1000-1000").unwrap().len(), 1);
    for bad in ["bytes=0-1", "5-2", "-1", "1-", ""] {
        let e = parse_upload_range(bad).unwrap_err();
        assert_eq!(e.error_code(), ErrorCode::RangeInvalid, "{bad}");
    }
}

proptest! {
    #[test]
    fn partial_ranges_lie_within_the_blob(len in 0u64..10_000, a in 0u64..12_000, b in 0u64..12_000, kind in 0u8..3) {
        let header = match kind {
            0 => format!("bytes={}-{}", a.min(b), a.max(b)),
            1 => format!("bytes={a}-"),
            _ => format!("bytes=-{a}"),
        };
        match evaluate(Some(&header), len) {
            RangeOutcome::Partial(r) => {
                prop_assert!(r.start <= r.end && r.end < len);
                let cr = ContentRange::parse(&r.content_range(len)).unwrap();
                prop_assert_eq!(cr.range, Some(r));
            }
            RangeOutcome::Unsatisfiable { complete_length } => {
                prop_assert_eq!(complete_length, len);
                prop_assert!(len == 0 || kind == 2 && a == 0 || kind != 2 && a.min(b) >= len || kind == 1 && a >= len);
            }
            RangeOutcome::Full => prop_assert!(false, "a single valid range is never ignored"),
        }
    }

    #[test]
    fn never_panics(s in "\\PC{0,60}", len in any::<u64>()) {
        let _ = evaluate(Some(&s), len);
        let _ = ContentRange::parse(&s);
        let _ = parse_upload_range(&s);
    }
}
