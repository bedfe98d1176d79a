//! `d8 mirror push`: copy a bundle's layouts into a registry byte for byte while verifying it —
//! every blob is checked against its digest as it is read for its upload (a blob that does not
//! match is never committed), the whole bundle against `d8-mirror-bundle.json` in the
//! background, and no manifest is written before both are done. Blobs that exist are skipped
//! (HEAD) or mounted from a repository already holding them, large blobs go up in chunks whose
//! upload sessions are journaled so that a re-run after an interruption continues where the
//! registry stopped, manifests go up as their exact bytes, children before the indexes and tags
//! that name them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::{Method, StatusCode, header};
use registry_client::{Client, Config, Endpoint, Mount, Remote, RequestBody, Scope};
use serde::{Deserialize, Serialize};

use crate::bundle::{self, BundleManifest, Entry, Package, ScannedPackage};
use crate::error::Error;
use crate::layout::{self, IndexJson, Target};
use crate::progress::{Phase, Progress, human_bytes};

/// What `d8 mirror push` does.
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// The target: host, path, CA, client certificate, write credentials.
    pub target: Endpoint,
    /// The bundle directory.
    pub bundle_dir: PathBuf,
    /// Blobs pushed at once.
    pub parallel: usize,
    /// Blobs above this size are uploaded in PATCH chunks of this size (resumable).
    pub chunk_size: u64,
    /// Where upload sessions are journaled (default: in the bundle directory).
    pub state_dir: Option<PathBuf>,
    /// Verify and print what would be pushed, push nothing.
    pub dry_run: bool,
    /// Where modules go under the target (`modules`).
    pub modules_path: String,
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PushSummary {
    /// Images (index entries) pushed or found in place.
    pub images: usize,
    /// Distinct (repository, blob) pairs in the bundle.
    pub blobs: usize,
    /// Uploaded by this run.
    pub uploaded: usize,
    /// Already in the repository (HEAD).
    pub skipped: usize,
    /// Mounted from another repository of the target.
    pub mounted: usize,
    /// Uploads that continued a session of an earlier, interrupted run.
    pub resumed: usize,
    /// Blob bytes sent by this run.
    pub bytes_sent: u64,
    /// Bytes verified in the bundle.
    pub bytes_verified: u64,
    /// Manifests PUT.
    pub manifests_pushed: usize,
    /// Manifests already in place.
    pub manifests_skipped: usize,
}

/// Where a blob is in the bundle.
#[derive(Debug, Clone, Copy)]
struct Loc {
    package: usize,
    entry: Entry,
}

#[derive(Debug, Clone)]
struct ManifestPush {
    digest: oci::Digest,
    media_type: String,
    loc: Loc,
    target: Target,
    image: String,
}

#[derive(Debug, Default)]
struct RepoPlan {
    blobs: BTreeMap<oci::Digest, Loc>,
    /// In push order: index children before their index, every manifest before its tag.
    manifests: Vec<ManifestPush>,
}

