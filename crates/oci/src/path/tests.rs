use super::*;
use proptest::prelude::*;

const D: &str = "sha256:34aeea00ee1993f0b51a6c4d6dd60fe13b60e668c00e41cae62f701b5f14142e";

fn dg() -> Digest {
    Digest::parse(D).unwrap()
}

fn repo(s: &str) -> Repository {
    Repository::parse(s).unwrap()
}

fn ok(path: &str, query: Option<&str>) -> Request {
    parse(path, query).unwrap_or_else(|e| panic!("{path}?{query:?}: {e}"))
}

#[test]
fn routes_table() {
    let tag = |t: &str| ManifestReference::Tag(Tag::parse(t).unwrap());
    let cases: Vec<(&str, Option<&str>, Route)> = vec![
        ("/v2/", None, Route::Ping),
        ("/v2", None, Route::Ping),
        (
            "/v2/_catalog",
            Some("n=10&last=a%2Fb"),
            Route::Catalog {
                n: Some(10),
                last: Some("a/b".into()),
            },
        ),
        (
            "/v2/test/img/manifests/v1",
            None,
            Route::Manifest {
                repository: repo("test/img"),
                reference: tag("v1"),
            },
        ),
        (
            "/v2/test/img/manifests/V_1.0-rc",
            None,
            Route::Manifest {
                repository: repo("test/img"),
                reference: tag("V_1.0-rc"),
            },
        ),
        (
            &*Box::leak(format!("/v2/library/img/manifests/{D}").into_boxed_str()),
            None,
            Route::Manifest {
                repository: repo("library/img"),
                reference: ManifestReference::Digest(dg()),
            },
        ),
        (
            &*Box::leak(format!("/v2/test/img/blobs/{D}").into_boxed_str()),
            None,
            Route::Blob {
                repository: repo("test/img"),
                digest: dg(),
            },
        ),
        (
            "/v2/test/img/blobs/uploads/",
            None,
            Route::UploadStart {
                repository: repo("test/img"),
                digest: None,
                mount: None,
                from: None,
            },
        ),
        (
            "/v2/test/img/blobs/uploads",
            Some(&*Box::leak(
                format!("mount={D}&from=other%2Frepo").into_boxed_str(),
            )),
            Route::UploadStart {
                repository: repo("test/img"),
                digest: None,
                mount: Some(dg()),
                from: Some(repo("other/repo")),
            },
        ),
        (
            "/v2/test/img/blobs/uploads/",
            Some(&*Box::leak(
                format!("digest={}", D.replace(':', "%3A")).into_boxed_str(),
            )),
            Route::UploadStart {
                repository: repo("test/img"),
                digest: Some(dg()),
                mount: None,
                from: None,
            },
        ),
        (
            "/v2/test/img/blobs/uploads/3f1c2a9e-0b7d-4c1e-9a55-7d2e_x.y=",
            Some(&*Box::leak(
                format!("digest={D}&_state=abc").into_boxed_str(),
            )),
            Route::Upload {
                repository: repo("test/img"),
                id: "3f1c2a9e-0b7d-4c1e-9a55-7d2e_x.y=".into(),
                digest: Some(dg()),
            },
        ),
        (
            "/v2/test/img/tags/list",
            Some("n=2&last=v1"),
            Route::Tags {
                repository: repo("test/img"),
                n: Some(2),
                last: Some("v1".into()),
            },
        ),
        (
            "/v2/test/img/tags/list",
            Some("n=&last="),
            Route::Tags {
                repository: repo("test/img"),
                n: None,
                last: None,
            },
        ),
        (
            &*Box::leak(format!("/v2/test/img/referrers/{D}").into_boxed_str()),
            Some("artifactType=application%2Fvnd.example%2Bjson"),
            Route::Referrers {
                repository: repo("test/img"),
                digest: dg(),
                artifact_type: Some("application/vnd.example+json".into()),
                n: None,
                last: None,
            },
        ),
        // Split at the LAST endpoint segment.
        (
            "/v2/a/manifests/b/manifests/v1",
            None,
            Route::Manifest {
                repository: repo("a/manifests/b"),
                reference: tag("v1"),
            },
        ),
        (
            &*Box::leak(format!("/v2/blobs/blobs/{D}").into_boxed_str()),
            None,
            Route::Blob {
                repository: repo("blobs"),
                digest: dg(),
            },
        ),
        (
            "/v2/a/tags/list/manifests/latest",
            None,
            Route::Manifest {
                repository: repo("a/tags/list"),
                reference: tag("latest"),
            },
        ),
        (
            "/v2/a/blobs/uploads/manifests/x",
            None,
            Route::Manifest {
                repository: repo("a/blobs/uploads"),
                reference: tag("x"),
            },
        ),
        (
            "/v2/manifests/tags/list",
            None,
            Route::Tags {
                repository: repo("manifests"),
                n: None,
                last: None,
            },
        ),
        // Percent-decoding of the path (as Go's URL.Path), including an encoded slash.
        (
            "/v2/a%2Fb/manifests/%76%31",
            None,
            Route::Manifest {
                repository: repo("a/b"),
                reference: tag("v1"),
            },
        ),
        // Unknown and repeated parameters: ignored, first wins.
        (
            "/v2/x/tags/list",
            Some("foo=bar&n=1&n=5&&="),
            Route::Tags {
                repository: repo("x"),
                n: Some(1),
                last: None,
            },
        ),
    ];
    for (path, query, want) in cases {
        let got = ok(path, query);
        assert_eq!(got.route, want, "{path}?{query:?}");
        assert_eq!(got.ns, None);
    }
}

