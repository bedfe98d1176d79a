//! Reconciling one DeckhouseRelease (Deckhouse §4.2): observe the release, every other release,
//! the settings and the cluster facts → ask [`release_plan::task::calculate`] and
//! [`release_plan::deploy::plan`] → write the phase, message and annotations, send the
//! notification, apply.

use std::time::Duration;

use api::deckhouse_release::{DeckhouseRelease, MESSAGE_RESTORED, MESSAGE_SUSPENDED};
use api::keys;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use release_plan::deploy::{self, Delay, Plan, ReleaseInfo, ReleaseState, WebhookBody};
use release_plan::task::{self, Context, Task, TaskType};
use release_plan::{Phase, ReleaseKind, ReleaseVersion};
use serde_json::json;

use crate::Error;
use crate::alerts::blocking_message;
use crate::controller::{Engine, Outcome};
use crate::requirements::{ClusterFacts, migrated_modules_not_downloaded, missing_migrated_module};
use crate::settings::DeckhouseSettings;

/// How soon a release that waits for something outside the controller is looked at again.
pub const REQUEUE_BLOCKED: Duration = Duration::from_secs(15);
/// How soon a delayed release (window, canary, approval, notification) is looked at again.
pub const REQUEUE_DELAYED: Duration = Duration::from_secs(60);

fn phase_of(release: &DeckhouseRelease) -> Phase {
    Phase::parse(
        release
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .map_or("", |p| p.as_str()),
    )
}

fn message_of(release: &DeckhouseRelease) -> &str {
    release.status.as_ref().map_or("", |s| s.message.as_str())
}

fn annotation<'a>(release: &'a DeckhouseRelease, key: &str) -> Option<&'a str> {
    release.annotations().get(key).map(String::as_str)
}

fn flag(release: &DeckhouseRelease, key: &str) -> bool {
    annotation(release, key).is_some_and(keys::parse_bool)
}

/// The task calculator's view of a release.
fn task_release(release: &DeckhouseRelease) -> Option<task::Release> {
    let version = ReleaseVersion::parse(&release.spec.spec.version).ok()?;
    let mut out = task::Release::new(release.name_any(), version, phase_of(release));
    out.forced = flag(release, keys::RELEASE_FORCE);
    out.message = message_of(release).to_owned();
    Some(out)
}

impl Engine {
    /// Reconciles the release `name`.
    pub async fn reconcile(&self, name: &str) -> Result<Outcome, Error> {
        let releases = self.list_releases().await?;
        let Some(release) = releases.iter().find(|r| r.name_any() == name) else {
            return Ok(Outcome::done());
        };
        match phase_of(release) {
            // A release restored from the running version becomes Deployed, whoever gets to
            // it first (the channel sync writes the same status right after creating it).
            Phase::New if flag(release, keys::RELEASE_CURRENT_RESTORED) => {
                self.patch_status(
                    name,
                    json!({
                        "phase": Phase::Deployed.as_str(),
                        "message": MESSAGE_RESTORED,
                        "approved": true,
                        "transitionTime": Time(self.clock.now()),
                    }),
                )
                .await?;
                Ok(Outcome::changed())
            }
            Phase::New => {
                self.set_phase(release, Phase::Pending, "").await?;
                Ok(Outcome::changed())
            }
            Phase::Deployed => self.reconcile_deployed(release).await,
            Phase::Pending => {
                let settings = self.settings().await?;
                self.reconcile_pending(release, &releases, &settings).await
            }
            _ => Ok(Outcome::done()),
        }
    }

    /// Writes phase and message when they differ; `transitionTime` moves with the phase.
    async fn set_phase(
        &self,
        release: &DeckhouseRelease,
        phase: Phase,
        message: &str,
    ) -> Result<bool, Error> {
        if matches!(phase, Phase::Skipped | Phase::Superseded | Phase::Suspended) {
            self.metrics.purge_release_info(&release.name_any());
        }
        if phase_of(release) == phase && message_of(release) == message {
            return Ok(false);
        }
        let mut status = json!({"phase": phase.as_str(), "message": message});
        if phase_of(release) != phase {
            status["transitionTime"] = json!(Time(self.clock.now()));
        }
        self.patch_status(&release.name_any(), status).await?;
        Ok(true)
    }

