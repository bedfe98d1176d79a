//! The replica's sync loop (the syncer's part that needs the cluster): measure the own disk
//! against the expected set, publish the entry, campaign for the lease, and copy ahead of
//! time — the leader from the upstream while one is held, a follower from the leader's
//! reported address.

use std::collections::BTreeSet;
use std::time::Duration;

use api::registry::RegistryStorage;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use oci::{Digest, Repository};
use registry_plan::expected::{Entry, ExpectedSet};
use storage::replicate::{Progress, Replicator};
use storage::status::{Report, StoreReport};
use tokio::sync::watch;

use crate::KubeStatus;
use crate::election::{self, Election};

/// How a follower reaches the leader's read listener.
#[derive(Clone, Debug)]
pub struct LeaderAccess {
    /// `http` or `https`.
    pub scheme: registry_client::Scheme,
    /// CA verifying the leader's serving certificate.
    pub ca_pem: Option<String>,
    /// The account to pull with (the node or sync account).
    pub credentials: Option<registry_client::Credentials>,
}

/// Sync loop settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Election settings (node name, lease, timings).
    pub election: election::Config,
    /// This replica's read address as others reach it (`host:port`).
    pub address: String,
    /// The platform repository (`system/deckhouse`).
    pub repository: Repository,
    /// The expected set's root manifests (`--expected-root`), used unless the loop computes
    /// the set from the cluster ([`spawn_with_cluster_set`]).
    pub roots: Vec<Digest>,
    /// How the leader is reached.
    pub leader: LeaderAccess,
    /// Blobs copied at a time.
    pub parallelism: usize,
    /// How often the disk is measured and copying resumed.
    pub interval: Duration,
}

/// A running sync loop.
#[derive(Debug)]
pub struct Sync {
    election: Election,
    report: watch::Receiver<Report>,
    task: tokio::task::JoinHandle<()>,
}

impl Sync {
    /// Whether this replica leads.
    pub fn is_leader(&self) -> bool {
        self.election.is_leader()
    }

    /// The replica's latest entry.
    pub fn report(&self) -> Report {
        self.report.borrow().clone()
    }

    /// Stops at once without releasing the lease (as a crash would).
    pub fn abort(self) {
        self.task.abort();
        self.election.abort();
    }

    /// Stops copying and releases the lease.
    pub async fn shutdown(self) {
        self.task.abort();
        self.election.shutdown().await;
    }
}

fn expected(roots: &[Digest]) -> ExpectedSet {
    ExpectedSet {
        entries: roots
            .iter()
            .map(|d| Entry::Digest(d.to_string()))
            .collect::<BTreeSet<_>>(),
    }
}

/// The set a pass measures and copies.
#[derive(Clone, Debug, Default)]
struct Target {
    set: ExpectedSet,
    roots: Vec<Digest>,
    /// Roots in other repositories (module images).
    others: Vec<(Repository, Digest)>,
    /// Tags to keep pointing at what they name, once it is held.
    tags: Vec<(Repository, oci::Tag, Digest)>,
    deployed: Option<oci::Tag>,
}

/// Points every tag of the set at its manifest once the store holds it (a copy by digest leaves
/// no tag behind). Failures are logged: the next pass tries again.
fn record_tags(store: &storage::Store, tags: &[(Repository, oci::Tag, Digest)]) {
    for (repository, tag, digest) in tags {
        if store.tag(repository, tag).as_ref() == Some(digest)
            || !store.has_manifest(repository, digest)
        {
            continue;
        }
        if let Err(error) = store.set_tag(repository, tag, digest) {
            tracing::warn!(%repository, %tag, %error, "cannot record a tag of the expected set");
        }
    }
}