#[test]
fn ns_parameter() {
    let ns = |q: &str| {
        ok("/v2/test/img/manifests/v1", Some(q))
            .ns
            .map(|h| h.to_string())
    };
    assert_eq!(
        ns("ns=myregistry.example.com%3A8443").as_deref(),
        Some("myregistry.example.com:8443")
    );
    assert_eq!(ns("ns=docker.io").as_deref(), Some("docker.io"));
    assert_eq!(ns("ns=127.0.0.1%3A5000").as_deref(), Some("127.0.0.1:5000"));
    assert_eq!(ns("ns=%5B%3A%3A1%5D%3A5000").as_deref(), Some("[::1]:5000"));
    assert_eq!(
        ns("ns=registry.d8-system.svc:5001").as_deref(),
        Some("registry.d8-system.svc:5001")
    );
    assert_eq!(ns("ns="), None);
    assert_eq!(ns("other=1"), None);
    for bad in [
        "ns=evil.com%2Fpath",
        "ns=user%40evil.com",
        "ns=http%3A%2F%2Fx",
        "ns=a+b",
        "ns=x:99999",
        "ns=%3A",
    ] {
        let e = parse("/v2/test/img/manifests/v1", Some(bad)).unwrap_err();
        assert!(matches!(e, PathError::Namespace(_)), "{bad}: {e:?}");
        assert_eq!((e.status(), e.error_code()), (400, ErrorCode::Unsupported));
    }
}

