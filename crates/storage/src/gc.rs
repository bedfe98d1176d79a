//! Garbage collection of the replica's own store: list it, let the keep rules
//! ([`registry_plan::gc`]) decide, then delete tags, unlink manifests, and sweep blobs nothing
//! references any more — or, in a dry run, only report what would go.
//!
//! Nothing in use is removed. Manifests used (pushed, read) since the cutoff count as kept
//! roots, so whatever they reference stays too; a blob used since the cutoff (read, uploaded,
//! mounted, referenced by a manifest being pushed, just committed) is skipped this run, checked
//! and removed under the store's lock (see [`crate::store`]). The cutoff is the run's start
//! minus a grace period: an upload touched in the last `grace` keeps what it touched.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use oci::{Digest, Repository, Tag};
use registry_plan::expected::{Entry, ExpectedSet};
use registry_plan::gc::{self as plan, Catalog, RepositoryState, Rules};

use crate::error::Error;
use crate::store::Store;

/// What a run is told.
#[derive(Clone, Debug)]
pub struct Options {
    /// The platform repository (`system/deckhouse`), the root scope of the tag pass.
    pub root: Repository,
    /// The deployed platform version (a tag of `root`); none deletes nothing.
    pub deployed: Option<String>,
    /// The previous platform version.
    pub previous: Option<String>,
    /// The expected set; `None` (unknown) deletes nothing.
    pub keep: Option<ExpectedSet>,
    /// Report only.
    pub dry_run: bool,
    /// Uses this long before the run's start still protect what they used.
    pub grace: Duration,
}

/// What a run deleted (or, dry, would delete).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Collection {
    /// Nothing was deleted; this is what would have been.
    pub dry_run: bool,
    /// `(repository, tag)`.
    pub tags: Vec<(String, String)>,
    /// `(repository, manifest digest)` unlinked.
    pub manifests: Vec<(String, Digest)>,
    /// Blobs removed.
    pub blobs: Vec<Digest>,
    /// Bytes freed by the removed blobs.
    pub bytes: u64,
    /// Unreferenced blobs left alone because they were in use.
    pub skipped_in_use: usize,
    /// Why parts of the run deleted nothing.
    pub notes: Vec<String>,
}

impl std::fmt::Display for Collection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verb = if self.dry_run {
            "would delete"
        } else {
            "deleted"
        };
        write!(
            f,
            "{verb} {} tag(s), {} manifest(s), {} blob(s) ({} bytes); {} unreferenced blob(s) in use kept",
            self.tags.len(),
            self.manifests.len(),
            self.blobs.len(),
            self.bytes,
            self.skipped_in_use
        )?;
        for note in &self.notes {
            write!(f, "; {note}")?;
        }
        Ok(())
    }
}

fn read_dir(dir: &Path) -> Result<Vec<std::fs::DirEntry>, Error> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::io("read directory", dir, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io("read directory", dir, e)),
    }
}

