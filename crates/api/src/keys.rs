//! Annotation, label and finalizer keys, spelled exactly as Deckhouse spells them.
//!
//! Existing clusters, dashboards and runbooks look these up by name, so a typo here is an
//! incompatibility. Values that are flags (`"true"`/`"false"`) are parsed by the controllers,
//! not here.

/// The `heritage` label; objects owned by the platform carry `heritage: deckhouse`.
pub const LABEL_HERITAGE: &str = "heritage";
/// Value of [`LABEL_HERITAGE`] on platform-owned objects.
pub const HERITAGE_DECKHOUSE: &str = "deckhouse";
/// Marks objects that a cluster backup must include (ModuleConfig, ModuleSource, ModuleUpdatePolicy).
pub const LABEL_BACKUP_CLUSTER_CONFIG: &str = "backup.deckhouse.io/cluster-config";
/// Put on every resource of a module in `NoResourceReconciliation` maintenance.
pub const LABEL_MAINTENANCE_NO_RESOURCE_RECONCILIATION: &str =
    "maintenance.deckhouse.io/no-resource-reconciliation";

/// Module: the module is a CNI (its name starts with `cni-`).
pub const LABEL_MODULE_CNI: &str = "module.deckhouse.io/cni";
/// Module: the module is a cloud provider (its name starts with `cloud-provider-`).
pub const LABEL_MODULE_CLOUD_PROVIDER: &str = "module.deckhouse.io/cloud-provider";
/// Module: prefix of the per-tag labels (`module.deckhouse.io/<tag>`).
pub const LABEL_MODULE_TAG_PREFIX: &str = "module.deckhouse.io/";
/// Module: English description annotation.
pub const ANNOTATION_DESCRIPTION_EN: &str = "en.meta.deckhouse.io/description";
/// Module: Russian description annotation.
pub const ANNOTATION_DESCRIPTION_RU: &str = "ru.meta.deckhouse.io/description";

/// ModuleConfig: confirms a disable that the module guards; removed once the module is disabled.
pub const ANNOTATION_ALLOW_DISABLING: &str = "modules.deckhouse.io/allow-disabling";
/// ModuleConfig finalizer set while the module is registered.
pub const FINALIZER_MODULE_REGISTERED: &str = "modules.deckhouse.io/module-registered";
/// Legacy ModuleConfig finalizer; the controller removes it.
pub const FINALIZER_MODULE_CONFIG_LEGACY: &str = "modules.deckhouse.io/module-config";

/// ModuleSource: md5 of the JSON of `spec.registry`, used to detect registry setting changes.
pub const ANNOTATION_REGISTRY_SPEC_CHECKSUM: &str = "modules.deckhouse.io/registry-spec-checksum";
/// ModuleSource: delete even though deployed releases still come from it.
pub const ANNOTATION_FORCE_DELETE: &str = "modules.deckhouse.io/force-delete";
/// ModuleSource finalizer held while a deployed ModuleRelease comes from the source.
pub const FINALIZER_RELEASE_EXISTS: &str = "modules.deckhouse.io/release-exists";
/// ModuleSource finalizer held while a Module comes from the source.
pub const FINALIZER_MODULE_EXISTS: &str = "modules.deckhouse.io/module-exists";

/// ModuleRelease label: the module name.
pub const LABEL_MODULE: &str = "module";
/// ModuleRelease label: the ModuleSource name.
pub const LABEL_SOURCE: &str = "source";
/// ModuleRelease label: the phase, lower-cased (`deployed`, `pending`, …).
pub const LABEL_STATUS: &str = "status";
/// ModuleRelease label: md5 of the release-channel image digest.
pub const LABEL_RELEASE_CHECKSUM: &str = "release-checksum";
/// ModuleRelease label: the ModuleUpdatePolicy governing the release.
pub const LABEL_UPDATE_POLICY: &str = "modules.deckhouse.io/update-policy";
/// ModuleRelease: manual approval (`"true"`, parsed like Go's `strconv.ParseBool`).
pub const MODULE_RELEASE_APPROVED: &str = "modules.deckhouse.io/approved";
/// ModuleRelease: deploy at once, ignoring windows, canary delay and approval.
pub const MODULE_RELEASE_APPLY_NOW: &str = "modules.deckhouse.io/apply-now";
/// ModuleRelease: deploy at once, skipping every later check.
pub const MODULE_RELEASE_FORCE: &str = "modules.deckhouse.io/force";
/// ModuleRelease: re-deploy an already deployed release.
pub const MODULE_RELEASE_REINSTALL: &str = "modules.deckhouse.io/reinstall";
/// ModuleRelease: `"true"` while the module is being updated to this release.
pub const MODULE_RELEASE_IS_UPDATING: &str = "modules.deckhouse.io/isUpdating";
/// ModuleRelease: whether the release notification webhook has been sent.
pub const MODULE_RELEASE_NOTIFIED: &str = "modules.deckhouse.io/notified";
/// ModuleRelease: `spec.applyAfter` was moved by the notification delay.
pub const MODULE_RELEASE_NOTIFICATION_TIME_SHIFT: &str =
    "modules.deckhouse.io/notification-time-shift";