#[test]
fn hostile_and_invalid_paths() {
    use PathError as E;
    let long = format!("/v2/{}/manifests/x", "a/".repeat(PATH_MAX_LEN));
    let long_name = format!("/v2/{}/manifests/x", "a".repeat(256));
    let long_query = "n=".to_owned() + &"1".repeat(QUERY_MAX_LEN);
    let long_last = "last=".to_owned() + &"%C3%A9".repeat(129);
    let long_type = "artifactType=".to_owned() + &"a".repeat(257);
    let referrers = format!("/v2/a/referrers/{D}");
    let cases: Vec<(&str, Option<&str>, E)> = vec![
        (
            &long,
            None,
            E::TooLong {
                len: long.len(),
                max: PATH_MAX_LEN,
            },
        ),
        ("/v3/x/manifests/y", None, E::NotV2),
        ("/v2x", None, E::NotV2),
        ("", None, E::NotV2),
        ("v2/x/manifests/y", None, E::NotV2),
        ("/v2/%2e%2e/manifests/x", None, E::Traversal),
        ("/v2/a/%2E%2E/b/manifests/x", None, E::Traversal),
        ("/v2/../etc/manifests/x", None, E::Traversal),
        ("/v2/a/./b/manifests/x", None, E::Traversal),
        ("/v2/a/manifests/..", None, E::Traversal),
        ("/v2/a%00/manifests/x", None, E::ControlCharacter),
        ("/v2/a\0/manifests/x", None, E::ControlCharacter),
        ("/v2/a/manifests/x%0a", None, E::ControlCharacter),
        ("/v2/a/manifests/x%", None, E::BadEscape { at: 17 }),
        ("/v2/a/manifests/%zz", None, E::BadEscape { at: 16 }),
        ("/v2/a/manifests/%ff", None, E::NotUtf8),
        ("/v2//manifests/x", None, E::EmptySegment),
        ("/v2/a//b/manifests/x", None, E::EmptySegment),
        ("/v2/a/tags/list/", None, E::EmptySegment),
        ("/v2//", None, E::EmptySegment),
        ("/v2/a", None, E::UnknownEndpoint),
        ("/v2/a/b", None, E::UnknownEndpoint),
        ("/v2/a/tags/lists", None, E::UnknownEndpoint),
        ("/v2/a/blobs/uploads/x/y", None, E::UnknownEndpoint),
        ("/v2/manifests/x", None, E::Name(RepositoryError::Empty)),
        ("/v2/blobs/uploads/", None, E::Name(RepositoryError::Empty)),
        (
            "/v2/A/manifests/x",
            None,
            E::Name(RepositoryError::NotLowercase { name: "A".into() }),
        ),
        (
            "/v2/a__-b/manifests/x",
            None,
            E::Name(RepositoryError::InvalidComponent {
                component: "a__-b".into(),
            }),
        ),
        (
            &long_name,
            None,
            E::Name(RepositoryError::TooLong { len: 256, max: 255 }),
        ),
        (
            "/v2/a/manifests/-bad",
            None,
            E::Reference(ReferenceError::InvalidTag { tag: "-bad".into() }),
        ),
        ("/v2/a/blobs/uploads/bad$id", None, E::InvalidUploadId),
        (
            "/v2/a/tags/list",
            Some("n=-1"),
            E::PaginationNumber { value: "-1".into() },
        ),
        (
            "/v2/a/tags/list",
            Some("n=abc"),
            E::PaginationNumber {
                value: "abc".into(),
            },
        ),
        (
            "/v2/a/tags/list",
            Some("n=%2B1"),
            E::PaginationNumber { value: "+1".into() },
        ),
        (
            "/v2/_catalog",
            Some("n=99999999999"),
            E::PaginationNumber {
                value: "99999999999".into(),
            },
        ),
        (
            "/v2/a/blobs/uploads/",
            Some("from=UP"),
            E::MountFrom(RepositoryError::NotLowercase { name: "UP".into() }),
        ),
        ("/v2/a/manifests/x", Some("ns=%zz"), E::QueryEncoding),
        (
            "/v2/a/tags/list",
            Some(&long_last),
            E::QueryValueTooLong {
                parameter: "last",
                max: QUERY_VALUE_MAX_LEN,
            },
        ),
        (
            "/v2/_catalog",
            Some(&long_last),
            E::QueryValueTooLong {
                parameter: "last",
                max: QUERY_VALUE_MAX_LEN,
            },
        ),
        (
            &referrers,
            Some(&long_type),
            E::QueryValueTooLong {
                parameter: "artifactType",
                max: QUERY_VALUE_MAX_LEN,
            },
        ),
        ("/v2/a/manifests/x", Some("ns=%ff"), E::QueryEncoding),
        (
            "/v2/a/tags/list",
            Some(&long_query),
            E::QueryTooLong {
                len: long_query.len(),
                max: QUERY_MAX_LEN,
            },
        ),
    ];
    for (path, query, want) in cases {
        assert_eq!(parse(path, query), Err(want), "{path:?}?{query:?}");
    }
    let digest_errors = [
        ("/v2/a/blobs/notadigest", None),
        ("/v2/a/manifests/sha256:xyz", None),
        ("/v2/a/referrers/md5:00", None),
        ("/v2/a/blobs/uploads/", Some("digest=sha256%3A00")),
        ("/v2/a/blobs/uploads/", Some("mount=x")),
        ("/v2/a/blobs/uploads/id", Some("digest=bad")),
    ];
    for (path, query) in digest_errors {
        let e = parse(path, query).unwrap_err();
        assert!(matches!(e, PathError::Digest(_)), "{path}?{query:?}: {e:?}");
        assert_eq!(
            (e.status(), e.error_code()),
            (400, ErrorCode::DigestInvalid)
        );
    }
}

