use super::*;
use proptest::prelude::*;

const D: &str = "sha256:34aeea00ee1993f0b51a6c4d6dd60fe13b60e668c00e41cae62f701b5f14142e";

#[test]
fn normalises_like_docker() {
    let cases: &[(&str, &str, &str)] = &[
        // input, canonical, familiar
        ("nginx", "docker.io/library/nginx:latest", "nginx:latest"),
        ("nginx:1.25", "docker.io/library/nginx:1.25", "nginx:1.25"),
        (
            "library/nginx",
            "docker.io/library/nginx:latest",
            "nginx:latest",
        ),
        (
            "docker.io/nginx",
            "docker.io/library/nginx:latest",
            "nginx:latest",
        ),
        (
            "index.docker.io/nginx",
            "docker.io/library/nginx:latest",
            "nginx:latest",
        ),
        (
            "index.docker.io/library/nginx:1",
            "docker.io/library/nginx:1",
            "nginx:1",
        ),
        ("user/app", "docker.io/user/app:latest", "user/app:latest"),
        (
            "docker.io/library/foo/bar",
            "docker.io/library/foo/bar:latest",
            "library/foo/bar:latest",
        ),
        (
            "localhost/foo",
            "localhost/foo:latest",
            "localhost/foo:latest",
        ),
        (
            "localhost:5000/foo/bar:v1",
            "localhost:5000/foo/bar:v1",
            "localhost:5000/foo/bar:v1",
        ),
        // No slash: the colon starts a tag, as in Docker.
        (
            "localhost:5000",
            "docker.io/library/localhost:5000",
            "localhost:5000",
        ),
        (
            "127.0.0.1:5000/test/img:v1",
            "127.0.0.1:5000/test/img:v1",
            "127.0.0.1:5000/test/img:v1",
        ),
        (
            "[::1]:5000/img:v1",
            "[::1]:5000/img:v1",
            "[::1]:5000/img:v1",
        ),
        (
            "[fe80::1]/img",
            "[fe80::1]/img:latest",
            "[fe80::1]/img:latest",
        ),
        (
            "Example.com/foo",
            "Example.com/foo:latest",
            "Example.com/foo:latest",
        ),
        ("Upper/foo", "Upper/foo:latest", "Upper/foo:latest"),
        // Dropping docker.io/ here would turn "a.b" into a registry: the familiar form keeps it.
        (
            "docker.io/a.b/c",
            "docker.io/a.b/c:latest",
            "docker.io/a.b/c:latest",
        ),
        (
            "docker.io/localhost/c",
            "docker.io/localhost/c:latest",
            "docker.io/localhost/c:latest",
        ),
        (
            "docker.io/library/a.b",
            "docker.io/library/a.b:latest",
            "a.b:latest",
        ),
        (
            "a.b/c__d/e---f/g.h_i:V_1.0-x",
            "a.b/c__d/e---f/g.h_i:V_1.0-x",
            "a.b/c__d/e---f/g.h_i:V_1.0-x",
        ),
    ];
    for (input, canonical, familiar) in cases {
        let r = Reference::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(r.to_string(), *canonical, "canonical of {input}");
        assert_eq!(r.familiar(), *familiar, "familiar of {input}");
    }
}

#[test]
fn digests_and_tags_together() {
    let r = Reference::parse(&format!("registry.example.com:8443/system/deckhouse@{D}")).unwrap();
    assert_eq!(r.registry().as_str(), "registry.example.com:8443");
    assert_eq!(r.registry().host(), "registry.example.com");
    assert_eq!(r.registry().port(), Some(8443));
    assert_eq!(r.repository().as_str(), "system/deckhouse");
    assert_eq!(
        r.tag(),
        None,
        "a digest-pinned reference gets no default tag"
    );
    assert_eq!(r.digest().unwrap().to_string(), D);
    assert_eq!(r.manifest_reference(), D);

    let r = Reference::parse(&format!("quay.io/a/b:t@{D}")).unwrap();
    assert_eq!(r.tag().unwrap().as_str(), "t");
    assert_eq!(r.manifest_reference(), D, "the digest wins over the tag");
    assert_eq!(r.to_string(), format!("quay.io/a/b:t@{D}"));

    let r = Reference::parse(&format!("nginx@{D}")).unwrap();
    assert_eq!(r.familiar(), format!("nginx@{D}"));
}

