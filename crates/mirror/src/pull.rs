//! `d8 mirror pull`: resolve what to mirror from the source's release channels and tags, fetch
//! manifests (and the few blobs resolving needs) into a cache, then write every package: each
//! blob once, straight into its place in the package files ([`place`]), the bundle's manifest
//! last.
//!
//! Resumable: the cache (`<bundle>/.d8-mirror-pull/`) and the package files of an interrupted
//! run stay until the bundle is complete, so a re-run fetches only what is missing. A blob is only
//! ever visible in the cache under its digest, or journaled as in place, once it has been
//! verified; one left by an earlier run is verified again before it is trusted.

mod dir_image;
mod images;
mod place;

#[cfg(test)]
pub(crate) use place::copy_in;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use registry_client::{Client, Config, Endpoint, Remote};
use semver::Version;
use tokio::io::AsyncWriteExt;

use crate::bundle::{self, FileEntry};
use crate::error::Error;
use crate::layout;
use crate::progress::{Progress, human_bytes};
use crate::select::{self, CHANNELS, LTS, ModuleFilter, PlatformSelection, parse_version_json};

/// What `d8 mirror pull` does.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// The source registry: host, path (`registry.deckhouse.ru/deckhouse/ee`), CA, credentials.
    pub source: Endpoint,
    /// The bundle directory.
    pub bundle_dir: PathBuf,
    /// Platform versions to pull; `None` for `--no-platform`.
    pub platform: Option<PlatformSelection>,
    /// Pull the installer images (`install`, `install-standalone`).
    pub installers: bool,
    /// Modules to pull; `None` for `--no-modules`.
    pub modules: Option<ModuleFilter>,
    /// Where modules are under the source (`modules`).
    pub modules_path: String,
    /// Split packages into chunks of at most this many bytes.
    pub chunk_size: Option<u64>,
    /// Print what would be pulled and stop.
    pub dry_run: bool,
    /// Reuse what an interrupted pull downloaded (`false` for `--no-pull-resume`).
    pub resume: bool,
    /// Overwrite a bundle already in the directory.
    pub force: bool,
    /// Mirror suspended channels anyway.
    pub ignore_suspend: bool,
    /// Blobs downloaded at once.
    pub parallel: usize,
    /// Images of your own (`--image`, `--images-file`), into the `images` package; see
    /// [`crate::images`].
    pub images: Vec<crate::images::Wanted>,
    /// Images made from local directories (`--image-dir`), into the `images` package.
    pub dir_images: Vec<crate::images::DirImage>,
}

/// What a pull did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PullSummary {
    /// Images (tags and digests) in the bundle.
    pub images: usize,
    /// Distinct blobs (manifests included).
    pub blobs: usize,
    /// Their total size.
    pub bytes: u64,
    /// Bytes downloaded by this run.
    pub downloaded: u64,
    /// Bytes found already downloaded by an earlier, interrupted run.
    pub reused: u64,
    /// The files written.
    pub files: Vec<FileEntry>,
    /// Platform tags pulled.
    pub platform_tags: Vec<String>,
    /// Modules pulled.
    pub modules: Vec<String>,
    /// Images of your own pulled (`--image`, `--images-file`), as normalised references.
    pub own_images: Vec<String>,
}

const WORK_DIR: &str = ".d8-mirror-pull";
const FILE_LIMIT: u64 = 64 << 20;
const ACCEPT: [&str; 4] = [
    oci::media_type::OCI_INDEX,
    oci::media_type::OCI_MANIFEST,
    oci::media_type::DOCKER_MANIFEST_LIST,
    oci::media_type::DOCKER_MANIFEST,
];

/// One image as fetched: its manifest (and those of its index entries) and blobs.
#[derive(Debug, Clone)]
struct Record {
    repo: String,
    reference: String,
    media_type: String,
    digest: oci::Digest,
    size: u64,
    /// Every manifest (this one and children) with its size.
    manifests: Vec<(oci::Digest, u64)>,
    /// Configs and layers.
    blobs: Vec<oci::Descriptor>,
}

#[derive(Debug, Default)]
struct LayoutBuild {
    entries: BTreeMap<String, oci::Descriptor>,
    blobs: BTreeMap<oci::Digest, u64>,
}