#[test]
fn error_codes_and_statuses() {
    let code = |p: &str, q: Option<&str>| {
        let e = parse(p, q).unwrap_err();
        (e.status(), e.error_code())
    };
    assert_eq!(
        code("/v2/%2e%2e/manifests/x", None),
        (400, ErrorCode::NameInvalid)
    );
    assert_eq!(
        code("/v2/a/manifests/-x", None),
        (400, ErrorCode::TagInvalid)
    );
    assert_eq!(
        code("/v2/a/tags/list", Some("n=x")),
        (400, ErrorCode::PaginationNumberInvalid)
    );
    assert_eq!(
        code("/v2/a/blobs/uploads/a$", None),
        (404, ErrorCode::BlobUploadUnknown)
    );
    assert_eq!(code("/healthz", None), (404, ErrorCode::Unsupported));
    assert_eq!(code("/v2/a/b", None), (400, ErrorCode::Unsupported));
    assert_eq!(
        parse("/v2/a%00/manifests/x", None).unwrap_err().to_string(),
        "request path contains a control character"
    );
}

#[test]
fn rebuilding_paths_for_forwarding() {
    let r = ok(
        &format!("/v2/system/deckhouse/install/blobs/{D}"),
        Some("ns=registry.d8-system.svc%3A5001"),
    )
    .route;
    assert_eq!(r.kind(), RouteKind::Blob);
    assert_eq!(r.kind().as_str(), "blob");
    assert_eq!(r.suffix(), format!("/blobs/{D}"));
    assert_eq!(r.path(), format!("/v2/system/deckhouse/install/blobs/{D}"));
    assert_eq!(
        r.path_for(&repo("deckhouse/ee/install")),
        format!("/v2/deckhouse/ee/install/blobs/{D}")
    );
    assert_eq!(r.query(), None);
    let r = ok("/v2/a/tags/list", Some("last=v%201&n=3&ns=x.io")).route;
    assert_eq!(
        r.query().as_deref(),
        Some("n=3&last=v+1"),
        "canonical order, ns dropped"
    );
    // The longest values a query may carry still re-encode within the query limit.
    let worst = Route::Tags {
        repository: repo("a"),
        n: Some(u32::MAX),
        last: Some("é".repeat(128)),
    };
    let q = worst.query().unwrap();
    assert!(q.len() <= QUERY_MAX_LEN, "{}", q.len());
    assert_eq!(parse(&worst.path(), Some(&q)).unwrap().route, worst);
    assert_eq!(Route::Ping.path(), "/v2/");
    assert_eq!(
        Route::Catalog {
            n: None,
            last: None
        }
        .path(),
        "/v2/_catalog"
    );
    assert_eq!(Route::Ping.repository(), None);
}

fn component() -> impl Strategy<Value = String> {
    "[a-z0-9]{1,6}(([._]|__|-{1,2})[a-z0-9]{1,6}){0,2}"
}

