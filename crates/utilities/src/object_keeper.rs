//! The ObjectKeeper controller. A keeper is the owner (`ownerReferences`) of the objects that
//! point at it; the controller only decides when the keeper itself goes ([`plan::decide`]) and
//! deletes it — the garbage collector then removes what it kept. No finalizer: a keeper
//! deleted by hand lets its objects go the same way.
//!
//! Observe (the keeper, the followed object through discovery and a dynamic client) → decide
//! (pure, with "now" passed in) → act (status patch or delete with the keeper's UID as a
//! precondition, so a recreated keeper of the same name is never taken for the old one).

pub mod plan;

use std::sync::Arc;
use std::time::Duration;

use api::object_keeper::{CONDITION_ACTIVE, ObjectKeeper};
use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, Preconditions};
use kube::{Api, Client, ResourceExt};
use release_controller::{Clock, SystemClock};
use serde_json::json;

use crate::Error;
use plan::{Decision, Followed, Keeper};

/// Settings of the ObjectKeeper controller.
#[derive(Clone, Debug)]
pub struct Options {
    /// How often a followed object that exists is looked at again (Deckhouse: 1m).
    pub recheck: Duration,
    /// How long to wait after a failed pass.
    pub retry: Duration,
    /// Where "now" comes from: a keeper's `ttl` and `lostAt` are measured on it.
    pub clock: Arc<dyn Clock>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            recheck: plan::DEFAULT_RECHECK,
            retry: Duration::from_secs(5),
            clock: Arc::new(SystemClock),
        }
    }
}

/// The controller.
#[derive(Clone)]
pub struct Controller {
    client: Client,
    options: Options,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// A controller talking to `client`.
    pub fn new(client: Client, options: Options) -> Self {
        Self { client, options }
    }