/// Runs `d8 mirror push`.
pub async fn push(options: &PushOptions, progress: &Progress) -> Result<PushSummary, Error> {
    let started = Instant::now();
    let dir = &options.bundle_dir;
    let packages = bundle::packages(dir)?;
    if packages.is_empty() {
        return Err(Error::InvalidBundle {
            file: dir.display().to_string(),
            reason: "no packages (*.tar or *.chunk files) here: is this a bundle written by `d8 mirror pull`?".into(),
        });
    }
    let manifest = BundleManifest::read(dir)?;
    if let Some(manifest) = &manifest {
        for expected in &manifest.packages {
            if !packages.iter().any(|p| p.name == expected.name) {
                return Err(Error::CorruptPackage {
                    file: format!("{}.tar", expected.name),
                    reason: "is missing (the bundle manifest lists it)".into(),
                });
            }
        }
    }
    let scanned = if options.dry_run {
        verify(&packages, manifest.as_ref(), progress).await?
    } else {
        index(&packages, manifest.as_ref()).await?
    };
    let mut summary = PushSummary {
        bytes_verified: packages.iter().map(Package::size).sum(),
        ..PushSummary::default()
    };
    let plan = plan(&scanned, &options.modules_path)?;
    summary.images = plan
        .values()
        .flat_map(|r| &r.manifests)
        .filter(|m| matches!(m.target, Target::Tag(_)))
        .count()
        + plan
            .values()
            .flat_map(|r| &r.manifests)
            .filter(|m| m.target == Target::Digest)
            .count();
    summary.blobs = plan.values().map(|r| r.blobs.len()).sum();
    let blob_bytes: u64 = unique_blobs(&plan)
        .values()
        .map(|(_, l)| l.entry.size)
        .sum();
    let shown = options.target.display();
    if options.dry_run {
        for (repo, repo_plan) in &plan {
            progress.info(&format!(
                "[dry-run] {}: {} manifests, {} blobs",
                layout::join(&shown, repo),
                repo_plan.manifests.len(),
                repo_plan.blobs.len()
            ));
        }
        progress.summary(
            serde_json::json!({"dryRun": true, "images": summary.images, "blobs": summary.blobs,
                "bytes": blob_bytes, "bytesVerified": summary.bytes_verified}),
            &format!(
                "dry run: the bundle is intact ({} verified); it would push {} images and {} blobs ({}) to {shown}",
                human_bytes(summary.bytes_verified),
                summary.images,
                summary.blobs,
                human_bytes(blob_bytes)
            ),
        );
        return Ok(summary);
    }
    // The whole bundle is verified while the blobs go up, each blob is verified as it is read
    // for its upload, and no manifest is written before both are done.
    let check = Check::start(&packages, manifest.clone(), progress);
    let remote = Client::new(Config::default())
        .remote(options.target.clone())
        .map_err(|e| Error::registry(&shown, true, "target registry", e))?;
    remote
        .check()
        .await
        .map_err(|e| Error::first_contact(&shown, &options.target, e))?;
    let state_dir = options
        .state_dir
        .clone()
        .unwrap_or_else(|| dir.join(".d8-mirror-push"));
    let journal = Arc::new(Journal::open(&state_dir, &options.target)?);
    let ctx = Arc::new(Ctx {
        remote,
        shown,
        packages: scanned.iter().map(|s| s.package.clone()).collect(),
        paths: scanned
            .iter()
            .map(|s| {
                s.entries
                    .iter()
                    .map(|(p, e)| (e.offset, p.clone()))
                    .collect()
            })
            .collect(),
        chunk_size: options.chunk_size.max(1 << 16),
        journal,
        stop: check.failed.clone(),
    });
    let pushed = push_blobs(&ctx, &plan, options.parallel.max(1), progress, &mut summary).await;
    if let Err(e @ Error::CorruptBlob { .. }) = pushed {
        return Err(e);
    }
    check.finish().await?;
    pushed?;
    push_manifests(&ctx, &plan, progress, &mut summary).await?;
    modules_index(&ctx, &plan, &options.modules_path, progress).await?;
    ctx.journal.clear()?;
    let seconds = started.elapsed().as_secs_f64();
    let mut fields = serde_json::to_value(&summary).unwrap_or_default();
    fields["seconds"] = serde_json::json!(seconds);
    progress.summary(
        fields,
        &format!(
            "pushed {} images to {} in {seconds:.1}s: {} blobs uploaded ({}, {} resumed), {} already there, {} mounted; {} manifests written, {} already there",
            summary.images,
            ctx.shown,
            summary.uploaded,
            human_bytes(summary.bytes_sent),
            summary.resumed,
            summary.skipped,
            summary.mounted,
            summary.manifests_pushed,
            summary.manifests_skipped
        ),
    );
    Ok(summary)
}

async fn verify(
    packages: &[Package],
    manifest: Option<&BundleManifest>,
    progress: &Progress,
) -> Result<Vec<ScannedPackage>, Error> {
    let total: u64 = packages.iter().map(Package::size).sum();
    let phase = progress.phase("verify", packages.len() as u64, total);
    let mut scanned = Vec::new();
    for package in packages {
        let expected = manifest.and_then(|m| m.packages.iter().find(|p| p.name == package.name));
        if manifest.is_some() && expected.is_none() {
            progress.warn(&format!(
                "{} is not listed in {}; verifying its blobs only",
                package.display(),
                bundle::MANIFEST_FILE
            ));
        }
        let (package, expected, phase_task) = (package.clone(), expected.cloned(), phase.clone());
        let result = tokio::task::spawn_blocking(move || {
            bundle::scan(&package, expected.as_ref(), &phase_task)
        })
        .await
        .map_err(|e| Error::InvalidArgument(format!("verification task failed: {e}")))??;
        phase.item();
        scanned.push(result);
    }
    phase.finish();
    Ok(scanned)
}