#[derive(Debug, Default)]
struct PackageBuild {
    layouts: BTreeMap<String, LayoutBuild>,
}

/// A blob to download: the registry and repository it comes from, and its descriptor.
#[derive(Clone)]
struct Want {
    remote: Remote,
    shown: String,
    repo: String,
    descriptor: oci::Descriptor,
}

struct Puller {
    remote: Remote,
    shown: String,
    cas: PathBuf,
    tmp: PathBuf,
    progress: Progress,
    packages: BTreeMap<String, PackageBuild>,
    /// Blobs to download: digest → (repository, descriptor).
    wanted: BTreeMap<oci::Digest, Want>,
    parallel: usize,
    /// Blobs this run downloaded (verified while written) or found intact in the cache of an
    /// earlier run: packing copies them without hashing them again.
    fresh: std::sync::Mutex<BTreeSet<oci::Digest>>,
}

/// Runs `d8 mirror pull`.
pub async fn pull(options: &PullOptions, progress: &Progress) -> Result<PullSummary, Error> {
    let started = Instant::now();
    let dir = &options.bundle_dir;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let work = dir.join(WORK_DIR);
    if !options.force && !options.dry_run {
        refuse_foreign_bundle(dir, work.exists())?;
    }
    if !options.resume && work.exists() {
        std::fs::remove_dir_all(&work).map_err(|e| Error::io(&work, e))?;
    }
    let cas = work.join("blobs");
    let tmp = work.join("tmp");
    for d in [&cas, &tmp] {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    let shown = options.source.display();
    let remote = Client::new(Config::default())
        .remote(options.source.clone())
        .map_err(|e| Error::registry(&shown, false, "source registry", e))?;
    if options.platform.is_some() || options.modules.is_some() {
        remote
            .check()
            .await
            .map_err(|e| Error::registry(&shown, false, format!("connect to {shown}"), e))?;
    }
    let mut puller = Puller {
        remote,
        shown,
        cas,
        tmp,
        progress: progress.clone(),
        packages: BTreeMap::new(),
        wanted: BTreeMap::new(),
        parallel: options.parallel.max(1),
        fresh: std::sync::Mutex::default(),
    };
    let mut summary = PullSummary::default();
    if let Some(selection) = &options.platform {
        summary.platform_tags = puller.platform(selection, options).await?;
    }
    if let Some(filter) = &options.modules {
        summary.modules = puller.modules(filter, &options.modules_path).await?;
    }
    if !options.images.is_empty() {
        summary.own_images = puller.images(&options.images, &options.source).await?;
    }
    for image in &options.dir_images {
        puller.dir_image(image)?;
        summary.own_images.push(format!(
            "{}:{} (from {})",
            image.repository,
            image.tag,
            image.dir.display()
        ));
    }
    if puller.packages.is_empty() {
        return Err(Error::NothingSelected {
            what: "image".into(),
        });
    }
    let plan_bytes: u64 = puller.all_blobs().values().sum();
    summary.blobs = puller.all_blobs().len();
    summary.bytes = plan_bytes;
    summary.images = puller
        .packages
        .values()
        .flat_map(|p| p.layouts.values())
        .map(|l| l.entries.len())
        .sum();
    if options.dry_run {
        puller.print_plan();
        let missing: u64 = puller
            .layout_blobs()
            .iter()
            .filter(|w| !puller.has(&w.descriptor.digest))
            .map(|w| w.descriptor.size)
            .sum();
        progress.summary(
            serde_json::json!({"dryRun": true, "images": summary.images, "blobs": summary.blobs,
                "bytes": summary.bytes, "toDownload": missing,
                "platform": summary.platform_tags, "modules": summary.modules,
                "ownImages": summary.own_images}),
            &format!(
                "dry run: {} images, {} blobs, {} in the bundle, {} to download",
                summary.images,
                summary.blobs,
                human_bytes(summary.bytes),
                human_bytes(missing)
            ),
        );
        return Ok(summary);
    }
    let (downloaded, reused, files) = puller
        .write_bundle(dir, options.chunk_size, options.resume)
        .await?;
    summary.downloaded += downloaded;
    summary.reused += reused;
    summary.files = files;
    std::fs::remove_dir_all(&work).map_err(|e| Error::io(&work, e))?;
    let seconds = started.elapsed().as_secs_f64();
    progress.summary(
        serde_json::json!({"images": summary.images, "blobs": summary.blobs, "bytes": summary.bytes,
            "downloaded": summary.downloaded, "reused": summary.reused, "seconds": seconds,
            "files": summary.files, "platform": summary.platform_tags, "modules": summary.modules,
            "ownImages": summary.own_images}),
        &format!(
            "pulled {} images ({} blobs, {}) into {} in {seconds:.1}s: {} downloaded, {} reused from an earlier run",
            summary.images,
            summary.blobs,
            human_bytes(summary.bytes),
            dir.display(),
            human_bytes(summary.downloaded),
            human_bytes(summary.reused),
        ),
    );
    Ok(summary)
}

fn refuse_foreign_bundle(dir: &Path, ours_interrupted: bool) -> Result<(), Error> {
    if dir.join(bundle::MANIFEST_FILE).exists() {
        return Err(Error::BundleExists {
            dir: dir.to_owned(),
            file: bundle::MANIFEST_FILE.into(),
        });
    }
    if ours_interrupted {
        return Ok(());
    }
    if let Some(package) = bundle::packages(dir)?.into_iter().next() {
        return Err(Error::BundleExists {
            dir: dir.to_owned(),
            file: package.display(),
        });
    }
    Ok(())
}

impl Puller {
    fn has(&self, digest: &oci::Digest) -> bool {
        self.cas_path(digest).exists()
    }

    fn cas_path(&self, digest: &oci::Digest) -> PathBuf {
        self.cas
            .join(digest.algorithm().as_str())
            .join(digest.encoded())
    }

    fn all_blobs(&self) -> BTreeMap<oci::Digest, u64> {
        self.packages
            .values()
            .flat_map(|p| p.layouts.values())
            .flat_map(|l| l.blobs.iter().map(|(d, s)| (*d, *s)))
            .collect()
    }

    /// The configs and layers the bundle's layouts need, with a repository to fetch each from.
    fn layout_blobs(&self) -> Vec<Want> {
        let needed = self.all_blobs();
        self.wanted
            .iter()
            .filter(|(d, _)| needed.contains_key(d))
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn what(&self, repo: &str, reference: &str) -> String {
        let sep = if reference.contains(':') { "@" } else { ":" };
        format!("{}{sep}{reference}", layout::join(&self.shown, repo))
    }

    /// Fetches an image's manifests into the cache (not its blobs); `None` when it does not
    /// exist.
    async fn fetch(&mut self, repo: &str, reference: &str) -> Result<Option<Record>, Error> {
        let what = self.what(repo, reference);
        let manifest = match self.remote.get_manifest(repo, reference, &ACCEPT).await {
            Ok(m) => m,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => {
                return Err(Error::registry(
                    &self.shown,
                    false,
                    format!("pull {what}"),
                    e,
                ));
            }
        };
        let parsed = oci::Manifest::parse(manifest.bytes.to_vec(), manifest.media_type.as_deref())
            .map_err(|e| Error::InvalidImage {
                image: what.clone(),
                reason: e.to_string(),
            })?;
        self.store(&manifest.digest, &manifest.bytes)?;
        let mut record = Record {
            repo: repo.to_owned(),
            reference: reference.to_owned(),
            media_type: parsed.media_type().as_str().to_owned(),
            digest: manifest.digest,
            size: manifest.bytes.len() as u64,
            manifests: vec![(manifest.digest, manifest.bytes.len() as u64)],
            blobs: Vec::new(),
        };
        let mut pending = vec![parsed];
        let mut depth = 0;
        while let Some(m) = pending.pop() {
            depth += 1;
            if depth > 64 {
                return Err(Error::InvalidImage {
                    image: what,
                    reason: "index nesting too deep".into(),
                });
            }
            match m.content() {
                oci::manifest::Content::Image(image) => {
                    record.blobs.push(image.config.clone());
                    record.blobs.extend(image.layers.iter().cloned());
                }
                oci::manifest::Content::Index(index) => {
                    for child in &index.manifests {
                        let bytes = self
                            .remote
                            .get_manifest(repo, &child.digest.to_string(), &ACCEPT)
                            .await
                            .map_err(|e| {
                                Error::registry(
                                    &self.shown,
                                    false,
                                    format!("pull {what} (entry {})", child.digest),
                                    e,
                                )
                            })?;
                        let parsed =
                            oci::Manifest::parse(bytes.bytes.to_vec(), Some(&child.media_type))
                                .map_err(|e| Error::InvalidImage {
                                    image: format!("{what} entry {}", child.digest),
                                    reason: e.to_string(),
                                })?;
                        self.store(&bytes.digest, &bytes.bytes)?;
                        record
                            .manifests
                            .push((bytes.digest, bytes.bytes.len() as u64));
                        pending.push(parsed);
                    }
                }
            }
        }
        for blob in &record.blobs {
            self.wanted.entry(blob.digest).or_insert_with(|| Want {
                remote: self.remote.clone(),
                shown: self.shown.clone(),
                repo: repo.to_owned(),
                descriptor: blob.clone(),
            });
        }
        Ok(Some(record))
    }

    fn store(&self, digest: &oci::Digest, bytes: &[u8]) -> Result<(), Error> {
        let path = self.cas_path(digest);
        if path.exists() {
            return Ok(());
        }
        let parent = path.parent().unwrap_or(&self.cas);
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        let temp = self.tmp.join(format!("{}.manifest", digest.encoded()));
        std::fs::write(&temp, bytes).map_err(|e| Error::io(&temp, e))?;
        std::fs::rename(&temp, &path).map_err(|e| Error::io(&path, e))
    }

    /// Adds `record` to the layout `dir` of `package` as `short_tag`.
    fn add(&mut self, package: &str, dir: &str, short_tag: &str, record: &Record) {
        let ref_name = if short_tag.starts_with('@') {
            format!("{}{short_tag}", layout::join(&self.shown, &record.repo))
        } else {
            format!("{}:{short_tag}", layout::join(&self.shown, &record.repo))
        };
        let layout = self
            .packages
            .entry(package.to_owned())
            .or_default()
            .layouts
            .entry(dir.to_owned())
            .or_default();
        layout.entries.insert(
            short_tag.to_owned(),
            layout::entry(
                &record.media_type,
                record.digest,
                record.size,
                &ref_name,
                short_tag,
            ),
        );
        layout.blobs.extend(record.manifests.iter().copied());
        layout
            .blobs
            .extend(record.blobs.iter().map(|b| (b.digest, b.size)));
    }

    /// Fetches `repo:tag` and adds it to `package`/`dir`; a missing image is an error when
    /// `required`, else a warning.
    async fn take(
        &mut self,
        package: &str,
        dir: &str,
        repo: &str,
        reference: &str,
        required: bool,
    ) -> Result<Option<Record>, Error> {
        match self.fetch(repo, reference).await? {
            Some(record) => {
                let short = if reference.contains(':') {
                    format!("@{reference}")
                } else {
                    reference.to_owned()
                };
                self.add(package, dir, &short, &record);
                Ok(Some(record))
            }
            None if required => Err(Error::InvalidImage {
                image: self.what(repo, reference),
                reason: "not found in the source registry".into(),
            }),
            None => {
                tracing::debug!(image = %self.what(repo, reference), "not in the source, skipped");
                Ok(None)
            }
        }
    }

    /// Reads files from an image's layers (downloading them first); later layers win.
    async fn read_files(
        &mut self,
        record: &Record,
        names: &[&str],
    ) -> Result<BTreeMap<String, Vec<u8>>, Error> {
        let blobs: Vec<Want> = record
            .blobs
            .iter()
            .map(|b| Want {
                remote: self.remote.clone(),
                shown: self.shown.clone(),
                repo: record.repo.clone(),
                descriptor: b.clone(),
            })
            .collect();
        self.download(&blobs, None).await?;
        let mut found = BTreeMap::new();
        let image = self.what(&record.repo, &record.reference);
        // The config is the first blob; layers follow in order.
        for layer in record.blobs.iter().skip(1) {
            let path = self.cas_path(&layer.digest);
            let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
            let media_type = layer.media_type.clone();
            let image = image.clone();
            let files = tokio::task::spawn_blocking(move || {
                files_in_layer(&path, &media_type, &names)
                    .map_err(|reason| Error::InvalidImage { image, reason })
            })
            .await
            .map_err(|e| Error::InvalidArgument(format!("layer reader failed: {e}")))??;
            found.extend(files);
        }
        Ok(found)
    }

    async fn platform(
        &mut self,
        selection: &PlatformSelection,
        options: &PullOptions,
    ) -> Result<Vec<String>, Error> {
        const PKG: &str = "platform";
        let phase = self.progress.phase("resolve", 0, 0);
        let mut channels: BTreeMap<String, Version> = BTreeMap::new();
        let mut channel_records: BTreeMap<String, Record> = BTreeMap::new();
        for channel in CHANNELS.iter().copied().chain([LTS]) {
            let Some(record) = self.fetch("release-channel", channel).await? else {
                continue;
            };
            let files = self.read_files(&record, &["version.json"]).await?;
            let Some(json) = files.get("version.json") else {
                self.progress.warn(&format!(
                    "{} has no version.json; channel {channel} skipped",
                    self.what("release-channel", channel)
                ));
                continue;
            };
            let info = parse_version_json(json).map_err(|reason| Error::InvalidImage {
                image: self.what("release-channel", channel),
                reason: format!("version.json: {reason}"),
            })?;
            if info.suspended && !options.ignore_suspend {
                return Err(Error::SuspendedChannel {
                    channel: channel.to_owned(),
                });
            }
            channels.insert(channel.to_owned(), info.version);
            channel_records.insert(channel.to_owned(), record);
            phase.item();
        }
        let tags = match self.remote.all_tags("release-channel").await {
            Ok(tags) => tags,
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => {
                return Err(Error::registry(
                    &self.shown,
                    false,
                    "list the platform releases",
                    e,
                ));
            }
        };
        let plan = select::plan_platform(selection, &channels, &tags)?;
        let platform_tags = plan.tags();
        self.progress.info(&format!(
            "platform releases: {}; channels: {}",
            platform_tags.join(", "),
            if plan.channels.is_empty() {
                "none".to_owned()
            } else {
                plan.channels.iter().cloned().collect::<Vec<_>>().join(", ")
            }
        ));
        for tag in &platform_tags {
            let root = self
                .take(PKG, "", "", tag, true)
                .await?
                .ok_or_else(|| Error::NothingSelected { what: tag.clone() })?;
            let install = if options.installers {
                let install = self.take(PKG, "install", "install", tag, false).await?;
                self.take(PKG, "install-standalone", "install-standalone", tag, false)
                    .await?;
                install
            } else {
                None
            };
            self.take(PKG, "release-channel", "release-channel", tag, false)
                .await?;
            // The release's image set: images_tags.json preferred, images_digests.json else;
            // in the release image, or else in its installer.
            let mut images = self
                .read_files(
                    &root,
                    &[
                        "deckhouse/modules/images_tags.json",
                        "deckhouse/modules/images_digests.json",
                        "modules/images_tags.json",
                        "modules/images_digests.json",
                    ],
                )
                .await?;
            if let (true, Some(install)) = (images.is_empty(), &install) {
                {
                    images = self
                        .read_files(
                            install,
                            &[
                                "deckhouse/candi/images_tags.json",
                                "deckhouse/candi/images_digests.json",
                            ],
                        )
                        .await?;
                }
            }
            let (mut digests, mut image_tags) = (BTreeSet::new(), BTreeSet::new());
            for (name, json) in &images {
                let bad = |e: serde_json::Error| Error::InvalidImage {
                    image: self.what("", tag),
                    reason: format!("{name}: {e}"),
                };
                if name.ends_with("images_tags.json") {
                    image_tags.extend(select::tags_in(json).map_err(bad)?);
                } else {
                    digests.extend(select::digests_in(json).map_err(bad)?);
                }
            }
            if !image_tags.is_empty() {
                digests.clear();
            }
            if digests.is_empty() && image_tags.is_empty() {
                self.progress.warn(&format!(
                    "release {tag} lists no images (no images_digests.json or images_tags.json found); \
                     only its release images are mirrored"
                ));
            }
            self.progress.info(&format!(
                "release {tag}: {} images",
                digests.len() + image_tags.len()
            ));
            for digest in digests {
                self.take(PKG, "", "", &digest.to_string(), true).await?;
            }
            for image_tag in image_tags {
                self.take(PKG, "", "", &image_tag, true).await?;
            }
        }
        for channel in &plan.channels {
            self.take(PKG, "", "", channel, false).await?;
            if options.installers {
                self.take(PKG, "install", "install", channel, false).await?;
            }
            if let Some(record) = channel_records.get(channel).cloned() {
                self.add(PKG, "release-channel", channel, &record);
            }
        }
        if let Some(target) = &plan.retag_channels_to {
            match self.fetch("release-channel", target).await? {
                Some(record) => {
                    for channel in CHANNELS {
                        self.add(PKG, "release-channel", channel, &record);
                    }
                }
                None => self.progress.warn(
                    "the source holds no release-channel image for the requested tag; the bundle has no release channels",
                ),
            }
        }
        phase.finish();
        Ok(platform_tags)
    }

    async fn modules(
        &mut self,
        filter: &ModuleFilter,
        modules_path: &str,
    ) -> Result<Vec<String>, Error> {
        let base = modules_path.trim_matches('/').to_owned();
        let names = match self.remote.all_tags(&base).await {
            Ok(names) => names,
            Err(e) if e.is_not_found() => {
                self.progress.warn(&format!(
                    "{} lists no modules; check --source and --modules-path-suffix",
                    layout::join(&self.shown, &base)
                ));
                Vec::new()
            }
            Err(e) => {
                return Err(Error::registry(&self.shown, false, "list the modules", e));
            }
        };
        let mut selected: Vec<String> = names.into_iter().filter(|n| filter.wants(n)).collect();
        selected.sort();
        selected.dedup();
        for spec in &filter.include {
            if !selected.contains(&spec.name) {
                self.progress.warn(&format!(
                    "module {} is not in the source registry",
                    spec.name
                ));
            }
        }
        let phase = self.progress.phase("modules", selected.len() as u64, 0);
        for name in &selected {
            let package = format!("module-{name}");
            let repo = format!("{base}/{name}");
            let release_repo = format!("{repo}/release");
            let dir = format!("modules/{name}");
            let release_dir = format!("{dir}/release");
            let mut channel_versions = BTreeMap::new();
            let mut channel_records = BTreeMap::new();
            for channel in CHANNELS.iter().copied().chain([LTS]) {
                let Some(record) = self.fetch(&release_repo, channel).await? else {
                    continue;
                };
                let files = self.read_files(&record, &["version.json"]).await?;
                match files.get("version.json").map(|j| parse_version_json(j)) {
                    Some(Ok(info)) => {
                        channel_versions.insert(channel.to_owned(), info.version);
                        channel_records.insert(channel.to_owned(), record);
                    }
                    _ => self.progress.warn(&format!(
                        "{} has no usable version.json; skipped",
                        self.what(&release_repo, channel)
                    )),
                }
            }
            let needs_tags = filter.include.iter().any(|s| {
                s.name == *name && matches!(s.constraint, Some(select::Constraint::Range { .. }))
            });
            let tags = if needs_tags {
                self.remote.all_tags(&repo).await.unwrap_or_default()
            } else {
                Vec::new()
            };
            let versions = filter.versions(name, &channel_versions, &tags);
            for channel in &versions.channels {
                if let Some(record) = channel_records.get(channel).cloned() {
                    self.add(&package, &release_dir, channel, &record);
                }
            }
            for tag in &versions.tags {
                let Some(image) = self.take(&package, &dir, &repo, tag, false).await? else {
                    self.progress.warn(&format!(
                        "{} is not in the source registry; skipped",
                        self.what(&repo, tag)
                    ));
                    continue;
                };
                self.take(&package, &release_dir, &release_repo, tag, false)
                    .await?;
                let files = self.read_files(&image, &["images_digests.json"]).await?;
                if let Some(json) = files.get("images_digests.json") {
                    let digests = select::digests_in(json).map_err(|e| Error::InvalidImage {
                        image: self.what(&repo, tag),
                        reason: format!("images_digests.json: {e}"),
                    })?;
                    for digest in digests {
                        self.take(&package, &dir, &repo, &digest.to_string(), true)
                            .await?;
                    }
                }
            }
            let retagged = match &versions.retag_to {
                Some(target) => self.fetch(&release_repo, target).await?,
                None => None,
            };
            if let Some(record) = retagged {
                for channel in &versions.retag_channels {
                    self.add(&package, &release_dir, channel, &record);
                }
            }
            if !self.packages.contains_key(&package) {
                self.progress.warn(&format!(
                    "module {name}: nothing to pull (no channel, no version)"
                ));
            }
            phase.item();
        }
        phase.finish();
        Ok(selected)
    }

    fn print_plan(&self) {
        for (package, build) in &self.packages {
            for (dir, layout) in &build.layouts {
                let repo = layout::repository_of(package, dir);
                let bytes: u64 = layout.blobs.values().sum();
                self.progress.info(&format!(
                    "[dry-run] {package}.tar: {} ({} images, {})",
                    layout::join(&self.shown, &repo),
                    layout.entries.len(),
                    human_bytes(bytes)
                ));
                for tag in layout.entries.keys() {
                    self.progress.info(&format!("[dry-run]   {tag}"));
                }
            }
        }
    }

    /// Downloads the blobs not yet in the cache, `parallel` at a time; returns (bytes
    /// downloaded, bytes already there).
    async fn download(
        &self,
        blobs: &[Want],
        phase: Option<&crate::progress::Phase>,
    ) -> Result<(u64, u64), Error> {
        let semaphore = Arc::new(tokio::sync::Semaphore::new(self.parallel));
        let mut tasks = tokio::task::JoinSet::new();
        let mut reused = 0;
        let mut seen = BTreeSet::new();
        for want in blobs {
            let descriptor = &want.descriptor;
            if !seen.insert(descriptor.digest) {
                continue;
            }
            let path = self.cas_path(&descriptor.digest);
            if std::fs::metadata(&path).is_ok_and(|m| m.len() == descriptor.size) {
                // Fetched by this run, or left by an earlier one: that one is trusted only once
                // it hashes to its digest again (the disk may have changed under it).
                let known = self
                    .fresh
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(&descriptor.digest);
                let (check, digest) = (path.clone(), descriptor.digest);
                let intact = known
                    || tokio::task::spawn_blocking(move || hashes_to(&check, digest))
                        .await
                        .unwrap_or(false);
                if intact {
                    reused += descriptor.size;
                    self.fresh
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(descriptor.digest);
                    if let Some(phase) = phase {
                        phase.bytes(descriptor.size);
                        phase.item();
                    }
                    continue;
                }
                self.progress.warn(&format!(
                    "blob {} in {} no longer matches its digest; fetching it again",
                    descriptor.digest,
                    path.display()
                ));
                std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
            }
            let permit = semaphore.clone();
            let Want {
                remote,
                shown,
                repo,
                descriptor,
            } = want.clone();
            let tmp = self.tmp.clone();
            let phase = phase.cloned();
            tasks.spawn(async move {
                let _permit = permit.acquire_owned().await;
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    match download_blob(&remote, &shown, &repo, &descriptor, &path, &tmp, phase.as_ref())
                        .await
                    {
                        Ok(()) => {
                            if let Some(phase) = &phase {
                                phase.item();
                            }
                            return Ok((descriptor.digest, descriptor.size));
                        }
                        Err(e) if e.transient() && attempt < 4 => {
                            tracing::warn!(digest = %descriptor.digest, error = %e, "blob download failed, retrying");
                            tokio::time::sleep(std::time::Duration::from_secs(attempt)).await;
                        }
                        Err(e) => return Err(e),
                    }
                }
            });
        }
        let mut downloaded = 0;
        while let Some(result) = tasks.join_next().await {
            let result =
                result.map_err(|e| Error::InvalidArgument(format!("download task failed: {e}")))?;
            match result {
                Ok((digest, n)) => {
                    downloaded += n;
                    self.fresh
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(digest);
                }
                Err(e) => {
                    tasks.abort_all();
                    return Err(e);
                }
            }
        }
        Ok((downloaded, reused))
    }
}

/// Whether the file at `path` hashes to `digest`.
fn hashes_to(path: &Path, digest: oci::Digest) -> bool {
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let mut verifier = digest.verifier();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return verifier.finish().is_ok(),
            Ok(n) => verifier.update(&buf[..n]),
            Err(_) => return false,
        }
    }
}

