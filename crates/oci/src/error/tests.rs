use super::*;
use serde_json::json;

#[test]
fn codes_statuses_and_messages() {
    use ErrorCode as C;
    let table: &[(C, &str, u16)] = &[
        (C::BlobUnknown, "BLOB_UNKNOWN", 404),
        (C::BlobUploadInvalid, "BLOB_UPLOAD_INVALID", 404),
        (C::BlobUploadUnknown, "BLOB_UPLOAD_UNKNOWN", 404),
        (C::DigestInvalid, "DIGEST_INVALID", 400),
        (C::ManifestBlobUnknown, "MANIFEST_BLOB_UNKNOWN", 400),
        (C::ManifestInvalid, "MANIFEST_INVALID", 400),
        (C::ManifestUnknown, "MANIFEST_UNKNOWN", 404),
        (C::ManifestUnverified, "MANIFEST_UNVERIFIED", 400),
        (C::NameInvalid, "NAME_INVALID", 400),
        (C::NameUnknown, "NAME_UNKNOWN", 404),
        (C::SizeInvalid, "SIZE_INVALID", 400),
        (C::TagInvalid, "TAG_INVALID", 400),
        (C::Unauthorized, "UNAUTHORIZED", 401),
        (C::Denied, "DENIED", 403),
        (C::Unsupported, "UNSUPPORTED", 405),
        (C::TooManyRequests, "TOOMANYREQUESTS", 429),
        (C::RangeInvalid, "RANGE_INVALID", 416),
        (C::PaginationNumberInvalid, "PAGINATION_NUMBER_INVALID", 400),
        (C::Unknown, "UNKNOWN", 500),
        (C::Unavailable, "UNAVAILABLE", 503),
    ];
    assert_eq!(table.len(), C::ALL.len(), "every code is in the table");
    for &(code, wire, status) in table {
        assert_eq!(code.as_str(), wire);
        assert_eq!(code.to_string(), wire);
        assert_eq!(code.status(), status, "{wire}");
        assert_eq!(C::parse(wire), Some(code));
        assert!(!code.default_message().is_empty());
    }
    assert_eq!(C::parse("blob_unknown"), None, "codes are case-sensitive");
    assert_eq!(C::parse("NOPE"), None);
}

#[test]
fn serialises_the_spec_shape() {
    let body = ErrorBody {
        errors: vec![
            ErrorInfo::new(ErrorCode::BlobUnknown).detail(json!({"digest": "sha256:abc"})),
            ErrorInfo::with_message(ErrorCode::Denied, "no"),
        ],
    };
    let v: serde_json::Value = serde_json::from_slice(&body.to_json()).unwrap();
    assert_eq!(
        v,
        json!({"errors": [
            {"code": "BLOB_UNKNOWN", "message": "blob unknown to registry", "detail": {"digest": "sha256:abc"}},
            {"code": "DENIED", "message": "no"}
        ]})
    );
    assert_eq!(body.status(), 404);
    assert_eq!(
        ErrorBody::new(ErrorCode::ManifestUnknown).to_json(),
        br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#
    );
}

#[test]
fn parses_upstream_bodies() {
    // distribution 2.8 as captured in real-clients.md, plus an unknown code and no message.
    let b = ErrorBody::parse(
        br#"{"errors":[{"code":"UNAUTHORIZED","message":"auth required","detail":[{"Type":"repository","Name":"test/img","Action":"pull"}]}]}"#,
    )
    .unwrap();
    assert_eq!(b.first_code(), Some(ErrorCode::Unauthorized));
    assert_eq!(b.status(), 401);
    let b = ErrorBody::parse(br#"{"errors":[{"code":"QUOTA_EXCEEDED"}],"extra":1}"#).unwrap();
    assert_eq!(b.errors[0].message, "");
    assert_eq!(b.first_code(), None);
    assert_eq!(b.status(), 500, "unknown codes map to 500");
}

#[test]
fn refuses_bad_bodies() {
    assert!(matches!(
        ErrorBody::parse(b"not json"),
        Err(ErrorBodyError::Malformed(_))
    ));
    assert!(matches!(
        ErrorBody::parse(br#"{"errors":[{"message":"x"}]}"#),
        Err(ErrorBodyError::Malformed(_))
    ));
    assert!(matches!(
        ErrorBody::parse(br#"{"errors":[]}"#),
        Err(ErrorBodyError::NoErrors)
    ));
    let big = vec![b' '; ERROR_BODY_MAX_LEN + 1];
    let err = ErrorBody::parse(&big).unwrap_err();
    assert!(matches!(err, ErrorBodyError::TooLarge { len, .. } if len == ERROR_BODY_MAX_LEN + 1));
    assert_eq!(
        err.to_string(),
        "error body is 65537 bytes, the limit is 65536"
    );
}
