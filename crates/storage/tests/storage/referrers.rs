//! The OCI 1.1 referrers API on both listeners: artifacts pushed with a `subject` are listed in
//! an image index, filtered by `artifactType`, paged by `Link`; a cache filling from a replica
//! lists the referrers its upstream knows.

use bytes::Bytes;
use registry_client::{Credentials, Endpoint, RequestBody};
use serde_json::{Value, json};
use storage::Upstream;

use crate::common::{self, NODE, Options, PUSHER, basic, client};

const SIGNATURE: &str = "application/vnd.example.signature";
const SBOM: &str = "application/vnd.example.sbom";

fn remote(url: &str, account: (&str, &str)) -> registry_client::Remote {
    let endpoint = Endpoint::from_url(url)
        .unwrap()
        .credentials(Credentials::new(account.0, account.1));
    registry_client::Client::new(registry_client::Config::default())
        .remote(endpoint)
        .unwrap()
}

/// Pushes an image and three artifacts referring to it; returns the subject and the
/// artifacts' digests by type.
async fn push_subject_and_referrers(
    write_url: &str,
    repository: &str,
) -> (oci::Digest, Vec<(oci::Digest, &'static str)>) {
    let write = remote(write_url, PUSHER);
    let empty = Bytes::from_static(b"{}");
    let empty_digest = oci::Digest::sha256(&empty);
    write
        .push_blob(repository, &empty_digest, RequestBody::Bytes(empty.clone()))
        .await
        .unwrap();
    let layer = Bytes::from_static(b"a layer");
    let layer_digest = oci::Digest::sha256(&layer);
    write
        .push_blob(repository, &layer_digest, RequestBody::Bytes(layer.clone()))
        .await
        .unwrap();
    let descriptor = |media_type: &str, digest: &oci::Digest, size: usize| json!({"mediaType": media_type, "digest": digest.to_string(), "size": size});
    let image = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": oci::media_type::OCI_MANIFEST,
        "config": descriptor(oci::media_type::OCI_CONFIG, &empty_digest, 2),
        "layers": [descriptor(oci::media_type::OCI_LAYER_TAR, &layer_digest, layer.len())],
    }))
    .unwrap();
    let subject = write
        .put_manifest(
            repository,
            "v1",
            oci::media_type::OCI_MANIFEST,
            Bytes::from(image.clone()),
        )
        .await
        .unwrap();
    let mut artifacts = Vec::new();
    for (i, artifact_type) in [SIGNATURE, SBOM, SIGNATURE].into_iter().enumerate() {
        let artifact = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": oci::media_type::OCI_MANIFEST,
            "artifactType": artifact_type,
            "config": descriptor(oci::media_type::OCI_EMPTY, &empty_digest, 2),
            "layers": [descriptor(oci::media_type::OCI_EMPTY, &empty_digest, 2)],
            "subject": descriptor(oci::media_type::OCI_MANIFEST, &subject, image.len()),
            "annotations": {"n": i.to_string()},
        }))
        .unwrap();
        let digest = oci::Digest::sha256(&artifact);
        let url = format!("{write_url}/v2/{repository}/manifests/{digest}");
        // Raw, to see the answer's OCI-Subject.
        let put = client()
            .put(url)
            .header("authorization", basic(PUSHER))
            .header("content-type", oci::media_type::OCI_MANIFEST)
            .body(artifact)
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), 201);
        assert_eq!(
            put.headers()["oci-subject"],
            subject.to_string().as_str(),
            "we serve the referrers API, so we say we processed the subject"
        );
        artifacts.push((digest, artifact_type));
    }
    (subject, artifacts)
}

async fn list(url: &str, account: (&str, &str)) -> (reqwest::header::HeaderMap, Value) {
    let response = client()
        .get(url)
        .header("authorization", basic(account))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{url}");
    assert_eq!(
        response.headers()["content-type"],
        oci::media_type::OCI_INDEX
    );
    let headers = response.headers().clone();
    (headers, response.json().await.unwrap())
}