fn list_repositories(
    dir: &Path,
    name: &str,
    out: &mut std::collections::BTreeMap<String, RepositoryState>,
) -> Result<(), Error> {
    for entry in read_dir(dir)? {
        let Some(file_name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        match file_name.as_str() {
            "_manifests" => {
                let state = out.entry(name.to_owned()).or_default();
                for alg in read_dir(&path)? {
                    let alg_name = alg.file_name().to_string_lossy().into_owned();
                    for link in read_dir(&alg.path())? {
                        let hex = link.file_name().to_string_lossy().into_owned();
                        if let Ok(d) = Digest::parse(&format!("{alg_name}:{hex}")) {
                            state.manifests.insert(d.to_string());
                        }
                    }
                }
            }
            "_tags" => {
                let state = out.entry(name.to_owned()).or_default();
                for tag in read_dir(&path)? {
                    let tag_name = tag.file_name().to_string_lossy().into_owned();
                    if let Ok(text) = std::fs::read_to_string(tag.path())
                        && let Ok(d) = Digest::parse(text.trim())
                    {
                        state.tags.insert(tag_name, d.to_string());
                    }
                }
            }
            child if !child.starts_with('_') => {
                let child_name = if name.is_empty() {
                    child.to_owned()
                } else {
                    format!("{name}/{child}")
                };
                list_repositories(&path, &child_name, out)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Lists the store: repositories with their tags and manifests, and what each manifest
/// references (a manifest that cannot be read or parsed is left out of `references`).
pub fn catalog(store: &Store) -> Result<Catalog, Error> {
    let mut catalog = Catalog::default();
    list_repositories(
        &store.root().join("repositories"),
        "",
        &mut catalog.repositories,
    )?;
    let mut manifests: Vec<(Digest, Option<String>)> = Vec::new();
    for (name, repo) in &catalog.repositories {
        let links = store
            .root()
            .join("repositories")
            .join(name)
            .join("_manifests");
        for m in &repo.manifests {
            let Ok(d) = Digest::parse(m) else { continue };
            let media_type =
                std::fs::read_to_string(links.join(d.algorithm().as_str()).join(d.encoded())).ok();
            manifests.push((d, media_type));
        }
    }
    for (digest, media_type) in manifests {
        let m = digest.to_string();
        if catalog.references.contains_key(&m) {
            continue;
        }
        let Some(bytes) = store.read_blob(&digest, oci::manifest::MANIFEST_MAX_LEN as u64)? else {
            continue;
        };
        let content_type = media_type.as_deref().filter(|t| !t.is_empty());
        let Ok(manifest) = oci::Manifest::parse(bytes, content_type) else {
            tracing::warn!(digest = %digest, "a stored manifest does not parse; the sweep is skipped");
            continue;
        };
        catalog.references.insert(
            m,
            manifest
                .references()
                .into_iter()
                .filter(|d| d.urls.is_empty())
                .map(|d| d.digest.to_string())
                .collect(),
        );
    }
    Ok(catalog)
}

/// Runs one collection (blocking: call it from `spawn_blocking`).
pub fn collect(store: &Store, options: &Options) -> Result<Collection, Error> {
    collect_at(store, options, Instant::now())
}

/// [`collect`] as if the run started at `started`: what was used at or after
/// `started - grace` is kept.
pub fn collect_at(store: &Store, options: &Options, started: Instant) -> Result<Collection, Error> {
    let cutoff = started.checked_sub(options.grace).unwrap_or(started);
    let catalog = catalog(store)?;
    let keep = options.keep.as_ref().map(|set| {
        let mut keep = BTreeSet::new();
        for entry in &set.entries {
            match entry {
                Entry::Digest(d) => {
                    keep.insert(d.clone());
                }
                Entry::Tag(t) => {
                    if let Some(d) = Tag::parse(t)
                        .ok()
                        .and_then(|t| store.tag(&options.root, &t))
                    {
                        keep.insert(d.to_string());
                    }
                }
            }
        }
        // Manifests used lately (just pushed, being pulled) are roots too.
        for repo in catalog.repositories.values() {
            for m in &repo.manifests {
                if Digest::parse(m).is_ok_and(|d| store.used_since(&d, cutoff)) {
                    keep.insert(m.clone());
                }
            }
        }
        keep
    });
    let rules = Rules {
        root: options.root.to_string(),
        deployed: options.deployed.clone(),
        previous: options.previous.clone(),
        keep,
    };
    let decided = plan::plan(&catalog, &rules)?;
    let mut collection = Collection {
        dry_run: options.dry_run,
        notes: decided.notes.clone(),
        ..Collection::default()
    };
    if let Some(blocked) = &decided.sweep_blocked
        && options.keep.is_some()
    {
        collection
            .notes
            .push(format!("no blob is swept: {blocked}"));
    }
    for (repo, tag) in &decided.delete_tags {
        let (Ok(repository), Ok(t)) = (Repository::parse(repo), Tag::parse(tag)) else {
            continue;
        };
        if options.dry_run || store.delete_tag(&repository, &t)? {
            collection.tags.push((repo.clone(), tag.clone()));
        }
    }
    for (repo, m) in &decided.delete_manifests {
        let (Ok(repository), Ok(digest)) = (Repository::parse(repo), Digest::parse(m)) else {
            continue;
        };
        if store.used_since(&digest, cutoff) {
            continue;
        }
        if options.dry_run || store.delete_manifest(&repository, &digest)? {
            collection.manifests.push((repo.clone(), digest));
        }
    }
    let blobs = store.blobs()?;
    let names: Vec<String> = blobs.iter().map(Digest::to_string).collect();
    let unreferenced = decided.sweep(names.iter().map(String::as_str), |_| false);
    for b in unreferenced {
        let Ok(digest) = Digest::parse(&b) else {
            continue;
        };
        if options.dry_run {
            if store.used_since(&digest, cutoff) {
                collection.skipped_in_use += 1;
            } else if let Some(len) = std::fs::metadata(store.blob_path(&digest))
                .ok()
                .map(|m| m.len())
            {
                collection.bytes += len;
                collection.blobs.push(digest);
            }
            continue;
        }
        match store.delete_unused_blob(&digest, cutoff)? {
            Some(len) => {
                collection.bytes += len;
                collection.blobs.push(digest);
            }
            None if store.used_since(&digest, cutoff) => collection.skipped_in_use += 1,
            None => {}
        }
    }
    if !options.dry_run {
        store.set_collected_now();
    }
    tracing::info!(
        dry_run = options.dry_run,
        tags = collection.tags.len(),
        manifests = collection.manifests.len(),
        blobs = collection.blobs.len(),
        bytes = collection.bytes,
        skipped_in_use = collection.skipped_in_use,
        "garbage collection finished"
    );
    Ok(collection)
}

#[cfg(test)]
mod tests;
