//! Lease-based leader election on kube-rs `Api<Lease>` (`coordination.k8s.io/v1`).
//!
//! Role: let one replica of a component act at a time, as client-go's leaderelection does:
//! get-or-create the Lease, renew it while holding it (`renewTime`), take it over only after
//! it has not changed for `leaseDurationSeconds` as observed on the *local* clock (so clock
//! skew between machines does not matter), every write guarded by `resourceVersion`, and
//! release it on shutdown so a successor need not wait for expiry. A holder that cannot renew
//! within `renew_deadline` (shorter than the lease duration) stops considering itself leader
//! before anyone else may take over.
//!
//! Depends on kube and k8s-openapi only; it must not depend on any server implementation.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

/// Errors of the elector.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a request (other than a lost race).
    #[error("lease {name}: {source}")]
    Kube {
        /// The lease.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The configuration cannot be safe.
    #[error("invalid leader election config: {0}")]
    Config(&'static str),
}

/// Election parameters (client-go's defaults: 15 s / 10 s / 2 s).
#[derive(Debug, Clone)]
pub struct Config {
    /// Lease name, e.g. `deckhouse-leader-election`.
    pub name: String,
    /// Who we are (the pod or host name); must be unique among candidates.
    pub identity: String,
    /// How long a lease stays valid without renewal.
    pub lease_duration: Duration,
    /// A holder that has not renewed for this long steps down (< `lease_duration`).
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
}

impl Config {
    /// Client-go's default timings for lease `name` and candidate `identity`.
    pub fn new(name: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    fn check(&self) -> Result<(), Error> {
        if self.renew_deadline >= self.lease_duration {
            return Err(Error::Config(
                "renew_deadline must be shorter than lease_duration",
            ));
        }
        if self.retry_period >= self.renew_deadline {
            return Err(Error::Config(
                "retry_period must be shorter than renew_deadline",
            ));
        }
        if self.identity.is_empty() || self.name.is_empty() {
            return Err(Error::Config("name and identity must not be empty"));
        }
        Ok(())
    }
}

/// One candidate.
#[derive(Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    cfg: Config,
    /// The last lease record seen and when (local clock) it was first seen.
    observed: Option<(LeaseSpec, Instant)>,
}

fn now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

fn secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

impl LeaderElector {
    /// A candidate for the lease in `api`'s namespace.
    pub fn new(api: Api<Lease>, cfg: Config) -> Result<Self, Error> {
        cfg.check()?;
        Ok(Self {
            api,
            cfg,
            observed: None,
        })
    }

    fn err(&self, source: kube::Error) -> Error {
        Error::Kube {
            name: self.cfg.name.clone(),
            source,
        }
    }

    /// One attempt to acquire or renew; `Ok(true)` when we hold the lease afterwards.
    /// Losing a race (409) is `Ok(false)`, not an error.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, Error> {
        let me = self.cfg.identity.clone();
        let lease = match self
            .api
            .get_opt(&self.cfg.name)
            .await
            .map_err(|e| self.err(e))?
        {
            Some(l) => l,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.cfg.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(me),
                        lease_duration_seconds: Some(secs(self.cfg.lease_duration)),
                        acquire_time: Some(now()),
                        renew_time: Some(now()),
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    Err(e) => Err(self.err(e)),
                };
            }
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        if self.observed.as_ref().is_none_or(|(seen, _)| *seen != spec) {
            self.observed = Some((spec.clone(), Instant::now()));
        }
        let mut next = lease.clone();
        let mut new_spec = spec.clone();
        if holder.as_deref() == Some(me.as_str()) {
            new_spec.renew_time = Some(now());
            new_spec.lease_duration_seconds = Some(secs(self.cfg.lease_duration));
        } else {
            let duration = spec
                .lease_duration_seconds
                .map(|s| Duration::from_secs(u64::try_from(s.max(0)).unwrap_or(0)))
                .unwrap_or(self.cfg.lease_duration);
            let seen_at = self
                .observed
                .as_ref()
                .map(|(_, at)| *at)
                .unwrap_or_else(Instant::now);
            let expired = holder.is_none() || seen_at + duration <= Instant::now();
            if !expired {
                return Ok(false);
            }
            new_spec.holder_identity = Some(me);
            new_spec.acquire_time = Some(now());
            new_spec.renew_time = Some(now());
            new_spec.lease_duration_seconds = Some(secs(self.cfg.lease_duration));
            new_spec.lease_transitions =
                Some(spec.lease_transitions.unwrap_or(0) + i32::from(holder.is_some()));
        }
        next.spec = Some(new_spec);
        // `replace` carries the resourceVersion we read: a concurrent writer makes this a 409.
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &next)
            .await
        {
            Ok(l) => {
                self.observed = l.spec.map(|s| (s, Instant::now()));
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(self.err(e)),
        }
    }

    /// Gives the lease up if we hold it, so a successor can take it at once.
    pub async fn release(&mut self) -> Result<(), Error> {
        let Some(mut lease) = self
            .api
            .get_opt(&self.cfg.name)
            .await
            .map_err(|e| self.err(e))?
        else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now());
        lease.spec = Some(spec);
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(self.err(e)),
        }
    }

    /// Runs the election in the background: acquires, renews, steps down when renewal fails
    /// past the deadline, and releases on [`Leadership::shutdown`].
    pub fn spawn(mut self) -> Leadership {
        let (state_tx, state_rx) = watch::channel(false);
        let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut last_renew: Option<Instant> = None;
            loop {
                let attempt =
                    tokio::time::timeout(self.cfg.retry_period, self.try_acquire_or_renew()).await;
                let held = match attempt {
                    Ok(Ok(h)) => h,
                    Ok(Err(e)) => {
                        tracing::warn!(lease = %self.cfg.name, error = %e, "leader election attempt failed");
                        false
                    }
                    Err(_) => false,
                };
                if held {
                    last_renew = Some(Instant::now());
                }
                let leading = last_renew.is_some_and(|t| t.elapsed() < self.cfg.renew_deadline)
                    && (held || *state_tx.borrow());
                if !leading {
                    last_renew = None;
                }
                if *state_tx.borrow() != leading {
                    tracing::info!(lease = %self.cfg.name, identity = %self.cfg.identity, leading, "leadership changed");
                    let _ = state_tx.send(leading);
                }
                tokio::select! {
                    _ = &mut stop_rx => break,
                    () = tokio::time::sleep(self.cfg.retry_period) => {}
                }
            }
            let _ = state_tx.send(false);
            if let Err(e) = tokio::time::timeout(self.cfg.retry_period, self.release())
                .await
                .unwrap_or(Ok(()))
            {
                tracing::warn!(lease = %self.cfg.name, error = %e, "could not release the lease");
            }
        });
        Leadership {
            state: state_rx,
            stop: Some(stop_tx),
            task: Some(task),
        }
    }
}

/// A running election.
#[derive(Debug)]
pub struct Leadership {
    state: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Leadership {
    /// Whether we are the leader now.
    pub fn is_leader(&self) -> bool {
        *self.state.borrow()
    }

    /// Waits until leadership changes; returns the new state.
    pub async fn changed(&mut self) -> bool {
        if self.state.changed().await.is_err() {
            return false;
        }
        *self.state.borrow()
    }

    /// Stops campaigning and releases the lease if held.
    pub async fn shutdown(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_timings_are_refused() {
        let mut c = Config::new("l", "me");
        assert!(c.check().is_ok());
        c.renew_deadline = c.lease_duration;
        assert!(c.check().is_err());
        let mut c = Config::new("l", "me");
        c.retry_period = c.renew_deadline;
        assert!(c.check().is_err());
        assert!(Config::new("l", "").check().is_err());
    }
}