/// Indexes every package (headers only) after checking its files' names and sizes.
async fn index(
    packages: &[Package],
    manifest: Option<&BundleManifest>,
) -> Result<Vec<ScannedPackage>, Error> {
    let packages = packages.to_vec();
    let manifest = manifest.cloned();
    tokio::task::spawn_blocking(move || {
        packages
            .iter()
            .map(|package| {
                if let Some(expected) = manifest
                    .as_ref()
                    .and_then(|m| m.packages.iter().find(|p| p.name == package.name))
                {
                    bundle::check_files(package, expected)?;
                }
                bundle::index(package)
            })
            .collect()
    })
    .await
    .map_err(|e| Error::InvalidArgument(format!("index task failed: {e}")))?
}

/// The verification pass over the whole bundle, in the background of the uploads: each file
/// against `d8-mirror-bundle.json`, or every blob of a package it does not list. Dropped
/// unfinished, it stops.
struct Check {
    task: Option<tokio::task::JoinHandle<Result<(), Error>>>,
    /// Set when the bundle turned out corrupted: no further upload starts.
    failed: Arc<AtomicBool>,
    cancelled: Arc<AtomicBool>,
}

impl Check {
    fn start(packages: &[Package], manifest: Option<BundleManifest>, progress: &Progress) -> Self {
        let total: u64 = packages.iter().map(Package::size).sum();
        let phase = progress.phase("verify", packages.len() as u64, total);
        let failed = Arc::new(AtomicBool::new(false));
        let cancelled = Arc::new(AtomicBool::new(false));
        let (packages, progress) = (packages.to_vec(), progress.clone());
        let (failed_task, cancelled_task) = (failed.clone(), cancelled.clone());
        let task = tokio::task::spawn_blocking(move || {
            for package in &packages {
                let expected = manifest
                    .as_ref()
                    .and_then(|m| m.packages.iter().find(|p| p.name == package.name));
                let result = match expected {
                    Some(expected) => {
                        bundle::hash_files(package, expected, &phase, &cancelled_task)
                            .map_err(|e| name_the_blob(package, e))
                    }
                    None => {
                        if manifest.is_some() {
                            progress.warn(&format!(
                                "{} is not listed in {}; verifying its blobs only",
                                package.display(),
                                bundle::MANIFEST_FILE
                            ));
                        }
                        bundle::scan(package, None, &phase).map(|_| ())
                    }
                };
                if let Err(e) = result {
                    failed_task.store(true, Ordering::Relaxed);
                    return Err(e);
                }
                if cancelled_task.load(Ordering::Relaxed) {
                    return Ok(());
                }
                phase.item();
            }
            phase.finish();
            Ok(())
        });
        Self {
            task: Some(task),
            failed,
            cancelled,
        }
    }

    /// Waits for the whole bundle to be verified.
    async fn finish(mut self) -> Result<(), Error> {
        match self.task.take() {
            Some(task) => task
                .await
                .map_err(|e| Error::InvalidArgument(format!("verification task failed: {e}")))?,
            None => Ok(()),
        }
    }
}

impl Drop for Check {
    fn drop(&mut self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }
}

/// A package that does not hash to what the bundle manifest says: names the blob that changed,
/// when one did.
fn name_the_blob(package: &Package, error: Error) -> Error {
    if !matches!(error, Error::CorruptPackage { .. }) {
        return error;
    }
    let quiet = Progress::new(crate::progress::Mode::Quiet).phase("verify", 0, 0);
    match bundle::scan(package, None, &quiet) {
        Err(e @ Error::CorruptBlob { .. }) => e,
        _ => error,
    }
}

