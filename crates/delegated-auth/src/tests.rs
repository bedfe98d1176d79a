use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// Tokens `t-<user>`; `alice` may, anyone else may not; every review counted.
#[derive(Default)]
struct Fake {
    token_reviews: AtomicUsize,
    access_reviews: AtomicUsize,
}

impl Reviewer for &Fake {
    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, Error> {
        self.token_reviews.fetch_add(1, Ordering::SeqCst);
        Ok(token.strip_prefix("t-").map(|name| UserInfo {
            username: name.into(),
            ..Default::default()
        }))
    }

    async fn authorize(&self, user: &UserInfo, _: &Question<'_>) -> Result<bool, Error> {
        self.access_reviews.fetch_add(1, Ordering::SeqCst);
        Ok(user.username == "alice")
    }
}

#[test]
fn bearer_tokens() {
    for (header, token) in [
        ("Bearer abc", Some("abc")),
        ("bearer  abc ", Some("abc")),
        ("Basic abc", None),
        ("Bearer ", None),
        ("Bearer", None),
    ] {
        assert_eq!(bearer(header), token, "{header:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn verdicts_and_their_lifetimes() {
    let fake = Fake::default();
    let attributes: ResourceAttributes =
        "namespace=d8-system,apiGroup=apps,resource=deployments,subresource=prometheus-metrics,name=deckhouse"
            .parse()
            .unwrap();
    let guard = Guard::new(&fake, Some(attributes)).exclude("/healthz");
    let reviews = || {
        (
            fake.token_reviews.load(Ordering::SeqCst),
            fake.access_reviews.load(Ordering::SeqCst),
        )
    };

    assert_eq!(guard.check("GET", "/healthz", None).await, Verdict::Allowed);
    assert_eq!(
        guard.check("GET", "/metrics", None).await,
        Verdict::Unauthorized
    );
    assert_eq!(
        guard.check("GET", "/metrics", Some("Basic x")).await,
        Verdict::Unauthorized
    );
    assert_eq!(
        guard.check("GET", "/metrics", Some("Bearer forged")).await,
        Verdict::Unauthorized
    );
    assert_eq!(reviews(), (1, 0));

    let bob = guard.check("GET", "/metrics", Some("Bearer t-bob")).await;
    assert_eq!(
        bob,
        Verdict::Forbidden(
            "Forbidden (user=bob, verb=get, resource=deployments, subresource=prometheus-metrics)"
                .into()
        )
    );
    assert_eq!(
        (bob.status(), bob.body().as_str()),
        (
            403,
            "Forbidden (user=bob, verb=get, resource=deployments, subresource=prometheus-metrics)\n"
        )
    );
    assert_eq!(
        guard.check("GET", "/metrics", Some("Bearer t-alice")).await,
        Verdict::Allowed
    );
    assert_eq!(reviews(), (3, 2));

    // Cached: no review within the lifetimes.
    for _ in 0..3 {
        guard.check("GET", "/metrics", Some("Bearer t-alice")).await;
        guard.check("GET", "/metrics", Some("Bearer t-bob")).await;
        guard.check("GET", "/metrics", Some("Bearer forged")).await;
    }
    assert_eq!(reviews(), (3, 2));
    // A denial is asked again after 30 s, an allowance is kept.
    tokio::time::advance(DENIED_TTL).await;
    guard.check("GET", "/metrics", Some("Bearer t-bob")).await;
    guard.check("GET", "/metrics", Some("Bearer t-alice")).await;
    assert_eq!(reviews(), (3, 3));
    // Tokens are reviewed again after 2 minutes.
    tokio::time::advance(TOKEN_TTL).await;
    guard.check("GET", "/metrics", Some("Bearer t-alice")).await;
    assert_eq!(reviews(), (4, 3));
    // Allowed verdicts last 5 minutes (the token, reviewed at 2:30, is reviewed again at 4:59).
    tokio::time::advance(ALLOWED_TTL - TOKEN_TTL - DENIED_TTL - Duration::from_secs(1)).await;
    guard.check("GET", "/metrics", Some("Bearer t-alice")).await;
    assert_eq!(reviews(), (5, 3));
    tokio::time::advance(Duration::from_secs(1)).await;
    guard.check("GET", "/metrics", Some("Bearer t-alice")).await;
    assert_eq!(reviews(), (5, 4));
    // Another verb is another question.
    guard
        .check("POST", "/metrics", Some("Bearer t-alice"))
        .await;
    assert_eq!(reviews(), (5, 5));
}
