//! Garbage collection of a cache replica: which tags, manifests and blobs go.
//!
//! The keep rules of the syncer, applied to a snapshot of the store ([`Catalog`]):
//!
//! 1. No deployed version known ⇒ nothing is deleted and the run reports an error
//!    ([`GcError::NoDeployedVersion`]).
//! 2. **Tag pass**, on the tags of the platform repository (the "root scope") only: every other
//!    repository is a foreign version space and keeps all its tags. Kept: the deployed version,
//!    the previous one, anything newer than the deployed one, and any tag that is not a semantic
//!    version (`stable`, `alpha`, hand-pushed names…). Older semantic versions are deleted. When
//!    the deployed version itself cannot be ordered (e.g. `pr21788`), no tag is deleted.
//! 3. **Manifest pass**: keep = the digests of the expected set (the declared digests of the
//!    kept versions, modules and catalogues) + the targets of the surviving tags, closed over
//!    what they reference (an index keeps its children). Every other manifest is deleted from
//!    its repository. An unknown keep set (the expected set could not be computed) deletes
//!    nothing at all.
//! 4. **Sweep**: a blob no surviving manifest references is deleted — unless it is in use
//!    (being read, uploaded or just committed: the caller says which), or the reference graph is
//!    incomplete (a kept manifest could not be parsed), in which case no blob is deleted.
//!
//! Pure: the caller lists the store and applies the plan.

use std::collections::{BTreeMap, BTreeSet};

/// Why a run deletes nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GcError {
    /// No deployed platform version is known.
    #[error(
        "no deployed platform version is known: garbage collection deletes nothing until one is"
    )]
    NoDeployedVersion,
}

/// One repository of the store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepositoryState {
    /// Tag → manifest digest.
    pub tags: BTreeMap<String, String>,
    /// Manifests linked into the repository.
    pub manifests: BTreeSet<String>,
}

/// A snapshot of the store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    /// Repositories by name.
    pub repositories: BTreeMap<String, RepositoryState>,
    /// Manifest digest → every digest it references (config, layers; child manifests of an
    /// index). A manifest absent from this map could not be read or parsed.
    pub references: BTreeMap<String, Vec<String>>,
}

/// The rules' inputs from the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// The platform repository (`system/deckhouse`): the root scope of the tag pass.
    pub root: String,
    /// The deployed platform version (a tag of the root repository), if known.
    pub deployed: Option<String>,
    /// The previous platform version, if any.
    pub previous: Option<String>,
    /// Digests of the expected set; `None` when it could not be computed (then nothing is
    /// deleted).
    pub keep: Option<BTreeSet<String>>,
}

/// What happens to one tag of the root repository, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TagFate {
    /// The deployed version.
    Deployed,
    /// The previous version.
    Previous,
    /// Newer than the deployed version.
    Newer,
    /// Not a semantic version (channels, hand-pushed tags).
    NotSemver,
    /// The deployed version cannot be ordered, so no version tag is judged older.
    DeployedUnordered,
    /// An older version: deleted.
    Older,
}

impl TagFate {
    /// Whether the tag survives.
    pub fn kept(self) -> bool {
        self != Self::Older
    }
}

/// Parses a version tag as Deckhouse names them (`v1.60.3`, `1.60.3`, prereleases allowed).
pub fn version(tag: &str) -> Option<semver::Version> {
    semver::Version::parse(tag.strip_prefix('v').unwrap_or(tag)).ok()
}

/// The tag pass for one root-scope tag.
pub fn tag_fate(tag: &str, deployed: &str, previous: Option<&str>) -> TagFate {
    if tag == deployed {
        return TagFate::Deployed;
    }
    if previous == Some(tag) {
        return TagFate::Previous;
    }
    let Some(v) = version(tag) else {
        return TagFate::NotSemver;
    };
    let Some(d) = version(deployed) else {
        return TagFate::DeployedUnordered;
    };
    if v > d {
        TagFate::Newer
    } else {
        TagFate::Older
    }
}