fn digests(index: &Value) -> Vec<String> {
    index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["digest"].as_str().unwrap().to_owned())
        .collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test]
async fn referrers_are_listed_filtered_and_paged_on_both_listeners() {
    let replica = common::start(Options::default()).await;
    let write = remote(&replica.write_url, PUSHER);
    let (subject, artifacts) = push_subject_and_referrers(&replica.write_url, "test/app").await;
    let all = sorted(artifacts.iter().map(|(d, _)| d.to_string()).collect());
    let signatures = sorted(
        artifacts
            .iter()
            .filter(|(_, t)| *t == SIGNATURE)
            .map(|(d, _)| d.to_string())
            .collect(),
    );

    for (base, account) in [
        (replica.write_url.clone(), PUSHER),
        (replica.read_url(), NODE),
    ] {
        let url = format!("{base}/v2/test/app/referrers/{subject}");
        let (headers, index) = list(&url, account).await;
        assert_eq!(index["schemaVersion"], 2);
        assert_eq!(index["mediaType"], oci::media_type::OCI_INDEX);
        assert_eq!(sorted(digests(&index)), all, "{base}");
        assert!(headers.get("oci-filters-applied").is_none());
        let entry = &index["manifests"][0];
        assert_eq!(entry["mediaType"], oci::media_type::OCI_MANIFEST);
        assert!(entry["artifactType"].is_string());
        assert!(entry["annotations"]["n"].is_string(), "annotations carried");

        let (headers, filtered) = list(&format!("{url}?artifactType={SIGNATURE}"), account).await;
        assert_eq!(sorted(digests(&filtered)), signatures);
        assert_eq!(headers["oci-filters-applied"], "artifactType");

        // Pages of one, following Link.
        let mut next = Some(format!("/v2/test/app/referrers/{subject}?n=1"));
        let mut seen = Vec::new();
        while let Some(path) = next.take() {
            let (headers, page) = list(&format!("{base}{path}"), account).await;
            assert!(digests(&page).len() <= 1);
            seen.extend(digests(&page));
            next = headers.get("link").map(|l| {
                let l = l.to_str().unwrap();
                oci::pagination::parse_next_link(l).unwrap().to_owned()
            });
            assert!(seen.len() <= all.len(), "Link pagination ends");
        }
        assert_eq!(seen, all, "pages in digest order, each referrer once");

        // Nothing refers to the layer: an empty index, not a 404.
        let layer = oci::Digest::sha256(b"a layer");
        let (_, empty) = list(&format!("{base}/v2/test/app/referrers/{layer}"), account).await;
        assert!(digests(&empty).is_empty());
    }

    // A deleted referrer is no longer listed.
    write
        .delete_manifest("test/app", &artifacts[1].0.to_string())
        .await
        .unwrap();
    let (_, index) = list(
        &format!("{}/v2/test/app/referrers/{subject}", replica.read_url()),
        NODE,
    )
    .await;
    assert_eq!(sorted(digests(&index)), signatures);
}

#[tokio::test]
async fn a_cache_lists_the_referrers_its_upstream_holds() {
    let origin = common::start(Options::default()).await;
    let (subject, artifacts) =
        push_subject_and_referrers(&origin.write_url, "deckhouse/ee/app").await;
    let upstream = registry_client::Client::new(registry_client::Config::default())
        .remote(
            Endpoint::from_url(&origin.read_url())
                .unwrap()
                .path_prefix("deckhouse/ee")
                .credentials(Credentials::new(NODE.0, NODE.1)),
        )
        .unwrap();
    let cache = common::start(Options {
        upstream: Some(Upstream {
            remote: upstream,
            prefix: "system/deckhouse".into(),
        }),
        ..Options::default()
    })
    .await;
    let (headers, index) = list(
        &format!(
            "{}/v2/system/deckhouse/app/referrers/{subject}?artifactType={SBOM}",
            cache.read_url()
        ),
        NODE,
    )
    .await;
    assert_eq!(digests(&index), [artifacts[1].0.to_string()]);
    assert_eq!(headers["oci-filters-applied"], "artifactType");
}
