//! Replication: a follower copies images from the leader's read address into its own store.
//!
//! For each root manifest (the expected set's digests), the manifest and everything it
//! references (index entries, then config and layers) is copied; content already on the own
//! disk is skipped, so an interrupted run resumes where it stopped. Blobs are copied with
//! bounded parallelism, each verified against its digest while written (nothing partial is
//! ever committed). A manifest is committed only after everything it references, so the store
//! never holds a manifest pointing at missing content.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::BytesMut;
use futures_util::{StreamExt, TryStreamExt};
use oci::{Digest, Repository};

use crate::error::Error;
use crate::service::Registry;
use crate::store::Store;

/// Bytes gathered before one blocking write.
const WRITE_BATCH: usize = 1 << 20;

/// What a run did.
#[derive(Debug, Default)]
pub struct Progress {
    /// Manifests committed by this run.
    pub manifests_copied: AtomicU64,
    /// Blobs committed by this run.
    pub blobs_copied: AtomicU64,
    /// Blobs (and manifests) found already on the own disk.
    pub already_held: AtomicU64,
    /// Bytes of blobs copied.
    pub bytes_copied: AtomicU64,
}

/// Copies from a source replica.
#[derive(Debug)]
pub struct Replicator<'a> {
    store: &'a Store,
    source: &'a registry_client::Remote,
    source_repository: &'a str,
    repository: &'a Repository,
    parallelism: usize,
    progress: &'a Progress,
    through: Option<&'a Registry>,
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Config(format!("replication task failed: {e}")))?
}

impl<'a> Replicator<'a> {
    /// Copies `source_repository` of `source` (the leader's read listener, or the upstream
    /// for the leader's own fill) into `repository` of `store`, at most `parallelism` blobs at
    /// a time, counting into `progress`.
    pub fn new(
        store: &'a Store,
        source: &'a registry_client::Remote,
        source_repository: &'a str,
        repository: &'a Repository,
        parallelism: usize,
        progress: &'a Progress,
    ) -> Self {
        Self {
            store,
            source,
            source_repository,
            repository,
            parallelism: parallelism.max(1),
            progress,
            through: None,
        }
    }

    /// Fetches blobs through `registry`'s single flight from its held upstream instead of
    /// from the source directly (the leader's fill): a client missing the same blob meanwhile
    /// joins the fill rather than causing a second upstream request.
    pub fn through(mut self, registry: &'a Registry) -> Self {
        self.through = Some(registry);
        self
    }

    /// Copies every root manifest and what it references.
    pub async fn copy_all(&self, roots: &[Digest]) -> Result<(), Error> {
        for root in roots {
            self.copy_manifest(*root, 0).await?;
        }
        Ok(())
    }

    /// Copies one manifest and everything it references.
    pub async fn copy_manifest(&self, digest: Digest, depth: u8) -> Result<(), Error> {
        if depth > 4 {
            return Err(Error::Config(format!(
                "{digest}: index nesting deeper than 4"
            )));
        }
        // On our disk already. A manifest copied here was committed after its references, but
        // one stored by a pull-through read was not (the client fetches blobs afterwards, or
        // never): walk its references anyway; held blobs cost a stat.
        let held = {
            let (store, repository) = (self.store.clone(), self.repository.clone());
            blocking(move || store.manifest(&repository, &digest)).await?
        };
        let (bytes, media_type, copied) = match held {
            Some(m) => {
                self.progress.already_held.fetch_add(1, Ordering::Relaxed);
                (bytes::Bytes::from(m.bytes), m.media_type, false)
            }
            None => {
                let fetched = self
                    .source
                    .get_manifest(
                        self.source_repository,
                        &digest.to_string(),
                        &[oci::media_type::MANIFEST_ACCEPT],
                    )
                    .await?;
                let media_type = fetched
                    .media_type
                    .clone()
                    .unwrap_or_else(|| "application/vnd.oci.image.manifest.v1+json".to_owned());
                (fetched.bytes, media_type, true)
            }
        };
        let manifest = oci::Manifest::parse(bytes.to_vec(), Some(&media_type))?;
        let mut blobs = Vec::new();
        for reference in manifest.references() {
            if oci::media_type::is_manifest_or_index(&reference.media_type) {
                Box::pin(self.copy_manifest(reference.digest, depth + 1)).await?;
            } else {
                blobs.push((reference.digest, reference.size));
            }
        }
        futures_util::stream::iter(blobs.into_iter().map(Ok::<_, Error>))
            .map_ok(|(digest, size)| self.copy_blob(digest, size))
            .try_buffer_unordered(self.parallelism)
            .try_collect::<Vec<()>>()
            .await?;
        if !copied {
            return Ok(());
        }
        let store = self.store.clone();
        let repository = self.repository.clone();
        blocking(move || store.put_manifest(&repository, &bytes, &media_type, Some(digest), None))
            .await?;
        self.progress
            .manifests_copied
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Copies one blob unless it is held, verified while written.
    async fn copy_blob(&self, digest: Digest, size: u64) -> Result<(), Error> {
        if self.store.blob_size(&digest).is_some() {
            self.progress.already_held.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        if let Some(registry) = self.through {
            registry.fill_blob(self.repository, digest).await?;
            self.progress.blobs_copied.fetch_add(1, Ordering::Relaxed);
            self.progress
                .bytes_copied
                .fetch_add(size, Ordering::Relaxed);
            return Ok(());
        }
        let response = self
            .source
            .get_blob(self.source_repository, &digest, None, Some(size))
            .await?;
        let store = self.store.clone();
        let mut writer = blocking(move || store.writer(digest.algorithm(), Some(size))).await?;
        let mut body = response.into_body();
        let mut batch = BytesMut::new();
        loop {
            let chunk = body.next().await.transpose()?;
            let done = chunk.is_none();
            if let Some(chunk) = chunk {
                batch.extend_from_slice(&chunk);
            }
            if batch.len() >= WRITE_BATCH || (done && !batch.is_empty()) {
                let data = std::mem::take(&mut batch);
                writer = blocking(move || writer.write(&data).map(|()| writer)).await?;
            }
            if done {
                break;
            }
        }
        if writer.len() != size {
            return Err(Error::SizeMismatch {
                expected: size,
                actual: writer.len(),
            });
        }
        blocking(move || writer.commit(Some(digest))).await?;
        self.progress.blobs_copied.fetch_add(1, Ordering::Relaxed);
        self.progress
            .bytes_copied
            .fetch_add(size, Ordering::Relaxed);
        Ok(())
    }
}