/// The decisions of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// `(repository, tag)` to delete.
    pub delete_tags: Vec<(String, String)>,
    /// `(repository, manifest digest)` to unlink.
    pub delete_manifests: Vec<(String, String)>,
    /// Every digest a surviving manifest keeps (manifests themselves included).
    pub marked: BTreeSet<String>,
    /// Why the sweep must delete no blob this run, if it must not.
    pub sweep_blocked: Option<String>,
    /// Why parts of the run deleted nothing (for the report and logs).
    pub notes: Vec<String>,
}

impl Plan {
    /// The blobs to delete among `blobs`: neither marked nor `in_use`. Empty when the sweep is
    /// blocked.
    pub fn sweep<'a>(
        &self,
        blobs: impl IntoIterator<Item = &'a str>,
        in_use: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        if self.sweep_blocked.is_some() {
            return Vec::new();
        }
        blobs
            .into_iter()
            .filter(|b| !self.marked.contains(*b) && !in_use(b))
            .map(str::to_owned)
            .collect()
    }
}

/// Closes `roots` over the reference graph; returns the closure and the marked manifests
/// whose references are unknown.
fn close(catalog: &Catalog, roots: impl IntoIterator<Item = String>) -> (BTreeSet<String>, usize) {
    let manifests: BTreeSet<&str> = catalog
        .repositories
        .values()
        .flat_map(|r| r.manifests.iter().map(String::as_str))
        .collect();
    let mut marked = BTreeSet::new();
    let mut unknown = 0;
    let mut stack: Vec<String> = roots.into_iter().collect();
    while let Some(d) = stack.pop() {
        if !marked.insert(d.clone()) {
            continue;
        }
        match catalog.references.get(&d) {
            Some(refs) => stack.extend(refs.iter().cloned()),
            None if manifests.contains(d.as_str()) => unknown += 1,
            None => {}
        }
    }
    (marked, unknown)
}

/// Plans one run over `catalog` (see the module docs).
pub fn plan(catalog: &Catalog, rules: &Rules) -> Result<Plan, GcError> {
    let Some(deployed) = rules.deployed.as_deref() else {
        return Err(GcError::NoDeployedVersion);
    };
    let mut plan = Plan::default();
    let Some(keep) = &rules.keep else {
        plan.notes
            .push("the expected image set is unknown: nothing is deleted".to_owned());
        plan.sweep_blocked = Some("the expected image set is unknown".to_owned());
        plan.marked = close(
            catalog,
            catalog
                .repositories
                .values()
                .flat_map(|r| r.manifests.iter().cloned()),
        )
        .0;
        return Ok(plan);
    };
    if version(deployed).is_none() {
        plan.notes.push(format!(
            "the deployed version {deployed} cannot be ordered: no tag is deleted"
        ));
    }
    // Tag pass.
    let mut surviving_targets = Vec::new();
    for (name, repo) in &catalog.repositories {
        for (tag, target) in &repo.tags {
            let kept =
                name != &rules.root || tag_fate(tag, deployed, rules.previous.as_deref()).kept();
            if kept {
                surviving_targets.push(target.clone());
            } else {
                plan.delete_tags.push((name.clone(), tag.clone()));
            }
        }
    }
    // Manifest pass.
    let (marked, unknown) = close(catalog, keep.iter().cloned().chain(surviving_targets));
    for (name, repo) in &catalog.repositories {
        for m in &repo.manifests {
            if !marked.contains(m) {
                plan.delete_manifests.push((name.clone(), m.clone()));
            }
        }
    }
    if unknown > 0 {
        plan.sweep_blocked = Some(format!(
            "{unknown} kept manifest(s) could not be read: what they reference is unknown"
        ));
    }
    plan.marked = marked;
    Ok(plan)
}

#[cfg(test)]
mod tests;