    async fn reconcile_deployed(&self, release: &DeckhouseRelease) -> Result<Outcome, Error> {
        if !flag(release, keys::RELEASE_IS_UPDATING) {
            return Ok(Outcome::done());
        }
        if !self.readiness.is_ready().await {
            // Deckhouse clears the message and raises d8_is_updating while it waits.
            let mut changed = false;
            if !message_of(release).is_empty() {
                self.patch_status(&release.name_any(), json!({"message": ""}))
                    .await?;
                changed = true;
            }
            self.metrics.set_updating(Some(&release.name_any()));
            return Ok(Outcome::requeue(changed, REQUEUE_BLOCKED));
        }
        self.metrics.set_updating(None);
        self.annotate(
            &release.name_any(),
            &[
                (keys::RELEASE_IS_UPDATING, Some("false")),
                (keys::RELEASE_NOTIFIED, Some("true")),
            ],
        )
        .await?;
        Ok(Outcome::changed())
    }

    async fn reconcile_pending(
        &self,
        release: &DeckhouseRelease,
        releases: &[DeckhouseRelease],
        settings: &DeckhouseSettings,
    ) -> Result<Outcome, Error> {
        let name = release.name_any();
        if flag(release, keys::RELEASE_SUSPENDED) {
            self.set_phase(release, Phase::Suspended, MESSAGE_SUSPENDED)
                .await?;
            self.annotate(&name, &[(keys::RELEASE_SUSPENDED, None)])
                .await?;
            return Ok(Outcome::changed());
        }
        let approved = release.is_manually_approved();
        let mut changed = false;
        if settings.mode == deploy::UpdateMode::Manual
            && release.status.as_ref().map(|s| s.approved) != Some(approved)
        {
            self.patch_status(&name, json!({ "approved": approved }))
                .await?;
            changed = true;
        }
        let version = ReleaseVersion::parse(&release.spec.spec.version)?;

        let all: Vec<task::Release> = releases.iter().filter_map(task_release).collect();
        let context = Context {
            kind: ReleaseKind::Deckhouse,
            lts: settings.release_channel.is_some_and(|c| c.is_lts()),
        };
        let task = match task::calculate(&all, &name, context) {
            Ok(task) => task,
            Err(release_plan::Error::ReleaseIsAlreadyDeployed) => {
                tracing::warn!(release = %name, "release is already deployed");
                return Ok(Outcome::done());
            }
            Err(e) => return Err(e.into()),
        };
        // Deckhouse checks `force` before acting on the verdict: a forced release is applied
        // even when the task calculator says Skip or Await (step-by-step).
        let forced = flag(release, keys::RELEASE_FORCE);
        if forced {
            let how = Applied::forced(settings);
            self.apply(release, releases, &task, &how).await?;
            return Ok(Outcome::changed());
        }
        match task.task_type {
            TaskType::Skip => {
                changed |= self
                    .set_phase(release, Phase::Skipped, &task.message)
                    .await?;
                return Ok(Outcome {
                    changed,
                    requeue_after: None,
                });
            }
            TaskType::Await => {
                changed |= self
                    .set_phase(release, Phase::Pending, &task.message)
                    .await?;
                return Ok(Outcome::requeue(changed, REQUEUE_BLOCKED));
            }
            TaskType::Process => {}
        }

        let state = ReleaseState {
            name: name.clone(),
            apply_after: release.spec.spec.apply_after.as_ref().map(|t| t.0),
            apply_now: flag(release, keys::RELEASE_APPLY_NOW),
            forced,
            notified: flag(release, keys::RELEASE_NOTIFIED),
            manually_approved: approved,
            disruption_approved: annotation(release, keys::RELEASE_DISRUPTION_APPROVED)
                == Some("true"),
        };
        let facts = ClusterFacts::gather(&self.client, &self.kubernetes_version).await?;
        let requirement_failures =
            self.checks
                .requirement_failures(&version, &release.spec.spec.requirements, &facts);
        self.metrics.set_migrated_module_not_found(
            missing_migrated_module(&release.spec.spec.requirements, &facts).as_deref(),
        );
        self.metrics
            .set_migrated_modules_not_downloaded(&migrated_modules_not_downloaded(
                &release.spec.spec.requirements,
                &facts,
            ));
        let disruption_reasons = self
            .checks
            .disruption_reasons(&release.spec.spec.disruptions, &facts);
        let pod_ready = self.readiness.is_ready().await;
        let deploy_settings = settings.deploy_settings();
        let now = self.clock.now();
        let input = deploy::Input {
            settings: &deploy_settings,
            release: &state,
            task: &task,
            now,
            pod_ready,
            requirement_failures: &requirement_failures,
            disruption_reasons: &disruption_reasons,
        };
        let plan = deploy::plan(&input)?;
        // d8_release_info as planned; a failed notification below rewrites it.
        let release_info = ReleaseInfo::of(&input, &plan, false);
        if let Some(info) = &release_info {
            self.metrics.set_release_info(&name, info);
        }

        // blockOnAlerts holds everything but forced releases (handled above).
        if settings.block_on_alerts.enabled && !matches!(plan, Plan::Blocked { .. }) {
            let alerts = self.alerts.firing().await?;
            if let Some(message) = blocking_message(&alerts, settings.block_on_alerts.severity) {
                changed |= self.set_phase(release, Phase::Pending, &message).await?;
                return Ok(Outcome::requeue(changed, REQUEUE_BLOCKED));
            }
        }

        match plan {
            Plan::ApplyForced => {
                let how = Applied::forced(settings);
                self.apply(release, releases, &task, &how).await?;
                Ok(Outcome::changed())
            }
            Plan::Blocked { message } => {
                changed |= self.set_phase(release, Phase::Pending, &message).await?;
                Ok(Outcome::requeue(changed, REQUEUE_BLOCKED))
            }
            Plan::Requeue => Ok(Outcome::requeue(changed, REQUEUE_BLOCKED)),
            Plan::DeployTime { notify, delay } => {
                if let Some(request) = notify {
                    let body = WebhookBody::new(
                        ReleaseKind::Deckhouse,
                        &version,
                        release.spec.spec.requirements.clone(),
                        release.spec.spec.changelog_link.as_deref().unwrap_or(""),
                        request.apply_time,
                    );
                    match self.notifier.send(&settings.notification, &body).await {
                        Ok(()) => {
                            // Recorded at once: the webhook is called at most once per release.
                            self.annotate(&name, &[(keys::RELEASE_NOTIFIED, Some("true"))])
                                .await?;
                            changed = true;
                            tracing::info!(release = %name, "release notification sent");
                        }
                        Err(error) => {
                            if let Some(info) = release_info {
                                let info = ReleaseInfo {
                                    notification_not_sent: true,
                                    ..info
                                };
                                self.metrics.set_release_info(&name, &info);
                            }
                            let failed = deploy::notification_failed(delay.as_ref(), &error);
                            changed |= self.write_delay(release, &failed).await?;
                            return Ok(Outcome::requeue(changed, REQUEUE_BLOCKED));
                        }
                    }
                }
                match delay {
                    Some(delay) => {
                        changed |= self.write_delay(release, &delay).await?;
                        Ok(Outcome::requeue(changed, REQUEUE_DELAYED))
                    }
                    None => {
                        let how = Applied::checked(settings);
                        self.apply(release, releases, &task, &how).await?;
                        Ok(Outcome::changed())
                    }
                }
            }
        }
    }