    /// Runs passes — on every change of a keeper and when the earliest recheck is due — until
    /// `stopped` resolves.
    pub async fn run(&self, stopped: impl std::future::Future<Output = ()>) {
        tokio::pin!(stopped);
        let keepers: Api<ObjectKeeper> = Api::all(self.client.clone());
        let events = kube::runtime::watcher(keepers, Default::default());
        tokio::pin!(events);
        loop {
            let wait = match self.pass().await {
                Ok(next) => next.unwrap_or(Duration::from_secs(3600)),
                Err(e) => {
                    tracing::warn!(error = %e, "ObjectKeeper pass failed");
                    self.options.retry
                }
            };
            let sleep = tokio::time::sleep(wait);
            tokio::pin!(sleep);
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    _ = &mut sleep => break,
                    event = events.next() => match event {
                        // Our own status writes come back as events too; a short debounce
                        // keeps them from turning into a busy loop.
                        Some(Ok(kube::runtime::watcher::Event::Apply(_)
                            | kube::runtime::watcher::Event::InitDone)) => {
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            break;
                        }
                        Some(Err(_)) => tokio::time::sleep(Duration::from_secs(1)).await,
                        Some(Ok(_)) => {}
                        None => return,
                    },
                }
            }
        }
    }

    /// One pass over every keeper; returns when the next one is due.
    pub async fn pass(&self) -> Result<Option<Duration>, Error> {
        let keepers: Api<ObjectKeeper> = Api::all(self.client.clone());
        let list = keepers
            .list(&Default::default())
            .await
            .map_err(|e| Error::kube("list ObjectKeepers", e))?;
        let mut next: Option<Duration> = None;
        for keeper in &list.items {
            if keeper.metadata.deletion_timestamp.is_some() {
                continue;
            }
            match self.reconcile(keeper).await {
                Ok(Some(d)) => next = Some(next.map_or(d, |n| n.min(d))),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(keeper = %keeper.name_any(), error = %e, "ObjectKeeper not reconciled");
                    next = Some(next.map_or(self.options.retry, |n| n.min(self.options.retry)));
                }
            }
        }
        Ok(next)
    }

    async fn reconcile(&self, keeper: &ObjectKeeper) -> Result<Option<Duration>, Error> {
        let name = keeper.name_any();
        let status = keeper.status.clone().unwrap_or_default();
        let view = Keeper {
            mode: keeper.spec.mode,
            follow: keeper.spec.follow_object_ref.as_ref(),
            ttl: keeper.spec.ttl.as_deref(),
            created: keeper
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or_else(|| self.options.clock.now(), |t| t.0),
            lost_at: status.lost_at.as_ref().map(|t| t.0),
        };
        let followed = if plan::must_look_up(&view) {
            self.look_up(keeper).await
        } else {
            Followed::NotLookedUp
        };
        match plan::decide(
            &view,
            &followed,
            self.options.clock.now(),
            self.options.recheck,
        ) {
            Decision::Delete { why } => {
                tracing::info!(keeper = %name, %why, "deleting ObjectKeeper: the objects it kept go with it");
                let keepers: Api<ObjectKeeper> = Api::all(self.client.clone());
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: keeper.uid(),
                        resource_version: None,
                    }),
                    ..DeleteParams::background()
                };
                match keepers.delete(&name, &params).await {
                    Ok(_) => Ok(None),
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(None),
                    Err(e) => Err(Error::kube(format!("delete ObjectKeeper {name}"), e)),
                }
            }
            Decision::Keep {
                phase,
                active,
                message,
                lost_at,
                recheck,
            } => {
                let unchanged = status.phase == Some(phase)
                    && status.message.as_deref() == Some(message.as_str())
                    && status.lost_at.as_ref().map(|t| t.0) == lost_at
                    && status.conditions.iter().any(|c| {
                        c.type_ == CONDITION_ACTIVE
                            && c.status == if active.0 { "True" } else { "False" }
                            && c.reason == active.1
                    });
                if !unchanged {
                    let condition = Condition {
                        type_: CONDITION_ACTIVE.into(),
                        status: if active.0 { "True" } else { "False" }.into(),
                        reason: active.1.into(),
                        message: message.clone(),
                        last_transition_time: Time(self.options.clock.now()),
                        observed_generation: keeper.metadata.generation,
                    };
                    let patch = json!({"status": {
                        "phase": phase,
                        "message": message,
                        "lostAt": lost_at.map(Time),
                        "conditions": [condition],
                    }});
                    let keepers: Api<ObjectKeeper> = Api::all(self.client.clone());
                    match keepers
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(None),
                        Err(e) => {
                            return Err(Error::kube(
                                format!("update ObjectKeeper {name} status"),
                                e,
                            ));
                        }
                    }
                }
                Ok(recheck)
            }
        }
    }

    /// What the API says of the followed object; a failed lookup is "not looked up" (the keeper
    /// is kept, never deleted on an error).
    async fn look_up(&self, keeper: &ObjectKeeper) -> Followed {
        let Some(follow) = &keeper.spec.follow_object_ref else {
            return Followed::NotLookedUp;
        };
        let Ok((group, version)) = plan::parse_api_version(&follow.api_version) else {
            return Followed::NotLookedUp;
        };
        let gvk = GroupVersionKind::gvk(&group, &version, &follow.kind);
        let (resource, capabilities) = match kube::discovery::pinned_kind(&self.client, &gvk).await
        {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(keeper = %keeper.name_any(), kind = %follow.kind, error = %e, "kind of the followed object not found");
                return Followed::NotLookedUp;
            }
        };
        let api: Api<DynamicObject> = match capabilities.scope {
            kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(self.client.clone(), &follow.namespace, &resource)
            }
            kube::discovery::Scope::Cluster => Api::all_with(self.client.clone(), &resource),
        };
        match api.get_opt(&follow.name).await {
            Ok(Some(object)) => Followed::Present {
                uid: object.uid().unwrap_or_default(),
            },
            Ok(None) => Followed::Absent,
            Err(e) => {
                tracing::warn!(keeper = %keeper.name_any(), error = %e, "followed object not looked up");
                Followed::NotLookedUp
            }
        }
    }
}
