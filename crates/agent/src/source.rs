//! Where the agent's layout comes from: the API when it answers, else the on-disk copy of what
//! the API last said, else the bootstrap layout the node was installed with.
//!
//! [`decide`] is the pure rule; [`Cache`] the on-disk copy (`{generation, spec}` with
//! credentials already resolved, file 0600 in a 0700 directory, written atomically).
//!
//! One deliberate improvement on Deckhouse: when the RegistryNode is deleted on purpose, the
//! cache keeps a tombstone rather than the old layout, so a later API outage cannot resurrect a
//! layout the cluster removed.

use std::path::{Path, PathBuf};

use registry_plan::Layout;
use serde::{Deserialize, Serialize};

/// Where the applied layout came from (`d8_registry_agent_layout_origin{origin}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// Read from the API server just now.
    Api,
    /// The API could not be read; the on-disk copy of its last answer.
    Cache,
    /// Never reached the API; the layout the node was installed with.
    Bootstrap,
}

impl Origin {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Api => "API",
            Origin::Cache => "Cache",
            Origin::Bootstrap => "Bootstrap",
        }
    }

    /// Every origin, for exporting a complete gauge.
    pub const ALL: [Origin; 3] = [Origin::Api, Origin::Cache, Origin::Bootstrap];
}

/// What the on-disk copy holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    /// `metadata.generation` of the RegistryNode it came from (0 for bootstrap).
    pub generation: i64,
    /// The layout; `None` records that the RegistryNode was deleted on purpose.
    pub spec: Option<Layout>,
}

/// What reading the API gave.
#[derive(Clone, Debug)]
pub enum Fetched {
    /// The RegistryNode, credentials resolved.
    Found(Stored),
    /// No such RegistryNode.
    NotFound,
    /// The API could not be read, or a credential could not be resolved (why, for the log).
    Failed(String),
}

/// The layout to apply now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The layout; `None` means nothing is configured and the drop-in is withdrawn.
    pub layout: Option<Layout>,
    /// Generation it belongs to.
    pub generation: i64,
    /// Where it came from; `None` when there is no layout.
    pub origin: Option<Origin>,
}

/// What to do with the on-disk copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheUpdate {
    /// Leave it.
    Keep,
    /// Replace it.
    Save(Stored),
}

/// Errors of the layout source.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Neither the API, nor a stored copy, nor a bootstrap layout is available.
    #[error("the API server cannot be read ({0}) and no layout has ever been stored or installed")]
    NothingToApply(String),
    /// The cache file could not be read or written.
    #[error("{action} the stored layout {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The cache or bootstrap file is not valid JSON of the expected shape.
    #[error("the layout in {path} cannot be read: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
}

/// The rule. `cached` is the on-disk copy, `bootstrap` the installed layout.
pub fn decide(
    fetched: Fetched,
    cached: Option<Stored>,
    bootstrap: Option<Layout>,
) -> Result<(Snapshot, CacheUpdate), SourceError> {
    let none = |generation| Snapshot {
        layout: None,
        generation,
        origin: None,
    };
    let from_bootstrap = |layout: Layout| Snapshot {
        layout: Some(layout),
        generation: 0,
        origin: Some(Origin::Bootstrap),
    };
    match fetched {
        Fetched::Found(stored) => {
            let snapshot = Snapshot {
                layout: stored.spec.clone(),
                generation: stored.generation,
                origin: stored.spec.as_ref().map(|_| Origin::Api),
            };
            let update = if cached.as_ref() == Some(&stored) {
                CacheUpdate::Keep
            } else {
                CacheUpdate::Save(stored)
            };
            Ok((snapshot, update))
        }
        // Deleted on purpose if this node ever had a layout; still joining otherwise.
        Fetched::NotFound => match cached {
            Some(stored) if stored.spec.is_none() => {
                Ok((none(stored.generation), CacheUpdate::Keep))
            }
            Some(stored) => Ok((
                none(stored.generation),
                CacheUpdate::Save(Stored {
                    generation: stored.generation,
                    spec: None,
                }),
            )),
            None => Ok((
                bootstrap.map(from_bootstrap).unwrap_or_else(|| none(0)),
                CacheUpdate::Keep,
            )),
        },
        Fetched::Failed(reason) => match (cached, bootstrap) {
            (Some(stored), _) => Ok((
                Snapshot {
                    origin: stored.spec.as_ref().map(|_| Origin::Cache),
                    layout: stored.spec,
                    generation: stored.generation,
                },
                CacheUpdate::Keep,
            )),
            (None, Some(layout)) => Ok((from_bootstrap(layout), CacheUpdate::Keep)),
            (None, None) => Err(SourceError::NothingToApply(reason)),
        },
    }
}

/// The on-disk copy of the last layout the API gave.
#[derive(Clone, Debug)]
pub struct Cache {
    path: PathBuf,
}

