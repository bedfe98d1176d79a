//! Writing the bundle: every package is laid out before a byte arrives
//! ([`crate::bundle::planned`]), its headers written, then every blob is written once, straight
//! into its place — streamed from the source (verified on the way by the registry client), or
//! copied from the pull cache where resolving the release already fetched it — `parallel` at a
//! time in tar order, while one thread per package hashes its files in order right behind. Each
//! file is flushed to disk once, at the end, then renamed into place; `d8-mirror-bundle.json`
//! comes last.
//!
//! Resumable: every blob in place is journaled in `.d8-mirror-pull/placed` with its package's
//! layout fingerprint; a re-run with the same layout keeps the package files and trusts a
//! journaled blob only once it hashes to its digest again where it lies.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt;

use super::{Puller, Want};
use crate::bundle::planned::{self, Content, Files, Plan};
use crate::bundle::{self, BundleManifest, FileEntry, ImageEntry, PackageManifest};
use crate::error::Error;
use crate::layout::{self, IndexJson, OCI_LAYOUT};
use crate::progress::Phase;

/// The journal of blobs in place, in the pull's work directory.
pub(crate) const JOURNAL: &str = "placed";
/// Bytes gathered from the network before one write.
const WRITE_BATCH: usize = 1 << 20;

struct Package {
    plan: Plan,
    files: Files,
    fingerprint: String,
}

/// One distinct blob and every place it goes.
struct Job {
    digest: oci::Digest,
    size: u64,
    /// (package, entry) in tar order, with whether the journal says it is there already.
    places: Vec<((usize, usize), bool)>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Got {
    downloaded: u64,
    reused: u64,
}

/// Appends journal lines.
struct Journal(Mutex<std::fs::File>);

impl Journal {
    fn placed(&self, package: &Package, path: &str) -> Result<(), Error> {
        let line = format!(
            "{}\t{}\t{path}\n",
            package.plan.package, package.fingerprint
        );
        let mut file = self.0.lock().unwrap_or_else(|e| e.into_inner());
        file.write_all(line.as_bytes())
            .map_err(|e| Error::io(JOURNAL, e))
    }
}

/// The journal's entries: package → (fingerprint → paths).
fn read_journal(path: &Path) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.splitn(3, '\t');
        if let (Some(package), Some(fingerprint), Some(entry)) =
            (fields.next(), fields.next(), fields.next())
        {
            out.entry(package.to_owned())
                .or_default()
                .entry(fingerprint.to_owned())
                .or_default()
                .insert(entry.to_owned());
        }
    }
    out
}