/// ModuleRelease: the ModuleSource registry settings changed (an RFC 3339 time).
pub const MODULE_RELEASE_REGISTRY_SPEC_CHANGED: &str = "modules.deckhouse.io/registry-spec-changed";
/// ModuleRelease: why the release was created.
pub const MODULE_RELEASE_CHANGE_CAUSE: &str = "modules.deckhouse.io/change-cause";
/// ModuleRelease finalizer held while the module's files are on disk.
pub const FINALIZER_EXIST_ON_FS: &str = "modules.deckhouse.io/exist-on-fs";

/// Release dry run (DeckhouseRelease and ModuleRelease use the same bare key).
pub const ANNOTATION_DRYRUN: &str = "dryrun";
/// Set on other Pending releases when a dry run would have deployed.
pub const ANNOTATION_TRIGGERED_BY_DRYRUN: &str = "triggered_by_dryrun";

/// ModulePullOverride finalizer.
pub const FINALIZER_MPO: &str = "modules.deckhouse.io/mpo-finalizer";
/// ModulePullOverride: the node the override was deployed on.
pub const MPO_DEPLOYED_ON: &str = "modules.deckhouse.io/deployed-on";

/// DeckhouseRelease: manual approval, alternative to the top-level `approved: true`.
pub const RELEASE_APPROVED: &str = "release.deckhouse.io/approved";
/// DeckhouseRelease: deploy at once, ignoring windows, canary delay and approval.
pub const RELEASE_APPLY_NOW: &str = "release.deckhouse.io/apply-now";
/// DeckhouseRelease (also accepted on ModuleRelease): deploy at once, skipping every later check.
pub const RELEASE_FORCE: &str = "release.deckhouse.io/force";
/// DeckhouseRelease: approves the disruptive changes of a minor release.
pub const RELEASE_DISRUPTION_APPROVED: &str = "release.deckhouse.io/disruption-approved";
/// DeckhouseRelease: the channel suspended this release.
pub const RELEASE_SUSPENDED: &str = "release.deckhouse.io/suspended";
/// DeckhouseRelease: whether the release notification webhook has been sent.
pub const RELEASE_NOTIFIED: &str = "release.deckhouse.io/notified";
/// DeckhouseRelease: `"true"` while the platform is being updated to this release.
pub const RELEASE_IS_UPDATING: &str = "release.deckhouse.io/isUpdating";
/// DeckhouseRelease: the apply-after time as an annotation.
pub const RELEASE_APPLY_AFTER: &str = "release.deckhouse.io/applyAfter";
/// DeckhouseRelease: `spec.applyAfter` was moved by the notification delay.
pub const RELEASE_NOTIFICATION_TIME_SHIFT: &str = "release.deckhouse.io/notification-time-shift";
/// DeckhouseRelease: restored from the running version ("Release object was restored").
pub const RELEASE_CURRENT_RESTORED: &str = "release.deckhouse.io/current-restored";
/// DeckhouseRelease: why the release was created.
pub const RELEASE_CHANGE_CAUSE: &str = "release.deckhouse.io/change-cause";
/// DeckhouseRelease: JSON describing the update in progress.
pub const RELEASE_UPDATE_INFO: &str = "release.deckhouse.io/update-info";
/// DeckhouseRelease: legacy cooldown time.
pub const RELEASE_COOLDOWN: &str = "release.deckhouse.io/cooldown";

/// Ingress annotation that publishes an Application endpoint into `status.urls`.
pub const PACKAGES_IS_APPLICATION_ENDPOINT: &str = "packages.deckhouse.io/is-application-endpoint";

/// Label on documentation builder Leases in `d8-system`.
pub const LABEL_DOCUMENTATION_BUILDER_SYNC: &str = "deckhouse.io/documentation-builder-sync";

/// Registry agent static pod: forces a restart when the agent image changes.
pub const REGISTRY_AGENT_IMAGE_DIGEST: &str = "registry.deckhouse.io/agent-image-digest";

/// Service account the platform runs as; the only user allowed to change Module objects.
pub const DECKHOUSE_SERVICE_ACCOUNT: &str = "system:serviceaccount:d8-system:deckhouse";
/// Prefix of every platform service account (`d8-*` namespaces).
pub const D8_SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:d8-";

/// Parses a flag annotation the way Go's `strconv.ParseBool` does (`1`, `t`, `T`, `TRUE`,
/// `true`, `True` are true; anything unparsable counts as false, as Deckhouse treats it).
pub fn parse_bool(value: &str) -> bool {
    matches!(value, "1" | "t" | "T" | "TRUE" | "true" | "True")
}

/// Whether `annotations[key]` is a true flag.
pub fn flag(annotations: Option<&std::collections::BTreeMap<String, String>>, key: &str) -> bool {
    annotations
        .and_then(|a| a.get(key))
        .is_some_and(|v| parse_bool(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_bool_follows_go() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert!(parse_bool(t), "{t}");
        }
        for f in ["0", "false", "yes", "", "tRuE"] {
            assert!(!parse_bool(f), "{f}");
        }
    }

    #[test]
    fn flag_reads_annotations() {
        let mut a = std::collections::BTreeMap::new();
        a.insert(MODULE_RELEASE_APPROVED.to_string(), "true".to_string());
        assert!(flag(Some(&a), MODULE_RELEASE_APPROVED));
        assert!(!flag(Some(&a), MODULE_RELEASE_FORCE));
        assert!(!flag(None, MODULE_RELEASE_FORCE));
    }
}