impl Cache {
    /// A cache at `path` (e.g. `/var/lib/deckhouse/registry-agent/layout.json`).
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
        }
    }

    /// The stored copy; `None` when there is none.
    pub fn load(&self) -> Result<Option<Stored>, SourceError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|source| SourceError::Corrupt {
                        path: self.path.clone(),
                        source,
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(self.io("reading", source)),
        }
    }

    /// Replaces the stored copy atomically; the file is 0600 and its directory 0700, since it
    /// holds credentials.
    pub fn save(&self, stored: &Stored) -> Result<(), SourceError> {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| self.io("creating the directory of", e))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| self.io("protecting the directory of", e))?;
        let bytes = serde_json::to_vec(stored).expect("a layout serializes");
        let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(|e| self.io("writing", e))?;
        temp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o600))
            .and_then(|()| temp.write_all(&bytes))
            .and_then(|()| temp.as_file().sync_all())
            .map_err(|e| self.io("writing", e))?;
        temp.persist(&self.path)
            .map_err(|e| self.io("replacing", e.error))?;
        Ok(())
    }

    fn io(&self, action: &'static str, source: std::io::Error) -> SourceError {
        SourceError::Io {
            action,
            path: self.path.clone(),
            source,
        }
    }
}

/// Reads the bootstrap layout (the RegistryNode spec shape, credentials inline); a missing file
/// is no layout.
pub fn load_bootstrap(path: &Path) -> Result<Option<Layout>, SourceError> {
    match std::fs::read(path) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|source| SourceError::Corrupt {
                    path: path.to_owned(),
                    source,
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SourceError::Io {
            action: "reading",
            path: path.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use registry_plan::{Backend, BackendName, Endpoint};

    fn layout(host: &str) -> Layout {
        Layout {
            cache: false,
            backends: vec![Backend {
                name: BackendName::Upstream,
                endpoint: Endpoint {
                    host: host.into(),
                    ..Endpoint::default()
                },
                mirrors: vec![],
            }],
            additional_routes: vec![],
        }
    }

    fn stored(generation: i64, host: &str) -> Stored {
        Stored {
            generation,
            spec: Some(layout(host)),
        }
    }

    #[test]
    fn api_answer_is_applied_and_saved_once() {
        let (snapshot, update) = decide(Fetched::Found(stored(3, "a")), None, None).unwrap();
        assert_eq!(snapshot.origin, Some(Origin::Api));
        assert_eq!(snapshot.generation, 3);
        assert_eq!(update, CacheUpdate::Save(stored(3, "a")));
        let (_, update) =
            decide(Fetched::Found(stored(3, "a")), Some(stored(3, "a")), None).unwrap();
        assert_eq!(update, CacheUpdate::Keep);
    }

    #[test]
    fn api_failure_uses_cache_then_bootstrap_then_fails() {
        let failed = || Fetched::Failed("connection refused".into());
        let (snapshot, update) =
            decide(failed(), Some(stored(2, "cached")), Some(layout("boot"))).unwrap();
        assert_eq!(
            (snapshot.origin, snapshot.generation),
            (Some(Origin::Cache), 2)
        );
        assert_eq!(snapshot.layout, Some(layout("cached")));
        assert_eq!(update, CacheUpdate::Keep);

        let (snapshot, update) = decide(failed(), None, Some(layout("boot"))).unwrap();
        assert_eq!(
            (snapshot.origin, snapshot.generation),
            (Some(Origin::Bootstrap), 0)
        );
        assert_eq!(
            update,
            CacheUpdate::Keep,
            "bootstrap is never promoted into the cache"
        );

        let error = decide(failed(), None, None).unwrap_err();
        assert!(error.to_string().contains("connection refused"), "{error}");
    }

    #[test]
    fn not_found_after_a_layout_means_deleted_and_stays_deleted_through_outages() {
        let (snapshot, update) = decide(
            Fetched::NotFound,
            Some(stored(4, "a")),
            Some(layout("boot")),
        )
        .unwrap();
        assert_eq!(snapshot.layout, None);
        let tombstone = Stored {
            generation: 4,
            spec: None,
        };
        assert_eq!(update, CacheUpdate::Save(tombstone.clone()));
        // The API is then unreachable: the deleted layout is not resurrected.
        let (snapshot, _) = decide(
            Fetched::Failed("down".into()),
            Some(tombstone.clone()),
            Some(layout("boot")),
        )
        .unwrap();
        assert_eq!(snapshot.layout, None);
        let (snapshot, update) = decide(Fetched::NotFound, Some(tombstone), None).unwrap();
        assert_eq!((snapshot.layout, update), (None, CacheUpdate::Keep));
    }

    #[test]
    fn not_found_on_a_joining_node_uses_bootstrap() {
        let (snapshot, _) = decide(Fetched::NotFound, None, Some(layout("boot"))).unwrap();
        assert_eq!(snapshot.origin, Some(Origin::Bootstrap));
        let (snapshot, _) = decide(Fetched::NotFound, None, None).unwrap();
        assert_eq!(snapshot.layout, None);
    }

    #[test]
    fn cache_file_is_private_and_round_trips() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(&dir.path().join("agent/layout.json"));
        assert_eq!(cache.load().unwrap(), None);
        let mut value = stored(7, "registry.example");
        value.spec.as_mut().unwrap().backends[0].endpoint.auth = Some(registry_plan::Credentials {
            username: "u".into(),
            password: "p".into(),
        });
        cache.save(&value).unwrap();
        assert_eq!(cache.load().unwrap(), Some(value));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("agent/layout.json")), 0o600);
        assert_eq!(mode(&dir.path().join("agent")), 0o700);
        std::fs::write(dir.path().join("agent/layout.json"), "{").unwrap();
        assert!(matches!(cache.load(), Err(SourceError::Corrupt { .. })));
    }
}
