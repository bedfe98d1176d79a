//! One pass: observe, plan, act.

use std::collections::BTreeMap;
use std::time::Instant;

use api::conditions::{ConditionStatus, RegistryCondition};
use api::module_config::ModuleConfig;
use api::registry::{
    CONDITION_ACCEPTED, EffectiveUpstream, NAMESPACE, RESOLVED_AUTH_SECRET, RegistryConfig,
    RegistryConfigSpec, RegistryConfigStatus, RegistryMode, RegistryNode, RegistryStorage,
    RegistryUpstream, SINGLETON,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use registry_controller_plan::arbitration::{self, Candidate};
use registry_controller_plan::drain::{self, Decision, DrainRecord};
use registry_controller_plan::image_address::{self, NodeProgress};
use registry_controller_plan::layout::{self, Inputs, StorageAccess};
use registry_controller_plan::migration::{self, Gate};
use registry_controller_plan::plan::{self, Action, Observed};
use registry_controller_plan::prerequisites::{
    CLUSTER_CONFIGURATION_KEY, CLUSTER_CONFIGURATION_NAMESPACE, CLUSTER_CONFIGURATION_SECRET,
};
use registry_controller_plan::probe::Outcome;
use registry_controller_plan::{
    DRAIN_SECRET, IMAGE_ADDRESS_CONFIGMAP, IMAGE_BASE, IN_CLUSTER_HOST, LEGACY_STATE_SECRET,
    SUGGESTED_CONFIG_KEY, SUGGESTED_CONFIG_SECRET, SWITCH_SECRET, handover, legacy,
    nodes as node_facts, prerequisites, settings, storage_status,
};
use registry_plan::Credentials;

use crate::error::{Error, kube};

/// Secret (in `d8-system`) naming the registry the cluster was installed from.
const INSTALL_REGISTRY_SECRET: &str = "deckhouse-registry";
/// Lease (in `d8-system`) the cache replicas elect their leader with.
const STORAGE_LEASE: &str = "registry-storage";
use crate::metrics::label;
use crate::{ClusterFacts, ClusterSource, Controller, probe};

/// What the controller remembers between passes: the last probe, so an unchanged upstream is
/// not probed on every pass.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    last_probe: Option<(probe::Target, Outcome, Instant)>,
}

/// What a pass did.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The migration gate.
    pub gate: Gate,
    /// The ModuleConfig asks for Managed (and the module is enabled).
    pub wanted_managed: bool,
    /// Serving a drain record.
    pub draining: bool,
    /// The layout writes performed.
    pub actions: usize,
    /// The settings or the configuration were refused (the message), nothing changed.
    pub invalid: Option<String>,
}

type Data = BTreeMap<String, Vec<u8>>;

fn data_of(secret: Secret) -> Data {
    secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect()
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    previous: &[RegistryCondition],
) -> RegistryCondition {
    let status = if ok {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now()));
    RegistryCondition {
        type_: type_.to_owned(),
        status,
        observed_generation: generation,
        last_transition_time,
        reason: reason.to_owned(),
        message: Some(message.to_owned()),
    }
}

impl Controller {
    pub(crate) fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    async fn secret(&self, name: &str) -> Result<Option<Data>, Error> {
        let secret = self
            .secrets()
            .get_opt(name)
            .await
            .map_err(kube(format!("reading Secret {NAMESPACE}/{name}")))?;
        Ok(secret.map(data_of))
    }

    async fn put_secret(&self, name: &str, data: &Data) -> Result<(), Error> {
        let what = format!("writing Secret {NAMESPACE}/{name}");
        let api = self.secrets();
        let data = data
            .iter()
            .map(|(k, v)| (k.clone(), ByteString(v.clone())))
            .collect();
        match api.get_opt(name).await.map_err(kube(&what))? {
            Some(mut existing) => {
                existing.data = Some(data);
                existing.string_data = None;
                api.replace(name, &PostParams::default(), &existing)
                    .await
                    .map_err(kube(&what))?;
            }
            None => {
                let secret = Secret {
                    metadata: kube::api::ObjectMeta {
                        name: Some(name.to_owned()),
                        namespace: Some(NAMESPACE.to_owned()),
                        labels: Some(BTreeMap::from([(
                            "heritage".to_owned(),
                            "deckhouse".to_owned(),
                        )])),
                        ..Default::default()
                    },
                    data: Some(data),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &secret)
                    .await
                    .map_err(kube(&what))?;
            }
        }
        Ok(())
    }

