//! The release engine end to end: the embedded API server, a real `docker-registry` holding the
//! release channel and release images, a real HTTP receiver for notifications, and time moved
//! by hand instead of waited for.

mod common;
mod image_address;
mod ingress_nginx;
mod registry_access;

use std::sync::Arc;
use std::time::Duration;

use api::module::Module;
use api::module_source::ModuleSource;
use axum::http::StatusCode;
use base64::Engine as _;
use common::{CLUSTER_UUID, Cluster, Receiver, at};
use jiff::SignedDuration;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use release_controller::alerts::{Alert, ClusterAlerts};
use release_controller::apply::HttpReadiness;
use release_controller::channel::{ChannelOutcome, Synced};
use release_controller::requirements::{Checks, KubernetesVersionSource};
use serde_json::json;

fn synced(outcome: ChannelOutcome) -> Synced {
    match outcome {
        ChannelOutcome::Synced(s) => s,
        other => panic!("expected a sync, got {other:?}"),
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

const APPROVAL: &str =
    "Release is waiting for the 'release.deckhouse.io/approved: \"true\"' annotation";

/// Deployed 1.66.3, tags 1.66.5, 1.67.5, 1.67.11, 1.68.1, 1.68.3, 1.68.5, channel 1.68.5:
/// 1.66.3 is restored, 1.67.11 and 1.68.5 are created; in Manual mode each waits for approval
/// in order, and an approval applies it.
#[tokio::test]
async fn channel_moving_from_1_66_to_1_68_creates_the_chain_and_manual_mode_waits_for_approval() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    for v in [
        "v1.66.5", "v1.67.5", "v1.67.11", "v1.68.1", "v1.68.3", "v1.68.5",
    ] {
        c.publish_version(v).await;
    }
    c.publish_channel("stable", json!({"version": "v1.68.5"}))
        .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Manual"}}))
        .await;

    let s = synced(c.engine.sync_channel().await.unwrap());
    assert_eq!(s.restored.as_deref(), Some("v1.66.3"));
    assert_eq!(s.created, names(&["v1.67.11", "v1.68.5"]));
    assert!(s.deleted.is_empty() && s.suspended.is_empty());

    let restored = c.release("v1.66.3").await;
    assert!(restored.spec.approved);
    assert_eq!(
        Cluster::annotations(&restored)["release.deckhouse.io/current-restored"],
        "true"
    );
    assert_eq!(
        c.phase("v1.66.3").await,
        ("Deployed".into(), "Release object was restored".into())
    );
    let created = c.release("v1.68.5").await;
    assert_eq!(created.spec.spec.version, "v1.68.5");
    assert_eq!(
        created.spec.spec.changelog_link.as_deref(),
        Some("https://github.com/deckhouse/deckhouse/releases/tag/v1.68.5")
    );
    assert_eq!(
        Cluster::annotations(&created)["release.deckhouse.io/change-cause"],
        "check release (step-by-step)"
    );

    // The same channel image again: one HEAD, nothing to do.
    assert_eq!(
        c.engine.sync_channel().await.unwrap(),
        ChannelOutcome::Unchanged
    );

    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.summary().await,
        vec![
            (
                "v1.66.3".into(),
                "Deployed".into(),
                "Release object was restored".into()
            ),
            ("v1.67.11".into(), "Pending".into(), APPROVAL.into()),
            (
                "v1.68.5".into(),
                "Pending".into(),
                "awaiting for v1.67.11 release to be deployed".into()
            ),
        ]
    );
    assert!(!c.release("v1.67.11").await.status.unwrap().approved);
    assert_eq!(c.running().await, "v1.66.3");
    // d8_release_info says the release waits for manual approval, one minor behind.
    let metrics = c.engine.metrics().encode();
    assert!(
        metrics.contains("d8_release_info{name=\"v1.67.11\",manualApproval=\"true\",disruptionApproval=\"false\",requirementsNotMet=\"false\",notificationNotSent=\"false\",releaseQueueDepth=\"2\""),
        "{metrics}"
    );

    // Approve with the top-level field.
    c.releases()
        .patch(
            "v1.67.11",
            &PatchParams::default(),
            &Patch::Merge(json!({"approved": true})),
        )
        .await
        .unwrap();
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.67.11");
    assert_eq!(c.phase("v1.67.11").await.0, "Deployed");
    assert_eq!(c.phase("v1.66.3").await.0, "Superseded");
    assert_eq!(
        c.phase("v1.68.5").await,
        ("Pending".into(), APPROVAL.into())
    );
    let deployed = c.release("v1.67.11").await;
    let annotations = Cluster::annotations(&deployed);
    // The pod is ready at once here, so the update is over and the release counts as notified.
    assert_eq!(annotations["release.deckhouse.io/isUpdating"], "false");
    assert_eq!(annotations["release.deckhouse.io/notified"], "true");
    let info: serde_json::Value =
        serde_json::from_str(&annotations["release.deckhouse.io/update-info"]).unwrap();
    assert_eq!(
        info,
        json!({
            "taskCalculation": {"taskType": "process", "isPatch": false, "isMajor": false,
                "isFromTo": false, "isSingle": false, "isLatest": false},
            "updatePolicy": {"mode": "Manual"},
            "forceRelease": {"isForced": false},
            "podReadiness": {"isReady": true},
            "requirementsCheck": {"requirementsMet": true},
        })
    );
    // And Deckhouse's event on the release.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(c.client.clone(), "default");
    let notes: Vec<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("ReleaseUpdateInitiated"))
        .filter_map(|e| e.note)
        .collect();
    assert!(
        notes.contains(&"Release update initiated: task=process, updateMode=Manual, force=false, podReady=true, requirementsMet=true".to_owned()),
        "{notes:?}"
    );

    // Approve with the annotation.
    c.annotate("v1.68.5", "release.deckhouse.io/approved", "true")
        .await;
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.68.5");
    assert_eq!(c.phase("v1.68.5").await.0, "Deployed");
    assert_eq!(c.phase("v1.67.11").await.0, "Superseded");
    // A superseded release has no d8_release_info series left.
    let metrics = c.engine.metrics().encode();
    assert!(!metrics.contains("name=\"v1.67.11\""), "{metrics}");
}