    /// Records a delay: Pending with its message, `isUpdating=false`, `notified`, and the
    /// notification shift of `spec.applyAfter` when there is one.
    async fn write_delay(&self, release: &DeckhouseRelease, delay: &Delay) -> Result<bool, Error> {
        let name = release.name_any();
        let mut changed = self
            .set_phase(release, Phase::Pending, &delay.message)
            .await?;
        let notified = if delay.notified { "true" } else { "false" };
        let mut wanted: Vec<(&str, Option<&str>)> = vec![
            (keys::RELEASE_IS_UPDATING, Some("false")),
            (keys::RELEASE_NOTIFIED, Some(notified)),
        ];
        if delay.apply_after.is_some() {
            wanted.push((keys::RELEASE_NOTIFICATION_TIME_SHIFT, Some("true")));
        }
        if wanted.iter().any(|(k, v)| annotation(release, k) != *v) {
            self.annotate(&name, &wanted).await?;
            changed = true;
        }
        if let Some(after) = delay.apply_after
            && release.spec.spec.apply_after.as_ref().map(|t| t.0) != Some(after)
        {
            self.releases_api()
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"applyAfter": Time(after)}})),
                )
                .await
                .map_err(|e| Error::kube(format!("set applyAfter of {name}"), e))?;
            changed = true;
        }
        Ok(changed)
    }

    /// Applies the release: switches the platform, supersedes the previous Deployed release,
    /// and records the update on the release.
    async fn apply(
        &self,
        release: &DeckhouseRelease,
        releases: &[DeckhouseRelease],
        task: &Task,
        how: &Applied,
    ) -> Result<(), Error> {
        let name = release.name_any();
        let version = &release.spec.spec.version;
        self.deployer.deploy(version).await?;
        for previous in releases
            .iter()
            .filter(|r| r.name_any() != name && phase_of(r) == Phase::Deployed)
        {
            self.set_phase(previous, Phase::Superseded, "").await?;
        }
        let update_info = how.update_info(task).to_string();
        self.record_update_initiated(release, task, how).await;
        self.annotate(
            &name,
            &[
                (keys::RELEASE_IS_UPDATING, Some("true")),
                (keys::RELEASE_NOTIFIED, Some("false")),
                (keys::RELEASE_UPDATE_INFO, Some(&update_info)),
                (keys::RELEASE_APPLY_NOW, None),
                (keys::RELEASE_FORCE, None),
            ],
        )
        .await?;
        self.set_phase(release, Phase::Deployed, "").await?;
        tracing::info!(release = %name, "release deployed");
        Ok(())
    }
}