impl Target {
    /// Roots grouped by the repository they are copied into (the platform repository first).
    fn groups(&self, platform: &Repository) -> Vec<(Repository, Vec<Digest>)> {
        let mut groups = vec![(platform.clone(), self.roots.clone())];
        for (repository, digest) in &self.others {
            match groups.iter_mut().find(|(r, _)| r == repository) {
                Some((_, roots)) => roots.push(*digest),
                None => groups.push((repository.clone(), vec![*digest])),
            }
        }
        groups
    }
}

/// The expected set computed from the cluster (see [`crate::expected`]).
#[derive(Clone, Debug)]
pub struct ClusterSet {
    /// Where release images are read (the replica's own read listener).
    pub source: crate::expected::Source,
    /// How long a computed set is reused (the syncer: a minute).
    pub ttl: Duration,
}

impl ClusterSet {
    /// Reading through `source`, recomputed every minute.
    pub fn new(source: crate::expected::Source) -> Self {
        Self {
            source,
            ttl: Duration::from_secs(60),
        }
    }
}

/// Where a pass reads the release images that define the set. Replication is
/// leader→followers: only the leader may fill from the upstream, so a follower reads its own
/// store and, for what it lacks, the leader.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SetFrom {
    /// The own read listener (the store, filled from the upstream on a miss).
    Own,
    /// The own store, then the leader's read listener at this address.
    Leader(String),
    /// The own store alone (no leader known yet: what it lacks waits for one).
    Store,
}

/// `holder`: the live lease holder and the address it reports, if any.
fn set_from(is_leader: bool, node: &str, holder: Option<(&str, Option<&str>)>) -> SetFrom {
    match holder {
        _ if is_leader => SetFrom::Own,
        Some((holder, _)) if holder == node => SetFrom::Own,
        Some((_, Some(address))) => SetFrom::Leader(address.to_owned()),
        _ => SetFrom::Store,
    }
}

/// The source a pass reads the set from.
async fn set_source(
    client: &kube::Client,
    config: &Config,
    registry: &storage::Registry,
    cluster: &ClusterSet,
    is_leader: bool,
) -> (SetFrom, crate::expected::Source) {
    let holder = if is_leader {
        None
    } else {
        match holder(client, config).await {
            Ok(holder) => holder,
            Err(e) => {
                tracing::warn!(error = %e, "cannot find the leader");
                None
            }
        }
    };
    let from = set_from(
        is_leader,
        &config.election.lease.identity,
        holder
            .as_ref()
            .map(|h| (h.node.as_str(), h.address.as_deref())),
    );
    let store = registry.store().clone();
    let repository = cluster.source.repository.clone();
    let source = match &from {
        SetFrom::Own => cluster.source.clone(),
        SetFrom::Leader(address) => match leader_remote(&config.leader, address) {
            Ok(remote) => crate::expected::Source::registry(remote, repository).store_first(store),
            Err(e) => {
                tracing::warn!(%address, error = %e, "the leader's address is unusable");
                crate::expected::Source::store(store, repository)
            }
        },
        SetFrom::Store => crate::expected::Source::store(store, repository),
    };
    (from, source)
}