/// Auto mode with a window: outside it the release waits with Deckhouse's message naming the
/// next opening; inside it the release is applied.
#[tokio::test]
async fn auto_mode_applies_only_inside_the_update_window() {
    // Monday 08:00 UTC; the window opens at 10:00.
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    c.publish_version("v1.67.0").await;
    c.publish_channel("stable", json!({"version": "v1.67.0"}))
        .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {
        "mode": "Auto", "windows": [{"from": "10:00", "to": "12:00", "days": ["Mon"]}]
    }}))
    .await;
    let s = synced(c.engine.sync_channel().await.unwrap());
    assert_eq!(s.created, names(&["v1.67.0"]));
    assert_eq!(
        Cluster::annotations(&c.release("v1.67.0").await)["release.deckhouse.io/change-cause"],
        "check release (from deployed)"
    );

    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.67.0").await,
        (
            "Pending".into(),
            "Release is waiting for the update window until 01 Jan 24 10:00 UTC".into()
        )
    );
    assert_eq!(c.running().await, "v1.66.3");

    // 09:59: still closed.
    c.clock.set(at("2024-01-01T09:59:00Z"));
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.66.3");

    c.clock.set(at("2024-01-01T10:30:00Z"));
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.67.0");
    assert_eq!(c.phase("v1.67.0").await, ("Deployed".into(), String::new()));
    assert_eq!(c.phase("v1.66.3").await.0, "Superseded");
}

/// A canary channel: this cluster's wave sets `applyAfter`; the release waits until then.
#[tokio::test]
async fn canary_wave_sets_apply_after_and_holds_the_release() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    // A version whose wave for this cluster is not 0 (wave 0 has no delay).
    let (version, wave) = (0..50)
        .map(|p| format!("v1.67.{p}"))
        .map(|v| {
            let w = release_plan::canary::wave(CLUSTER_UUID, &v, 5);
            (v, w)
        })
        .find(|(_, w)| *w != 0)
        .unwrap();
    c.publish_version(&version).await;
    c.publish_channel(
        "stable",
        json!({"version": version, "canary": {"stable": {"enabled": true, "waves": 5, "interval": "30m"}}}),
    )
    .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Auto"}}))
        .await;
    c.engine.sync_channel().await.unwrap();

    let expected = at("2024-01-01T08:00:00Z")
        .checked_add(SignedDuration::from_mins(30 * wave as i64))
        .unwrap();
    let release = c.release(&version).await;
    assert_eq!(
        release.spec.spec.apply_after.as_ref().map(|t| t.0),
        Some(expected)
    );

    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase(&version).await,
        (
            "Pending".into(),
            format!(
                "Release is postponed until {}",
                release_plan::deploy::format_until(expected)
            )
        )
    );
    assert_eq!(c.running().await, "v1.66.3");

    c.clock
        .set(expected.checked_add(SignedDuration::from_mins(1)).unwrap());
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, version);
}