    pub(crate) async fn delete<K>(&self, api: &Api<K>, name: &str, what: &str) -> Result<(), Error>
    where
        K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(Error::Kube {
                what: format!("deleting {what}"),
                source: e,
            }),
        }
    }

    /// Deletes what the previous implementation left in `d8-system` ([`handover::leftovers`]);
    /// finds nothing on a second pass.
    async fn remove_legacy_objects(&self) -> Result<(), Error> {
        let api = self.secrets();
        let list = api
            .list_metadata(&kube::api::ListParams::default())
            .await
            .map_err(kube(format!("listing Secrets in {NAMESPACE}")))?;
        let empty = BTreeMap::new();
        let leftovers = handover::leftovers(list.items.iter().map(|s| {
            (
                s.metadata.name.as_deref().unwrap_or_default(),
                s.metadata.labels.as_ref().unwrap_or(&empty),
            )
        }));
        for name in leftovers {
            self.delete(&api, &name, &format!("Secret {NAMESPACE}/{name}"))
                .await?;
            tracing::info!(secret = %name, "handover complete: the previous implementation's Secret is removed");
        }
        Ok(())
    }

    /// One pass.
    pub async fn reconcile(&self) -> Result<Report, Error> {
        let client = self.client.clone();
        let metrics = &self.metrics;
        let module_configs: Api<ModuleConfig> = Api::all(client.clone());
        let mc = module_configs
            .get_opt("registry")
            .await
            .map_err(kube("reading ModuleConfig registry"))?;
        let enabled = mc.as_ref().is_none_or(|mc| mc.spec.enabled != Some(false));
        let parsed = settings::parse(mc.as_ref().and_then(|mc| mc.spec.settings.as_ref()));

        // Migration gate.
        let switched = self.secret(SWITCH_SECRET).await?.is_some();
        let legacy_state = self.secret(LEGACY_STATE_SECRET).await?;
        let legacy = migration::read_legacy_state(
            legacy_state
                .as_ref()
                .and_then(|d| d.get("state"))
                .map(Vec::as_slice),
        );
        let module_configured = parsed
            .as_ref()
            .is_ok_and(|s| s.mode == Some(RegistryMode::Managed));
        let gate = migration::gate(switched, &legacy, module_configured);
        metrics.migration_pending.clear();
        metrics.migration_preflight.clear();
        // The suggestion is what D8RegistryMigrationPending sends the operator to, so it is
        // written while the gate blocks too.
        let suggested = self
            .suggest(parsed.as_ref().is_ok_and(|s| s.primary.is_some()))
            .await?;
        let upstream_reachable = if switched {
            None
        } else if matches!(gate, Gate::Blocked(_)) {
            // Before the switch: probe the registry the cluster will pull from after it (the
            // configured primary, else the suggested one), so the operator learns of a
            // registry that would not serve before switching to it.
            match pre_switch_target(&parsed, suggested.as_ref()) {
                Some(target) => Some(self.probe_outcome(target, false).await == Outcome::Accepted),
                None => None,
            }
        } else {
            self.state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .last_probe
                .as_ref()
                .map(|(_, outcome, _)| *outcome == Outcome::Accepted)
        };
        for check in migration::preflight(switched, &legacy, upstream_reachable) {
            metrics
                .migration_preflight
                .get_or_create(&vec![
                    ("check", check.check.to_owned()),
                    ("detail", check.detail),
                    ("blocking", check.blocking.to_string()),
                ])
                .set(1);
        }
        if let Gate::Blocked(reason) = &gate {
            tracing::info!(%reason, "the previous registry implementation keeps the pull path");
            metrics
                .migration_pending
                .get_or_create(&label("reason", reason.clone()))
                .set(1);
            return Ok(Report {
                gate,
                wanted_managed: false,
                draining: false,
                actions: 0,
                invalid: None,
            });
        }
        if !switched {
            self.put_secret(SWITCH_SECRET, &Data::new()).await?;
        }

        let settings = match parsed {
            Ok(settings) => settings,
            Err(error) => {
                // Refused before write on a real API; a stored one is kept but not acted on.
                metrics.config_valid.set(0);
                let message = error.to_string();
                tracing::warn!(%message, "ModuleConfig registry is not usable");
                return Ok(Report {
                    gate,
                    wanted_managed: false,
                    draining: false,
                    actions: 0,
                    invalid: Some(message),
                });
            }
        };
        let rendered = settings::render(&settings);
        let wanted_managed = enabled && rendered.mode == RegistryMode::Managed;

        // Drain.
        let configs: Api<RegistryConfig> = Api::all(client.clone());
        let rcfg = configs
            .get_opt(SINGLETON)
            .await
            .map_err(kube("reading RegistryConfig registry"))?;
        let record = match self.secret(DRAIN_SECRET).await? {
            Some(data) => match data
                .get(drain::RECORD_KEY)
                .map(|b| DrainRecord::from_bytes(b))
            {
                Some(Ok(record)) => Some(record),
                Some(Err(error)) => {
                    tracing::warn!(%error, "unreadable drain record; starting the drain again");
                    None
                }
                None => None,
            },
            None => None,
        };
        let references = if wanted_managed {
            0
        } else {
            self.references().await?
        };
        let at = now().as_second();
        let decision = drain::step(drain::Inputs {
            wanted_managed,
            module_enabled: enabled,
            current: rcfg.as_ref().map(|r| r.spec.clone()),
            record: record.clone(),
            references,
            now: at,
        });
        metrics.drain_references.set(references as i64);
        let serving: Option<RegistryConfigSpec> = match &decision {
            Decision::Follow => {
                if record.is_some() {
                    self.delete(&self.secrets(), DRAIN_SECRET, "Secret registry-drain")
                        .await?;
                }
                metrics.drain_seconds.set(0);
                (rendered.mode == RegistryMode::Managed).then(|| rendered.clone())
            }
            Decision::Serve { record } => {
                let data = Data::from([(drain::RECORD_KEY.to_owned(), record.to_bytes())]);
                if !record.can_finish() {
                    tracing::warn!(
                        "draining: no upstream to point the cluster back at; the drain cannot finish"
                    );
                } else if references > 0 {
                    tracing::info!(
                        references,
                        "draining: objects still name the in-cluster registry"
                    );
                }
                self.put_secret(DRAIN_SECRET, &data).await?;
                metrics.drain_seconds.set(at - record.started_at);
                Some(record.config.clone())
            }
            Decision::Withdraw => {
                if let Some(record) = &record {
                    self.write_back(record).await?;
                }
                if record.is_some() {
                    self.delete(&self.secrets(), DRAIN_SECRET, "Secret registry-drain")
                        .await?;
                    tracing::info!("drain finished: the registry module withdraws");
                }
                metrics.drain_seconds.set(0);
                None
            }
        };
        let draining = matches!(decision, Decision::Serve { .. });

        // The image address goes at once when not Managed; otherwise the two-step rule below.
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
        let address_exists = config_maps
            .get_opt(IMAGE_ADDRESS_CONFIGMAP)
            .await
            .map_err(kube("reading ConfigMap registry-image-address"))?
            .is_some();
        if !wanted_managed && address_exists {
            self.delete(
                &config_maps,
                IMAGE_ADDRESS_CONFIGMAP,
                "ConfigMap registry-image-address",
            )
            .await?;
        }
        // Past the gate, the switch marker exists.
        if handover::complete(true, wanted_managed, address_exists) {
            self.remove_legacy_objects().await?;
        }

        metrics.managed.set(i64::from(serving.is_some()));
        let Some(config) = serving else {
            let actions = self.withdraw(rcfg.is_some()).await?;
            self.sync_publish(&settings, None).await?;
            self.sync_push(None).await?;
            self.clear_layout_metrics();
            metrics.config_valid.set(1);
            return Ok(Report {
                gate,
                wanted_managed,
                draining,
                actions,
                invalid: None,
            });
        };

        // RegistryConfig spec follows the ModuleConfig (even while draining: the record serves).
        let rcfg = self.write_config(rcfg, &rendered).await?;
        let generation = rcfg.metadata.generation;
        let previous_status = rcfg.status.clone().unwrap_or_default();

        let report = self
            .lay_out(
                &config,
                &previous_status,
                generation,
                wanted_managed,
                address_exists,
            )
            .await;
        let (reason, message) = match report {
            Ok(actions) => {
                let storage: Api<RegistryStorage> = Api::all(self.client.clone());
                let storage = storage
                    .get_opt(SINGLETON)
                    .await
                    .map_err(kube("reading RegistryStorage registry"))?;
                if storage.is_some() {
                    self.sync_ingress_client().await?;
                }
                self.sync_publish(&settings, storage.as_ref().map(|s| &s.spec))
                    .await?;
                self.sync_push(storage.as_ref()).await?;
                return Ok(Report {
                    gate,
                    wanted_managed,
                    draining,
                    actions,
                    invalid: None,
                });
            }
            Err(LayoutError::Api(error)) => return Err(error),
            Err(LayoutError::Invalid(message)) => ("Invalid", message),
            Err(LayoutError::Unmet(message)) => (prerequisites::REASON, message),
        };
        tracing::warn!(%message, "the registry layout is refused");
        metrics.config_valid.set(0);
        let status = RegistryConfigStatus {
            observed_generation: generation,
            effective_upstream: previous_status.effective_upstream.clone(),
            conditions: vec![condition(
                "Valid",
                false,
                reason,
                &message,
                generation,
                &previous_status.conditions,
            )],
        };
        self.write_config_status(&previous_status, status).await?;
        Ok(Report {
            gate,
            wanted_managed,
            draining,
            actions: 0,
            invalid: Some(message),
        })
    }

    /// What ClusterConfiguration says (`None`: there is none, a Managed Kubernetes).
    async fn cluster_facts(&self) -> Result<Option<ClusterFacts>, LayoutError> {
        if let ClusterSource::Fixed(facts) = &self.options.cluster {
            return Ok(Some(facts.clone()));
        }
        let secrets: Api<Secret> =
            Api::namespaced(self.client.clone(), CLUSTER_CONFIGURATION_NAMESPACE);
        let secret = secrets
            .get_opt(CLUSTER_CONFIGURATION_SECRET)
            .await
            .map_err(kube(format!(
                "reading Secret {CLUSTER_CONFIGURATION_NAMESPACE}/{CLUSTER_CONFIGURATION_SECRET}"
            )))?;
        let Some(secret) = secret else {
            return Ok(None);
        };
        let data = data_of(secret);
        let yaml = data
            .get(CLUSTER_CONFIGURATION_KEY)
            .map(Vec::as_slice)
            .unwrap_or_default();
        prerequisites::read_cluster_configuration(yaml)
            .map(Some)
            .map_err(|e| LayoutError::Unmet(format!("ClusterConfiguration is unreadable: {e}")))
    }

    fn clear_layout_metrics(&self) {
        let m = &self.metrics;
        m.effective_upstream.clear();
        m.nodes.set(0);
        m.node_reconciled.clear();
        m.node_layout_from_disk.clear();
        m.node_foreign_registry_config.clear();
        m.storage_stale_data_bytes.clear();
        m.air_gap_transition_held.set(0);
        m.upstreams_rejected.clear();
    }

    /// Deletes every object the controller wrote (after the drain, or when never Managed).
    async fn withdraw(&self, config_exists: bool) -> Result<usize, Error> {
        let observed = self.observe_objects().await?;
        let actions = plan::plan(None, &observed);
        self.act(&actions, &BTreeMap::new()).await?;
        if config_exists {
            let configs: Api<RegistryConfig> = Api::all(self.client.clone());
            self.delete(&configs, SINGLETON, "RegistryConfig registry")
                .await?;
        }
        Ok(actions.len())
    }

    async fn write_config(
        &self,
        existing: Option<RegistryConfig>,
        spec: &RegistryConfigSpec,
    ) -> Result<RegistryConfig, Error> {
        let api: Api<RegistryConfig> = Api::all(self.client.clone());
        let what = "writing RegistryConfig registry";
        match existing {
            Some(existing) if existing.spec == *spec => Ok(existing),
            Some(mut existing) => {
                existing.spec = spec.clone();
                api.replace(SINGLETON, &PostParams::default(), &existing)
                    .await
                    .map_err(kube(what))
            }
            None => {
                let object = RegistryConfig::new(SINGLETON, spec.clone());
                api.create(&PostParams::default(), &object)
                    .await
                    .map_err(kube(what))
            }
        }
    }

    async fn write_config_status(
        &self,
        previous: &RegistryConfigStatus,
        status: RegistryConfigStatus,
    ) -> Result<(), Error> {
        if previous == &status {
            return Ok(());
        }
        let api: Api<RegistryConfig> = Api::all(self.client.clone());
        let mut status = serde_json::to_value(&status).map_err(Error::Encode)?;
        // A merge patch keeps what it does not name: an upstream no longer in effect (dropped
        // for air gap) must be removed explicitly, or the next pass would hold it again.
        if status.get("effectiveUpstream").is_none() {
            status["effectiveUpstream"] = serde_json::Value::Null;
        }
        let patch = serde_json::json!({ "status": status });
        api.patch_status(SINGLETON, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(kube("writing the status of RegistryConfig registry"))?;
        Ok(())
    }

    async fn observe_objects(&self) -> Result<Observed, Error> {
        let nodes: Api<RegistryNode> = Api::all(self.client.clone());
        let storage: Api<RegistryStorage> = Api::all(self.client.clone());
        Ok(Observed {
            secret: self.secret(RESOLVED_AUTH_SECRET).await?,
            nodes: nodes
                .list(&ListParams::default())
                .await
                .map_err(kube("listing RegistryNodes"))?
                .items
                .into_iter()
                .map(|n| (n.name_any(), n.spec))
                .collect(),
            storage: storage
                .get_opt(SINGLETON)
                .await
                .map_err(kube("reading RegistryStorage registry"))?
                .map(|s| s.spec),
        })
    }

    /// Writes the aggregate fields of `RegistryStorage.status` (a merge patch: the replicas'
    /// own entries are left alone).
    async fn write_storage_summary(
        &self,
        status: &api::registry::RegistryStorageStatus,
        summary: &storage_status::Summary,
    ) -> Result<(), Error> {
        let current = (
            status.leader.as_ref(),
            status.safe_to_drop_upstream,
            status.all_replicas_full,
            status.authoritative,
            status.phase,
            status.fill.as_ref(),
        );
        let wanted = (
            summary.leader.as_ref(),
            Some(summary.leader_full),
            Some(summary.all_replicas_full),
            Some(summary.authoritative),
            Some(summary.phase),
            summary.fill.as_ref(),
        );
        if current == wanted {
            return Ok(());
        }
        let patch = serde_json::json!({ "status": {
            "leader": summary.leader,
            "safeToDropUpstream": summary.leader_full,
            "allReplicasFull": summary.all_replicas_full,
            "authoritative": summary.authoritative,
            "phase": summary.phase,
            "fill": summary.fill,
        }});
        let api: Api<RegistryStorage> = Api::all(self.client.clone());
        api.patch_status(SINGLETON, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(kube("writing the status of RegistryStorage registry"))?;
        Ok(())
    }

    /// Points `deckhouse-registry` back at the drained upstream when the cluster was installed
    /// into the module (its address is the in-cluster one).
    async fn write_back(&self, record: &DrainRecord) -> Result<(), Error> {
        let Some(existing) = self.secret(INSTALL_REGISTRY_SECRET).await? else {
            return Ok(());
        };
        match drain::write_back(&existing, record) {
            Ok(Some(data)) => {
                self.put_secret(INSTALL_REGISTRY_SECRET, &data).await?;
                tracing::info!("drain finished: deckhouse-registry names the upstream again");
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%error, "the drained configuration's credentials are unreadable; deckhouse-registry is left as it is");
            }
        }
        Ok(())
    }

    /// The GC schedule from NodeGroup `master`'s maintenance windows; an API without NodeGroups
    /// (the single-machine server) has none.
    async fn master_windows_schedule(&self) -> Result<Option<String>, Error> {
        let resource = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("deckhouse.io", "v1", "NodeGroup"),
            "nodegroups",
        );
        let groups: Api<kube::api::DynamicObject> = Api::all_with(self.client.clone(), &resource);
        match groups.get_opt("master").await {
            Ok(group) => Ok(group
                .and_then(|g| g.data.get("spec").cloned())
                .and_then(|spec| node_facts::gc_schedule_from_windows(&spec))),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
            Err(e) => Err(Error::Kube {
                what: "reading NodeGroup master".into(),
                source: e,
            }),
        }
    }

    /// The holder of Lease `d8-system/registry-storage` while it is unexpired.
    pub(crate) async fn storage_lease_holder(&self) -> Result<Option<String>, Error> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), NAMESPACE);
        let lease = leases
            .get_opt(STORAGE_LEASE)
            .await
            .map_err(kube("reading Lease registry-storage"))?;
        let Some(spec) = lease.and_then(|l| l.spec) else {
            return Ok(None);
        };
        let Some(holder) = spec.holder_identity.filter(|h| !h.is_empty()) else {
            return Ok(None);
        };
        let renewed = spec.renew_time.or(spec.acquire_time).map(|t| t.0);
        let duration = i64::from(spec.lease_duration_seconds.unwrap_or(0));
        let live = renewed.is_some_and(|at| now().as_second() <= at.as_second() + duration);
        Ok(live.then_some(holder))
    }

    /// Objects still naming the in-cluster address: pods that have not pulled yet. An API
    /// without pods (the single-machine server) has none.
    async fn references(&self) -> Result<u64, Error> {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let list = match pods.list(&ListParams::default()).await {
            Ok(list) => list,
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(0),
            Err(e) => {
                return Err(Error::Kube {
                    what: "listing Pods".into(),
                    source: e,
                });
            }
        };
        let count = list
            .items
            .iter()
            .filter(|pod| {
                let pending = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.as_deref())
                    .is_none_or(|phase| phase == "Pending");
                let names = pod.spec.as_ref().is_some_and(|spec| {
                    spec.containers
                        .iter()
                        .chain(spec.init_containers.iter().flatten())
                        .any(|c| {
                            c.image
                                .as_deref()
                                .is_some_and(|i| i.starts_with(IN_CLUSTER_HOST))
                        })
                });
                pending && names
            })
            .count();
        Ok(count as u64)
    }

    /// Writes (or removes) `registry-suggested-config`; returns the upstream it names.
    async fn suggest(
        &self,
        operator_names_primary: bool,
    ) -> Result<Option<serde_json::Value>, Error> {
        let install = self
            .secret(INSTALL_REGISTRY_SECRET)
            .await?
            .and_then(|d| legacy::InstallRegistry::from_secret(&d));
        let module_configs: Api<ModuleConfig> = Api::all(self.client.clone());
        let deckhouse = module_configs
            .get_opt("deckhouse")
            .await
            .map_err(kube("reading ModuleConfig deckhouse"))?;
        let legacy_settings = match legacy::read_legacy_settings(
            deckhouse.as_ref().and_then(|mc| mc.spec.settings.as_ref()),
        ) {
            Ok(settings) => settings,
            Err(error) => {
                tracing::warn!(%error, "legacy registry settings are unreadable");
                None
            }
        };
        let upstream = legacy::suggested_upstream(install.as_ref(), legacy_settings.as_ref());
        let suggestion = legacy::suggested_config(
            install.as_ref(),
            legacy_settings.as_ref(),
            operator_names_primary,
        );
        let existing = self.secret(SUGGESTED_CONFIG_SECRET).await?;
        match suggestion {
            Some(yaml) => {
                let data = Data::from([(SUGGESTED_CONFIG_KEY.to_owned(), yaml.into_bytes())]);
                if existing.as_ref() != Some(&data) {
                    self.put_secret(SUGGESTED_CONFIG_SECRET, &data).await?;
                }
            }
            None if existing.is_some() => {
                self.delete(
                    &self.secrets(),
                    SUGGESTED_CONFIG_SECRET,
                    "Secret registry-suggested-config",
                )
                .await?;
            }
            None => {}
        }
        Ok(upstream)
    }

    async fn probe_outcome(&self, target: probe::Target, accepted_before: bool) -> Outcome {
        if accepted_before {
            return Outcome::Accepted;
        }
        {
            let memory = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((last, outcome, at)) = &memory.last_probe
                && *last == target
                && (*outcome == Outcome::Accepted || at.elapsed() < self.options.probe_retry)
            {
                return outcome.clone();
            }
        }
        let outcome = probe::run(&target, self.options.probe_timeout).await;
        tracing::info!(host = %target.host, outcome = outcome.label(), message = outcome.message(), "preflight probe");
        self.metrics.probed(outcome.label());
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last_probe = Some((target, outcome.clone(), Instant::now()));
        outcome
    }

    async fn lay_out(
        &self,
        config: &RegistryConfigSpec,
        previous: &RegistryConfigStatus,
        generation: Option<i64>,
        wanted_managed: bool,
        address_exists: bool,
    ) -> Result<usize, LayoutError> {
        let cluster = self.cluster_facts().await?;
        let unmet = prerequisites::check(config, cluster.as_ref());
        if !unmet.is_empty() {
            return Err(LayoutError::Unmet(prerequisites::message(&unmet)));
        }
        let client = self.client.clone();
        let metrics = &self.metrics;
        let observed = self.observe_objects().await?;
        let persisted: BTreeMap<String, Credentials> = observed
            .secret
            .iter()
            .flatten()
            .filter_map(|(k, v)| settings::decode(v).map(|c| (k.clone(), c)))
            .collect();

        // Probe the configured primary upstream when it differs from what is in effect.
        let configured = config.primary.as_ref().and_then(|p| p.upstream.as_ref());
        let mut probe_outcome = None;
        if let Some(upstream) = configured {
            let credentials =
                settings::credentials(upstream.auth.as_ref(), "spec.primary.upstream.auth")
                    .map_err(|e| LayoutError::Invalid(e.to_string()))?;
            let in_effect = previous.effective_upstream.as_ref();
            let same_address = in_effect.is_some_and(|e| {
                let c = layout::effective_of(upstream);
                (e.scheme, &e.host, &e.path, &e.ca) == (c.scheme, &c.host, &c.path, &c.ca)
            });
            let accepted_before = same_address
                && persisted.get(registry_controller_plan::AUTH_KEY_UPSTREAM)
                    == credentials.as_ref();
            let target = probe::Target {
                scheme: upstream.scheme,
                host: upstream.host.clone(),
                path: upstream.path.clone(),
                ca: upstream.ca.clone(),
                credentials,
            };
            probe_outcome = Some(self.probe_outcome(target, accepted_before).await);
        }
        let probe_failed = probe_outcome
            .as_ref()
            .is_some_and(|o| *o != Outcome::Accepted);

        // RegistryUpstreams.
        let upstreams: Api<RegistryUpstream> = Api::all(client.clone());
        let objects = upstreams
            .list(&ListParams::default())
            .await
            .map_err(kube("listing RegistryUpstreams"))?
            .items;
        let candidates: Vec<Candidate> = objects
            .iter()
            .map(|u| Candidate {
                name: u.name_any(),
                created: u
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or(0, |t| t.0.as_second()),
                generation: u.metadata.generation,
                spec: u.spec.clone(),
            })
            .collect();
        let arbitration = arbitration::arbitrate(configured, &candidates);
        for object in &objects {
            let name = object.name_any();
            let verdict = &arbitration.verdicts[&name];
            let previous = object.status.clone().unwrap_or_default();
            let status = api::registry::RegistryUpstreamStatus {
                observed_generation: object.metadata.generation,
                accepted: Some(verdict.accepted),
                conflict: (!verdict.accepted).then(|| verdict.conflict.clone()),
                conditions: vec![condition(
                    CONDITION_ACCEPTED,
                    verdict.accepted,
                    verdict.reason.as_str(),
                    if verdict.accepted {
                        "compiled into every node's additionalRoutes"
                    } else {
                        &verdict.conflict
                    },
                    object.metadata.generation,
                    &previous.conditions,
                )],
            };
            if status != previous {
                let patch = serde_json::json!({ "status": status });
                upstreams
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(kube(format!(
                        "writing the status of RegistryUpstream {name}"
                    )))?;
            }
        }
        metrics.upstreams_rejected.clear();
        for (reason, count) in arbitration.rejected() {
            metrics
                .upstreams_rejected
                .get_or_create(&label("reason", reason.as_str()))
                .set(count as i64);
        }

        // Storage replicas: the lease holder's own report decides.
        let storage_api: Api<RegistryStorage> = Api::all(client.clone());
        let storage_object = storage_api
            .get_opt(SINGLETON)
            .await
            .map_err(kube("reading RegistryStorage registry"))?;
        let storage_status = storage_object
            .as_ref()
            .and_then(|s| s.status.clone())
            .unwrap_or_default();
        let holder = self.storage_lease_holder().await?;
        let summary = storage_status::summarise(
            &storage_status.replicas,
            holder.as_deref(),
            config
                .storage
                .as_ref()
                .and_then(|s| s.source.as_ref())
                .and_then(|s| s.expected_digests),
            storage_object
                .as_ref()
                .is_some_and(|s| s.spec.upstream.is_some()),
        );
        if storage_object.is_some() {
            self.write_storage_summary(&storage_status, &summary)
                .await?;
        }
        let leader = summary.leader.clone();
        let leader_full = summary.leader_full;
        let mut replicas = self.options.storage.replicas.clone();
        for replica in &storage_status.replicas {
            if let Some(address) = &replica.address
                && !replicas.iter().any(|(n, _)| n == &replica.node)
            {
                replicas.push((replica.node.clone(), address.clone()));
            }
        }
        self.storage_metrics(&storage_status, leader_full);

        // Nodes.
        let node_api: Api<Node> = Api::all(client.clone());
        let nodes = node_api
            .list(&ListParams::default())
            .await
            .map_err(kube("listing Nodes"))?
            .items;
        let node_names: Vec<String> = nodes.iter().map(|n| n.name_any()).collect();
        metrics.node_foreign_registry_config.clear();
        let no_labels = BTreeMap::new();
        for node in node_facts::foreign_registry_config(nodes.iter().map(|n| {
            (
                n.metadata.name.as_deref().unwrap_or_default(),
                n.metadata.labels.as_ref().unwrap_or(&no_labels),
            )
        })) {
            tracing::warn!(
                node,
                "the node carries containerd registry configuration this module did not write"
            );
            metrics
                .node_foreign_registry_config
                .get_or_create(&label("node", node))
                .set(1);
        }
        let owners: BTreeMap<String, OwnerReference> = nodes
            .iter()
            .filter_map(|n| {
                Some((
                    n.name_any(),
                    OwnerReference {
                        api_version: "v1".into(),
                        kind: "Node".into(),
                        name: n.name_any(),
                        uid: n.metadata.uid.clone()?,
                        ..Default::default()
                    },
                ))
            })
            .collect();

        let inputs = Inputs {
            config: config.clone(),
            effective: previous.effective_upstream.clone(),
            persisted,
            probe_failed,
            leader_full,
            nodes: node_names.clone(),
            routes: arbitration.routes.clone(),
            storage: StorageAccess {
                replicas,
                leader,
                scheme: self.options.storage.scheme,
                ca: self.options.storage.ca.clone(),
                credentials: self.options.storage.credentials.clone(),
            },
            gc_schedule_fallback: self.master_windows_schedule().await?,
        };
        let desired = layout::compute(&inputs).map_err(|e| LayoutError::Invalid(e.to_string()))?;
        if desired.drop_upstream {
            tracing::info!("the storage leader is full: the upstream is dropped (air gap)");
        }
        let actions = plan::plan(Some(&desired), &observed);
        self.act(&actions, &owners).await?;

        // Status.
        let upstream_condition = match &probe_outcome {
            None => condition(
                "UpstreamValid",
                true,
                "NoUpstream",
                "no primary upstream is configured (air gap)",
                generation,
                &previous.conditions,
            ),
            Some(outcome) => condition(
                "UpstreamValid",
                *outcome == Outcome::Accepted,
                outcome.reason().map_or("Accepted", |r| r.as_str()),
                outcome.message(),
                generation,
                &previous.conditions,
            ),
        };
        let cache = config.storage.as_ref().is_some_and(|s| s.cache);
        let converged = !cache || (leader_full && !desired.air_gap_held) || configured.is_some();
        let status = RegistryConfigStatus {
            observed_generation: generation,
            effective_upstream: desired.effective.clone(),
            conditions: vec![
                condition(
                    "Valid",
                    true,
                    "Valid",
                    "the configuration is usable",
                    generation,
                    &previous.conditions,
                ),
                upstream_condition,
                condition(
                    "StorageConverged",
                    converged,
                    if converged {
                        "Converged"
                    } else {
                        "AirGapTransitionHeld"
                    },
                    if converged {
                        "the storage matches the configuration"
                    } else {
                        "air gap is asked for; the upstream is held until the storage leader is full"
                    },
                    generation,
                    &previous.conditions,
                ),
            ],
        };
        self.write_config_status(previous, status).await?;

        // Image address (step two).
        let registry_nodes: Api<RegistryNode> = Api::all(client.clone());
        metrics.node_layout_from_disk.clear();
        metrics.storage_stale_data_bytes.clear();
        let progress: BTreeMap<String, NodeProgress> = registry_nodes
            .list(&ListParams::default())
            .await
            .map_err(kube("listing RegistryNodes"))?
            .items
            .into_iter()
            .map(|n| {
                let status = n.status.clone().unwrap_or_default();
                let from_disk = status
                    .conditions
                    .iter()
                    .any(|c| c.reason == api::registry::REASON_APPLIED_FROM_CACHE);
                self.metrics
                    .node_layout_from_disk
                    .get_or_create(&label("node", n.name_any()))
                    .set(i64::from(from_disk));
                // Reported by the agent only while the cache is off on its node.
                if let Some(bytes) = status.stale_storage_data_bytes.filter(|b| *b > 0) {
                    self.metrics
                        .storage_stale_data_bytes
                        .get_or_create(&label("node", n.name_any()))
                        .set(bytes);
                }
                (
                    n.name_any(),
                    NodeProgress {
                        generation: n.metadata.generation,
                        observed_generation: status.observed_generation,
                        reconciled: status.reconciled,
                    },
                )
            })
            .collect();
        metrics.node_reconciled.clear();
        for node in &node_names {
            let applied = progress.get(node).is_some_and(NodeProgress::applied);
            metrics
                .node_reconciled
                .get_or_create(&label("node", node.clone()))
                .set(i64::from(applied));
        }
        let publish =
            image_address::published(wanted_managed, address_exists, &node_names, &progress);
        if publish && !address_exists {
            let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
            let object = ConfigMap {
                metadata: kube::api::ObjectMeta {
                    name: Some(IMAGE_ADDRESS_CONFIGMAP.into()),
                    namespace: Some(NAMESPACE.into()),
                    ..Default::default()
                },
                data: Some(BTreeMap::from([(
                    image_address::BASE_KEY.to_owned(),
                    IMAGE_BASE.to_owned(),
                )])),
                ..Default::default()
            };
            config_maps
                .create(&PostParams::default(), &object)
                .await
                .map_err(kube("creating ConfigMap registry-image-address"))?;
            tracing::info!("every node applied its layout: the image address is published");
        }

        // Metrics.
        metrics.config_valid.set(1);
        metrics.nodes.set(node_names.len() as i64);
        metrics
            .air_gap_transition_held
            .set(i64::from(desired.air_gap_held));
        metrics.effective_upstream.clear();
        if let Some(host) = desired
            .effective
            .as_ref()
            .and_then(|e: &EffectiveUpstream| e.host.clone())
        {
            metrics
                .effective_upstream
                .get_or_create(&label("host", host))
                .set(1);
        }
        Ok(actions.len())
    }

    fn storage_metrics(&self, status: &api::registry::RegistryStorageStatus, leader_full: bool) {
        let m = &self.metrics;
        m.storage_replicas.set(status.replicas.len() as i64);
        m.storage_safe_to_drop_upstream.set(i64::from(leader_full));
        m.storage_all_replicas_full.set(i64::from(
            !status.replicas.is_empty() && status.replicas.iter().all(|r| r.full == Some(true)),
        ));
        for family in [
            &m.storage_replica_full,
            &m.store_used_bytes,
            &m.store_budget_bytes,
            &m.store_reserve_bytes,
            &m.store_filesystem_free_bytes,
            &m.store_filesystem_capacity_bytes,
            &m.store_writable,
        ] {
            family.clear();
        }
        for replica in &status.replicas {
            let node = replica.node.clone();
            let role = replica.role.map_or("", |r| r.as_str());
            m.storage_replica_full
                .get_or_create(&vec![("node", node.clone()), ("role", role.to_owned())])
                .set(i64::from(replica.full == Some(true)));
            if let Some(store) = &replica.store {
                let node_label = label("node", node.clone());
                m.store_used_bytes
                    .get_or_create(&node_label)
                    .set(store.used_bytes);
                m.store_budget_bytes
                    .get_or_create(&node_label)
                    .set(store.budget_bytes.unwrap_or(0));
                m.store_reserve_bytes
                    .get_or_create(&node_label)
                    .set(store.reserve_bytes);
                m.store_filesystem_free_bytes
                    .get_or_create(&node_label)
                    .set(store.filesystem_free_bytes);
                m.store_filesystem_capacity_bytes
                    .get_or_create(&node_label)
                    .set(store.filesystem_capacity_bytes);
                m.store_writable
                    .get_or_create(&vec![
                        ("node", node),
                        ("reason", store.reason.map_or("", |r| r.as_str()).to_owned()),
                    ])
                    .set(i64::from(store.writable));
            }
        }
    }

    async fn act(
        &self,
        actions: &[Action],
        owners: &BTreeMap<String, OwnerReference>,
    ) -> Result<(), Error> {
        let nodes: Api<RegistryNode> = Api::all(self.client.clone());
        let storage: Api<RegistryStorage> = Api::all(self.client.clone());
        for action in actions {
            match action {
                Action::WriteSecret(data) => self.put_secret(RESOLVED_AUTH_SECRET, data).await?,
                Action::DeleteSecret => {
                    self.delete(
                        &self.secrets(),
                        RESOLVED_AUTH_SECRET,
                        "Secret registry-resolved-auth",
                    )
                    .await?
                }
                Action::ApplyNode { name, spec } => {
                    let what = format!("writing RegistryNode {name}");
                    match nodes.get_opt(name).await.map_err(kube(&what))? {
                        Some(_) => {
                            replace_spec(&nodes, name, &what, |o: &mut RegistryNode| {
                                o.spec = (**spec).clone()
                            })
                            .await?;
                        }
                        None => {
                            let mut object = RegistryNode::new(name, (**spec).clone());
                            object.metadata.owner_references =
                                owners.get(name).map(|o| vec![o.clone()]);
                            nodes
                                .create(&PostParams::default(), &object)
                                .await
                                .map_err(kube(&what))?;
                        }
                    }
                }
                Action::DeleteNode(name) => {
                    self.delete(&nodes, name, &format!("RegistryNode {name}"))
                        .await?
                }
                Action::ApplyStorage(spec) => {
                    let what = "writing RegistryStorage registry";
                    match storage.get_opt(SINGLETON).await.map_err(kube(what))? {
                        Some(_) => {
                            replace_spec(&storage, SINGLETON, what, |o: &mut RegistryStorage| {
                                o.spec = (**spec).clone()
                            })
                            .await?;
                        }
                        None => {
                            let object = RegistryStorage::new(SINGLETON, (**spec).clone());
                            storage
                                .create(&PostParams::default(), &object)
                                .await
                                .map_err(kube(what))?;
                        }
                    }
                }
                Action::DeleteStorage => {
                    self.delete(&storage, SINGLETON, "RegistryStorage registry")
                        .await?
                }
            }
        }
        Ok(())
    }
}

