//! Our own conformance suite for the OCI distribution-spec, written from the specification
//! text (distribution-spec 1.1): a **pull** profile (ping, manifests by tag and digest with
//! `Accept` negotiation across OCI and Docker media types, blobs, every `Range` case, tag lists
//! with `n`/`last` and `Link`, referrers, error bodies), a **push** profile (POST+PUT, single
//! POST, chunked PATCH, upload status, cross-repository mount, manifest PUT, deletes), and
//! **hostile** requests of our own (traversal, bad names, digests and references, huge headers,
//! unserved methods) that must get a 4xx, never a 5xx, a hang or a dead endpoint.
//!
//! It runs against any registry URL and returns one [`CheckResult`] per check. Where a known
//! registry deviates from the spec, the deviation is listed by name with its reason in a
//! [`Deviations`] allow-list ([`deviations::docker_registry_2_8`]) and reported as
//! [`Outcome::KnownDeviation`] — the check itself is never loosened. A listed deviation that
//! no longer happens is reported as [`Outcome::StaleDeviation`], so the list stays honest.
//!
//! It talks through [`registry_client`] (auth, TLS) but uses raw requests wherever a check needs
//! to send something a well-behaved client would not. It must not depend on the agent or the
//! storage crates: it is what they are checked with.

mod checks;
pub mod deviations;
mod fixtures;

use std::fmt;

pub use deviations::{Deviation, Deviations};
use registry_client::{Client, Config, Endpoint, Remote};

/// Which part of the spec a check belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Profile {
    /// Reading: every registry must pass it.
    Pull,
    /// Writing: uploads, mounts, manifest PUT.
    Push,
    /// Tag listing and referrers.
    Discovery,
    /// Deletes.
    Management,
    /// Requests a well-behaved client never sends: 4xx, never a 5xx, a hang or a dead endpoint.
    Hostile,
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Pull => "pull",
            Self::Push => "push",
            Self::Discovery => "discovery",
            Self::Management => "management",
            Self::Hostile => "hostile",
        })
    }
}

/// How one check went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The registry did what the spec says.
    Pass,
    /// It did not.
    Fail {
        /// What was observed.
        observed: String,
    },
    /// It did not, and the deviation is known and allowed for this registry.
    KnownDeviation {
        /// Why it is allowed.
        reason: &'static str,
        /// What was observed.
        observed: String,
    },
    /// A listed deviation did not happen: the allow-list is out of date.
    StaleDeviation {
        /// The reason the list gives.
        reason: &'static str,
    },
}

impl Outcome {
    /// Whether this outcome should fail a CI run (`Fail` or `StaleDeviation`).
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Fail { .. } | Self::StaleDeviation { .. })
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// Stable identifier, e.g. `pull.blob.range.suffix`.
    pub id: &'static str,
    /// The profile.
    pub profile: Profile,
    /// What the spec requires, in a sentence.
    pub requirement: &'static str,
    /// How it went.
    pub outcome: Outcome,
}

/// Every check's result, in the order they ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The results.
    pub results: Vec<CheckResult>,
}

impl Report {
    /// The results that fail a run.
    pub fn failures(&self) -> Vec<&CheckResult> {
        self.results
            .iter()
            .filter(|r| r.outcome.is_failure())
            .collect()
    }

    /// The result of one check.
    pub fn get(&self, id: &str) -> Option<&CheckResult> {
        self.results.iter().find(|r| r.id == id)
    }

    /// Counts: (pass, fail, known deviations, stale deviations).
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let mut c = (0, 0, 0, 0);
        for r in &self.results {
            match r.outcome {
                Outcome::Pass => c.0 += 1,
                Outcome::Fail { .. } => c.1 += 1,
                Outcome::KnownDeviation { .. } => c.2 += 1,
                Outcome::StaleDeviation { .. } => c.3 += 1,
            }
        }
        c
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.results {
            let (mark, note) = match &r.outcome {
                Outcome::Pass => ("pass", String::new()),
                Outcome::Fail { observed } => ("FAIL", format!(" — {observed}")),
                Outcome::KnownDeviation { reason, observed } => (
                    "dev ",
                    format!(" — known deviation: {reason} (observed: {observed})"),
                ),
                Outcome::StaleDeviation { reason } => (
                    "STALE",
                    format!(" — listed as a deviation ({reason}) but the registry now conforms"),
                ),
            };
            writeln!(
                f,
                "{mark:5} {:10} {:45} {}{note}",
                r.profile.to_string(),
                r.id,
                r.requirement
            )?;
        }
        let (pass, fail, dev, stale) = self.counts();
        write!(
            f,
            "{pass} passed, {fail} failed, {dev} known deviations, {stale} stale deviations"
        )
    }
}

/// What to run against.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The registry (`http://host:port` or `https://…`), with credentials and CA as needed.
    pub endpoint: Endpoint,
    /// The first test repository (content is pushed here).
    pub repository: String,
    /// The second test repository (cross-repository mounts).
    pub other_repository: String,
    /// The registry's allowed deviations.
    pub deviations: Deviations,
    /// Run the push and management profiles (the pull and discovery profiles need their content
    /// pushed either way).
    pub push: bool,
    /// Client settings (timeouts).
    pub client: Config,
    /// Where the test content is pushed when the registry under test does not take pushes
    /// itself (a cache's read listener, the agent): the registry it serves from, under the same
    /// repository names. `None`: pushed to `endpoint`.
    pub seed: Option<Endpoint>,
}