/// From the scanned packages, per target repository: blobs and manifests in push order.
fn plan(
    scanned: &[ScannedPackage],
    modules_path: &str,
) -> Result<BTreeMap<String, RepoPlan>, Error> {
    let modules_path = modules_path.trim_matches('/');
    let mut repos: BTreeMap<String, RepoPlan> = BTreeMap::new();
    for (index, scan) in scanned.iter().enumerate() {
        let package = scan.package.display();
        for (path, bytes) in &scan.small {
            let Some(dir) = path.strip_suffix("index.json") else {
                continue;
            };
            let dir = dir.trim_end_matches('/');
            let mut repo = layout::repository_of(&scan.package.name, dir);
            if let (true, Some(rest)) = (modules_path != "modules", repo.strip_prefix("modules")) {
                repo = format!("{modules_path}{rest}");
            }
            let index_json: IndexJson =
                serde_json::from_slice(bytes).map_err(|e| Error::InvalidBundle {
                    file: format!("{package}: {path}"),
                    reason: e.to_string(),
                })?;
            let repo_plan = repos.entry(repo.clone()).or_default();
            let locate = |digest: &oci::Digest, image: &str| -> Result<Loc, Error> {
                scan.entries
                    .get(&layout::blob_path(dir, digest))
                    .map(|entry| Loc {
                        package: index,
                        entry: *entry,
                    })
                    .ok_or_else(|| Error::MissingBlob {
                        package: package.clone(),
                        digest: *digest,
                        image: image.to_owned(),
                    })
            };
            let mut pushed: BTreeSet<oci::Digest> = BTreeSet::new();
            for descriptor in &index_json.manifests {
                let target = layout::target_of(descriptor);
                let image = match &target {
                    Target::Tag(tag) => format!("{repo}:{tag}"),
                    Target::Digest => format!("{repo}@{}", descriptor.digest),
                };
                // Depth-first: children first, then the manifest itself.
                let mut order = Vec::new();
                let mut stack = vec![(descriptor.digest, descriptor.media_type.clone(), false)];
                while let Some((digest, media_type, expanded)) = stack.pop() {
                    let loc = locate(&digest, &image)?;
                    if expanded {
                        order.push((digest, media_type, loc));
                        continue;
                    }
                    let mut bytes = vec![0u8; loc.entry.size as usize];
                    scan.package
                        .read_at(loc.entry.offset, &mut bytes)
                        .map_err(|e| Error::io(&scan.package.parts[0].0, e))?;
                    let actual = oci::Digest::compute(digest.algorithm(), &bytes);
                    if actual != digest {
                        return Err(Error::CorruptBlob {
                            package: package.clone(),
                            path: layout::blob_path(dir, &digest),
                            expected: digest.to_string(),
                            actual: actual.to_string(),
                        });
                    }
                    let parsed = oci::Manifest::parse(bytes, Some(&media_type)).map_err(|e| {
                        Error::InvalidImage {
                            image: image.clone(),
                            reason: e.to_string(),
                        }
                    })?;
                    let media_type = parsed.media_type().as_str().to_owned();
                    stack.push((digest, media_type, true));
                    match parsed.content() {
                        oci::manifest::Content::Image(img) => {
                            for blob in std::iter::once(&img.config).chain(&img.layers) {
                                if !blob.urls.is_empty() && locate(&blob.digest, &image).is_err() {
                                    continue; // a foreign layer, fetched from its URLs
                                }
                                let loc = locate(&blob.digest, &image)?;
                                repo_plan.blobs.insert(blob.digest, loc);
                            }
                        }
                        oci::manifest::Content::Index(idx) => {
                            for child in &idx.manifests {
                                stack.push((child.digest, child.media_type.clone(), false));
                            }
                        }
                    }
                }
                for (i, (digest, media_type, loc)) in order.iter().enumerate() {
                    let last = i + 1 == order.len();
                    if !last && !pushed.insert(*digest) {
                        continue;
                    }
                    repo_plan.manifests.push(ManifestPush {
                        digest: *digest,
                        media_type: media_type.clone(),
                        loc: *loc,
                        target: if last { target.clone() } else { Target::Digest },
                        image: image.clone(),
                    });
                }
            }
        }
    }
    Ok(repos)
}

fn unique_blobs(plan: &BTreeMap<String, RepoPlan>) -> BTreeMap<oci::Digest, (Vec<String>, Loc)> {
    let mut out: BTreeMap<oci::Digest, (Vec<String>, Loc)> = BTreeMap::new();
    for (repo, repo_plan) in plan {
        for (digest, loc) in &repo_plan.blobs {
            out.entry(*digest)
                .or_insert_with(|| (Vec::new(), *loc))
                .0
                .push(repo.clone());
        }
    }
    out
}

struct Ctx {
    remote: Remote,
    shown: String,
    packages: Vec<Package>,
    /// Per package: tar path by data offset, to name a corrupted blob.
    paths: Vec<BTreeMap<u64, String>>,
    chunk_size: u64,
    journal: Arc<Journal>,
    /// Set once the background verification found the bundle corrupted.
    stop: Arc<AtomicBool>,
}

impl Ctx {
    fn err(&self, what: impl Into<String>, e: registry_client::Error) -> Error {
        Error::registry(&self.shown, true, what, e)
    }

    fn corrupt(&self, loc: Loc, mismatch: &oci::DigestMismatch) -> Error {
        Error::CorruptBlob {
            package: self.packages[loc.package].display(),
            path: self.paths[loc.package]
                .get(&loc.entry.offset)
                .cloned()
                .unwrap_or_default(),
            expected: mismatch.expected.to_string(),
            actual: mismatch.actual.to_string(),
        }
    }

