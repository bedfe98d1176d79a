//! Named allow-lists of known deviations from the spec, per registry, each with its reason.
//!
//! A deviation never loosens a check: the check still runs and still fails; the report says
//! the failure is known. When a listed check passes, the report flags the entry as stale.

/// One allowed deviation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deviation {
    /// The check's id.
    pub check: &'static str,
    /// Why the registry behaves differently (and whether it matters to us).
    pub reason: &'static str,
}

/// A registry's allowed deviations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deviations {
    /// The registry they describe, e.g. `docker-registry 2.8`.
    pub registry: &'static str,
    /// The entries.
    pub entries: Vec<Deviation>,
}

impl Deviations {
    /// No deviations: the registry must conform fully (our own registries).
    pub fn none() -> Self {
        Self {
            registry: "strict",
            entries: Vec::new(),
        }
    }

    /// The entry for `check`, if listed.
    pub fn get(&self, check: &str) -> Option<&Deviation> {
        self.entries.iter().find(|d| d.check == check)
    }
}

const TAGS: &str = "distribution 2.8 ignores `n` and `last` on tags/list and lists tags in \
                    storage order, unsorted, without Link (tag pagination arrived in distribution 3)";

const RANGE_416_FRAMING: &str = "distribution 2.8 (Go 1.19's http.ServeContent) answers 416 with \
                                 the correct `Content-Range: bytes */len` but keeps the blob's \
                                 Content-Length on a short text body, then cuts the connection";

const REFERRERS: &str = "distribution 2.8 predates distribution-spec 1.1 and has no referrers \
                         API: GET /v2/<name>/referrers/<digest> is not routed (404)";

const UNROUTED: &str = "paths outside distribution 2.8's route patterns (uppercase names, \
                        references outside the tag grammar) get a plain-text `404 page not \
                        found`, no OCI error body";

/// CNCF distribution 2.8 as Debian packages it (`docker-registry`), the upstream our tests
/// start.
pub fn docker_registry_2_8() -> Deviations {
    Deviations {
        registry: "docker-registry 2.8",
        entries: vec![
            Deviation {
                check: "pull.name.invalid",
                reason: "names outside the grammar match none of distribution 2.8's routes: a \
                         plain-text `404 page not found`, no NAME_INVALID error body",
            },
            Deviation {
                check: "pull.blob.range.beyond-end",
                reason: RANGE_416_FRAMING,
            },
            Deviation {
                check: "pull.blob.range.far-beyond-end",
                reason: RANGE_416_FRAMING,
            },
            Deviation {
                check: "pull.blob.range.malformed",
                reason: RANGE_416_FRAMING,
            },
            Deviation {
                check: "pull.blob.range.unknown-unit",
                reason: "Go's http.ServeContent answers a Range with an unknown unit with 416 \
                         (RFC 9110 says to ignore it and send the whole blob), with the same \
                         broken Content-Length framing",
            },
            Deviation {
                check: "discovery.tags.list",
                reason: TAGS,
            },
            Deviation {
                check: "discovery.tags.n",
                reason: TAGS,
            },
            Deviation {
                check: "discovery.tags.n-last",
                reason: TAGS,
            },
            Deviation {
                check: "discovery.tags.last",
                reason: TAGS,
            },
            Deviation {
                check: "discovery.tags.n-zero",
                reason: TAGS,
            },
            Deviation {
                check: "discovery.tags.link-pagination",
                reason: TAGS,
            },
            Deviation {
                check: "push.blob.chunk-out-of-order",
                reason: "distribution 2.8 ignores Content-Range on PATCH (a TODO in its upload \
                         handler) and appends the chunk, answering 202 instead of 416",
            },
            Deviation {
                check: "discovery.referrers.list",
                reason: REFERRERS,
            },
            Deviation {
                check: "discovery.referrers.filter",
                reason: REFERRERS,
            },
            Deviation {
                check: "discovery.referrers.empty",
                reason: REFERRERS,
            },
            Deviation {
                check: "discovery.referrers.invalid-digest",
                reason: REFERRERS,
            },
            Deviation {
                check: "hostile.path-traversal",
                reason: "distribution 2.8 decodes `%2F` and looks the name up (inside its storage \
                         root): 404 MANIFEST_UNKNOWN instead of NAME_INVALID",
            },
            Deviation {
                check: "hostile.name.too-long",
                reason: "distribution 2.8 answers a repository name over its path limit with 500 \
                         (a filesystem error surfaced), not NAME_INVALID",
            },
            Deviation {
                check: "hostile.name.uppercase",
                reason: UNROUTED,
            },
            Deviation {
                check: "hostile.reference.malformed",
                reason: UNROUTED,
            },
            Deviation {
                check: "hostile.reference.too-long",
                reason: UNROUTED,
            },
            Deviation {
                check: "hostile.method.unserved",
                reason: "distribution 2.8's base route answers every method, TRACE included, with \
                         200",
            },
            Deviation {
                check: "push.manifest.subject-header",
                reason: "without the referrers API, distribution 2.8 does not process `subject` \
                         and sends no OCI-Subject header (clients fall back to the tag schema)",
            },
        ],
    }
}

const BLOB_DELETE: &str = "the replica's store is one content-addressed set shared by every \
                           repository: a blob is removed only by garbage collection, which \
                           checks that no manifest and no client uses it; DELETE of a blob \
                           answers 405 UNSUPPORTED, as the spec allows a registry that does not \
                           delete";

/// [`docker_registry_2_8`] behind token auth: a name the token does not cover is refused with
/// 401 UNAUTHORIZED before distribution looks at it, so its name deviations do not show.
pub fn docker_registry_2_8_with_token_auth() -> Deviations {
    let mut list = docker_registry_2_8();
    list.registry = "docker-registry 2.8 (token auth)";
    list.entries
        .retain(|d| !matches!(d.check, "hostile.path-traversal" | "hostile.name.too-long"));
    list
}

/// The cache replica's write listener (the publish endpoint).
pub fn d8_storage_write() -> Deviations {
    Deviations {
        registry: "d8 registry storage (write listener)",
        entries: vec![
            Deviation {
                check: "management.delete.blob",
                reason: BLOB_DELETE,
            },
            Deviation {
                check: "management.delete.blob-unknown",
                reason: BLOB_DELETE,
            },
        ],
    }
}

/// The cache replica's read listener (pull and discovery).
pub fn d8_storage_read() -> Deviations {
    Deviations {
        registry: "d8 registry storage (read listener)",
        entries: vec![],
    }
}

/// The agent in front of the cache (pull and discovery, as containerd uses it).
pub fn d8_agent() -> Deviations {
    Deviations {
        registry: "d8 registry agent",
        entries: vec![],
    }
}