/// The notification webhook: the documented body, with Basic auth, received exactly once; the
/// minimal notification time postpones the release.
#[tokio::test]
async fn notification_is_posted_once_with_the_documented_body() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    let receiver = Receiver::start(StatusCode::OK).await;
    c.publish_version("v1.67.0").await;
    c.publish_channel(
        "stable",
        json!({"version": "v1.67.0", "requirements": {"k8s": "1.27"}}),
    )
    .await;
    c.settings(
        json!({"releaseChannel": "Stable", "update": {"mode": "Auto", "notification": {
            "webhook": receiver.url(), "minimalNotificationTime": "1h",
            "auth": {"basic": {"username": "ops", "password": "s3cret"}}
        }}}),
    )
    .await;
    c.engine.sync_channel().await.unwrap();
    c.engine.reconcile("v1.67.0").await.unwrap(); // "" → Pending
    c.engine.reconcile("v1.67.0").await.unwrap();

    let received = receiver.received();
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(
        received[0].body,
        json!({
            "subject": "Deckhouse",
            "version": "1.67.0",
            "requirements": {"k8s": "1.27"},
            "changelogLink": "https://github.com/deckhouse/deckhouse/releases/tag/v1.67.0",
            "applyTime": "2024-01-01T09:00:00Z",
            "message": "New Deckhouse Release 1.67.0 is available. Release will be applied at: Monday, 01-Jan-24 09:00:00 UTC",
        })
    );
    let basic = base64::engine::general_purpose::STANDARD.encode("ops:s3cret");
    assert_eq!(
        received[0].authorization.as_deref(),
        Some(format!("Basic {basic}").as_str())
    );
    assert_eq!(
        received[0].content_type.as_deref(),
        Some("application/json")
    );
    assert_eq!(
        c.phase("v1.67.0").await,
        (
            "Pending".into(),
            "Release is postponed by notification until 01 Jan 24 09:00 UTC".into()
        )
    );
    let release = c.release("v1.67.0").await;
    let annotations = Cluster::annotations(&release);
    assert_eq!(annotations["release.deckhouse.io/notified"], "true");
    assert_eq!(
        annotations["release.deckhouse.io/notification-time-shift"],
        "true"
    );
    assert_eq!(
        release.spec.spec.apply_after.map(|t| t.0),
        Some(at("2024-01-01T09:00:00Z"))
    );

    // Looking again sends nothing more; the shifted applyAfter now holds the release.
    c.clock.set(at("2024-01-01T08:30:00Z"));
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(receiver.received().len(), 1);
    assert_eq!(
        c.phase("v1.67.0").await,
        (
            "Pending".into(),
            "Release is postponed until 01 Jan 24 09:00 UTC".into()
        )
    );
    assert_eq!(c.running().await, "v1.66.3");

    c.clock.set(at("2024-01-01T09:01:00Z"));
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.67.0");
    assert_eq!(receiver.received().len(), 1);
}

/// A receiver answering 500 blocks the release with Deckhouse's message after 5 tries spaced
/// by `retryMinTime` doubled (2 s, 4 s, 8 s, 16 s on the injected clock).
#[tokio::test]
async fn failing_notification_receiver_blocks_the_release() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    let receiver = Receiver::start(StatusCode::INTERNAL_SERVER_ERROR).await;
    c.publish_version("v1.67.0").await;
    c.publish_channel("stable", json!({"version": "v1.67.0"}))
        .await;
    c.settings(
        json!({"releaseChannel": "Stable", "update": {"mode": "Auto", "notification": {
            "webhook": receiver.url(), "auth": {"bearerToken": "tok-1"}
        }}}),
    )
    .await;
    c.engine.sync_channel().await.unwrap();
    c.engine.reconcile("v1.67.0").await.unwrap(); // "" → Pending
    c.engine.reconcile("v1.67.0").await.unwrap();

    let received = receiver.received();
    assert_eq!(received.len(), 5);
    assert!(
        received
            .iter()
            .all(|r| r.authorization.as_deref() == Some("Bearer tok-1"))
    );
    assert_eq!(c.clock_now(), at("2024-01-01T08:00:30Z"));
    assert_eq!(
        c.phase("v1.67.0").await,
        (
            "Pending".into(),
            "Release is blocked, failed to send release notification: send release notification: send webhook notification: after 5 attempts, last error: webhook response with status code 500, with empty body".into()
        )
    );
    let annotations = Cluster::annotations(&c.release("v1.67.0").await);
    assert_eq!(annotations["release.deckhouse.io/notified"], "false");
    assert_eq!(c.running().await, "v1.66.3");
}