async fn download_blob(
    remote: &Remote,
    shown: &str,
    repo: &str,
    descriptor: &oci::Descriptor,
    path: &Path,
    tmp: &Path,
    phase: Option<&crate::progress::Phase>,
) -> Result<(), Error> {
    let what = format!(
        "pull blob {} of {}",
        descriptor.digest,
        layout::join(shown, repo)
    );
    let response = remote
        .get_blob(repo, &descriptor.digest, None, Some(descriptor.size))
        .await
        .map_err(|e| Error::registry(shown, false, what.clone(), e))?;
    let temp = tmp.join(format!(
        "{}.{}.partial",
        descriptor.digest.encoded(),
        std::process::id()
    ));
    let mut file = tokio::fs::File::create(&temp)
        .await
        .map_err(|e| Error::io(&temp, e))?;
    let mut body = response.into_body();
    let mut done = 0u64;
    while let Some(chunk) = body.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => {
                let _ = tokio::fs::remove_file(&temp).await;
                return Err(Error::registry(shown, false, what, e));
            }
        };
        file.write_all(&chunk)
            .await
            .map_err(|e| Error::io(&temp, e))?;
        done += chunk.len() as u64;
        if let Some(phase) = phase {
            phase.bytes(chunk.len() as u64);
        }
    }
    file.flush().await.map_err(|e| Error::io(&temp, e))?;
    drop(file);
    // The body ended cleanly, so it hashed to the digest and had the descriptor's size.
    debug_assert_eq!(done, descriptor.size);
    let parent = path.parent().unwrap_or(tmp);
    tokio::fs::create_dir_all(parent)
        .await
        .map_err(|e| Error::io(parent, e))?;
    tokio::fs::rename(&temp, path)
        .await
        .map_err(|e| Error::io(path, e))
}