fn repository() -> impl Strategy<Value = Repository> {
    // Endpoint words are valid components too: the parser must still split at the last one.
    let word = prop_oneof![
        component(),
        Just("manifests".to_owned()),
        Just("blobs".to_owned()),
        Just("uploads".to_owned()),
        Just("tags".to_owned()),
        Just("list".to_owned())
    ];
    proptest::collection::vec(word, 1..5)
        .prop_map(|v| v.join("/"))
        .prop_map(|s| Repository::parse(&s).expect("generated names are valid"))
}

fn digest() -> impl Strategy<Value = Digest> {
    any::<[u8; 32]>().prop_map(Digest::Sha256)
}

fn route() -> impl Strategy<Value = Route> {
    let tag = "[A-Za-z0-9_][A-Za-z0-9._-]{0,20}"
        .prop_map(|t| ManifestReference::Tag(Tag::parse(&t).unwrap()));
    let reference = prop_oneof![tag, digest().prop_map(ManifestReference::Digest)];
    let text = proptest::option::of("[ -~]{1,20}");
    prop_oneof![
        Just(Route::Ping),
        (proptest::option::of(any::<u32>()), text.clone())
            .prop_map(|(n, last)| Route::Catalog { n, last }),
        (repository(), reference).prop_map(|(repository, reference)| Route::Manifest {
            repository,
            reference
        }),
        (repository(), digest())
            .prop_map(|(repository, digest)| Route::Blob { repository, digest }),
        (
            repository(),
            proptest::option::of(digest()),
            proptest::option::of(digest()),
            proptest::option::of(repository())
        )
            .prop_map(|(repository, digest, mount, from)| Route::UploadStart {
                repository,
                digest,
                mount,
                from
            }),
        (
            repository(),
            "[A-Za-z0-9._=-]{1,40}",
            proptest::option::of(digest())
        )
            .prop_filter(
                "an id spelled like a dot segment is a traversal",
                |(_, id, _)| id != "." && id != ".."
            )
            .prop_map(|(repository, id, digest)| Route::Upload {
                repository,
                id,
                digest
            }),
        (
            repository(),
            proptest::option::of(any::<u32>()),
            text.clone()
        )
            .prop_map(|(repository, n, last)| Route::Tags {
                repository,
                n,
                last
            }),
        (
            repository(),
            digest(),
            text.clone(),
            proptest::option::of(0u32..1000),
            text
        )
            .prop_map(
                |(repository, digest, artifact_type, n, last)| Route::Referrers {
                    repository,
                    digest,
                    artifact_type,
                    n,
                    last,
                }
            ),
    ]
}

fn host() -> impl Strategy<Value = RegistryHost> {
    "[a-z0-9]{1,8}(\\.[a-z0-9]{1,8}){0,2}(:[1-9][0-9]{0,3})?"
        .prop_map(|h| RegistryHost::parse(&h).unwrap())
}

proptest! {
    #[test]
    fn generated_requests_round_trip(route in route(), ns in proptest::option::of(host())) {
        let mut query: Vec<String> = route.query().into_iter().collect();
        if let Some(ns) = &ns {
            query.push(format!("ns={}", crate::encoding::query_escape(ns.as_str())));
        }
        let query = query.join("&");
        let parsed = parse(&route.path(), Some(&query))
            .map_err(|e| TestCaseError::fail(format!("{} ? {query}: {e}", route.path())))?;
        prop_assert_eq!(parsed.route, route);
        prop_assert_eq!(parsed.ns, ns);
    }

    #[test]
    fn arbitrary_input_never_panics(path in "/v2/\\PC{0,120}", query in proptest::option::of("\\PC{0,60}")) {
        if let Ok(req) = parse(&path, query.as_deref()) {
            // Whatever parses re-parses to the same thing from its canonical form.
            let again = parse(&req.route.path(), req.route.query().as_deref()).unwrap();
            prop_assert_eq!(again.route, req.route);
        }
    }

    #[test]
    fn encoded_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        let path: String = bytes.iter().map(|b| format!("%{b:02x}")).collect();
        let _ = parse(&format!("/v2/{path}/manifests/x"), Some(&format!("ns={path}")));
    }
}