/// `apply-now` skips approval; `force` skips even failed requirements; both annotations are
/// removed once applied.
#[tokio::test]
async fn apply_now_and_force_behave_as_documented() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    c.publish_version("v1.67.0").await;
    c.publish_channel("stable", json!({"version": "v1.67.0"}))
        .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Manual"}}))
        .await;
    c.engine.sync_channel().await.unwrap();
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.67.0").await,
        ("Pending".into(), APPROVAL.into())
    );

    c.annotate("v1.67.0", "release.deckhouse.io/apply-now", "true")
        .await;
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.67.0");
    assert_eq!(c.phase("v1.67.0").await.0, "Deployed");
    assert!(
        !Cluster::annotations(&c.release("v1.67.0").await)
            .contains_key("release.deckhouse.io/apply-now")
    );

    // The next release needs a newer Kubernetes than the cluster runs.
    c.publish_version("v1.68.0").await;
    c.publish_channel(
        "stable",
        json!({"version": "v1.68.0", "requirements": {"k8s": "1.30"}}),
    )
    .await;
    let s = synced(c.engine.sync_channel().await.unwrap());
    assert_eq!(s.created, names(&["v1.68.0"]));
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.68.0").await,
        (
            "Pending".into(),
            "\"k8s\" requirement for DeckhouseRelease \"1.68.0\" not met: current kubernetes version is lower than required".into()
        )
    );
    // apply-now does not override requirements.
    c.annotate("v1.68.0", "release.deckhouse.io/apply-now", "true")
        .await;
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.67.0");

    c.annotate("v1.68.0", "release.deckhouse.io/force", "true")
        .await;
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.68.0");
    assert_eq!(c.phase("v1.68.0").await.0, "Deployed");
    let annotations = Cluster::annotations(&c.release("v1.68.0").await);
    assert!(!annotations.contains_key("release.deckhouse.io/force"));
    assert!(!annotations.contains_key("release.deckhouse.io/apply-now"));
}

/// Deckhouse checks `force` before acting on the task calculator's verdict: a forced release
/// that the step-by-step rule would hold ("awaiting for v… release to be deployed") is applied
/// at once, and the release it skipped over is marked Skipped.
#[tokio::test]
async fn a_forced_release_is_applied_even_when_step_by_step_would_make_it_wait() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    for v in ["v1.67.11", "v1.68.5"] {
        c.publish_version(v).await;
    }
    c.publish_channel("stable", json!({"version": "v1.68.5"}))
        .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Manual"}}))
        .await;
    let s = synced(c.engine.sync_channel().await.unwrap());
    assert_eq!(s.created, names(&["v1.67.11", "v1.68.5"]));
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.68.5").await,
        (
            "Pending".into(),
            "awaiting for v1.67.11 release to be deployed".into()
        )
    );

    c.annotate("v1.68.5", "release.deckhouse.io/force", "true")
        .await;
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.68.5");
    assert_eq!(c.phase("v1.68.5").await.0, "Deployed");
    assert!(
        !Cluster::annotations(&c.release("v1.68.5").await)
            .contains_key("release.deckhouse.io/force")
    );
    assert_eq!(c.phase("v1.67.11").await.0, "Skipped");
}

/// `blockOnAlerts`: a firing alert at the threshold or more critical holds the release; a less
/// critical one does not; a forced release passes.
#[tokio::test]
async fn firing_alerts_block_updates_until_they_stop() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    c.publish_version("v1.67.0").await;
    c.publish_channel("stable", json!({"version": "v1.67.0"}))
        .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {
        "mode": "Auto", "blockOnAlerts": {"enabled": true, "severity": 4}
    }}))
    .await;
    c.alerts.set(vec![
        Alert::new("D8Quiet", 7),
        Alert::new("KubernetesVersionEndOfLife", 3),
    ]);
    c.engine.sync_channel().await.unwrap();
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.67.0").await,
        (
            "Pending".into(),
            "Release is blocked by the firing alert KubernetesVersionEndOfLife with severity level 3 (update.blockOnAlerts.severity is 4)".into()
        )
    );
    assert_eq!(c.running().await, "v1.66.3");

    c.alerts.set(vec![Alert::new("D8Quiet", 7)]);
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.67.0");
}

/// `disruptionApprovalMode: Manual`: a minor release with a registered disruption waits for
/// `disruption-approved`.
#[tokio::test]
async fn disruptive_release_waits_for_disruption_approval() {
    let checks = Checks::with_defaults().disruption("ingressNginx", |_| {
        Some("ingress-nginx controllers will restart".into())
    });
    let c = Cluster::start_with("v1.66.3", "2024-01-01T08:00:00Z", checks).await;
    c.publish_version("v1.67.0").await;
    c.publish_channel(
        "stable",
        json!({"version": "v1.67.0", "disruptions": {"1.67": ["ingressNginx"], "1.66": ["other"]}}),
    )
    .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {
        "mode": "Auto", "disruptionApprovalMode": "Manual"
    }}))
    .await;
    c.engine.sync_channel().await.unwrap();
    assert_eq!(
        c.release("v1.67.0").await.spec.spec.disruptions,
        names(&["ingressNginx"])
    );
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.67.0").await,
        (
            "Pending".into(),
            "release blocked, disruption approval required: (`kubectl annotate DeckhouseRelease v1.67.0 release.deckhouse.io/disruption-approved=true`): ingress-nginx controllers will restart".into()
        )
    );
    c.annotate(
        "v1.67.0",
        "release.deckhouse.io/disruption-approved",
        "true",
    )
    .await;
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.67.0");
}