/// How a release came to be applied: Deckhouse's `ReleaseUpdateInfo`.
#[derive(Clone, Debug)]
pub(crate) struct Applied {
    mode: &'static str,
    forced: bool,
    pod_ready: bool,
    requirements_met: bool,
}

impl Applied {
    /// The `force` annotation: nothing was checked.
    fn forced(settings: &DeckhouseSettings) -> Self {
        Self {
            mode: mode_name(settings.mode),
            forced: true,
            pod_ready: false,
            requirements_met: false,
        }
    }

    /// Every check passed.
    fn checked(settings: &DeckhouseSettings) -> Self {
        Self {
            mode: mode_name(settings.mode),
            forced: false,
            pod_ready: true,
            requirements_met: true,
        }
    }

    /// The `release.deckhouse.io/update-info` annotation, in Deckhouse's JSON.
    fn update_info(&self, task: &Task) -> serde_json::Value {
        json!({
            "taskCalculation": {
                "taskType": task.task_type.as_str(),
                "isPatch": task.is_patch,
                "isMajor": task.is_major,
                "isFromTo": task.is_from_to,
                "isSingle": task.is_single,
                "isLatest": task.is_latest,
            },
            "updatePolicy": {"mode": self.mode},
            "forceRelease": {"isForced": self.forced},
            "podReadiness": {"isReady": self.pod_ready},
            "requirementsCheck": {"requirementsMet": self.requirements_met},
        })
    }

    /// The note of the `ReleaseUpdateInitiated` event.
    fn event_note(&self, task: &Task) -> String {
        format!(
            "Release update initiated: task={}, updateMode={}, force={}, podReady={}, requirementsMet={}",
            task.task_type.as_str(),
            self.mode,
            self.forced,
            self.pod_ready,
            self.requirements_met
        )
    }
}

fn mode_name(mode: deploy::UpdateMode) -> &'static str {
    match mode {
        deploy::UpdateMode::Auto => "Auto",
        deploy::UpdateMode::AutoPatch => "AutoPatch",
        deploy::UpdateMode::Manual => "Manual",
    }
}

impl Engine {
    /// The `ReleaseUpdateInitiated` event on the release (best effort: an event that cannot be
    /// written never holds an update).
    async fn record_update_initiated(
        &self,
        release: &DeckhouseRelease,
        task: &Task,
        how: &Applied,
    ) {
        let event = Event {
            type_: EventType::Normal,
            reason: "ReleaseUpdateInitiated".into(),
            note: Some(how.event_note(task)),
            action: "Apply".into(),
            secondary: None,
        };
        if let Err(error) = self
            .recorder
            .publish(&event, &release.object_ref(&()))
            .await
        {
            tracing::debug!(release = %release.name_any(), %error, "recording the ReleaseUpdateInitiated event");
        }
    }
}
