use super::*;
use crate::layout::{Backend, BackendName, Route};
use proptest::prelude::*;

const SELF: &str = "127.0.0.1:5001";

fn creds(user: &str) -> Option<Credentials> {
    Some(Credentials {
        username: user.into(),
        password: format!("{user}-secret"),
    })
}

fn endpoint(host: &str, path: &str, user: Option<&str>) -> Endpoint {
    Endpoint {
        scheme: Scheme::Https,
        host: host.into(),
        path: path.into(),
        ca: None,
        auth: user.and_then(creds),
    }
}

/// Cache on: Storage (leader, one follower as mirror), then the upstream with one mirror; one
/// accepted route with a mirror; one anonymous route.
fn layout() -> Layout {
    Layout {
        cache: true,
        backends: vec![
            Backend {
                name: BackendName::Storage,
                endpoint: endpoint("10.0.0.1:5001", "/system/deckhouse", Some("node")),
                mirrors: vec![endpoint("10.0.0.2:5001", "/system/deckhouse", Some("node"))],
            },
            Backend {
                name: BackendName::Upstream,
                endpoint: endpoint("registry.deckhouse.io", "/deckhouse/ee", Some("license")),
                mirrors: vec![endpoint("mirror.example.com:8443", "/dkp", Some("mirror"))],
            },
        ],
        additional_routes: vec![
            Route {
                match_host: "ghcr.io".into(),
                endpoint: endpoint("proxy.corp.example", "/ghcr", Some("route")),
                mirrors: vec![endpoint("proxy2.corp.example", "", Some("route2"))],
            },
            Route {
                match_host: "quay.io".into(),
                endpoint: endpoint("quay-cache.corp.example", "", None),
                mirrors: vec![],
            },
        ],
    }
}

fn route<'a>(
    layout: &'a Layout,
    ns: Option<&str>,
    repository: &str,
) -> Result<Resolution<'a>, Unroutable> {
    let request = Request {
        ns,
        repository,
        remainder: "/manifests/v1",
    };
    resolve(&request, Some(layout), SELF)
}

fn urls(resolution: &Resolution<'_>) -> Vec<String> {
    resolution.targets.iter().map(Target::url).collect()
}

fn users<'a>(resolution: &Resolution<'a>) -> Vec<Option<&'a str>> {
    resolution
        .targets
        .iter()
        .map(|t| t.credentials.map(|c| c.username.as_str()))
        .collect()
}

#[test]
fn platform_images_go_to_every_backend_in_order_with_the_prefix_rewritten() {
    let layout = layout();
    for ns in [
        None,
        Some(""),
        Some("registry.d8-system.svc:5001"),
        Some("REGISTRY.D8-SYSTEM.SVC:5001"),
    ] {
        let r = route(&layout, ns, "system/deckhouse/install").unwrap();
        assert_eq!(r.kind, Kind::Primary);
        assert_eq!(
            urls(&r),
            [
                "https://10.0.0.1:5001/v2/system/deckhouse/install/manifests/v1",
                "https://10.0.0.2:5001/v2/system/deckhouse/install/manifests/v1",
                "https://registry.deckhouse.io/v2/deckhouse/ee/install/manifests/v1",
                "https://mirror.example.com:8443/v2/dkp/install/manifests/v1",
            ]
        );
        assert_eq!(
            users(&r),
            [Some("node"), Some("node"), Some("license"), Some("mirror")]
        );
        assert_eq!(r.targets[2].repository, "deckhouse/ee/install");
    }
    let root = route(&layout, None, "system/deckhouse").unwrap();
    assert_eq!(
        root.targets[2].url(),
        "https://registry.deckhouse.io/v2/deckhouse/ee/manifests/v1"
    );
}

#[test]
fn a_lookalike_repository_is_an_upstream_sibling_not_the_platform() {
    let layout = layout();
    for repository in ["system/deckhouse-extra", "flant/modules", "system"] {
        let r = route(&layout, None, repository).unwrap();
        assert_eq!(r.kind, Kind::UpstreamSibling, "{repository}");
        assert_eq!(
            urls(&r),
            [format!(
                "https://registry.deckhouse.io/v2/{repository}/manifests/v1"
            )]
        );
        assert_eq!(users(&r), [Some("license")]);
    }
}

#[test]
fn sibling_without_upstream_is_unroutable_in_air_gap() {
    let mut layout = layout();
    layout.backends.retain(|b| b.name == BackendName::Storage);
    assert_eq!(
        route(&layout, None, "flant/modules"),
        Err(Unroutable::NoUpstream("flant/modules".into()))
    );
    let platform = route(&layout, None, "system/deckhouse").unwrap();
    assert_eq!(platform.targets.len(), 2, "storage and its mirror only");
}

#[test]
fn loop_and_missing_layout_are_refused() {
    let layout = layout();
    assert_eq!(
        route(&layout, Some(SELF), "a/b"),
        Err(Unroutable::Loop(SELF.into()))
    );
    let request = Request {
        ns: None,
        repository: "system/deckhouse",
        remainder: "/manifests/v1",
    };
    assert_eq!(resolve(&request, None, SELF), Err(Unroutable::NoLayout));
}

