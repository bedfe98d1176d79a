use super::*;

#[test]
fn failover_rules() {
    use FailoverReason::*;
    use Outcome::*;
    let cases = [
        // (status, our credentials, last target) → verdict
        (StatusCode::OK, true, false, Verdict::Relay(served)),
        (
            StatusCode::PARTIAL_CONTENT,
            false,
            true,
            Verdict::Relay(served),
        ),
        (
            StatusCode::NOT_FOUND,
            true,
            false,
            Verdict::Relay(not_found),
        ),
        (
            StatusCode::UNAUTHORIZED,
            true,
            false,
            Verdict::Next(unauthorized),
        ),
        (
            StatusCode::FORBIDDEN,
            true,
            true,
            Verdict::Next(unauthorized),
        ),
        (
            StatusCode::UNAUTHORIZED,
            false,
            false,
            Verdict::Relay(served),
        ),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            false,
            false,
            Verdict::Next(server_error),
        ),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            true,
            false,
            Verdict::Next(server_error),
        ),
        // The last target's 5xx is relayed unchanged (Deckhouse's agent does the same).
        (
            StatusCode::BAD_GATEWAY,
            false,
            true,
            Verdict::Relay(unavailable),
        ),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            true,
            true,
            Verdict::Relay(unavailable),
        ),
        (
            StatusCode::RANGE_NOT_SATISFIABLE,
            false,
            false,
            Verdict::Relay(served),
        ),
    ];
    for (status, ours, last, verdict) in cases {
        assert_eq!(
            judge(status, ours, last),
            verdict,
            "{status} ours={ours} last={last}"
        );
    }
}

#[test]
fn only_listed_headers_are_forwarded_and_authorization_only_on_pass_through() {
    let mut client = HeaderMap::new();
    client.append(
        header::ACCEPT,
        HeaderValue::from_static("application/vnd.oci.image.manifest.v1+json"),
    );
    client.append(
        header::ACCEPT,
        HeaderValue::from_static("application/vnd.docker.distribution.manifest.v2+json"),
    );
    client.append(header::RANGE, HeaderValue::from_static("bytes=0-9"));
    client.append(
        header::AUTHORIZATION,
        HeaderValue::from_static("Basic Y2xpZW50OnNlY3JldA=="),
    );
    client.append(header::COOKIE, HeaderValue::from_static("session=1"));
    client.append(header::HOST, HeaderValue::from_static("127.0.0.1:5001"));

    let primary = forwarded_headers(&client, Kind::Primary);
    assert_eq!(
        primary.get_all(header::ACCEPT).iter().count(),
        2,
        "every Accept line"
    );
    assert_eq!(primary.get(header::RANGE).unwrap(), "bytes=0-9");
    assert!(primary.get(header::AUTHORIZATION).is_none());
    assert!(primary.get(header::COOKIE).is_none());
    assert!(primary.get(header::HOST).is_none());

    let pass = forwarded_headers(&client, Kind::PassThrough);
    assert_eq!(
        pass.get(header::AUTHORIZATION).unwrap(),
        "Basic Y2xpZW50OnNlY3JldA=="
    );
}

#[test]
fn forwarded_headers_do_not_keep_the_request_heads_buffer() {
    // hyper's header values are slices of the buffer the head was read into.
    let head = Bytes::from_static(b"application/json curl/8 Basic eA==");
    let shared =
        |range: std::ops::Range<usize>| HeaderValue::from_maybe_shared(head.slice(range)).unwrap();
    let mut client = HeaderMap::new();
    client.append(header::ACCEPT, shared(0..16));
    client.append(header::USER_AGENT, shared(17..23));
    let mut authorization = shared(24..34);
    authorization.set_sensitive(true);
    client.append(header::AUTHORIZATION, authorization);

    let forwarded = forwarded_headers(&client, Kind::PassThrough);
    let buffer = head.as_ptr_range();
    for (name, value) in &forwarded {
        assert_eq!(value, client.get(name).unwrap());
        assert!(
            !buffer.contains(&value.as_bytes().as_ptr()),
            "{name} still points into the request head's buffer"
        );
    }
    assert_eq!(forwarded.len(), 3);
    assert!(forwarded[header::AUTHORIZATION].is_sensitive());
}

#[test]
fn pagination_links_name_the_clients_repository() {
    let value =
        HeaderValue::from_static(r#"</v2/deckhouse/ee/install/tags/list?n=2&last=b>; rel="next""#);
    let rewritten = rewrite_link(&value, "deckhouse/ee/install", "system/deckhouse/install");
    assert_eq!(
        rewritten,
        r#"</v2/system/deckhouse/install/tags/list?n=2&last=b>; rel="next""#
    );
}

#[tokio::test]
async fn local_answers_and_refusals() {
    let proxy = Proxy::new(
        registry_client::Client::default(),
        LayoutCell::default(),
        Arc::new(Metrics::default()),
        "127.0.0.1:5001",
    );
    let call = |method: Method, uri: &str| {
        let request = Request::builder().method(method).uri(uri).body(()).unwrap();
        let proxy = proxy.clone();
        async move {
            let response = proxy.handle(request).await;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (status, headers, String::from_utf8(body.to_vec()).unwrap())
        }
    };
    let (status, headers, body) = call(Method::GET, "/v2/").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "{}"));
    assert_eq!(headers["docker-distribution-api-version"], "registry/2.0");
    assert_eq!(call(Method::GET, "/healthz").await.0, StatusCode::OK);

    let (status, _, body) = call(Method::PUT, "/v2/a/manifests/v1").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(body.contains("UNSUPPORTED"), "{body}");

    let (status, _, body) = call(Method::GET, "/v2/a/../b/manifests/v1").await;
    assert!(status.is_client_error(), "{status}");
    assert!(body.contains("errors"), "{body}");

    // No layout yet: 502 with the reason.
    let (status, _, body) = call(Method::GET, "/v2/system/deckhouse/manifests/v1").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(body.contains("no registry layout"), "{body}");

    // The agent named as its own registry would loop.
    let (status, _, body) = call(Method::GET, "/v2/a/manifests/v1?ns=127.0.0.1%3A5001").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(body.contains("loop"), "{body}");
}