impl Puller {
    /// Writes every package and the bundle manifest; returns (bytes downloaded, bytes reused
    /// from the cache or an earlier run) and the files written.
    pub(super) async fn write_bundle(
        &self,
        dir: &Path,
        chunk: Option<u64>,
        resume: bool,
    ) -> Result<(u64, u64, Vec<FileEntry>), Error> {
        let work = self.cas.parent().unwrap_or(dir).to_owned();
        let journal_path = work.join(JOURNAL);
        let journaled = if resume {
            read_journal(&journal_path)
        } else {
            BTreeMap::new()
        };
        let mut manifest = BundleManifest {
            format: bundle::FORMAT.to_owned(),
            source: self.shown.clone(),
            packages: Vec::new(),
        };
        let mut packages = Vec::new();
        let mut jobs: Vec<Job> = Vec::new();
        let mut job_of: BTreeMap<oci::Digest, usize> = BTreeMap::new();
        for (name, build) in &self.packages {
            let mut entries: BTreeMap<String, Content> = BTreeMap::new();
            let mut images = Vec::new();
            let mut blob_set = BTreeMap::new();
            for (layout_dir, layout) in &build.layouts {
                let index = IndexJson::new(layout.entries.values().cloned().collect());
                let index_bytes = serde_json::to_vec_pretty(&index)
                    .map_err(|e| Error::InvalidArgument(format!("index.json: {e}")))?;
                entries.insert(
                    layout::join(layout_dir, "index.json"),
                    Content::Bytes(index_bytes),
                );
                entries.insert(
                    layout::join(layout_dir, "oci-layout"),
                    Content::Bytes(OCI_LAYOUT.to_vec()),
                );
                for (digest, size) in &layout.blobs {
                    entries.insert(
                        layout::blob_path(layout_dir, digest),
                        Content::Blob {
                            digest: *digest,
                            size: *size,
                        },
                    );
                }
                let repo = layout::repository_of(name, layout_dir);
                for (tag, descriptor) in &layout.entries {
                    images.push(ImageEntry {
                        repository: repo.clone(),
                        tag: tag.clone(),
                        digest: descriptor.digest.to_string(),
                        media_type: descriptor.media_type.clone(),
                    });
                }
                blob_set.extend(layout.blobs.iter().map(|(d, s)| (*d, *s)));
            }
            let plan = planned::plan(name, entries, chunk).map_err(|e| Error::io(dir, e))?;
            let fingerprint = plan.fingerprint();
            let earlier = journaled
                .get(name)
                .and_then(|by_fingerprint| by_fingerprint.get(&fingerprint));
            remove_stray_partials(dir, &plan)?;
            let (files, kept) =
                Files::open(dir, &plan, earlier.is_some()).map_err(|e| Error::io(dir, e))?;
            files.write_frame(&plan).map_err(|e| Error::io(dir, e))?;
            let index = packages.len();
            for (entry_index, entry) in plan.entries.iter().enumerate() {
                let Content::Blob { digest, size } = entry.content else {
                    continue;
                };
                let there = kept && earlier.is_some_and(|paths| paths.contains(&entry.path));
                let job = *job_of.entry(digest).or_insert_with(|| {
                    jobs.push(Job {
                        digest,
                        size,
                        places: Vec::new(),
                    });
                    jobs.len() - 1
                });
                jobs[job].places.push(((index, entry_index), there));
            }
            manifest.packages.push(PackageManifest {
                name: name.clone(),
                files: Vec::new(),
                images,
                blobs: blob_set.len() as u64,
                blob_bytes: blob_set.values().sum(),
            });
            packages.push(Package {
                plan,
                files,
                fingerprint,
            });
        }
        let journal = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&journal_path)
            .map_err(|e| Error::io(&journal_path, e))?;
        let journal = Arc::new(Journal(Mutex::new(journal)));
        let packages = Arc::new(packages);

        // One hashing thread per package, right behind the writes.
        let mut senders = Vec::new();
        let mut hashers = Vec::new();
        for index in 0..packages.len() {
            let (tx, rx) = std::sync::mpsc::channel::<usize>();
            senders.push(tx);
            let packages = packages.clone();
            hashers.push(tokio::task::spawn_blocking(move || {
                let package = &packages[index];
                let ready = package
                    .plan
                    .entries
                    .iter()
                    .map(|e| matches!(e.content, Content::Bytes(_)))
                    .collect();
                let digests = package.files.hash_in_order(&package.plan, ready, &rx)?;
                if digests.is_some() {
                    package.files.sync()?;
                }
                Ok::<_, std::io::Error>(digests)
            }));
        }
        let senders = Arc::new(senders);