#[test]
fn accepted_routes_use_their_endpoint_then_mirrors_case_insensitively() {
    let layout = layout();
    let r = route(&layout, Some("GHCR.io"), "org/app").unwrap();
    assert_eq!(r.kind, Kind::Route);
    assert_eq!(
        urls(&r),
        [
            "https://proxy.corp.example/v2/ghcr/org/app/manifests/v1",
            "https://proxy2.corp.example/v2/org/app/manifests/v1",
        ]
    );
    assert_eq!(users(&r), [Some("route"), Some("route2")]);
    let anonymous = route(&layout, Some("quay.io"), "org/app").unwrap();
    assert_eq!(users(&anonymous), [None]);
}

#[test]
fn an_upstream_named_directly_under_its_path_is_served_as_primary() {
    let layout = layout();
    let r = route(
        &layout,
        Some("registry.deckhouse.io"),
        "deckhouse/ee/install",
    )
    .unwrap();
    assert_eq!(r.kind, Kind::Primary);
    assert_eq!(
        r.targets[0].url(),
        "https://10.0.0.1:5001/v2/system/deckhouse/install/manifests/v1"
    );
    // A mirror's own path prefix claims too.
    let via_mirror = route(&layout, Some("mirror.example.com:8443"), "dkp/install").unwrap();
    assert_eq!(via_mirror.kind, Kind::Primary);
    // Segment-aware: deckhouse/eee is not under deckhouse/ee, so the upstream host is only Known.
    let other = route(&layout, Some("registry.deckhouse.io"), "deckhouse/eee").unwrap();
    assert_eq!(other.kind, Kind::Known);
    assert_eq!(
        urls(&other),
        ["https://registry.deckhouse.io/v2/deckhouse/eee/manifests/v1"]
    );
    assert_eq!(users(&other), [Some("license")]);
}

#[test]
fn a_backend_with_an_empty_path_claims_nothing() {
    let mut layout = layout();
    layout.backends[1].endpoint.path.clear();
    let r = route(
        &layout,
        Some("registry.deckhouse.io"),
        "deckhouse/ee/install",
    )
    .unwrap();
    assert_eq!(r.kind, Kind::Known);
}

#[test]
fn hosts_without_credentials_are_passed_through() {
    let mut layout = layout();
    layout.backends[1].endpoint.auth = None;
    layout.backends[1].endpoint.path.clear();
    let r = route(&layout, Some("registry.deckhouse.io"), "x/y").unwrap();
    assert_eq!(r.kind, Kind::PassThrough);
}

#[test]
fn unknown_registries_pass_through_untouched_without_our_credentials() {
    let layout = layout();
    let r = route(&layout, Some("docker.io"), "library/nginx").unwrap();
    assert_eq!(r.kind, Kind::PassThrough);
    assert!(r.forwards_client_authorization());
    assert_eq!(
        urls(&r),
        ["https://docker.io/v2/library/nginx/manifests/v1"]
    );
    assert_eq!(users(&r), [None]);
    assert!(
        !route(&layout, None, "system/deckhouse")
            .unwrap()
            .forwards_client_authorization()
    );
}

#[test]
fn layout_round_trips_through_json_in_crd_field_names() {
    let layout = layout();
    let json = serde_json::to_value(&layout).unwrap();
    assert_eq!(json["backends"][0]["name"], "Storage");
    assert_eq!(json["backends"][1]["scheme"], "HTTPS");
    assert_eq!(json["additionalRoutes"][0]["match"], "ghcr.io");
    let back: Layout = serde_json::from_value(json).unwrap();
    assert_eq!(back, layout);
    assert!(
        !format!("{layout:?}").contains("license-secret"),
        "Debug redacts passwords"
    );
}

fn arb_host() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("registry.d8-system.svc:5001".to_owned()),
        Just("registry.deckhouse.io".to_owned()),
        Just("mirror.example.com:8443".to_owned()),
        Just("ghcr.io".to_owned()),
        Just("quay.io".to_owned()),
        Just("10.0.0.1:5001".to_owned()),
        Just(SELF.to_owned()),
        "[a-z]{1,8}(\\.[a-z]{2,3})?(:[0-9]{2,4})?",
    ]
}

proptest! {
    /// Our credentials only ever go to the host they were configured for, and never on
    /// PassThrough.
    #[test]
    fn credentials_never_travel_to_another_host(
        ns in proptest::option::of(arb_host()),
        repository in "(system/deckhouse|deckhouse/ee|dkp|[a-z]{1,6})(/[a-z]{1,6}){0,2}",
    ) {
        let layout = layout();
        if let Ok(r) = route(&layout, ns.as_deref(), &repository) {
            prop_assert!(!r.targets.is_empty());
            for t in &r.targets {
                prop_assert!(t.path.starts_with("/v2/"));
                prop_assert!(!t.path.contains("//"), "{}", t.path);
                if let Some(c) = t.credentials {
                    prop_assert!(r.kind != Kind::PassThrough);
                    prop_assert!(layout.endpoints().any(|e| e.host == t.host && e.auth.as_ref() == Some(c)));
                }
            }
        }
    }
}