#[test]
fn registry_host_parts() {
    let h = RegistryHost::parse("[::1]:5000").unwrap();
    assert_eq!((h.host(), h.port()), ("[::1]", Some(5000)));
    let h = RegistryHost::parse("[::1]").unwrap();
    assert_eq!((h.host(), h.port()), ("[::1]", None));
    let h = RegistryHost::parse("docker.io").unwrap();
    assert!(h.is_docker_hub());
    assert_eq!(h.api_host(), "registry-1.docker.io");
    assert!(h.eq_ignore_case("DOCKER.io"));
    assert_eq!(
        RegistryHost::parse("quay.io").unwrap().api_host(),
        "quay.io"
    );
}

fn err(input: &str) -> ReferenceError {
    Reference::parse(input).expect_err(input)
}

#[test]
fn rejects_invalid_references() {
    use ReferenceError as E;
    use RepositoryError as R;
    assert_eq!(err(""), E::Empty);
    let hex = "a".repeat(64);
    assert_eq!(err(&hex), E::HexIdentifier(hex.clone()));
    assert_eq!(
        err("Nginx"),
        E::Repository(R::NotLowercase {
            name: "library/Nginx".into()
        })
    );
    assert_eq!(
        err("foo/Bar"),
        E::Repository(R::NotLowercase {
            name: "foo/Bar".into()
        })
    );
    assert_eq!(err("foo:"), E::InvalidTag { tag: String::new() });
    assert_eq!(err("foo:-bad"), E::InvalidTag { tag: "-bad".into() });
    assert_eq!(err("foo:.bad"), E::InvalidTag { tag: ".bad".into() });
    assert!(matches!(
        err(&format!("foo:{}", "a".repeat(129))),
        E::InvalidTag { .. }
    ));
    assert!(Reference::parse(&format!("foo:{}", "a".repeat(128))).is_ok());
    assert!(matches!(
        err("foo@sha256:abc"),
        E::Digest(DigestError::InvalidLength { .. })
    ));
    assert!(matches!(err("foo@"), E::Digest(DigestError::Empty)));
    assert_eq!(err("foo//bar"), E::Repository(R::EmptyComponent));
    assert_eq!(err("example.com/"), E::Repository(R::Empty));
    assert_eq!(err("example.com/foo/"), E::Repository(R::EmptyComponent));
    assert_eq!(err("foo/../bar"), E::Repository(R::Traversal));
    assert_eq!(err("example.com/./bar"), E::Repository(R::Traversal));
    for bad in [
        "foo___bar",
        "foo..bar",
        "foo-",
        "_foo",
        "foo.",
        "fo%6f",
        "foo bar",
        "fo\0o",
    ] {
        assert!(
            matches!(
                err(&format!("example.com/{bad}")),
                E::Repository(R::InvalidComponent { .. })
            ),
            "{bad}"
        );
    }
    for bad in [
        "example.com:99999/foo",
        "example.com:/foo",
        "example.com:8x/foo",
        "-bad.com/foo",
        "bad-.com/foo",
        "a..b/foo",
        "[::1/foo",
        "[zz:1]/foo",
        "[]:5000/foo",
        "[::1]x/foo",
        "ex_ample.com/foo",
    ] {
        assert!(
            matches!(err(bad), E::InvalidRegistry { .. }),
            "{bad}: {:?}",
            err(bad)
        );
    }
}

#[test]
fn length_limits() {
    let repo = "a".repeat(250);
    assert_eq!(
        err(&format!("example.com/{repo}")),
        ReferenceError::NameTooLong { len: 262, max: 255 }
    );
    assert!(Reference::parse(&format!("ex.com/{}", "a".repeat(248))).is_ok());
    assert_eq!(
        Repository::parse(&"a".repeat(256)),
        Err(RepositoryError::TooLong { len: 256, max: 255 })
    );
    assert!(Repository::parse(&"a".repeat(255)).is_ok());
}