    /// Reads a whole blob, checking that it hashes to `digest`.
    async fn read_verified(&self, loc: Loc, digest: oci::Digest) -> Result<Bytes, Error> {
        let (bytes, verifier) = self
            .read_hashing(loc, 0, loc.entry.size, Some(digest.verifier()))
            .await?;
        if let Some(verifier) = verifier {
            verifier.finish().map_err(|m| self.corrupt(loc, &m))?;
        }
        Ok(bytes)
    }

    /// A verifier of `digest` fed with the first `len` bytes of the blob (sent by an earlier,
    /// interrupted run).
    async fn verifier_after(
        &self,
        loc: Loc,
        digest: oci::Digest,
        len: u64,
    ) -> Result<oci::Verifier, Error> {
        let package = self.packages[loc.package].clone();
        tokio::task::spawn_blocking(move || {
            let mut verifier = digest.verifier();
            let mut buf = vec![0u8; (len as usize).min(1 << 20)];
            let mut done = 0;
            while done < len {
                let n = ((len - done) as usize).min(buf.len());
                package
                    .read_at(loc.entry.offset + done, &mut buf[..n])
                    .map_err(|e| Error::io(&package.parts[0].0, e))?;
                verifier.update(&buf[..n]);
                done += n as u64;
            }
            Ok(verifier)
        })
        .await
        .map_err(|e| Error::InvalidArgument(format!("read task failed: {e}")))?
    }

    async fn read(&self, loc: Loc, offset: u64, len: u64) -> Result<Bytes, Error> {
        Ok(self.read_hashing(loc, offset, len, None).await?.0)
    }

