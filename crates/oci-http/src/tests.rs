use super::*;

fn header<'a, T>(r: &'a Response<T>, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

fn range_request(value: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(RANGE, HeaderValue::from_str(value).unwrap());
    h
}

fn digest() -> Digest {
    Digest::sha256(b"x")
}

fn content(d: &Digest) -> Content<'_> {
    Content {
        size: 1000,
        digest: d,
        media_type: "application/octet-stream",
    }
}

#[test]
fn error_answers_carry_status_json_and_api_version() {
    let r = error(ErrorCode::BlobUnknown, "blob unknown to registry");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        header(&r, "docker-distribution-api-version"),
        Some("registry/2.0")
    );
    assert_eq!(
        header(&r, "content-type"),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(
        header(&r, "content-length"),
        Some(r.body().len().to_string().as_str())
    );
    let body = ErrorBody::parse(r.body()).unwrap();
    assert_eq!(body.first_code(), Some(ErrorCode::BlobUnknown));
    assert_eq!(
        error(ErrorCode::Denied, "no").status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(ping().status(), StatusCode::OK);
    assert_eq!(ping().body().as_ref(), b"{}");
}

#[test]
fn path_errors_answer_with_the_parsers_status_and_code() {
    let e = oci::path::parse("/v2/UPPER/manifests/x", None).unwrap_err();
    let r = path_error(&e);
    assert_eq!(r.status().as_u16(), e.status());
    let body = ErrorBody::parse(r.body()).unwrap();
    assert_eq!(body.errors[0].code, e.error_code().as_str());
}

#[test]
fn head_has_the_exact_length_and_digest_and_no_body() {
    let d = digest();
    let r = blob(&Method::HEAD, &range_request("bytes=0-9"), &content(&d));
    assert_eq!(r.status(), StatusCode::OK, "ranges apply to GET only");
    assert_eq!(*r.body(), BodyPlan::Empty);
    assert_eq!(header(&r, "content-length"), Some("1000"));
    assert_eq!(
        header(&r, "docker-content-digest"),
        Some(d.to_string().as_str())
    );
    let m = manifest(
        &Method::HEAD,
        &Content {
            size: 401,
            digest: &d,
            media_type: oci::media_type::OCI_MANIFEST,
        },
    );
    assert_eq!(*m.body(), BodyPlan::Empty);
    assert_eq!(header(&m, "content-length"), Some("401"));
    assert_eq!(
        header(&m, "content-type"),
        Some(oci::media_type::OCI_MANIFEST)
    );
    assert_eq!(
        *manifest(&Method::GET, &content(&d)).body(),
        BodyPlan::Whole
    );
}

/// Range header, status, Content-Range, Content-Length, the range to stream.
type RangeCase = (
    &'static str,
    u16,
    Option<&'static str>,
    &'static str,
    Option<(u64, u64)>,
);

#[test]
fn every_range_case() {
    let d = digest();
    let c = content(&d);
    let cases: &[RangeCase] = &[
        ("bytes=0-9", 206, Some("bytes 0-9/1000"), "10", Some((0, 9))),
        (
            "bytes=10-",
            206,
            Some("bytes 10-999/1000"),
            "990",
            Some((10, 999)),
        ),
        (
            "bytes=-5",
            206,
            Some("bytes 995-999/1000"),
            "5",
            Some((995, 999)),
        ),
        (
            "bytes=990-5000",
            206,
            Some("bytes 990-999/1000"),
            "10",
            Some((990, 999)),
        ),
        ("bytes=1000-", 416, Some("bytes */1000"), "0", None),
        ("bytes=2000-3000", 416, Some("bytes */1000"), "0", None),
        ("bytes=abc", 200, None, "1000", None),
        ("items=0-9", 200, None, "1000", None),
        ("bytes=0-1,5-6", 200, None, "1000", None),
    ];
    for (range, status, content_range, length, plan) in cases {
        let r = blob(&Method::GET, &range_request(range), &c);
        assert_eq!(r.status().as_u16(), *status, "{range}");
        assert_eq!(header(&r, "content-range"), *content_range, "{range}");
        assert_eq!(header(&r, "content-length"), Some(*length), "{range}");
        assert_eq!(header(&r, "accept-ranges"), Some("bytes"), "{range}");
        let expected = match (status, plan) {
            (206, Some((start, end))) => BodyPlan::Range(oci::ByteRange {
                start: *start,
                end: *end,
            }),
            (416, _) => BodyPlan::Empty,
            _ => BodyPlan::Whole,
        };
        assert_eq!(*r.body(), expected, "{range}");
    }
    let r = blob(&Method::GET, &HeaderMap::new(), &c);
    assert_eq!((r.status(), *r.body()), (StatusCode::OK, BodyPlan::Whole));
}

#[test]
fn tag_lists_paginate_with_link() {
    let tags = ["b", "a", "d", "c", "e"].map(String::from);
    let r = tag_list(
        "team/app",
        "/v2/team/app/tags/list",
        tags.clone(),
        Some(2),
        None,
    );
    let list: oci::pagination::TagList = serde_json::from_slice(r.body()).unwrap();
    assert_eq!(list.name, "team/app");
    assert_eq!(list.tags, ["a", "b"]);
    assert_eq!(
        header(&r, "link"),
        Some("</v2/team/app/tags/list?n=2&last=b>; rel=\"next\"")
    );
    let r = tag_list(
        "team/app",
        "/v2/team/app/tags/list",
        tags.clone(),
        Some(2),
        Some("d"),
    );
    let list: oci::pagination::TagList = serde_json::from_slice(r.body()).unwrap();
    assert_eq!(list.tags, ["e"]);
    assert_eq!(header(&r, "link"), None);
    let r = tag_list("team/app", "/v2/team/app/tags/list", tags, Some(0), None);
    let list: oci::pagination::TagList = serde_json::from_slice(r.body()).unwrap();
    assert!(list.tags.is_empty());
    assert_eq!(header(&r, "link"), None, "n=0: empty, no Link");
}
