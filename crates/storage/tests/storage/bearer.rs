//! The read listener's token service: a Bearer challenge, tokens for Basic credentials, pulls
//! by containerd and by the registry client with tokens; Basic keeps working.

use std::time::Duration;

use testkit::containerd::PullOptions;
use testkit::{Credentials, ImageBuilder};

use crate::common::{self, NODE, Options, PUSHER, basic, client};
use storage::auth::TokenKey;

async fn replica_with_image() -> (common::Replica, TokenKey, testkit::Image, tempfile::TempDir) {
    let key = TokenKey::random(Duration::from_secs(300)).expect("key");
    let replica = common::start(Options {
        tokens: Some(key.clone()),
        ..Options::default()
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = testkit::image::Layout::new(dir.path()).expect("layout");
    let image = ImageBuilder::new("bearer").layer(64 << 10).build(&layout);
    testkit::push::Registry::new(
        &replica.write_url,
        None,
        Some(Credentials::new(PUSHER.0, PUSHER.1)),
    )
    .push_image("system/deckhouse/app", Some("v1"), &image)
    .await
    .expect("push");
    (replica, key, image, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn challenge_token_endpoint_and_scopes() {
    let (replica, key, image, _dir) = replica_with_image().await;
    let http = client();
    let base = replica.read_url();
    let manifest = format!("{base}/v2/system/deckhouse/app/manifests/v1");

    let anonymous = http.get(&manifest).send().await.expect("send");
    assert_eq!(anonymous.status(), 401);
    assert_eq!(
        anonymous.headers()["www-authenticate"],
        format!(
            "Bearer realm=\"{base}/auth/token\",service=\"Deckhouse registry\",scope=\"repository:system/deckhouse/app:pull\""
        )
    );

    // The token endpoint wants Basic credentials, and the right ones.
    let token_url = format!(
        "{base}/auth/token?service=Deckhouse+registry&scope=repository%3Asystem%2Fdeckhouse%2Fapp%3Apull%2Cpush"
    );
    assert_eq!(
        http.get(&token_url).send().await.expect("send").status(),
        401
    );
    let wrong = http
        .get(&token_url)
        .header("authorization", basic((NODE.0, "guess")))
        .send()
        .await
        .expect("send");
    assert_eq!(wrong.status(), 401);
    assert!(
        wrong
            .text()
            .await
            .expect("text")
            .contains("invalid credentials")
    );
    assert_eq!(key.issued(), 0);

    let answer: serde_json::Value = http
        .get(&token_url)
        .header("authorization", basic(NODE))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    let token = answer["token"].as_str().expect("token").to_owned();
    assert_eq!(answer["access_token"], answer["token"]);
    assert_eq!(answer["expires_in"], 300);
    // The node account asked for pull and push; the token carries pull only.
    let claims = key.verify(&token, 0).expect("a token of ours");
    assert_eq!(claims.sub, "node");
    assert_eq!(claims.access.len(), 1);
    assert_eq!(claims.access[0].actions, ["pull"]);

    let bearer = format!("Bearer {token}");
    let ok = http
        .get(&manifest)
        .header("authorization", &bearer)
        .header("accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .expect("send");
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["docker-content-digest"], image.digest());

    // Another repository: the token does not cover it, the client is told to get a wider one.
    let other = http
        .get(format!("{base}/v2/system/deckhouse/other/manifests/v1"))
        .header("authorization", &bearer)
        .send()
        .await
        .expect("send");
    assert_eq!(other.status(), 401);
    let challenge = other.headers()["www-authenticate"].to_str().expect("ascii");
    assert!(
        challenge.contains("scope=\"repository:system/deckhouse/other:pull\"")
            && challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );

    // A token of another key (or a tampered one) is refused as invalid.
    let foreign = TokenKey::random(Duration::from_secs(300))
        .expect("key")
        .issue(
            "node",
            storage::Access::Pull,
            &[storage::auth::Scope::needed(
                "system/deckhouse/app",
                storage::Access::Pull,
            )],
            4_000_000_000 - 600,
        );
    let refused = http
        .get(&manifest)
        .header("authorization", format!("Bearer {foreign}"))
        .send()
        .await
        .expect("send");
    assert_eq!(refused.status(), 401);
    assert!(
        refused.headers()["www-authenticate"]
            .to_str()
            .expect("ascii")
            .contains("error=\"invalid_token\"")
    );

    // The OAuth2 password grant (what containerd tries first) gives the same kind of token.
    let form = http
        .post(format!("{base}/auth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("grant_type=password&username=node&password=node-password&service=Deckhouse+registry&scope=repository%3Asystem%2Fdeckhouse%2Fapp%3Apull&client_id=test")
        .send()
        .await
        .expect("send");
    assert_eq!(form.status(), 200);
    let answer: serde_json::Value = form.json().await.expect("json");
    let token = answer["access_token"].as_str().expect("token");
    assert!(
        key.verify(token, 0)
            .expect("ours")
            .admits(Some("system/deckhouse/app"), storage::Access::Pull)
    );

    // Basic keeps working for clients that send it directly (the agent).
    let direct = http
        .get(&manifest)
        .header("authorization", basic(NODE))
        .send()
        .await
        .expect("send");
    assert_eq!(direct.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_client_pulls_with_a_token() {
    let (replica, key, image, _dir) = replica_with_image().await;
    let endpoint = registry_client::Endpoint::from_url(&replica.read_url())
        .expect("endpoint")
        .credentials(registry_client::Credentials::new(NODE.0, NODE.1));
    let client = registry_client::Client::new(registry_client::Config::default());
    let remote = client.remote(endpoint).expect("remote");
    let manifest = remote
        .get_manifest(
            "system/deckhouse/app",
            "v1",
            &["application/vnd.oci.image.manifest.v1+json"],
        )
        .await
        .expect("manifest through a token");
    assert_eq!(manifest.digest.to_string(), image.digest());
    for blob in image.blobs() {
        let digest = oci::Digest::parse(&blob.digest).expect("digest");
        let body = remote
            .get_blob("system/deckhouse/app", &digest, None, Some(blob.size))
            .await
            .expect("blob")
            .into_body()
            .collect(1 << 30)
            .await
            .expect("verified body");
        assert_eq!(body.len() as u64, blob.size);
    }
    assert!(
        client.token_stats().issued >= 1,
        "{:?}",
        client.token_stats()
    );
    assert!(
        key.issued() >= 1,
        "the client went through our token endpoint"
    );

    // Wrong credentials: the token endpoint refuses, so does the pull.
    let endpoint = registry_client::Endpoint::from_url(&replica.read_url())
        .expect("endpoint")
        .credentials(registry_client::Credentials::new(NODE.0, "wrong"));
    let wrong = client.remote(endpoint).expect("remote");
    let error = wrong
        .get_manifest("system/deckhouse/app", "v1", &[])
        .await
        .expect_err("wrong credentials");
    assert!(
        error.to_string().contains("401")
            || error.to_string().to_lowercase().contains("unauthorized"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_pulls_with_credentials_through_the_token_service() {
    let (replica, key, image, _dir) = replica_with_image().await;
    let containerd = testkit::Containerd::start().await;
    let url = replica.read_url();
    containerd.use_mirror(&url, None, &url);
    let reference = format!("{}/system/deckhouse/app:v1", replica.read);

    let without = containerd.pull(&reference).await;
    assert!(!without.success, "an anonymous pull must fail");
    let wrong = containerd
        .pull_with(
            &reference,
            &PullOptions {
                credentials: Some(Credentials::new(NODE.0, "wrong")),
                ..PullOptions::default()
            },
        )
        .await;
    assert!(!wrong.success, "wrong credentials must fail");
    assert_eq!(key.issued(), 0, "no token for wrong credentials");

    let pulled = containerd
        .pull_with(
            &reference,
            &PullOptions {
                credentials: Some(Credentials::new(NODE.0, NODE.1)),
                ..PullOptions::default()
            },
        )
        .await;
    assert!(pulled.success, "{}", pulled.stderr);
    assert!(key.issued() >= 1, "containerd used the token service");
    let content = containerd.content().await;
    for blob in image.blobs() {
        assert!(content.contains(&blob.digest), "{} missing", blob.digest);
    }
}