    /// Reads `len` bytes of a blob at `offset`, feeding them to `verifier` on the same blocking
    /// thread.
    async fn read_hashing(
        &self,
        loc: Loc,
        offset: u64,
        len: u64,
        mut verifier: Option<oci::Verifier>,
    ) -> Result<(Bytes, Option<oci::Verifier>), Error> {
        let package = self.packages[loc.package].clone();
        tokio::task::spawn_blocking(move || {
            let mut buf = vec![0u8; len as usize];
            package
                .read_at(loc.entry.offset + offset, &mut buf)
                .map_err(|e| Error::io(&package.parts[0].0, e))?;
            if let Some(v) = verifier.as_mut() {
                v.update(&buf);
            }
            Ok((Bytes::from(buf), verifier))
        })
        .await
        .map_err(|e| Error::InvalidArgument(format!("read task failed: {e}")))?
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Skipped,
    Mounted,
    Uploaded { resumed: bool, sent: u64 },
}

async fn push_blobs(
    ctx: &Arc<Ctx>,
    plan: &BTreeMap<String, RepoPlan>,
    parallel: usize,
    progress: &Progress,
    summary: &mut PushSummary,
) -> Result<(), Error> {
    let blobs = unique_blobs(plan);
    let total: u64 = blobs.values().map(|(_, l)| l.entry.size).sum();
    let phase = progress.phase("push", blobs.len() as u64, total);
    let semaphore = Arc::new(tokio::sync::Semaphore::new(parallel));
    let mut tasks = tokio::task::JoinSet::new();
    // Largest first: the long uploads start early and the tail is short.
    let mut order: Vec<_> = blobs.into_iter().collect();
    order.sort_by_key(|(_, (_, loc))| std::cmp::Reverse(loc.entry.size));
    for (digest, (repos, loc)) in order {
        let (ctx, phase, permit) = (ctx.clone(), phase.clone(), semaphore.clone());
        tasks.spawn(async move {
            let _permit = permit.acquire_owned().await;
            let mut outcomes = Vec::new();
            if ctx.stop.load(Ordering::Relaxed) {
                return Ok(outcomes);
            }
            let mut holder: Option<String> = None;
            for repo in &repos {
                let outcome =
                    with_retries(|| push_blob(&ctx, repo, digest, loc, holder.as_deref(), &phase))
                        .await?;
                holder = Some(repo.clone());
                outcomes.push(outcome);
            }
            let sent: u64 = outcomes
                .iter()
                .map(|o| match o {
                    Outcome::Uploaded { sent, .. } => *sent,
                    _ => 0,
                })
                .sum();
            // The bar shows the bundle's bytes done, whether sent or found in place.
            phase.bytes(loc.entry.size.saturating_sub(sent.min(loc.entry.size)));
            phase.item();
            Ok::<_, Error>(outcomes)
        });
    }
    let mut failure = None;
    while let Some(result) = tasks.join_next().await {
        match result {
            Ok(Ok(outcomes)) => {
                for outcome in outcomes {
                    match outcome {
                        Outcome::Skipped => summary.skipped += 1,
                        Outcome::Mounted => summary.mounted += 1,
                        Outcome::Uploaded { resumed, sent } => {
                            summary.uploaded += 1;
                            summary.resumed += usize::from(resumed);
                            summary.bytes_sent += sent;
                        }
                    }
                }
            }
            Ok(Err(e)) => {
                failure.get_or_insert(e);
                tasks.abort_all();
            }
            Err(e) if e.is_cancelled() => {}
            Err(e) => {
                failure.get_or_insert(Error::InvalidArgument(format!("push task failed: {e}")));
            }
        }
    }
    phase.finish();
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

async fn with_retries<T, F, Fut>(mut f: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let mut attempt = 0u64;
    loop {
        attempt += 1;
        match f().await {
            Err(e) if e.transient() && attempt < 4 => {
                tracing::warn!(error = %e, attempt, "retrying");
                tokio::time::sleep(std::time::Duration::from_secs(attempt)).await;
            }
            other => return other,
        }
    }
}

async fn push_blob(
    ctx: &Ctx,
    repo: &str,
    digest: oci::Digest,
    loc: Loc,
    holder: Option<&str>,
    phase: &Phase,
) -> Result<Outcome, Error> {
    let what = |verb: &str| format!("{verb} blob {digest} to {}", layout::join(&ctx.shown, repo));
    let key = format!("{repo}@{digest}");
    let journaled = ctx.journal.get(&key);
    if journaled.is_none() {
        match ctx.remote.head_blob(repo, &digest).await {
            Ok(_) => return Ok(Outcome::Skipped),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(ctx.err(what("check"), e)),
        }
        if let Some(from) = holder {
            match ctx.remote.mount_blob(repo, &digest, from).await {
                Ok(Mount::Mounted) => return Ok(Outcome::Mounted),
                Ok(Mount::Upload(_)) => {} // no cross-repository mount here: upload
                Err(e) if matches!(e, registry_client::Error::Unauthorized { .. }) => {
                    return Err(ctx.err(what("mount"), e));
                }
                Err(_) => {}
            }
        }
    }
    let size = loc.entry.size;
    if journaled.is_none() && size <= ctx.chunk_size {
        let data = ctx.read_verified(loc, digest).await?;
        ctx.remote
            .post_blob(repo, &digest, data)
            .await
            .map_err(|e| ctx.err(what("upload"), e))?;
        phase.bytes(size);
        return Ok(Outcome::Uploaded {
            resumed: false,
            sent: size,
        });
    }
    chunked_upload(ctx, repo, digest, loc, journaled, phase).await
}

/// Upload in PATCH chunks, journaling the session after each so a later run resumes it.
async fn chunked_upload(
    ctx: &Ctx,
    repo: &str,
    digest: oci::Digest,
    loc: Loc,
    journaled: Option<JournalEntry>,
    phase: &Phase,
) -> Result<Outcome, Error> {
    let what = |verb: &str| format!("{verb} blob {digest} to {}", layout::join(&ctx.shown, repo));
    let key = format!("{repo}@{digest}");
    let scope = Scope::push(&ctx.remote.endpoint().full_repository(repo));
    let size = loc.entry.size;
    let mut resumed = false;
    let mut session = None;
    if let Some(entry) = journaled {
        // Ask the registry how far the interrupted session got.
        let response = ctx
            .remote
            .location_request(Method::GET, &entry.location, Some(scope.clone()))
            .send()
            .await;
        match response {
            Ok(r) if r.status() == StatusCode::NO_CONTENT || r.status() == StatusCode::ACCEPTED => {
                let offset = r
                    .header_str(header::RANGE.as_str())
                    .and_then(|range| range.split_once('-'))
                    .and_then(|(_, end)| end.trim().parse::<u64>().ok())
                    .map_or(0, |end| if end == 0 { 0 } else { end + 1 });
                let location = r
                    .header_str(header::LOCATION.as_str())
                    .map_or(entry.location.clone(), str::to_owned);
                if offset <= size {
                    resumed = true;
                    session = Some((location, offset));
                }
            }
            _ => {
                // The session is gone (expired, registry restarted): maybe the blob arrived.
                if ctx.remote.head_blob(repo, &digest).await.is_ok() {
                    ctx.journal.remove(&key)?;
                    return Ok(Outcome::Skipped);
                }
            }
        }
    }
    let (mut location, mut offset) = match session {
        Some(s) => s,
        None => (start_session(ctx, repo).await?, 0),
    };
    ctx.journal.put(&key, &location, offset)?;
    let mut verifier = Some(ctx.verifier_after(loc, digest, offset).await?);
    let mut sent = 0;
    while offset < size {
        let len = ctx.chunk_size.min(size - offset);
        let (data, fed) = ctx.read_hashing(loc, offset, len, verifier.take()).await?;
        verifier = fed;
        let response = ctx
            .remote
            .location_request(Method::PATCH, &location, Some(scope.clone()))
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .header(
                header::CONTENT_RANGE,
                &format!("{offset}-{}", offset + len - 1),
            )
            .header(header::CONTENT_LENGTH, &len.to_string())
            .body(RequestBody::Bytes(data))
            .send()
            .await
            .map_err(|e| ctx.err(what("upload"), e))?;
        let status = response.status();
        if status == StatusCode::RANGE_NOT_SATISFIABLE
            || (status == StatusCode::NOT_FOUND && resumed)
            || (status == StatusCode::BAD_REQUEST && resumed)
        {
            // The registry does not accept the session where we left it: start over.
            ctx.journal.remove(&key)?;
            tracing::warn!(%digest, repo, "resumed upload refused, starting it again");
            location = start_session(ctx, repo).await?;
            offset = 0;
            resumed = false;
            verifier = Some(digest.verifier());
            ctx.journal.put(&key, &location, 0)?;
            continue;
        }
        let response = response
            .error_for_status()
            .await
            .map_err(|e| ctx.err(what("upload"), e))?;
        if let Some(next) = response.header_str(header::LOCATION.as_str()) {
            location = next.to_owned();
        }
        offset += len;
        sent += len;
        phase.bytes(len);
        ctx.journal.put(&key, &location, offset)?;
    }
    let checked = verifier
        .ok_or_else(|| Error::InvalidArgument(format!("blob {digest}: its check was lost")))?
        .finish();
    if let Err(mismatch) = checked {
        // Never committed: the session is dropped, and so is its journal entry.
        let _ = ctx
            .remote
            .location_request(Method::DELETE, &location, Some(scope))
            .send()
            .await;
        ctx.journal.remove(&key)?;
        return Err(ctx.corrupt(loc, &mismatch));
    }
    let separator = if location.contains('?') { '&' } else { '?' };
    let close = format!("{location}{separator}digest={digest}");
    ctx.remote
        .location_request(Method::PUT, &close, Some(scope))
        .header(header::CONTENT_LENGTH, "0")
        .send()
        .await
        .map_err(|e| ctx.err(what("finish"), e))?
        .error_for_status()
        .await
        .map_err(|e| ctx.err(what("finish"), e))?;
    ctx.journal.remove(&key)?;
    Ok(Outcome::Uploaded { resumed, sent })
}

async fn start_session(ctx: &Ctx, repo: &str) -> Result<String, Error> {
    let response = ctx
        .remote
        .request(Method::POST, repo, "blobs/uploads/")
        .header(header::CONTENT_LENGTH, "0")
        .send()
        .await
        .map_err(|e| {
            ctx.err(
                format!("start an upload to {}", layout::join(&ctx.shown, repo)),
                e,
            )
        })?
        .error_for_status()
        .await
        .map_err(|e| {
            ctx.err(
                format!("start an upload to {}", layout::join(&ctx.shown, repo)),
                e,
            )
        })?;
    response
        .header_str(header::LOCATION.as_str())
        .map(str::to_owned)
        .ok_or_else(|| Error::Registry {
            what: format!("start an upload to {}", layout::join(&ctx.shown, repo)),
            source: registry_client::Error::InvalidResponse {
                url: response.url(),
                reason: "202 without a Location".into(),
            },
        })
}

async fn push_manifests(
    ctx: &Arc<Ctx>,
    plan: &BTreeMap<String, RepoPlan>,
    progress: &Progress,
    summary: &mut PushSummary,
) -> Result<(), Error> {
    let count: usize = plan.values().map(|r| r.manifests.len()).sum();
    let phase = progress.phase("manifests", count as u64, 0);
    for (repo, repo_plan) in plan {
        for manifest in &repo_plan.manifests {
            let reference = match &manifest.target {
                Target::Tag(tag) => tag.clone(),
                Target::Digest => manifest.digest.to_string(),
            };
            let what = format!("push {}", manifest.image);
            let head = ctx
                .remote
                .head_manifest(repo, &reference, &[&manifest.media_type])
                .await;
            match head {
                Ok(head) if head.digest == Some(manifest.digest) => {
                    summary.manifests_skipped += 1;
                    phase.item();
                    continue;
                }
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(ctx.err(what, e)),
            }
            let bytes = ctx.read(manifest.loc, 0, manifest.loc.entry.size).await?;
            with_retries(|| async {
                ctx.remote
                    .put_manifest(repo, &reference, &manifest.media_type, bytes.clone())
                    .await
                    .map_err(|e| ctx.err(what.clone(), e))
            })
            .await?;
            summary.manifests_pushed += 1;
            phase.item();
        }
    }
    phase.finish();
    Ok(())
}

/// Tags `<modules>:<name>` for every module of the bundle, so that a ModuleSource finds the
/// modules by listing tags (as Deckhouse's `d8 mirror push` does; ours is a tiny deterministic
/// image instead of a random one, so a re-run changes nothing).
async fn modules_index(
    ctx: &Arc<Ctx>,
    plan: &BTreeMap<String, RepoPlan>,
    modules_path: &str,
    progress: &Progress,
) -> Result<(), Error> {
    let base = modules_path.trim_matches('/');
    let names: BTreeSet<&str> = plan
        .keys()
        .filter_map(|repo| repo.strip_prefix(base)?.strip_prefix('/'))
        .filter_map(|rest| rest.split('/').next())
        .filter(|name| !name.is_empty())
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    let (layer, config, manifest) = index_image();
    let manifest_digest = oci::Digest::sha256(&manifest);
    for name in names {
        let what = format!("tag {}:{name}", layout::join(&ctx.shown, base));
        match ctx
            .remote
            .head_manifest(base, name, &[oci::media_type::OCI_MANIFEST])
            .await
        {
            Ok(_) => continue,
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(ctx.err(what, e)),
        }
        for blob in [&layer, &config] {
            let digest = oci::Digest::sha256(blob);
            if ctx.remote.head_blob(base, &digest).await.is_err() {
                ctx.remote
                    .post_blob(base, &digest, Bytes::from(blob.clone()))
                    .await
                    .map_err(|e| ctx.err(what.clone(), e))?;
            }
        }
        ctx.remote
            .put_manifest(
                base,
                name,
                oci::media_type::OCI_MANIFEST,
                Bytes::from(manifest.clone()),
            )
            .await
            .map_err(|e| ctx.err(what.clone(), e))?;
        tracing::debug!(module = name, digest = %manifest_digest, "module index tag written");
    }
    progress.info("module index tags written");
    Ok(())
}

/// A minimal image: an empty tar layer, its config, its manifest.
fn index_image() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let layer = vec![0u8; 1024];
    let diff_id = oci::Digest::sha256(&layer);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [diff_id.to_string()]},
    }))
    .unwrap_or_default();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": oci::media_type::OCI_MANIFEST,
        "config": {"mediaType": oci::media_type::OCI_CONFIG,
                   "digest": oci::Digest::sha256(&config).to_string(), "size": config.len()},
        "layers": [{"mediaType": oci::media_type::OCI_LAYER_TAR,
                    "digest": diff_id.to_string(), "size": layer.len()}],
    }))
    .unwrap_or_default();
    (layer, config, manifest)
}