impl Settings {
    /// Settings for `endpoint` with fresh repository names under `conformance/`, no deviations.
    pub fn new(endpoint: Endpoint) -> Self {
        let run = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        Self {
            endpoint,
            repository: format!("conformance/run-{run:x}/one"),
            other_repository: format!("conformance/run-{run:x}/two"),
            deviations: Deviations::none(),
            push: true,
            client: Config::default(),
            seed: None,
        }
    }

    /// With the test repositories under `prefix` (e.g. `system/deckhouse`, the platform's
    /// prefix that the agent routes to the cache).
    pub fn under(mut self, prefix: &str) -> Self {
        let prefix = prefix.trim_matches('/');
        self.repository = format!("{prefix}/{}", self.repository);
        self.other_repository = format!("{prefix}/{}", self.other_repository);
        self
    }

    /// Only the pull and discovery profiles, the content pushed through `seed`.
    pub fn read_only(mut self, seed: Endpoint) -> Self {
        self.push = false;
        self.seed = Some(seed);
        self
    }

    /// With this registry's deviations.
    pub fn deviations(mut self, deviations: Deviations) -> Self {
        self.deviations = deviations;
        self
    }
}

/// Why the suite could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// The endpoint is unusable.
    #[error("cannot use the registry endpoint: {0}")]
    Client(#[source] registry_client::Error),
    /// Pushing the content the pull profile reads failed.
    #[error("cannot push the test content: {0}")]
    Setup(String),
}

/// The shared state every check sees.
pub(crate) struct Ctx {
    pub(crate) remote: Remote,
    pub(crate) repo: String,
    pub(crate) other: String,
    pub(crate) fixtures: fixtures::Fixtures,
}

/// Records results, applying the deviation list.
pub(crate) struct Recorder<'a> {
    deviations: &'a Deviations,
    results: Vec<CheckResult>,
}

impl Recorder<'_> {
    pub(crate) fn record(
        &mut self,
        id: &'static str,
        profile: Profile,
        requirement: &'static str,
        result: Result<(), String>,
    ) {
        let listed = self.deviations.get(id);
        let outcome = match (result, listed) {
            (Ok(()), None) => Outcome::Pass,
            (Ok(()), Some(d)) => Outcome::StaleDeviation { reason: d.reason },
            (Err(observed), None) => Outcome::Fail { observed },
            (Err(observed), Some(d)) => Outcome::KnownDeviation {
                reason: d.reason,
                observed,
            },
        };
        self.results.push(CheckResult {
            id,
            profile,
            requirement,
            outcome,
        });
    }
}

/// Runs the suite.
pub async fn run(settings: &Settings) -> Result<Report, SuiteError> {
    let client = Client::new(settings.client.clone());
    let remote = client
        .remote(settings.endpoint.clone())
        .map_err(SuiteError::Client)?;
    let fixtures = fixtures::Fixtures::new();
    let seed = match &settings.seed {
        Some(seed) => client.remote(seed.clone()).map_err(SuiteError::Client)?,
        None => remote.clone(),
    };
    fixtures
        .push(&seed, &settings.repository)
        .await
        .map_err(SuiteError::Setup)?;
    let ctx = Ctx {
        remote,
        repo: settings.repository.clone(),
        other: settings.other_repository.clone(),
        fixtures,
    };
    let mut rec = Recorder {
        deviations: &settings.deviations,
        results: Vec::new(),
    };
    checks::pull::run(&ctx, &mut rec).await;
    checks::discovery::run(&ctx, &mut rec).await;
    if settings.push {
        checks::push::run(&ctx, &mut rec).await;
        checks::management::run(&ctx, &mut rec).await;
    }
    checks::hostile::run(&ctx, &mut rec).await;
    Ok(Report {
        results: rec.results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deviations_never_loosen_a_check() {
        let list = Deviations {
            registry: "test",
            entries: vec![Deviation {
                check: "listed",
                reason: "known",
            }],
        };
        let mut rec = Recorder {
            deviations: &list,
            results: Vec::new(),
        };
        rec.record("listed", Profile::Pull, "r", Err("observed".into()));
        rec.record("listed", Profile::Pull, "r", Ok(()));
        rec.record("other", Profile::Pull, "r", Err("broken".into()));
        rec.record("other", Profile::Pull, "r", Ok(()));
        let outcomes: Vec<_> = rec.results.iter().map(|r| &r.outcome).collect();
        assert!(matches!(
            outcomes[0],
            Outcome::KnownDeviation {
                reason: "known",
                ..
            }
        ));
        assert!(matches!(outcomes[1], Outcome::StaleDeviation { .. }));
        assert!(matches!(outcomes[2], Outcome::Fail { .. }));
        assert_eq!(outcomes[3], &Outcome::Pass);
        let report = Report {
            results: rec.results,
        };
        assert_eq!(
            report.failures().len(),
            2,
            "failures and stale entries fail a run"
        );
        assert_eq!(report.counts(), (1, 1, 1, 1));
        assert!(report.to_string().contains("1 passed, 1 failed"));
    }

    #[test]
    fn every_listed_deviation_names_a_distinct_check() {
        let list = deviations::docker_registry_2_8();
        let mut ids: Vec<_> = list.entries.iter().map(|d| d.check).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), list.entries.len());
    }
}
