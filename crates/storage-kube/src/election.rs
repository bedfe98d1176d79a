//! Leader election of the cache replicas on Lease `registry-storage` with the `MayLead` rules.
//!
//! Each round the replica publishes its entry (with its current role), reads every replica's
//! entry and the lease (the first round only publishes, so replicas starting together see each
//! other before anyone campaigns), and asks [`registry_plan::election::may_lead`] whether it may lead.
//! Only then does it try to acquire or renew the lease (through [`leader::LeaderElector`]); a
//! leader that may no longer lead steps aside by releasing the lease. When the status or lease
//! cannot be read, the current arrangement is kept.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use registry_plan::election::{Observed, may_lead};
use storage::status::{Report, Role, StatusSink};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::KubeStatus;

/// Election settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Lease name, timings and identity (the node name).
    pub lease: leader::Config,
    /// Namespace of the lease.
    pub namespace: String,
    /// How often eligibility is re-checked (the entry is published as often).
    pub recheck: Duration,
}

impl Config {
    /// Deckhouse's settings: Lease `d8-system/registry-storage`, 30 s / 20 s / 5 s, eligibility
    /// re-checked every 15 s. The rules are the same with or without an upstream.
    pub fn new(node: &str) -> Self {
        Self {
            lease: leader::Config {
                lease_duration: Duration::from_secs(30),
                renew_deadline: Duration::from_secs(20),
                retry_period: Duration::from_secs(5),
                ..leader::Config::new("registry-storage", node)
            },
            namespace: api::registry::NAMESPACE.to_owned(),
            recheck: Duration::from_secs(15),
        }
    }
}

/// The running election: whether this replica leads now.
#[derive(Debug)]
pub struct Election {
    leading: watch::Receiver<bool>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Election {
    /// Whether this replica leads now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// A receiver following leadership.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Stops at once *without* releasing the lease, as a crashed process would: the others
    /// wait for the lease to expire.
    pub fn abort(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    /// Stops campaigning and releases the lease if held.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// The live holder of `lease`: named, and renewed within its duration (wall clock, as the
/// holder wrote it; a holder that stopped renewing is not an incumbent).
pub(crate) fn live_holder(lease: &Lease) -> Option<String> {
    let spec = lease.spec.as_ref()?;
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref()?.0;
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(0));
    let expires = renewed
        .checked_add(jiff::SignedDuration::from_secs(duration))
        .ok()?;
    (expires > jiff::Timestamp::now()).then_some(holder)
}

/// Starts campaigning: `report` is the replica's current entry (its role is set here).
pub fn spawn(
    client: kube::Client,
    status: KubeStatus,
    report: watch::Receiver<Report>,
    config: Config,
) -> Result<Election, leader::Error> {
    let leases: Api<Lease> = Api::namespaced(client, &config.namespace);
    let mut elector = leader::LeaderElector::new(leases.clone(), config.lease.clone())?;
    let (leading_tx, leading_rx) = watch::channel(false);
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel();
    let node = config.lease.identity.clone();
    let task = tokio::spawn(async move {
        let mut eligible = false;
        let mut published = false;
        let mut last_check: Option<Instant> = None;
        let mut last_renew: Option<Instant> = None;
        loop {
            let leading = *leading_tx.borrow();
            if last_check.is_none_or(|t| t.elapsed() >= config.recheck) {
                let mut entry = report.borrow().clone();
                entry.role = Some(if leading {
                    Role::Leader
                } else {
                    Role::Follower
                });
                match check(&status, &leases, &entry, &config).await {
                    // The first round only publishes: replicas starting together then see
                    // each other's entries before anyone campaigns.
                    Ok(_) if last_check.is_none() && !published => {
                        published = true;
                        last_check = Some(Instant::now());
                    }
                    Ok(may) => {
                        if may != eligible {
                            tracing::info!(node = %node, eligible = may, "leader eligibility changed");
                        }
                        eligible = may;
                        last_check = Some(Instant::now());
                    }
                    Err(error) => {
                        tracing::warn!(node = %node, %error, "cannot re-check leader eligibility; keeping the current arrangement");
                    }
                }
            }
            let now_leading = if eligible {
                let attempt =
                    tokio::time::timeout(config.lease.retry_period, elector.try_acquire_or_renew())
                        .await;
                let held = matches!(attempt, Ok(Ok(true)));
                if let Ok(Err(error)) = &attempt {
                    tracing::warn!(node = %node, %error, "lease attempt failed");
                }
                if held {
                    last_renew = Some(Instant::now());
                }
                held || (leading
                    && last_renew.is_some_and(|t| t.elapsed() < config.lease.renew_deadline))
            } else {
                if leading {
                    tracing::info!(node = %node, "stepping aside: another replica may lead");
                    if let Err(error) = elector.release().await {
                        tracing::warn!(node = %node, %error, "could not release the lease");
                    }
                }
                false
            };
            if now_leading != leading {
                tracing::info!(node = %node, leading = now_leading, "storage leadership changed");
                let _ = leading_tx.send(now_leading);
                // Publish the new role at once.
                last_check = None;
            }
            tokio::select! {
                _ = &mut stop_rx => break,
                () = tokio::time::sleep(config.lease.retry_period) => {}
            }
        }
        let _ = leading_tx.send(false);
        let _ = tokio::time::timeout(config.lease.retry_period, elector.release()).await;
    });
    Ok(Election {
        leading: leading_rx,
        stop: Some(stop_tx),
        task: Some(task),
    })
}

/// Publishes `entry`, reads everyone's and the lease, and applies `MayLead`.
async fn check(
    status: &KubeStatus,
    leases: &Api<Lease>,
    entry: &Report,
    config: &Config,
) -> Result<bool, crate::Error> {
    let reports = status.publish(entry).await?;
    let lease = leases
        .get_opt(&config.lease.name)
        .await
        .map_err(|source| crate::Error::Kube {
            name: format!("Lease {}", config.lease.name),
            source,
        })?;
    let incumbent = lease.as_ref().and_then(live_holder);
    let current_set = entry.verified_set.as_deref();
    let observed = Observed {
        incumbent: incumbent.as_deref(),
        reports: &reports,
        current_set,
    };
    Ok(may_lead(&entry.node, &observed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: Option<&str>, renewed_secs_ago: i64, duration: i32) -> Lease {
        let renewed = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(renewed_secs_ago);
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: Some(MicroTime(renewed)),
                lease_duration_seconds: Some(duration),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn only_a_renewing_holder_is_an_incumbent() {
        assert_eq!(live_holder(&lease(Some("a"), 5, 30)).as_deref(), Some("a"));
        assert_eq!(live_holder(&lease(Some("a"), 31, 30)), None);
        assert_eq!(live_holder(&lease(None, 0, 30)), None);
        assert_eq!(live_holder(&lease(Some(""), 0, 30)), None);
        assert_eq!(live_holder(&Lease::default()), None);
    }

    #[test]
    fn deckhouse_timings() {
        let c = Config::new("m-0");
        assert_eq!(c.lease.name, "registry-storage");
        assert_eq!(c.lease.identity, "m-0");
        assert_eq!(
            (
                c.lease.lease_duration,
                c.lease.renew_deadline,
                c.lease.retry_period
            ),
            (
                Duration::from_secs(30),
                Duration::from_secs(20),
                Duration::from_secs(5)
            )
        );
        assert_eq!(c.namespace, "d8-system");
    }
}