/// Upload sessions in progress, on disk: a re-run resumes them.
#[derive(Debug)]
struct Journal {
    path: PathBuf,
    entries: Mutex<BTreeMap<String, JournalEntry>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct JournalEntry {
    location: String,
    offset: u64,
}

impl Journal {
    fn open(dir: &Path, target: &Endpoint) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let name: String = format!("{}-{}", target.host, target.path_prefix)
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let path = dir.join(format!("uploads-{name}.json"));
        let entries = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_default(),
            Err(_) => BTreeMap::new(),
        };
        Ok(Self {
            path,
            entries: Mutex::new(entries),
        })
    }

    fn get(&self, key: &str) -> Option<JournalEntry> {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    fn put(&self, key: &str, location: &str, offset: u64) -> Result<(), Error> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.insert(
            key.to_owned(),
            JournalEntry {
                location: location.to_owned(),
                offset,
            },
        );
        self.save(&entries)
    }

    fn remove(&self, key: &str) -> Result<(), Error> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.remove(key).is_some() {
            self.save(&entries)?;
        }
        Ok(())
    }

    fn clear(&self) -> Result<(), Error> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.is_empty() {
            let _ = std::fs::remove_file(&self.path);
        }
        Ok(())
    }

    fn save(&self, entries: &BTreeMap<String, JournalEntry>) -> Result<(), Error> {
        let temp = self.path.with_extension("json.partial");
        let bytes = serde_json::to_vec(entries).unwrap_or_default();
        std::fs::write(&temp, bytes).map_err(|e| Error::io(&temp, e))?;
        std::fs::rename(&temp, &self.path).map_err(|e| Error::io(&self.path, e))
    }
}
