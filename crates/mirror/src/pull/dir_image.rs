//! `--image-dir DIR=REPOSITORY:TAG`: an image made on the spot from a local directory, with
//! `image-build`'s deterministic layer (sorted paths, owner root, mtime 0, the modes on disk),
//! config and manifest — the same directory always gives the same digest. Its blobs are written
//! straight into the pull cache under their digests and packed like any other image.

use std::path::Path;

use image_build::{ImageConfig, Labels, Rootfs};

use super::{Puller, Record};
use crate::error::Error;
use crate::images::{self, DirImage};

/// The directory's tree as a root filesystem: directories, regular files (read when the layer
/// is written) and symbolic links; anything else is refused.
pub(super) fn rootfs_of(dir: &Path) -> Result<Rootfs, Error> {
    let mut fs = Rootfs::new();
    let mut pending = vec![(dir.to_owned(), String::new())];
    while let Some((host, path)) = pending.pop() {
        let entries = std::fs::read_dir(&host).map_err(|e| Error::io(&host, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(&host, e))?;
            let name = entry.file_name();
            let name = name.to_str().ok_or_else(|| {
                Error::InvalidArgument(format!("{}: the name is not UTF-8", entry.path().display()))
            })?;
            let target = format!("{path}/{name}");
            let meta =
                std::fs::symlink_metadata(entry.path()).map_err(|e| Error::io(entry.path(), e))?;
            let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777;
            let bad = |e: image_build::Error| Error::InvalidArgument(e.to_string());
            let kind = meta.file_type();
            if kind.is_dir() {
                fs.add(&target, image_build::Entry::Dir { mode })
                    .map_err(bad)?;
                pending.push((entry.path(), target));
            } else if kind.is_file() {
                fs.host_file(&target, mode, entry.path()).map_err(bad)?;
            } else if kind.is_symlink() {
                let link =
                    std::fs::read_link(entry.path()).map_err(|e| Error::io(entry.path(), e))?;
                fs.add(
                    &target,
                    image_build::Entry::Symlink {
                        target: link.display().to_string(),
                    },
                )
                .map_err(bad)?;
            } else {
                return Err(Error::InvalidArgument(format!(
                    "{}: only directories, files and symbolic links go into an image",
                    entry.path().display()
                )));
            }
        }
    }
    Ok(fs)
}

impl Puller {
    /// Builds `image` into the cache and adds it to the `images` package.
    pub(super) fn dir_image(&mut self, image: &DirImage) -> Result<(), Error> {
        let fs = rootfs_of(&image.dir)?;
        let temp = self
            .tmp
            .join(format!("layer.{}.partial", std::process::id()));
        let what = image.dir.display().to_string();
        let layer = image_build::layer::write(&what, &fs, 0, &temp)
            .map_err(|e| Error::InvalidArgument(format!("{what}: {e}")))?;
        let layer_path = self.cas_path(&layer.digest);
        let parent = layer_path.parent().unwrap_or(&self.cas);
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        std::fs::rename(&temp, &layer_path).map_err(|e| Error::io(&layer_path, e))?;
        let settings = ImageConfig {
            user: "0:0".into(),
            entrypoint: Vec::new(),
            env: Vec::new(),
            labels: Labels::new(),
            created: 0,
        };
        let config = image_build::config::config_json(&settings, std::slice::from_ref(&layer));
        let config_digest = oci::Digest::compute(oci::Algorithm::Sha256, &config);
        self.store(&config_digest, &config)?;
        let manifest = image_build::config::manifest_json(
            &config,
            std::slice::from_ref(&layer),
            &settings.labels,
        );
        let digest = oci::Digest::compute(oci::Algorithm::Sha256, &manifest);
        self.store(&digest, &manifest)?;
        let record = Record {
            repo: image.repository.clone(),
            reference: image.tag.clone(),
            media_type: image_build::config::MANIFEST.to_owned(),
            digest,
            size: manifest.len() as u64,
            manifests: vec![(digest, manifest.len() as u64)],
            blobs: vec![
                oci::Descriptor::new(
                    image_build::config::CONFIG,
                    config_digest,
                    config.len() as u64,
                ),
                oci::Descriptor::new(image_build::layer::MEDIA_TYPE, layer.digest, layer.size),
            ],
        };
        // Named by its repository alone (`team/site:v1`): it has no registry.
        let shown = std::mem::take(&mut self.shown);
        self.add(images::PACKAGE, &image.repository, &image.tag, &record);
        self.shown = shown;
        let mut fresh = self.fresh.lock().unwrap_or_else(|e| e.into_inner());
        fresh.extend([config_digest, layer.digest]);
        Ok(())
    }
}