/// A channel that suspends its version suspends the release; lifting it resumes the release.
#[tokio::test]
async fn channel_suspend_and_resume() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    c.publish_version("v1.67.0").await;
    c.publish_channel("stable", json!({"version": "v1.67.0", "suspend": true}))
        .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Auto"}}))
        .await;
    c.engine.sync_channel().await.unwrap();
    assert_eq!(
        Cluster::annotations(&c.release("v1.67.0").await)["release.deckhouse.io/suspended"],
        "true"
    );
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.67.0").await,
        ("Suspended".into(), "Release is suspended".into())
    );
    assert!(
        !Cluster::annotations(&c.release("v1.67.0").await)
            .contains_key("release.deckhouse.io/suspended")
    );
    assert_eq!(c.running().await, "v1.66.3");

    c.publish_channel("stable", json!({"version": "v1.67.0", "suspend": false}))
        .await;
    let s = synced(c.engine.sync_channel().await.unwrap());
    assert_eq!(s.resumed, names(&["v1.67.0"]));
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.67.0");
}

/// A channel rolled back below a Pending release deletes that release and creates the
/// channel's version.
#[tokio::test]
async fn channel_rollback_deletes_newer_pending_releases() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    c.publish_version("v1.67.0").await;
    c.publish_version("v1.66.5").await;
    c.publish_channel("stable", json!({"version": "v1.67.0"}))
        .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Manual"}}))
        .await;
    c.engine.sync_channel().await.unwrap();
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.phase("v1.67.0").await.0, "Pending");

    c.publish_channel("stable", json!({"version": "v1.66.5"}))
        .await;
    let s = synced(c.engine.sync_channel().await.unwrap());
    assert_eq!(s.created, names(&["v1.66.5"]));
    assert_eq!(s.deleted, names(&["v1.67.0"]));
    assert!(c.releases().get_opt("v1.67.0").await.unwrap().is_none());
    // Manual mode: the patch waits for approval too.
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.66.5").await,
        ("Pending".into(), APPROVAL.into())
    );
}

/// The running controller: a settings change (dev mode → a channel) wakes the channel loop at
/// once, and the DeckhouseRelease controller applies the new release.
#[tokio::test]
async fn running_engine_follows_a_settings_change() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    c.publish_version("v1.67.0").await;
    c.publish_channel("stable", json!({"version": "v1.67.0"}))
        .await;
    c.settings(json!({"update": {"mode": "Auto"}})).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let engine = Arc::clone(&c.engine);
    let running = tokio::spawn(engine.run(async move {
        let _ = stopped.await;
    }));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(c.summary().await.is_empty(), "dev mode follows no channel");
    // … and says so for D8DeckhouseIsNotOnReleaseChannel.
    assert!(
        c.engine
            .metrics()
            .encode()
            .lines()
            .any(|l| l == "deckhouse_release_channel{release_channel=\"\"} 1")
    );

    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Auto"}}))
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if c.running().await == "v1.67.0" && c.phase("v1.67.0").await.0 == "Deployed" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not applied: {:?}",
            c.summary().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = c.engine.metrics().encode();
    assert!(
        metrics
            .lines()
            .any(|l| l == "deckhouse_release_channel{release_channel=\"Stable\"} 1"),
        "{metrics}"
    );
    assert!(!metrics.contains("release_channel=\"\""), "{metrics}");
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the engine stops on shutdown")
        .unwrap();
}

/// The cleanup: extra Deployed releases are superseded, Pending releases older than the
/// Deployed one are skipped with Deckhouse's message, and only the newest 10 outdated releases
/// are kept.
#[tokio::test]
async fn cleanup_supersedes_skips_and_keeps_ten_outdated_releases() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    let mut wanted: Vec<(String, &str)> = (50..62)
        .map(|minor| (format!("v1.{minor}.0"), "Superseded"))
        .collect();
    wanted.push(("v1.62.0".into(), "Pending"));
    wanted.push(("v1.65.0".into(), "Deployed"));
    wanted.push(("v1.66.3".into(), "Deployed"));
    for (name, phase) in &wanted {
        let release: api::deckhouse_release::DeckhouseRelease = serde_json::from_value(json!({
            "apiVersion": "deckhouse.io/v1alpha1", "kind": "DeckhouseRelease",
            "metadata": {"name": name}, "spec": {"version": name},
        }))
        .unwrap();
        c.releases()
            .create(&Default::default(), &release)
            .await
            .unwrap();
        c.releases()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": phase}})),
            )
            .await
            .unwrap();
    }
    let plan = c.engine.cleanup().await.unwrap();
    assert_eq!(plan.supersede, names(&["v1.65.0"]));
    assert_eq!(plan.skip, names(&["v1.62.0"]));
    assert_eq!(plan.delete, names(&["v1.51.0", "v1.50.0"]));
    assert_eq!(c.phase("v1.65.0").await.0, "Superseded");
    assert_eq!(
        c.phase("v1.62.0").await,
        ("Skipped".into(), "Skipped by cleanup hook".into())
    );
    assert!(c.releases().get_opt("v1.50.0").await.unwrap().is_none());
    assert!(c.releases().get_opt("v1.52.0").await.unwrap().is_some());
    assert_eq!(c.phase("v1.66.3").await.0, "Deployed");
}