        let total: u64 = jobs.iter().map(|j| j.size).sum();
        let phase = self.progress.phase("pull", jobs.len() as u64, total);
        let placed = self
            .place_all(jobs, &packages, &senders, &journal, &phase)
            .await;
        phase.finish();
        drop(senders);
        let pack = self.progress.phase("pack", packages.len() as u64, 0);
        let mut digests = Vec::new();
        for hasher in hashers {
            let result = hasher
                .await
                .map_err(|e| Error::InvalidArgument(format!("hash task failed: {e}")))?;
            digests.push(result.map_err(|e| Error::io(dir, e))?);
            pack.item();
        }
        let got = placed?;
        let packages = Arc::try_unwrap(packages)
            .map_err(|_| Error::InvalidArgument("package files still in use".into()))?;
        let mut files = Vec::new();
        for ((package, digests), entry) in packages
            .into_iter()
            .zip(digests)
            .zip(&mut manifest.packages)
        {
            let digests = digests.ok_or_else(|| {
                Error::InvalidArgument(format!("{} was not hashed whole", package.plan.package))
            })?;
            // Files of this package from an interrupted run of another chunking must not be
            // mistaken for part of the new one.
            for stale in bundle::packages(dir)?
                .into_iter()
                .filter(|p| p.name == package.plan.package)
            {
                for (path, _) in stale.parts {
                    std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                }
            }
            let written = package
                .files
                .finish(digests)
                .map_err(|e| Error::io(dir, e))?;
            entry.files = written.clone();
            files.extend(written);
        }
        pack.finish();
        let path = dir.join(bundle::MANIFEST_FILE);
        let temp = dir.join(format!(".{}.partial", bundle::MANIFEST_FILE));
        let bytes = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::InvalidArgument(format!("bundle manifest: {e}")))?;
        std::fs::write(&temp, bytes).map_err(|e| Error::io(&temp, e))?;
        std::fs::rename(&temp, &path).map_err(|e| Error::io(&path, e))?;
        Ok((got.downloaded, got.reused, files))
    }

    /// Puts every blob in place, `parallel` at a time, started in tar order.
    async fn place_all(
        &self,
        jobs: Vec<Job>,
        packages: &Arc<Vec<Package>>,
        senders: &Arc<Vec<Sender<usize>>>,
        journal: &Arc<Journal>,
        phase: &Phase,
    ) -> Result<Got, Error> {
        let semaphore = Arc::new(tokio::sync::Semaphore::new(self.parallel));
        let mut tasks = tokio::task::JoinSet::new();
        let mut got = Got::default();
        let mut failure = None;
        let fresh = self.fresh.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for job in jobs {
            let Ok(permit) = semaphore.clone().acquire_owned().await else {
                break;
            };
            while let Some(result) = tasks.try_join_next() {
                collect(result, &mut got, &mut failure);
            }
            if failure.is_some() {
                break;
            }
            let source = Source {
                cas: self.cas_path(&job.digest),
                fresh: fresh.contains(&job.digest),
                want: self.wanted.get(&job.digest).cloned(),
            };
            let (packages, senders, journal, phase, progress) = (
                packages.clone(),
                senders.clone(),
                journal.clone(),
                phase.clone(),
                self.progress.clone(),
            );
            tasks.spawn(async move {
                let _permit = permit;
                let counted = source.want.is_some();
                let got = place(&job, source, &packages, &phase, &progress).await?;
                for ((package, entry), _) in &job.places {
                    let package_state = &packages[*package];
                    journal.placed(package_state, &package_state.plan.entries[*entry].path)?;
                    let _ = senders[*package].send(*entry);
                }
                phase.item();
                Ok(if counted { got } else { Got::default() })
            });
        }
        while let Some(result) = tasks.join_next().await {
            collect(result, &mut got, &mut failure);
            if failure.is_some() {
                tasks.abort_all();
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(got),
        }
    }
}

fn collect(
    result: Result<Result<Got, Error>, tokio::task::JoinError>,
    got: &mut Got,
    failure: &mut Option<Error>,
) {
    match result {
        Ok(Ok(one)) => {
            got.downloaded += one.downloaded;
            got.reused += one.reused;
        }
        Ok(Err(e)) => {
            failure.get_or_insert(e);
        }
        Err(e) if e.is_cancelled() => {}
        Err(e) => {
            failure.get_or_insert(Error::InvalidArgument(format!("blob task failed: {e}")));
        }
    }
}