#[test]
fn error_messages_are_readable() {
    assert_eq!(
        err("foo//bar").to_string(),
        "repository name has an empty path component"
    );
    assert_eq!(
        err("example.com:99999/foo").to_string(),
        "registry host \"example.com:99999\" is invalid: the port must be a number up to 65535"
    );
    assert_eq!(
        err("foo:-x").to_string(),
        "tag \"-x\" must match [A-Za-z0-9_][A-Za-z0-9._-]{0,127}"
    );
}

#[test]
fn repository_components() {
    let r = Repository::parse("system/deckhouse/install").unwrap();
    assert_eq!(
        r.components().collect::<Vec<_>>(),
        ["system", "deckhouse", "install"]
    );
}

fn component() -> impl Strategy<Value = String> {
    "[a-z0-9]{1,8}(([._]|__|-{1,3})[a-z0-9]{1,8}){0,2}"
}

fn repository() -> impl Strategy<Value = String> {
    proptest::collection::vec(component(), 1..4).prop_map(|v| v.join("/"))
}

fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?(\\.[a-z0-9]{1,6}){1,2}(:[1-9][0-9]{0,3})?",
        Just("localhost".to_owned()),
        "localhost:[1-9][0-9]{0,3}",
        "\\[[0-9a-f]{0,4}:[0-9a-f:]{1,8}\\](:[1-9][0-9]{0,3})?",
    ]
    .prop_filter("docker hub names are normalised", |h| {
        h != DOCKER_HUB && h != DOCKER_HUB_LEGACY
    })
}

fn digest() -> impl Strategy<Value = Digest> {
    any::<[u8; 32]>().prop_map(Digest::Sha256)
}

proptest! {
    #[test]
    fn canonical_round_trip(
        host in host(),
        repo in repository(),
        tag in proptest::option::of("[A-Za-z0-9_][A-Za-z0-9._-]{0,20}"),
        digest in proptest::option::of(digest()),
    ) {
        let mut s = format!("{host}/{repo}");
        if let Some(t) = &tag { s.push(':'); s.push_str(t); }
        if let Some(d) = &digest { s.push('@'); s.push_str(&d.to_string()); }
        let r = Reference::parse(&s).map_err(|e| TestCaseError::fail(format!("{s}: {e}")))?;
        let expected = if tag.is_none() && digest.is_none() { format!("{s}:latest") } else { s.clone() };
        prop_assert_eq!(r.to_string(), expected);
        prop_assert_eq!(r.registry().as_str(), host.as_str());
        prop_assert_eq!(r.repository().as_str(), repo.as_str());
        prop_assert_eq!(r.digest(), digest);
    }

    #[test]
    fn familiar_and_canonical_forms_parse_back(
        repo in repository(),
        tag in "[a-z0-9_][a-z0-9._-]{0,10}",
        hub in prop_oneof![Just(""), Just("docker.io/"), Just("index.docker.io/")],
    ) {
        let input = format!("{hub}{repo}:{tag}");
        let Ok(r) = Reference::parse(&input) else {
            // Without a hub prefix a dotted first component is read as a registry host, which
            // may be invalid (`a.b_c`); with a hub prefix everything must parse.
            prop_assert!(hub.is_empty(), "{} does not parse", input);
            return Ok(());
        };
        prop_assert_eq!(Reference::parse(&r.to_string()).unwrap(), r.clone());
        prop_assert_eq!(Reference::parse(&r.familiar()).unwrap(), r);
    }

    #[test]
    fn parse_never_panics(s in "\\PC{0,300}") {
        if let Ok(r) = Reference::parse(&s) {
            // Whatever parses is canonical-stable.
            prop_assert_eq!(Reference::parse(&r.to_string()).unwrap(), r);
        }
    }
}