/// Invalid settings stop the reconcile with the schema's message, and the one backoff policy
/// doubles per consecutive failure up to its ceiling.
#[tokio::test]
async fn invalid_settings_fail_the_reconcile_and_back_off() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    c.publish_version("v1.67.0").await;
    c.publish_channel("stable", json!({"version": "v1.67.0"}))
        .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Auto"}}))
        .await;
    c.engine.sync_channel().await.unwrap();
    c.engine.reconcile("v1.67.0").await.unwrap();
    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Whenever"}}))
        .await;
    let err = c.engine.reconcile("v1.67.0").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the deckhouse ModuleConfig settings are invalid: update.mode in body should be one of [AutoPatch Auto Manual]"
    );
    assert_eq!(c.running().await, "v1.66.3");
    let delays: Vec<u64> = (0..8)
        .map(|_| c.engine.error_policy("v1.67.0", &err).as_secs())
        .collect();
    assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300, 300]);
}

/// Deckhouse's requirement checks against what the cluster holds: an enabled Module's
/// `requirements.deckhouse` and `requirements.kubernetes` (the latter against `autoK8sVersion`
/// because the cluster configuration Secret says `kubernetesVersion: Automatic`), and a
/// `migratedModules` entry a ModuleSource offers only with a pull error. The release waits with
/// the three messages joined by `;`, `d8_release_info{requirementsNotMet="true"}` and
/// `d8_migrated_module_not_found{module}` are raised; once offered, a migrated module still holds
/// the release until it is downloaded (`is not pre-downloaded yet`, Deckhouse's check), and
/// fixing the cluster lets it apply.
#[tokio::test]
async fn requirements_read_modules_sources_and_the_cluster_configuration() {
    let c = Cluster::start_full(
        "v1.67.0",
        "2024-01-01T08:00:00Z",
        Checks::with_defaults(),
        KubernetesVersionSource::ClusterConfiguration,
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), "kube-system");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "d8-cluster-configuration", "namespace": "kube-system"},
        "data": {"cluster-configuration.yaml": base64::engine::general_purpose::STANDARD.encode(
            "apiVersion: deckhouse.io/v1\nkind: ClusterConfiguration\nkubernetesVersion: Automatic\n"
        )},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let modules: Api<Module> = Api::all(c.client.clone());
    for (name, enabled, requirements) in [
        (
            "echo",
            "True",
            json!({"deckhouse": "< 1.68", "kubernetes": "< 1.31"}),
        ),
        ("off", "False", json!({"deckhouse": "< 1.0"})),
    ] {
        let module: Module = serde_json::from_value(json!({
            "apiVersion": "deckhouse.io/v1alpha1", "kind": "Module",
            "metadata": {"name": name},
            "properties": {"requirements": requirements},
        }))
        .unwrap();
        modules
            .create(&PostParams::default(), &module)
            .await
            .unwrap();
        modules
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": [
                    {"type": "EnabledByModuleManager", "status": enabled}
                ]}})),
            )
            .await
            .unwrap();
    }
    let sources: Api<ModuleSource> = Api::all(c.client.clone());
    let source: ModuleSource = serde_json::from_value(json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleSource",
        "metadata": {"name": "deckhouse"},
        "spec": {"registry": {"repo": "registry.example.com/modules"}},
    }))
    .unwrap();
    sources
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    let offer = |pull_error: Option<&str>| {
        json!({"status": {"modules": [
            {"name": "moved"},
            {"name": "broken", "pullError": pull_error},
        ]}})
    };
    sources
        .patch_status(
            "deckhouse",
            &PatchParams::default(),
            &Patch::Merge(offer(Some("manifest unknown"))),
        )
        .await
        .unwrap();

    c.publish_version("v1.68.0").await;
    c.publish_channel(
        "stable",
        json!({"version": "v1.68.0", "requirements": {
            "autoK8sVersion": "1.31",
            "migratedModules": "moved, broken, off",
            "ingressNginx": "1.9",
        }}),
    )
    .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Auto"}}))
        .await;
    c.engine.sync_channel().await.unwrap();
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.68.0").await,
        (
            "Pending".into(),
            [
                "requirements of the 'echo' module are not satisfied: 1.68.0 deckhouse version is not suitable: 1.68.0 is greater than or equal to 1.68",
                "requirements of the 'echo' module are not satisfied: 1.31 kubernetes version is not suitable: 1.31.0 is greater than or equal to 1.31",
                "migrated module 'broken' not found in any ModuleSource registry",
            ]
            .join(";")
        )
    );
    assert_eq!(c.running().await, "v1.67.0");
    let metrics = c.engine.metrics().encode();
    assert!(
        metrics.contains("d8_release_info{name=\"v1.68.0\",manualApproval=\"false\",disruptionApproval=\"false\",requirementsNotMet=\"true\""),
        "{metrics}"
    );
    assert!(
        metrics.contains("d8_migrated_module_not_found{module=\"broken\"} 1"),
        "{metrics}"
    );
    // `moved` is offered but has no Deployed ModuleRelease yet (DeckhouseMigratedModuleNotDownloaded).
    assert!(
        metrics.contains("d8_migrated_module_not_downloaded{module=\"moved\"} 1"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("d8_migrated_module_not_downloaded{module=\"broken\"}"),
        "{metrics}"
    );
    // `moved` is downloaded once it has a Deployed ModuleRelease.
    let releases: Api<api::module_release::ModuleRelease> = Api::all(c.client.clone());
    let release = serde_json::from_value(json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleRelease",
        "metadata": {"name": "moved-v1.0.0", "labels": {"module": "moved", "source": "deckhouse"}},
        "spec": {"moduleName": "moved", "version": "1.0.0"},
    }))
    .unwrap();
    releases
        .create(&PostParams::default(), &release)
        .await
        .unwrap();
    releases
        .patch_status(
            "moved-v1.0.0",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Deployed"}})),
        )
        .await
        .unwrap();

    // The module allows the new versions, the source pulls the migrated module: applied.
    modules
        .patch(
            "echo",
            &PatchParams::default(),
            &Patch::Merge(json!({"properties": {"requirements": {
                "deckhouse": ">= 1.60", "kubernetes": ">= 1.28"
            }}})),
        )
        .await
        .unwrap();
    sources
        .patch_status(
            "deckhouse",
            &PatchParams::default(),
            &Patch::Merge(offer(None)),
        )
        .await
        .unwrap();
    c.engine.reconcile_all().await.unwrap();
    // `broken` is offered now, but not downloaded: the release is held until it is.
    assert_eq!(
        c.phase("v1.68.0").await,
        (
            "Pending".into(),
            "migrated module 'broken' is not pre-downloaded yet".into()
        )
    );
    assert_eq!(c.running().await, "v1.67.0");
    let metrics = c.engine.metrics().encode();
    assert!(
        !metrics.contains("d8_migrated_module_not_found{"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("d8_migrated_module_not_downloaded{module=\"moved\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("d8_migrated_module_not_downloaded{module=\"broken\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("requirementsNotMet=\"true\""), "{metrics}");
    // Its first release deployed, the platform release applies.
    let release = serde_json::from_value(json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleRelease",
        "metadata": {"name": "broken-v1.0.0", "labels": {"module": "broken", "source": "deckhouse"}},
        "spec": {"moduleName": "broken", "version": "1.0.0"},
    }))
    .unwrap();
    releases
        .create(&PostParams::default(), &release)
        .await
        .unwrap();
    releases
        .patch_status(
            "broken-v1.0.0",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Deployed"}})),
        )
        .await
        .unwrap();
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.phase("v1.68.0").await, ("Deployed".into(), String::new()));
    assert_eq!(c.running().await, "v1.68.0");
    let metrics = c.engine.metrics().encode();
    assert!(
        !metrics.contains("d8_migrated_module_not_downloaded{"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("requirementsNotMet=\"true\""),
        "{metrics}"
    );
}

