//! The content the suite pushes and then reads back: deterministic blobs, an OCI manifest, a
//! Docker schema 2 manifest over the same blobs, an OCI index, and an artifact whose `subject`
//! is the OCI manifest (for referrers).

use bytes::Bytes;
use oci::media_type::{
    DOCKER_CONFIG, DOCKER_LAYER_GZIP, DOCKER_MANIFEST, OCI_CONFIG, OCI_EMPTY, OCI_INDEX,
    OCI_LAYER_TAR, OCI_MANIFEST,
};
use registry_client::{Remote, RequestBody};

/// Artifact type of the referrer.
pub(crate) const ARTIFACT_TYPE: &str = "application/vnd.d8.conformance.sbom.v1+json";

/// A blob and its digest.
#[derive(Debug, Clone)]
pub(crate) struct Blob {
    pub(crate) bytes: Bytes,
    pub(crate) digest: oci::Digest,
}

impl Blob {
    fn new(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        Self {
            digest: oci::Digest::sha256(&bytes),
            bytes,
        }
    }

    pub(crate) fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn descriptor(&self, media_type: &str) -> serde_json::Value {
        serde_json::json!({"mediaType": media_type, "digest": self.digest.to_string(), "size": self.size()})
    }
}

/// A manifest: its bytes, media type and digest.
#[derive(Debug, Clone)]
pub(crate) struct Doc {
    pub(crate) blob: Blob,
    pub(crate) media_type: &'static str,
}

impl Doc {
    fn new(media_type: &'static str, value: &serde_json::Value) -> Self {
        Self {
            blob: Blob::new(serde_json::to_vec(value).unwrap_or_default()),
            media_type,
        }
    }

    pub(crate) fn digest(&self) -> oci::Digest {
        self.blob.digest
    }
}

/// Everything pushed before the checks run.
#[derive(Debug, Clone)]
pub(crate) struct Fixtures {
    /// 1000 bytes: the range tests' blob.
    pub(crate) layer: Blob,
    pub(crate) config: Blob,
    pub(crate) docker_config: Blob,
    pub(crate) empty: Blob,
    pub(crate) manifest: Doc,
    pub(crate) docker_manifest: Doc,
    pub(crate) index: Doc,
    pub(crate) artifact: Doc,
    /// Tags pushed for the tag-list checks (beyond `oci`, `docker`, `index`).
    pub(crate) extra_tags: Vec<&'static str>,
}

impl Fixtures {
    pub(crate) fn new() -> Self {
        let layer = Blob::new(
            (0..1000u32)
                .map(|i| (i.wrapping_mul(31).wrapping_add(7) % 251) as u8)
                .collect::<Vec<_>>(),
        );
        let config = Blob::new(
            br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#
                .to_vec(),
        );
        let docker_config = Blob::new(
            br#"{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":[]}}"#
                .to_vec(),
        );
        let empty = Blob::new(b"{}".to_vec());
        let manifest = Doc::new(
            OCI_MANIFEST,
            &serde_json::json!({
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": config.descriptor(OCI_CONFIG),
                "layers": [layer.descriptor(OCI_LAYER_TAR)],
            }),
        );
        let docker_manifest = Doc::new(
            DOCKER_MANIFEST,
            &serde_json::json!({
                "schemaVersion": 2,
                "mediaType": DOCKER_MANIFEST,
                "config": docker_config.descriptor(DOCKER_CONFIG),
                "layers": [layer.descriptor(DOCKER_LAYER_GZIP)],
            }),
        );
        let mut platform_entry = manifest.blob.descriptor(OCI_MANIFEST);
        platform_entry["platform"] = serde_json::json!({"architecture": "amd64", "os": "linux"});
        let index = Doc::new(
            OCI_INDEX,
            &serde_json::json!({
                "schemaVersion": 2,
                "mediaType": OCI_INDEX,
                "manifests": [platform_entry],
            }),
        );
        let artifact = Doc::new(
            OCI_MANIFEST,
            &serde_json::json!({
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "artifactType": ARTIFACT_TYPE,
                "config": empty.descriptor(OCI_EMPTY),
                "layers": [empty.descriptor(OCI_EMPTY)],
                "subject": manifest.blob.descriptor(OCI_MANIFEST),
                "annotations": {"org.opencontainers.image.created": "2024-01-01T00:00:00Z"},
            }),
        );
        Self {
            layer,
            config,
            docker_config,
            empty,
            manifest,
            docker_manifest,
            index,
            artifact,
            extra_tags: vec!["t-a", "t-b", "t-c", "t-d", "t-e"],
        }
    }

    /// Every tag the repository ends up with, sorted as the spec orders them.
    pub(crate) fn all_tags(&self) -> Vec<String> {
        let mut tags: Vec<String> = ["oci", "docker", "index"]
            .into_iter()
            .chain(self.extra_tags.iter().copied())
            .map(str::to_owned)
            .collect();
        tags.sort();
        tags
    }

    /// Pushes blobs and manifests with the client's own helpers.
    pub(crate) async fn push(&self, remote: &Remote, repo: &str) -> Result<(), String> {
        for blob in [&self.layer, &self.config, &self.docker_config, &self.empty] {
            remote
                .push_blob(repo, &blob.digest, RequestBody::Bytes(blob.bytes.clone()))
                .await
                .map_err(|e| format!("blob {}: {e}", blob.digest))?;
        }
        let put = |doc: &Doc, reference: String| {
            let doc = doc.clone();
            async move {
                remote
                    .put_manifest(repo, &reference, doc.media_type, doc.blob.bytes.clone())
                    .await
                    .map_err(|e| format!("manifest {reference}: {e}"))
            }
        };
        put(&self.manifest, "oci".into()).await?;
        put(&self.docker_manifest, "docker".into()).await?;
        put(&self.index, "index".into()).await?;
        for tag in &self.extra_tags {
            put(&self.manifest, (*tag).to_owned()).await?;
        }
        put(&self.artifact, self.artifact.digest().to_string()).await?;
        Ok(())
    }
}
