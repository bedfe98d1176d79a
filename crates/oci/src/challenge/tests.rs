use super::*;
use proptest::prelude::*;

fn one(value: &str) -> Challenge {
    let mut v = parse_challenges(value).unwrap_or_else(|e| panic!("{value}: {e}"));
    assert_eq!(v.len(), 1, "{value}");
    v.remove(0)
}

#[test]
fn docker_bearer_challenge() {
    // As distribution and the test proxy in real-clients.md send it.
    let c = one(
        r#"Bearer realm="http://127.0.0.1:5001/token",service="logproxy",scope="repository:test/img:pull""#,
    );
    assert!(c.is_bearer());
    assert_eq!(c.realm(), Some("http://127.0.0.1:5001/token"));
    assert_eq!(c.service(), Some("logproxy"));
    assert_eq!(c.scope(), Some("repository:test/img:pull"));
    assert_eq!(c.scopes(), ["repository:test/img:pull"]);
    assert_eq!(c.error(), None);
}

#[test]
fn grammar_variants() {
    let c = one(
        r#"bEaReR REALM = "https://auth.example/token" , Service=registry.example , scope="repository:a:pull,push repository:b:pull", error="insufficient_scope""#,
    );
    assert!(c.is_bearer(), "scheme is case-insensitive");
    assert_eq!(
        c.realm(),
        Some("https://auth.example/token"),
        "names are case-insensitive, BWS around '='"
    );
    assert_eq!(
        c.service(),
        Some("registry.example"),
        "unquoted token value"
    );
    assert_eq!(
        c.scopes(),
        ["repository:a:pull,push", "repository:b:pull"],
        "comma inside quotes, space-separated scopes"
    );
    assert_eq!(c.error(), Some("insufficient_scope"));

    let c = one(r#"Basic realm="say \"hi\", \\ ok",charset="UTF-8""#);
    assert!(c.is_basic());
    assert_eq!(
        c.realm(),
        Some(r#"say "hi", \ ok"#),
        "escaped quote and backslash"
    );
    assert_eq!(c.param("charset"), Some("UTF-8"));

    let c = one(r#"Bearer realm="a" service="b""#);
    assert_eq!(
        (c.realm(), c.service()),
        (Some("a"), Some("b")),
        "missing comma tolerated"
    );

    let c = one("Basic");
    assert!(c.is_basic() && c.params.is_empty());

    let c = one(r#"Bearer realm="ünïcode""#);
    assert_eq!(c.realm(), Some("ünïcode"));

    let c = one(r#"Bearer scope="a",scope="b c""#);
    assert_eq!(c.scopes(), ["a", "b", "c"], "repeated scope parameters");
}

#[test]
fn several_challenges() {
    let v = parse_challenges(
        r#"Negotiate abc/+==, Basic realm="basic, realm", Bearer realm="https://t/token",service="s",,  NTLM"#,
    )
    .unwrap();
    let schemes: Vec<String> = v.iter().map(|c| c.scheme.to_string()).collect();
    assert_eq!(schemes, ["Negotiate", "Basic", "Bearer", "NTLM"]);
    assert_eq!(v[0].scheme, AuthScheme::Other("Negotiate".into()));
    assert_eq!(v[0].token68.as_deref(), Some("abc/+=="));
    assert_eq!(v[1].realm(), Some("basic, realm"));
    assert_eq!(v[2].service(), Some("s"));
    assert!(v[3].params.is_empty());

    let all = parse_all(["Basic realm=\"r\"", "", "Bearer realm=\"t\""]).unwrap();
    assert_eq!(all.len(), 2);
    assert!(all[0].is_basic() && all[1].is_bearer());
}

#[test]
fn malformed_values() {
    use ChallengeError as E;
    let cases: &[(&str, E)] = &[
        ("", E::Empty),
        (" , ,", E::Empty),
        (
            r#"Bearer realm="unterminated"#,
            E::UnterminatedQuote { at: 13 },
        ),
        (
            r#"Bearer realm="ends in escape\"#,
            E::UnterminatedQuote { at: 13 },
        ),
        (
            "Bearer realm=",
            E::MissingValue {
                name: "realm".into(),
            },
        ),
        (
            "Bearer realm=,service=x",
            E::MissingValue {
                name: "realm".into(),
            },
        ),
        (r#"Bearer realm="a"@"#, E::Unexpected { at: 16, found: '@' }),
        (
            r#"Bearer realm="a" Basic"#,
            E::Unexpected { at: 17, found: 'B' },
        ),
        ("=x", E::Unexpected { at: 0, found: '=' }),
        (r#""quoted""#, E::Unexpected { at: 0, found: '"' }),
        ("Bearer \"x\"", E::Unexpected { at: 7, found: '"' }),
    ];
    for (value, want) in cases {
        assert_eq!(parse_challenges(value).as_ref(), Err(want), "{value:?}");
    }
    assert_eq!(parse_all([""]), Err(E::Empty));
    assert_eq!(
        parse_challenges("Bearer realm=").unwrap_err().to_string(),
        "WWW-Authenticate: parameter \"realm\" has no value"
    );
}

#[test]
fn token_request_url() {
    // What containerd sent in real-clients.md.
    assert_eq!(
        token_url(
            "http://127.0.0.1:5001/token",
            Some("logproxy"),
            &["repository:test/img:pull"]
        )
        .unwrap(),
        "http://127.0.0.1:5001/token?scope=repository%3Atest%2Fimg%3Apull&service=logproxy"
    );
    assert_eq!(
        token_url(
            "https://auth.example/token?x=1",
            None,
            &[
                repository_scope("a/b", &["pull", "push"]),
                "registry:catalog:*".into()
            ]
        )
        .unwrap(),
        "https://auth.example/token?x=1&scope=repository%3Aa%2Fb%3Apull%2Cpush&scope=registry%3Acatalog%3A%2A"
    );
    assert_eq!(
        token_url("HTTPS://a/t", None, &[] as &[&str]).unwrap(),
        "HTTPS://a/t"
    );
    assert_eq!(token_query(Some("a b"), &[] as &[&str]), "service=a+b");
    for bad in [
        "ftp://a/t",
        "/token",
        "",
        "https://a/t#frag",
        "https://a/t x",
        "ü",
    ] {
        assert!(
            matches!(
                token_url(bad, None, &["s"]),
                Err(ChallengeError::InvalidRealm { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn token_responses() {
    let r = TokenResponse::parse(br#"{"token":"t1","access_token":"t2","expires_in":300,"issued_at":"2024-01-01T00:00:00Z"}"#).unwrap();
    assert_eq!(r.bearer_token(), Some("t1"));
    assert_eq!(r.lifetime_secs(), 300);
    let r = TokenResponse::parse(br#"{"token":"","access_token":"t2","expires_in":30}"#).unwrap();
    assert_eq!(
        r.bearer_token(),
        Some("t2"),
        "empty token falls back to access_token"
    );
    assert_eq!(r.lifetime_secs(), 60, "30 s or less counts as 60");
    let r = TokenResponse::parse(br#"{"access_token":"t2"}"#).unwrap();
    assert_eq!(r.lifetime_secs(), 60, "absent counts as 60");
    assert!(
        !format!("{r:?}").contains("t2"),
        "Debug never prints tokens"
    );
    assert!(matches!(
        TokenResponse::parse(br#"{"token":""}"#),
        Err(TokenError::NoToken)
    ));
    assert!(matches!(
        TokenResponse::parse(b"<html>"),
        Err(TokenError::Malformed(_))
    ));
    assert!(matches!(
        TokenResponse::parse(br#"{"expires_in":-1,"token":"x"}"#),
        Err(TokenError::Malformed(_))
    ));
}

fn value() -> impl Strategy<Value = String> {
    "[ -~]{0,20}"
}

proptest! {
    #[test]
    fn quoted_values_round_trip(realm in value(), service in value(), scope in value()) {
        let q = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let header = format!(r#"Bearer realm="{}",service="{}",scope="{}""#, q(&realm), q(&service), q(&scope));
        let c = one(&header);
        prop_assert_eq!(c.realm(), Some(realm.as_str()));
        prop_assert_eq!(c.service(), Some(service.as_str()));
        prop_assert_eq!(c.scope(), Some(scope.as_str()));
    }

    #[test]
    fn never_panics(s in "\\PC{0,200}") {
        let _ = parse_challenges(&s);
    }
}