/// Reads the named files from a layer blob (gzip or plain tar).
fn files_in_layer(
    path: &Path,
    media_type: &str,
    names: &[String],
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut head = [0u8; 2];
    let gzip = media_type.ends_with("gzip") || {
        let mut probe = std::fs::File::open(path).map_err(|e| e.to_string())?;
        probe.read_exact(&mut head).is_ok() && head == [0x1f, 0x8b]
    };
    if media_type.contains("zstd") {
        return Ok(BTreeMap::new());
    }
    let reader: Box<dyn Read> = if gzip {
        Box::new(flate2::read::GzDecoder::new(std::io::BufReader::new(file)))
    } else {
        Box::new(std::io::BufReader::new(file))
    };
    let mut archive = tar::Archive::new(reader);
    let mut found = BTreeMap::new();
    let entries = match archive.entries() {
        Ok(entries) => entries,
        Err(_) => return Ok(found),
    };
    for entry in entries {
        // Not every blob is a tar (artifacts); stop quietly at the first thing that is not.
        let Ok(mut entry) = entry else { break };
        let Ok(entry_path) = entry.path() else {
            continue;
        };
        let entry_path = entry_path
            .to_string_lossy()
            .trim_start_matches("./")
            .trim_start_matches('/')
            .to_owned();
        if !names.contains(&entry_path) || !entry.header().entry_type().is_file() {
            continue;
        }
        if entry.size() > FILE_LIMIT {
            return Err(format!("{entry_path} is larger than {FILE_LIMIT} bytes"));
        }
        let mut bytes = Vec::new();
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{entry_path}: {e}"))?;
        found.insert(entry_path, bytes);
    }
    Ok(found)
}