/// Where a blob can come from besides its places in the bundle.
struct Source {
    /// Its path in the pull cache (it may not be there).
    cas: PathBuf,
    /// Whether this run fetched or verified that cache file.
    fresh: bool,
    /// The registry it is fetched from, for configs and layers.
    want: Option<Want>,
}

/// Puts one blob in every place it goes; says how it got there.
async fn place(
    job: &Job,
    source: Source,
    packages: &Arc<Vec<Package>>,
    phase: &Phase,
    progress: &crate::progress::Progress,
) -> Result<Got, Error> {
    let (digest, size) = (job.digest, job.size);
    // Left by an earlier run: trusted where it still hashes to its digest.
    let journaled: Vec<(usize, usize)> = job
        .places
        .iter()
        .filter(|(_, there)| *there)
        .map(|(p, _)| *p)
        .collect();
    let mut good = {
        let packages = packages.clone();
        tokio::task::spawn_blocking(move || {
            journaled.into_iter().find(|place| {
                packages[place.0].files.hashes_to(
                    packages[place.0].plan.entries[place.1].data,
                    size,
                    digest,
                )
            })
        })
        .await
        .map_err(|e| Error::InvalidArgument(format!("check task failed: {e}")))?
    };
    let mut got = Got::default();
    if good.is_some() {
        got.reused = size;
        phase.bytes(size);
    }
    let first = job.places[0].0;
    if good.is_none() && std::fs::metadata(&source.cas).is_ok_and(|m| m.len() == size) {
        let (packages, cas, verify) = (packages.clone(), source.cas.clone(), !source.fresh);
        let copied = tokio::task::spawn_blocking(move || {
            copy_in(
                &packages[first.0].files,
                &cas,
                at_of(&packages, first),
                size,
                digest,
                verify,
            )
        })
        .await
        .map_err(|e| Error::InvalidArgument(format!("copy task failed: {e}")))?;
        match copied {
            Ok(()) => {
                good = Some(first);
                got.reused = size;
                phase.bytes(size);
            }
            Err(e) if source.want.is_some() => progress.warn(&format!(
                "blob {digest} in {}: {e}; fetching it again",
                source.cas.display()
            )),
            Err(e) => return Err(Error::io(&source.cas, e)),
        }
    }
    if good.is_none() {
        let Some(want) = &source.want else {
            return Err(Error::InvalidArgument(format!(
                "blob {digest} is neither in the cache nor to be fetched"
            )));
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            match download_into(want, packages, first, phase).await {
                Ok(()) => break,
                Err(e) if e.transient() && attempt < 4 => {
                    tracing::warn!(%digest, error = %e, "blob download failed, retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(attempt)).await;
                }
                Err(e) => return Err(e),
            }
        }
        good = Some(first);
        got.downloaded = size;
    }
    let Some(from) = good else {
        return Ok(got);
    };
    let others: Vec<(usize, usize)> = job
        .places
        .iter()
        .map(|(p, _)| *p)
        .filter(|p| *p != from)
        .collect();
    if !others.is_empty() {
        let name = packages[from.0].plan.package.clone();
        let packages = packages.clone();
        tokio::task::spawn_blocking(move || {
            let source = &packages[from.0].files;
            for to in others {
                packages[to.0].files.copy_from(
                    source,
                    at_of(&packages, from),
                    at_of(&packages, to),
                    size,
                )?;
            }
            Ok::<_, std::io::Error>(())
        })
        .await
        .map_err(|e| Error::InvalidArgument(format!("copy task failed: {e}")))?
        .map_err(|e| Error::io(name, e))?;
    }
    Ok(got)
}

fn at_of(packages: &[Package], (package, entry): (usize, usize)) -> u64 {
    packages[package].plan.entries[entry].data
}

/// Copies a cached blob into place, checking on the way (unless this run verified it) that it
/// hashes to `digest`.
pub(crate) fn copy_in(
    files: &Files,
    cas: &Path,
    at: u64,
    size: u64,
    digest: oci::Digest,
    verify: bool,
) -> std::io::Result<()> {
    use std::io::Read;
    let mut file = std::fs::File::open(cas)?;
    let mut verifier = verify.then(|| digest.verifier());
    let mut buf = vec![0u8; (size as usize).clamp(1, WRITE_BATCH)];
    let mut done = 0u64;
    while done < size {
        let n = ((size - done) as usize).min(buf.len());
        file.read_exact(&mut buf[..n])?;
        if let Some(v) = verifier.as_mut() {
            v.update(&buf[..n]);
        }
        files.write_at(at + done, &buf[..n])?;
        done += n as u64;
    }
    if let Some(v) = verifier {
        v.finish().map_err(|m| {
            std::io::Error::other(format!("hashes to {} instead of {}", m.actual, m.expected))
        })?;
    }
    Ok(())
}

/// Streams a blob from the source into its place, in batches written off the async threads,
/// one batch in flight while the next arrives. The registry client's body ends cleanly only
/// when the bytes hash to the digest.
async fn download_into(
    want: &Want,
    packages: &Arc<Vec<Package>>,
    (package, entry): (usize, usize),
    phase: &Phase,
) -> Result<(), Error> {
    let descriptor = &want.descriptor;
    let what = format!(
        "pull blob {} of {}",
        descriptor.digest,
        layout::join(&want.shown, &want.repo)
    );
    let response = want
        .remote
        .get_blob(&want.repo, &descriptor.digest, None, Some(descriptor.size))
        .await
        .map_err(|e| Error::registry(&want.shown, false, what.clone(), e))?;
    let mut body = response.into_body();
    let mut batch: Vec<Bytes> = Vec::new();
    let mut batch_len = 0usize;
    let mut offset = packages[package].plan.entries[entry].data;
    let mut in_flight: Option<tokio::task::JoinHandle<std::io::Result<()>>> = None;
    let mut failed = None;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => {
                phase.bytes(chunk.len() as u64);
                batch_len += chunk.len();
                batch.push(chunk);
            }
            Err(e) => {
                failed = Some(Error::registry(&want.shown, false, what.clone(), e));
                break;
            }
        }
        if batch_len >= WRITE_BATCH {
            if let Some(write) = in_flight.take() {
                finish_write(write, &what).await?;
            }
            let (chunks, len) = (std::mem::take(&mut batch), batch_len);
            let (packages, start) = (packages.clone(), offset);
            in_flight = Some(tokio::task::spawn_blocking(move || {
                packages[package].files.write_chunks(start, &chunks)
            }));
            offset += len as u64;
            batch_len = 0;
        }
    }
    if let Some(write) = in_flight.take() {
        finish_write(write, &what).await?;
    }
    if let Some(e) = failed {
        return Err(e);
    }
    if !batch.is_empty() {
        let packages = packages.clone();
        finish_write(
            tokio::task::spawn_blocking(move || {
                packages[package].files.write_chunks(offset, &batch)
            }),
            &what,
        )
        .await?;
    }
    Ok(())
}

async fn finish_write(
    write: tokio::task::JoinHandle<std::io::Result<()>>,
    what: &str,
) -> Result<(), Error> {
    write
        .await
        .map_err(|e| Error::InvalidArgument(format!("write task failed: {e}")))?
        .map_err(|e| Error::io(what, e))
}

/// Removes temporary files of `plan`'s package that it does not use (an interrupted run with
/// another chunking).
fn remove_stray_partials(dir: &Path, plan: &Plan) -> Result<(), Error> {
    let wanted: BTreeSet<String> = plan
        .files
        .iter()
        .map(|(name, _)| planned::partial_name(name))
        .collect();
    let prefix = format!(".{}.tar", plan.package);
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) && name.ends_with(".partial") && !wanted.contains(&name) {
            std::fs::remove_file(entry.path()).map_err(|e| Error::io(entry.path(), e))?;
        }
    }
    Ok(())
}