/// The running Deckhouse's readiness (`/readyz` of a real HTTP server): a patch applies while the
/// pod is not ready and the update stays open (`isUpdating`, `d8_is_updating`); a minor waits
/// with Deckhouse's message and no `d8_release_info` series; once ready, the update closes
/// (`isUpdating=false`, `notified=true`, no `d8_is_updating`) and the minor applies.
#[tokio::test]
async fn minor_releases_wait_for_the_running_pod_and_updates_raise_d8_is_updating() {
    use std::sync::atomic::{AtomicBool, Ordering};

    testkit::install_crypto();
    let ready = Arc::new(AtomicBool::new(false));
    let flag = ready.clone();
    let app = axum::Router::new().route(
        "/readyz",
        axum::routing::get(move || {
            let ready = flag.load(Ordering::SeqCst);
            async move {
                if ready {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let c = Cluster::start_ready(
        "v1.66.3",
        "2024-01-01T08:00:00Z",
        Checks::with_defaults(),
        KubernetesVersionSource::Fixed("1.29.3".into()),
        Arc::new(HttpReadiness::new(format!("http://{addr}/readyz"))),
    )
    .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Auto"}}))
        .await;

    // A patch does not wait for the pod; the update stays open while the pod is not ready.
    c.publish_version("v1.66.4").await;
    c.publish_channel("stable", json!({"version": "v1.66.4"}))
        .await;
    c.engine.sync_channel().await.unwrap();
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.66.4");
    assert_eq!(c.phase("v1.66.4").await, ("Deployed".into(), String::new()));
    let annotations = Cluster::annotations(&c.release("v1.66.4").await);
    assert_eq!(annotations["release.deckhouse.io/isUpdating"], "true");
    let metrics = c.engine.metrics().encode();
    assert!(
        metrics.contains("d8_is_updating{deployingRelease=\"v1.66.4\"} 1"),
        "{metrics}"
    );

    // A minor waits for the pod, before any check (no d8_release_info series).
    c.publish_version("v1.67.0").await;
    c.publish_channel("stable", json!({"version": "v1.67.0"}))
        .await;
    c.engine.sync_channel().await.unwrap();
    c.engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.67.0").await,
        (
            "Pending".into(),
            "awaiting for Deckhouse v1.66.4 pod to be ready".into()
        )
    );
    assert!(!c.engine.metrics().encode().contains("name=\"v1.67.0\""));

    ready.store(true, Ordering::SeqCst);
    c.engine.reconcile_all().await.unwrap();
    let annotations = Cluster::annotations(&c.release("v1.66.4").await);
    assert_eq!(annotations["release.deckhouse.io/isUpdating"], "false");
    assert_eq!(annotations["release.deckhouse.io/notified"], "true");
    assert_eq!(c.running().await, "v1.67.0");
    assert_eq!(c.phase("v1.67.0").await.0, "Deployed");
    let metrics = c.engine.metrics().encode();
    assert!(!metrics.contains("d8_is_updating{"), "{metrics}");
}

/// Deckhouse's alert source: ClusterAlert objects. One at severity 3 holds the release (its level
/// written as a string, as the monitoring stack writes it); once it is gone, and with only a
/// less critical one left, the release applies.
#[tokio::test]
async fn cluster_alert_objects_block_updates() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    let engine = c.engine_with_alerts(Arc::new(ClusterAlerts::new(c.client.clone())));
    let resource = ClusterAlerts::resource();
    let alerts: Api<kube::api::DynamicObject> = Api::all_with(c.client.clone(), &resource);
    for (name, level) in [("quiet", json!("7")), ("eol", json!("3"))] {
        let alert: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "deckhouse.io/v1alpha1", "kind": "ClusterAlert",
            "metadata": {"name": name},
            "alert": {"name": format!("{name}-alert"), "severityLevel": level},
        }))
        .unwrap();
        alerts.create(&PostParams::default(), &alert).await.unwrap();
    }
    c.publish_version("v1.67.0").await;
    c.publish_channel("stable", json!({"version": "v1.67.0"}))
        .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {
        "mode": "Auto", "blockOnAlerts": {"enabled": true}
    }}))
    .await;
    engine.sync_channel().await.unwrap();
    engine.reconcile_all().await.unwrap();
    assert_eq!(
        c.phase("v1.67.0").await,
        (
            "Pending".into(),
            "Release is blocked by the firing alert eol-alert with severity level 3 (update.blockOnAlerts.severity is 4)".into()
        )
    );
    assert_eq!(c.running().await, "v1.66.3");

    alerts.delete("eol", &Default::default()).await.unwrap();
    engine.reconcile_all().await.unwrap();
    assert_eq!(c.running().await, "v1.67.0");
}

