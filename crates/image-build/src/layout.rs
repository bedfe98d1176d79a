//! Writing an image as an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/…`), the
//! form `skopeo`, `crane` and `ctr import` read, and from which `d8 image push` uploads.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::Error;
use crate::config::{self, ImageConfig};
use crate::layer::{self, Layer};
use crate::rootfs::Rootfs;

/// A built image.
#[derive(Clone, Debug)]
pub struct Built {
    /// The layout directory.
    pub dir: PathBuf,
    /// The manifest's bytes (their digest is the image's identity).
    pub manifest: Vec<u8>,
    /// The manifest's digest.
    pub digest: oci::Digest,
    /// The config blob.
    pub config: Vec<u8>,
    /// The layers, bottom first.
    pub layers: Vec<Layer>,
}

impl Built {
    /// Where a blob of this image is stored.
    pub fn blob_path(&self, digest: &oci::Digest) -> PathBuf {
        blob_path(&self.dir, digest)
    }
}

fn blob_path(dir: &Path, digest: &oci::Digest) -> PathBuf {
    dir.join("blobs")
        .join(digest.algorithm().to_string())
        .join(digest.encoded())
}

/// Builds the image from `layers` (name and filesystem, bottom first) into the layout at `dir`
/// (created; blobs already there are overwritten with the same bytes). `index.json` names the
/// manifest with `org.opencontainers.image.ref.name` = `tag`.
pub fn build(
    dir: &Path,
    layers: &[(String, Rootfs)],
    config: &ImageConfig,
    tag: &str,
) -> Result<Built, Error> {
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Write { path, source }
    };
    let blobs = dir.join("blobs").join("sha256");
    std::fs::create_dir_all(&blobs).map_err(write_err(&blobs))?;
    let mut written = Vec::new();
    for (index, (name, fs)) in layers.iter().enumerate() {
        let partial = blobs.join(format!(".layer-{index}.partial"));
        let layer = layer::write(name, fs, config.created, &partial)?;
        let target = blob_path(dir, &layer.digest);
        std::fs::rename(&partial, &target).map_err(write_err(&target))?;
        written.push(layer);
    }
    let config_bytes = config::config_json(config, &written);
    let manifest = config::manifest_json(&config_bytes, &written, &config.labels);
    let digest = oci::Digest::compute(oci::Algorithm::Sha256, &manifest);
    for bytes in [&config_bytes, &manifest] {
        let path = blob_path(dir, &oci::Digest::compute(oci::Algorithm::Sha256, bytes));
        std::fs::write(&path, bytes).map_err(write_err(&path))?;
    }
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": config::MANIFEST,
            "digest": digest.to_string(),
            "size": manifest.len(),
            "annotations": {"org.opencontainers.image.ref.name": tag},
        }],
    });
    for (name, bytes) in [
        ("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec()),
        (
            "index.json",
            serde_json::to_vec(&index).expect("JSON values serialize"),
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(write_err(&path))?;
    }
    Ok(Built {
        dir: dir.to_path_buf(),
        manifest,
        digest,
        config: config_bytes,
        layers: written,
    })
}
