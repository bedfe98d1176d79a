//! Where the release images that define the expected set are read.
//!
//! The leader reads through its own read listener, which serves from its store and fills from
//! the upstream on a miss. A follower must never fill: replication is leader→followers, so it
//! reads content by digest from its own store (never filled) and everything else from the
//! leader's read listener, where a miss joins the leader's single fill. Without a leader it
//! reads its store alone. Tags are asked of the registry first (they move), the store's copy
//! answering only when the registry cannot.

use futures_util::StreamExt;
use oci::{Digest, Repository};
use tokio::io::AsyncWriteExt;

/// A manifest as read.
#[derive(Debug)]
pub(crate) struct Manifest {
    pub bytes: Vec<u8>,
    pub media_type: Option<String>,
    pub digest: Digest,
}

/// Where release images are read from.
#[derive(Clone, Debug)]
pub struct Source {
    remote: Option<registry_client::Remote>,
    store: Option<storage::Store>,
    /// The platform repository (`system/deckhouse`).
    pub repository: String,
}

impl Source {
    /// Everything from `remote` (a replica's own read listener).
    pub fn registry(remote: registry_client::Remote, repository: impl Into<String>) -> Self {
        Self {
            remote: Some(remote),
            store: None,
            repository: repository.into(),
        }
    }

    /// Everything from `store`, nothing filled (a follower that knows no leader).
    pub fn store(store: storage::Store, repository: impl Into<String>) -> Self {
        Self {
            remote: None,
            store: Some(store),
            repository: repository.into(),
        }
    }

    /// Content by digest from `store` first (never filled), the rest from the registry.
    pub fn store_first(mut self, store: storage::Store) -> Self {
        self.store = Some(store);
        self
    }

    fn parse(repository: &str) -> Result<Repository, String> {
        Repository::parse(repository).map_err(|e| e.to_string())
    }

    fn no_registry(what: &str) -> String {
        format!("{what} is not held here and no leader is known to read it from")
    }

    fn held_manifest(&self, repository: &str, digest: &Digest) -> Option<Manifest> {
        let store = self.store.as_ref()?;
        let held = store
            .manifest(&Self::parse(repository).ok()?, digest)
            .ok()??;
        Some(Manifest {
            bytes: held.bytes,
            media_type: Some(held.media_type),
            digest: held.digest,
        })
    }

    fn held_tag(&self, repository: &str, tag: &str) -> Option<Digest> {
        let store = self.store.as_ref()?;
        let repository = Self::parse(repository).ok()?;
        let digest = store.tag(&repository, &oci::Tag::parse(tag).ok()?)?;
        store.has_manifest(&repository, &digest).then_some(digest)
    }

    /// A manifest by tag or digest.
    pub(crate) async fn manifest(
        &self,
        repository: &str,
        reference: &str,
        accept: &[&str],
    ) -> Result<Manifest, String> {
        let by_digest = Digest::parse(reference).ok();
        if let Some(held) = by_digest.and_then(|d| self.held_manifest(repository, &d)) {
            return Ok(held);
        }
        let fetched = match &self.remote {
            Some(remote) => remote
                .get_manifest(repository, reference, accept)
                .await
                .map_err(|e| e.to_string()),
            None => Err(Self::no_registry(&format!("{repository}:{reference}"))),
        };
        match fetched {
            Ok(m) => Ok(Manifest {
                bytes: m.bytes.to_vec(),
                media_type: m.media_type,
                digest: m.digest,
            }),
            Err(error) => self
                .held_tag(repository, reference)
                .and_then(|d| self.held_manifest(repository, &d))
                .ok_or(error),
        }
    }

    /// What a tag points at.
    pub(crate) async fn resolve(
        &self,
        repository: &str,
        tag: &str,
        accept: &[&str],
    ) -> Result<Option<Digest>, String> {
        let asked = match &self.remote {
            Some(remote) => remote
                .head_manifest(repository, tag, accept)
                .await
                .map(|h| h.digest)
                .map_err(|e| e.to_string()),
            None => Err(Self::no_registry(&format!("{repository}:{tag}"))),
        };
        asked.or_else(|error| self.held_tag(repository, tag).map(Some).ok_or(error))
    }

    /// Every tag of a repository.
    pub(crate) async fn tags(&self, repository: &str) -> Result<Vec<String>, String> {
        let asked = match &self.remote {
            Some(remote) => remote.all_tags(repository).await.map_err(|e| e.to_string()),
            None => Err(Self::no_registry(&format!("the tags of {repository}"))),
        };
        asked.or_else(|error| {
            let held = self
                .store
                .as_ref()
                .zip(Self::parse(repository).ok())
                .and_then(|(store, r)| store.tags(&r).ok().flatten());
            held.ok_or(error)
        })
    }

    /// A blob in a file of its own (rewound by the reader).
    pub(crate) async fn blob(
        &self,
        repository: &str,
        digest: &Digest,
    ) -> Result<std::fs::File, String> {
        if let Some(store) = &self.store
            && let Some((file, _)) = store.open_blob(digest).map_err(|e| e.to_string())?
        {
            return Ok(file);
        }
        let Some(remote) = &self.remote else {
            return Err(Self::no_registry(&format!("blob {digest}")));
        };
        let response = remote
            .get_blob(repository, digest, None, None)
            .await
            .map_err(|e| e.to_string())?;
        let file = tempfile::tempfile().map_err(|e| format!("temporary file: {e}"))?;
        let mut file = tokio::fs::File::from_std(file);
        let mut body = response.into_body();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| e.to_string())?;
            file.write_all(&chunk)
                .await
                .map_err(|e| format!("temporary file: {e}"))?;
        }
        Ok(file.into_std().await)
    }
}
