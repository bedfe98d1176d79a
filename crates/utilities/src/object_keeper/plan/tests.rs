use super::*;

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn reference(uid: &str) -> FollowObjectRef {
    FollowObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "default".into(),
        name: "target".into(),
        uid: uid.into(),
    }
}

const CREATED: &str = "2030-01-01T00:00:00Z";
const RECHECK: Duration = Duration::from_secs(60);

fn keeper<'a>(
    mode: ObjectKeeperMode,
    follow: Option<&'a FollowObjectRef>,
    ttl: Option<&'a str>,
    lost_at: Option<&str>,
) -> Keeper<'a> {
    Keeper {
        mode,
        follow,
        ttl,
        created: at(CREATED),
        lost_at: lost_at.map(at),
    }
}

fn present(uid: &str) -> Followed {
    Followed::Present { uid: uid.into() }
}

fn outcome(d: &Decision) -> String {
    match d {
        Decision::Keep { phase, message, .. } => format!("{phase}: {message}"),
        Decision::Delete { .. } => "delete".into(),
    }
}

#[test]
fn decisions() {
    use ObjectKeeperMode::*;
    let r = reference("u1");
    let bad = FollowObjectRef {
        api_version: "apps/v1/x".into(),
        ..reference("u1")
    };
    let lost = Some("2030-02-01T00:00:00Z");
    // (case, keeper, observed, now, expected)
    let rows: Vec<(&str, Keeper<'_>, Followed, &str, &str)> = vec![
        (
            "follow: alive",
            keeper(FollowObject, Some(&r), None, None),
            present("u1"),
            CREATED,
            "Tracking: Following object v1/ConfigMap/target",
        ),
        (
            "follow: gone",
            keeper(FollowObject, Some(&r), None, None),
            Followed::Absent,
            CREATED,
            "delete",
        ),
        (
            "follow: replaced (same name, new UID)",
            keeper(FollowObject, Some(&r), None, None),
            present("u2"),
            CREATED,
            "delete",
        ),
        (
            "follow: no reference",
            keeper(FollowObject, None, None, None),
            Followed::NotLookedUp,
            CREATED,
            "Pending: followObjectRef is required when mode is FollowObject or FollowObjectWithTTL",
        ),
        (
            "follow: bad apiVersion",
            keeper(FollowObject, Some(&bad), None, None),
            Followed::NotLookedUp,
            CREATED,
            "Pending: invalid apiVersion \"apps/v1/x\"",
        ),
        (
            "ttl: before expiry",
            keeper(Ttl, None, Some("1h"), None),
            Followed::NotLookedUp,
            "2030-01-01T00:59:59Z",
            "Expiring: TTL expires at 2030-01-01T01:00:00Z",
        ),
        (
            "ttl: at expiry",
            keeper(Ttl, None, Some("1h"), None),
            Followed::NotLookedUp,
            "2030-01-01T01:00:00Z",
            "delete",
        ),
        (
            "ttl: invalid",
            keeper(Ttl, None, Some("soon"), None),
            Followed::NotLookedUp,
            CREATED,
            "Pending: invalid duration \"soon\"",
        ),
        (
            "with ttl: alive",
            keeper(FollowObjectWithTtl, Some(&r), Some("10m"), None),
            present("u1"),
            "2030-02-01T00:00:00Z",
            "Tracking: Following object v1/ConfigMap/target",
        ),
        (
            "with ttl: just lost (fractions of a second dropped)",
            keeper(FollowObjectWithTtl, Some(&r), Some("10m"), None),
            Followed::Absent,
            "2030-02-01T00:00:00.7Z",
            "Expiring: TTL expires at 2030-02-01T00:10:00Z",
        ),
        (
            "with ttl: replaced",
            keeper(FollowObjectWithTtl, Some(&r), Some("10m"), None),
            present("u2"),
            "2030-02-01T00:00:00Z",
            "Expiring: TTL expires at 2030-02-01T00:10:00Z",
        ),
        (
            "with ttl: lost earlier, counts from lostAt",
            keeper(FollowObjectWithTtl, Some(&r), Some("10m"), lost),
            Followed::Absent,
            "2030-02-01T00:09:00Z",
            "Expiring: TTL expires at 2030-02-01T00:10:00Z",
        ),
        (
            "with ttl: lost earlier, expired",
            keeper(FollowObjectWithTtl, Some(&r), Some("10m"), lost),
            Followed::Absent,
            "2030-02-01T00:10:00Z",
            "delete",
        ),
        (
            "with ttl: a failed lookup after the loss keeps counting",
            keeper(FollowObjectWithTtl, Some(&r), Some("10m"), lost),
            Followed::NotLookedUp,
            "2030-02-01T00:11:00Z",
            "delete",
        ),
    ];
    for (case, keeper, followed, now, expected) in rows {
        let d = decide(&keeper, &followed, at(now), RECHECK);
        assert_eq!(outcome(&d), expected, "{case}");
    }
}

#[test]
fn expiring_rechecks_when_the_ttl_runs_out_and_records_lost_at() {
    let r = reference("u1");
    let k = keeper(
        ObjectKeeperMode::FollowObjectWithTtl,
        Some(&r),
        Some("10m"),
        None,
    );
    let d = decide(&k, &Followed::Absent, at("2030-02-01T00:04:00Z"), RECHECK);
    let Decision::Keep {
        lost_at,
        recheck,
        active,
        ..
    } = d
    else {
        panic!("kept")
    };
    assert_eq!(lost_at, Some(at("2030-02-01T00:04:00Z")));
    assert_eq!(recheck, Some(Duration::from_secs(600)));
    assert_eq!(active, (true, "WaitingTTL"));
}

#[test]
fn a_restart_does_not_restart_the_clock() {
    // A controller started an hour after the keeper was created: the TTL counts from
    // creationTimestamp, so 30 minutes are left, not 90.
    let k = keeper(ObjectKeeperMode::Ttl, None, Some("90m"), None);
    let d = decide(
        &k,
        &Followed::NotLookedUp,
        at("2030-01-01T01:00:00Z"),
        RECHECK,
    );
    let Decision::Keep { recheck, .. } = d else {
        panic!("kept")
    };
    assert_eq!(recheck, Some(Duration::from_secs(30 * 60)));
}

#[test]
fn api_versions() {
    assert_eq!(parse_api_version("v1").unwrap(), ("".into(), "v1".into()));
    assert_eq!(
        parse_api_version("apps/v1").unwrap(),
        ("apps".into(), "v1".into())
    );
    assert_eq!(
        parse_api_version("deckhouse.io/v1alpha1").unwrap(),
        ("deckhouse.io".into(), "v1alpha1".into())
    );
    for bad in ["", "/v1", "apps/", "Apps/v1", "a/b/c", "v1.2"] {
        assert!(parse_api_version(bad).is_err(), "{bad}");
    }
}
