use super::*;
use crate::image::{ImageBuilder, Layout};
use crate::push::Registry;

async fn pull_manifest(
    upstream: &Upstream,
    repo: &str,
    reference: &str,
    auth: Option<String>,
) -> reqwest::Response {
    let mut request = upstream
        .client()
        .get(format!(
            "{}/v2/{repo}/manifests/{reference}",
            upstream.url()
        ))
        .header("Accept", crate::image::OCI_MANIFEST);
    if let Some(auth) = auth {
        request = request.header("Authorization", auth);
    }
    request.send().await.unwrap()
}

fn image(dir: &Path) -> crate::Image {
    let layout = Layout::new(dir).unwrap();
    ImageBuilder::new("upstream-test")
        .layers(&[1000, 70_000])
        .build(&layout)
}

#[tokio::test]
async fn plain_registry_stores_what_is_pushed_byte_for_byte() {
    let upstream = Upstream::start_plain().await;
    let image = image(&upstream.scratch_dir().join("layout"));
    Registry::of(&upstream)
        .push_image("test/img", Some("v1"), &image)
        .await
        .unwrap();
    let response = pull_manifest(&upstream, "test/img", "v1", None).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["docker-content-digest"]
            .to_str()
            .unwrap(),
        image.digest()
    );
    assert_eq!(response.bytes().await.unwrap(), image.manifest.read());
    assert!(
        upstream.log().contains("/v2/test/img/manifests/v1"),
        "access log is kept"
    );
}

#[tokio::test]
async fn basic_auth_refuses_anonymous_and_wrong_passwords() {
    let upstream = Upstream::start(UpstreamOptions::default().basic_auth("alice", "s3cret")).await;
    let image = image(&upstream.scratch_dir().join("layout"));
    let anonymous = pull_manifest(&upstream, "test/img", "v1", None).await;
    assert_eq!(anonymous.status(), 401);
    let challenge = anonymous.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.starts_with("Basic realm="), "{challenge}");

    let wrong = Registry::new(
        &upstream.url(),
        None,
        Some(Credentials::new("alice", "nope")),
    );
    assert!(
        wrong
            .push_image("test/img", Some("v1"), &image)
            .await
            .is_err()
    );

    Registry::of(&upstream)
        .push_image("test/img", Some("v1"), &image)
        .await
        .unwrap();
    let basic = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "alice:s3cret")
    );
    assert_eq!(
        pull_manifest(&upstream, "test/img", "v1", Some(basic))
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn token_auth_issues_signed_tokens_the_registry_accepts() {
    let upstream = Upstream::start(UpstreamOptions::default().token_auth("bob", "pw")).await;
    let image = image(&upstream.scratch_dir().join("layout"));
    let anonymous = pull_manifest(&upstream, "test/img", "v1", None).await;
    assert_eq!(anonymous.status(), 401);
    let challenge = anonymous.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    let realm = upstream.token_server().unwrap().realm();
    assert!(
        challenge.starts_with(&format!("Bearer realm=\"{realm}\"")),
        "{challenge}"
    );
    assert!(
        challenge.contains("scope=\"repository:test/img:pull\""),
        "{challenge}"
    );

    let wrong = Registry::new(
        &upstream.url(),
        None,
        Some(Credentials::new("bob", "wrong")),
    );
    assert!(
        wrong
            .push_image("test/img", Some("v1"), &image)
            .await
            .is_err()
    );
    assert_eq!(upstream.token_server().unwrap().refused(), 1);

    Registry::of(&upstream)
        .push_image("test/img", Some("v1"), &image)
        .await
        .unwrap();
    assert!(upstream.token_server().unwrap().issued() >= 1);

    // A pull token for the repository works; a token for another repository does not.
    let client = upstream.client();
    let token_for = |scope: &'static str| {
        let client = client.clone();
        let realm = realm.clone();
        async move {
            let body: serde_json::Value = client
                .get(&realm)
                .query(&[("service", token::SERVICE), ("scope", scope)])
                .basic_auth("bob", Some("pw"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(body["token"], body["access_token"]);
            format!("Bearer {}", body["token"].as_str().unwrap())
        }
    };
    let good = token_for("repository:test/img:pull").await;
    assert_eq!(
        pull_manifest(&upstream, "test/img", "v1", Some(good))
            .await
            .status(),
        200
    );
    let other = token_for("repository:other/img:pull").await;
    assert_eq!(
        pull_manifest(&upstream, "test/img", "v1", Some(other))
            .await
            .status(),
        401
    );
}

#[tokio::test]
async fn tls_upstream_is_trusted_only_with_its_ca() {
    let ca = Certs::new("upstream CA");
    let upstream = Upstream::start(UpstreamOptions::default().tls(&ca)).await;
    assert!(upstream.url().starts_with("https://127.0.0.1:"));
    let image = image(&upstream.scratch_dir().join("layout"));
    Registry::of(&upstream)
        .push_image("test/img", Some("v1"), &image)
        .await
        .unwrap();
    assert_eq!(
        pull_manifest(&upstream, "test/img", "v1", None)
            .await
            .status(),
        200
    );

    let other_ca = Certs::new("someone else");
    let stranger = crate::http_client(Some(&other_ca.ca_pem()));
    let error = stranger
        .get(format!("{}/v2/", upstream.url()))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_connect(), "{error:?}");
}

#[tokio::test]
async fn stop_makes_the_upstream_unreachable() {
    let mut upstream = Upstream::start_plain().await;
    let client = upstream.client();
    let url = format!("{}/v2/", upstream.url());
    assert!(client.get(&url).send().await.is_ok());
    upstream.stop();
    assert!(client.get(&url).send().await.is_err());
}