/// The set of this pass: fixed roots, or computed from the cluster (cached for a minute
/// while the deployed and previous versions stay the same). `Ok(None)`: a follower that knows
/// no leader lacks part of the release images; it waits for one rather than filling.
async fn target(
    client: &kube::Client,
    config: &Config,
    registry: &storage::Registry,
    cluster: Option<&ClusterSet>,
    is_leader: bool,
    cache: &mut Option<(tokio::time::Instant, crate::expected::Computed)>,
) -> Result<Option<Target>, crate::expected::ExpectedError> {
    let Some(cluster) = cluster else {
        return Ok(Some(Target {
            set: expected(&config.roots),
            roots: config.roots.clone(),
            others: Vec::new(),
            tags: Vec::new(),
            deployed: None,
        }));
    };
    let fresh = cache
        .as_ref()
        .is_some_and(|(at, _)| at.elapsed() < cluster.ttl);
    if !fresh {
        let (from, source) = set_source(client, config, registry, cluster, is_leader).await;
        match crate::expected::compute(client, &source).await {
            Ok(computed) => *cache = Some((tokio::time::Instant::now(), computed)),
            Err(e) if from == SetFrom::Store => {
                tracing::debug!(error = %e, "the expected set waits for a leader to read the release images from");
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
    }
    let Some((_, computed)) = cache.as_ref() else {
        return Ok(Some(Target::default()));
    };
    Ok(Some(Target {
        set: computed.set.clone(),
        roots: computed.roots.clone(),
        others: computed.modules.clone(),
        tags: computed.tags.clone(),
        deployed: oci::Tag::parse(&computed.deployed).ok(),
    }))
}

/// Measures the own disk: store usage and completeness against the set.
fn measure(registry: &storage::Registry, config: &Config, target: &Target, report: &mut Report) {
    let store = registry.store();
    match store.usage() {
        Ok(usage) => report.store = Some(StoreReport::of(&usage)),
        Err(error) => report.error = Some(format!("measuring the store: {error}")),
    }
    let set = &target.set;
    let completeness = store.completeness(&config.repository, set, target.deployed.as_ref());
    report.full = completeness.full;
    report.verified_digests = completeness.held as u64;
    report.declared_digests = completeness.declared as u64;
    report.total_digests = store.blobs().map(|b| b.len() as u64).unwrap_or(0);
    report.verified_set = (!set.is_empty()).then(|| set.fingerprint());
}

/// Copies every root, going on past one that fails (an image missing at the source must
/// not hold back the rest of the set); returns the first error.
trait CopyEach {
    async fn copy_each(&self, roots: &[Digest]) -> Result<(), storage::Error>;
}

impl CopyEach for Replicator<'_> {
    async fn copy_each(&self, roots: &[Digest]) -> Result<(), storage::Error> {
        let mut first = None;
        for root in roots {
            if let Err(e) = self.copy_all(std::slice::from_ref(root)).await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// The live lease holder and what it reports.
struct Holder {
    node: String,
    /// Its read address as others reach it.
    address: Option<String>,
    /// Whether it reports full, without an error.
    full: bool,
}

async fn holder(client: &kube::Client, config: &Config) -> Result<Option<Holder>, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &config.election.namespace);
    let Some(lease) = leases.get_opt(&config.election.lease.name).await? else {
        return Ok(None);
    };
    let Some(node) = election::live_holder(&lease) else {
        return Ok(None);
    };
    let storages: Api<RegistryStorage> = Api::all(client.clone());
    let entry = storages
        .get_opt(api::registry::SINGLETON)
        .await?
        .and_then(|s| s.status)
        .and_then(|s| s.replicas.into_iter().find(|r| r.node == node));
    Ok(Some(Holder {
        address: entry.as_ref().and_then(|r| r.address.clone()),
        full: entry.is_some_and(|r| r.full == Some(true) && r.error.is_none()),
        node,
    }))
}

/// The live lease holder and its reported address, once it reports full: copying from a
/// leader still filling would make its read listener fetch the same blobs from the upstream
/// a second time (pull-through next to its own fill).
async fn leader_address(
    client: &kube::Client,
    config: &Config,
) -> Result<Option<(String, String)>, kube::Error> {
    Ok(holder(client, config)
        .await?
        .filter(|h| h.full)
        .and_then(|h| Some((h.node, h.address?))))
}

/// The upstream repository `repository` maps to (below the upstream's own path prefix).
fn upstream_repository(upstream: &storage::Upstream, repository: &Repository) -> String {
    let prefix = upstream.prefix.trim_matches('/');
    let name = repository.as_str();
    if prefix.is_empty() {
        return name.to_owned();
    }
    match name.strip_prefix(prefix) {
        Some("") => String::new(),
        Some(rest) => rest.trim_start_matches('/').to_owned(),
        None => name.to_owned(),
    }
}

fn leader_remote(
    access: &LeaderAccess,
    address: &str,
) -> Result<registry_client::Remote, registry_client::Error> {
    let mut endpoint = registry_client::Endpoint::new(access.scheme, address);
    if let Some(ca) = &access.ca_pem {
        endpoint = endpoint.ca_pem(ca);
    }
    if let Some(credentials) = &access.credentials {
        endpoint = endpoint.credentials(credentials.clone());
    }
    registry_client::Client::new(registry_client::Config::default()).remote(endpoint)
}

/// Starts the loop over `registry` (the replica's store and upstream, as `storage::run`
/// started them), with the expected set given by `config.roots`.
pub fn spawn(
    client: kube::Client,
    registry: storage::Registry,
    upstream: Option<storage::Upstream>,
    config: Config,
) -> Result<Sync, leader::Error> {
    spawn_with_cluster_set(client, registry, upstream, config, None)
}

/// Starts the loop; with `cluster`, the expected set is computed from the cluster's
/// DeckhouseReleases and the release images read through that source (recomputed every
/// minute) instead of `config.roots`, and `full` also needs the deployed tag resolvable.
pub fn spawn_with_cluster_set(
    client: kube::Client,
    registry: storage::Registry,
    upstream: Option<storage::Upstream>,
    config: Config,
    cluster: Option<ClusterSet>,
) -> Result<Sync, leader::Error> {
    let node = config.election.lease.identity.clone();
    let mut first = Report::new(&node, &config.address);
    let initial = Target {
        set: expected(&config.roots),
        roots: config.roots.clone(),
        others: Vec::new(),
        tags: Vec::new(),
        deployed: None,
    };
    measure(&registry, &config, &initial, &mut first);
    if cluster.is_some() {
        // Nothing is known to be full before the cluster's set is computed.
        first.full = false;
        first.verified_set = None;
    }
    let (report_tx, report_rx) = watch::channel(first);
    let election = election::spawn(
        client.clone(),
        KubeStatus::new(client.clone()),
        report_rx.clone(),
        config.election.clone(),
    )?;
    let leading = election.subscribe();
    let task = tokio::spawn(async move {
        let mut source: Option<String> = None;
        let mut cache = None;
        loop {
            let mut report = Report::new(&node, &config.address);
            let is_leader = *leading.borrow();
            let computed = target(
                &client,
                &config,
                &registry,
                cluster.as_ref(),
                is_leader,
                &mut cache,
            )
            .await;
            let target = match computed {
                Ok(Some(t)) => t,
                Ok(None) => {
                    measure(&registry, &config, &Target::default(), &mut report);
                    report.full = false;
                    report.verified_set = None;
                    let _ = report_tx.send(report);
                    tokio::time::sleep(config.interval).await;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(node = %node, error = %e, "the expected image set cannot be computed");
                    measure(&registry, &config, &Target::default(), &mut report);
                    report.full = false;
                    report.verified_set = None;
                    report.error = Some(format!("the expected image set: {e}"));
                    let _ = report_tx.send(report);
                    tokio::time::sleep(config.interval).await;
                    continue;
                }
            };
            record_tags(registry.store(), &target.tags);
            measure(&registry, &config, &target, &mut report);
            if is_leader {
                source = None;
            }
            let mut error = None;
            if !report.full && !target.roots.is_empty() {
                let progress = Progress::default();
                if is_leader {
                    if let Some(upstream) = &upstream {
                        let mut result = Ok(());
                        for (repository, roots) in target.groups(&config.repository) {
                            let source_repository = upstream_repository(upstream, &repository);
                            let copied = Replicator::new(
                                registry.store(),
                                &upstream.remote,
                                &source_repository,
                                &repository,
                                config.parallelism,
                                &progress,
                            )
                            .through(&registry)
                            .copy_each(&roots)
                            .await;
                            result = result.and(copied);
                        }
                        if let Err(e) = result {
                            error = Some(format!("fill from the upstream: {e}"));
                        }
                    }
                } else {
                    match leader_address(&client, &config).await {
                        Ok(Some((leader, address))) if leader != node => {
                            source = Some(leader.clone());
                            let result = match leader_remote(&config.leader, &address) {
                                Ok(remote) => {
                                    let mut result = Ok(());
                                    for (repository, roots) in target.groups(&config.repository) {
                                        let copied = Replicator::new(
                                            registry.store(),
                                            &remote,
                                            repository.as_str(),
                                            &repository,
                                            config.parallelism,
                                            &progress,
                                        )
                                        .copy_each(&roots)
                                        .await;
                                        result = result.and(copied);
                                    }
                                    result
                                }
                                Err(e) => Err(storage::Error::Upstream(e)),
                            };
                            if let Err(e) = result {
                                error = Some(format!("replication from {leader}: {e}"));
                            }
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(node = %node, error = %e, "cannot find the leader")
                        }
                    }
                }
                record_tags(registry.store(), &target.tags);
                measure(&registry, &config, &target, &mut report);
            }
            if let Some(error) = &error {
                tracing::warn!(node = %node, %error, "copy ahead of time failed; retrying");
            }
            report.error = error;
            report.source.clone_from(&source);
            let _ = report_tx.send(report);
            tokio::time::sleep(config.interval).await;
        }
    });
    Ok(Sync {
        election,
        report: report_rx,
        task,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_leader_reads_the_set_through_its_own_filling_listener() {
        let leader = SetFrom::Leader("10.0.0.1:5001".into());
        for (is_leader, holder, from) in [
            (true, None, SetFrom::Own),
            (
                true,
                Some(("master-1", Some("10.0.0.1:5001"))),
                SetFrom::Own,
            ),
            // The lease names us before the elector says so.
            (
                false,
                Some(("master-0", Some("10.0.0.0:5001"))),
                SetFrom::Own,
            ),
            (false, Some(("master-1", Some("10.0.0.1:5001"))), leader),
            // A leader that reported no address yet, or none at all: the own store alone.
            (false, Some(("master-1", None)), SetFrom::Store),
            (false, None, SetFrom::Store),
        ] {
            assert_eq!(
                set_from(is_leader, "master-0", holder),
                from,
                "{is_leader} {holder:?}"
            );
        }
    }

    #[test]
    fn tags_of_the_set_are_kept_once_their_manifest_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let store = storage::Store::open(
            dir.path(),
            storage::Limits {
                budget: None,
                reserve: Some(0),
            },
        )
        .unwrap();
        let modules = Repository::parse("system/deckhouse/modules").unwrap();
        let config = store.put_bytes(b"{}", None).unwrap();
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config}","size":2}},"layers":[]}}"#
        );
        // Copied by digest, as replication does: no tag.
        let held = store
            .put_manifest(
                &modules,
                manifest.as_bytes(),
                "application/vnd.oci.image.manifest.v1+json",
                None,
                None,
            )
            .unwrap();
        let echo = oci::Tag::parse("echo").unwrap();
        let absent = oci::Tag::parse("hello").unwrap();
        let missing = Digest::sha256(b"not held");
        assert_eq!(store.tag(&modules, &echo), None);

        let tags = [
            (modules.clone(), echo.clone(), held),
            (modules.clone(), absent.clone(), missing),
        ];
        record_tags(&store, &tags);
        assert_eq!(store.tag(&modules, &echo), Some(held));
        assert_eq!(
            store.tag(&modules, &absent),
            None,
            "nothing to point at yet"
        );

        // A moved tag follows the set.
        let other = store
            .put_manifest(
                &modules,
                manifest
                    .replace("\"layers\":[]", "\"layers\":[],\"annotations\":{}")
                    .as_bytes(),
                "application/vnd.oci.image.manifest.v1+json",
                None,
                None,
            )
            .unwrap();
        record_tags(&store, &[(modules.clone(), echo.clone(), other)]);
        assert_eq!(store.tag(&modules, &echo), Some(other));
    }
}