/// Read-modify-replace of an object whose status others write (agents, replicas): a conflict
/// with their write is retried on a fresh read, a few times, rather than failing the pass.
async fn replace_spec<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    set: impl Fn(&mut K),
) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    const ATTEMPTS: usize = 4;
    for attempt in 1..=ATTEMPTS {
        let mut object = api.get(name).await.map_err(kube(what))?;
        set(&mut object);
        match api.replace(name, &PostParams::default(), &object).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < ATTEMPTS => {
                tokio::time::sleep(std::time::Duration::from_millis(50 * attempt as u64)).await;
            }
            Err(e) => return Err(kube(what)(e)),
        }
    }
    Ok(())
}

/// Why a layout was not applied.
enum LayoutError {
    /// The configuration cannot be laid out (reported in `Valid`).
    Invalid(String),
    /// The cluster does not meet the module's prerequisites (reported in `Valid`).
    Unmet(String),
    /// The API failed.
    Api(Error),
}

impl From<Error> for LayoutError {
    fn from(error: Error) -> Self {
        LayoutError::Api(error)
    }
}

/// The registry the cluster will pull from after the switch: the primary upstream the `registry`
/// ModuleConfig names, else the one the suggestion names.
fn pre_switch_target<E>(
    parsed: &Result<api::registry::RegistrySettings, E>,
    suggested: Option<&serde_json::Value>,
) -> Option<probe::Target> {
    let settings = match parsed {
        Ok(s) if s.primary.as_ref().is_some_and(|p| p.upstream.is_some()) => s.clone(),
        _ => settings::parse(Some(&serde_json::json!({
            "mode": "Managed",
            "primary": {"upstream": suggested?},
        })))
        .ok()?,
    };
    let rendered = settings::render(&settings);
    let upstream = rendered.primary.as_ref()?.upstream.as_ref()?;
    let credentials =
        settings::credentials(upstream.auth.as_ref(), "primary.upstream.auth").ok()?;
    Some(probe::Target {
        scheme: upstream.scheme,
        host: upstream.host.clone(),
        path: upstream.path.clone(),
        ca: upstream.ca.clone(),
        credentials,
    })
}