/// An intermediate release the registry cannot give (its channel image has no `version.json`):
/// the step-by-step sync fails and `d8_updating_is_failed{version}` (DeckhouseUpdatingFailed)
/// is 1 for the channel's version; once the image is fixed, the chain is created and it is 0.
#[tokio::test]
async fn an_unreadable_intermediate_release_raises_d8_updating_is_failed() {
    let c = Cluster::start("v1.66.3", "2024-01-01T08:00:00Z").await;
    c.publish_version("v1.68.5").await;
    let broken = testkit::ImageBuilder::new("channel-broken-v1.67.1")
        .files(&[("changelog.yaml", b"deckhouse: {}\n".as_slice())])
        .build(&c.layout);
    c.registry
        .push_image(
            &format!("{}/release-channel", common::REPO),
            Some("v1.67.1"),
            &broken,
        )
        .await
        .unwrap();
    c.publish_channel("stable", json!({"version": "v1.68.5"}))
        .await;
    c.settings(json!({"releaseChannel": "Stable", "update": {"mode": "Manual"}}))
        .await;

    assert!(c.engine.sync_channel().await.is_err());
    let metrics = c.engine.metrics().encode();
    assert!(
        metrics
            .lines()
            .any(|l| l == "d8_updating_is_failed{version=\"v1.68.5\"} 1"),
        "{metrics}"
    );

    c.publish_version("v1.67.1").await;
    let s = synced(c.engine.sync_channel().await.unwrap());
    assert_eq!(s.created, names(&["v1.67.1", "v1.68.5"]));
    let metrics = c.engine.metrics().encode();
    assert!(
        metrics
            .lines()
            .any(|l| l == "d8_updating_is_failed{version=\"v1.68.5\"} 0"),
        "{metrics}"
    );
}
