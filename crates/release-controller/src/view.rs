//! The operator's view of releases (`d8 release list`): one row per release, newest first, with
//! why a Pending release waits, in words an operator can act on.

use api::deckhouse_release::DeckhouseRelease;
use api::keys;
use kube::ResourceExt;
use release_plan::ReleaseVersion;

use crate::settings::DeckhouseSettings;

/// One row of the listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The release name.
    pub name: String,
    /// `status.phase` (`-` when none yet).
    pub phase: String,
    /// Manually approved (top-level `approved` or the annotation).
    pub approved: bool,
    /// `spec.applyAfter`, RFC 3339, or `-`.
    pub apply_after: String,
    /// Why it is in its phase: the status message, plus the operator's next step when the
    /// message names one.
    pub why: String,
}

/// What an operator can do about a waiting release, from its status message.
fn hint(name: &str, message: &str) -> Option<String> {
    if message.contains("release.deckhouse.io/approved") {
        return Some(format!("approve: d8 release approve {name}"));
    }
    if message.contains("disruption approval required") {
        return Some(format!(
            "approve the disruption: kubectl annotate DeckhouseRelease {name} release.deckhouse.io/disruption-approved=true"
        ));
    }
    if message.contains("waiting for the update window")
        || message.starts_with("Release is postponed")
    {
        return Some(format!("skip the wait: d8 release apply-now {name}"));
    }
    if message.contains("requirement for DeckhouseRelease")
        || message.contains("module are not satisfied")
        || message.contains("not found in any ModuleSource registry")
    {
        return Some("fix the cluster, or force: kubectl annotate DeckhouseRelease <name> release.deckhouse.io/force=true".replace("<name>", name));
    }
    None
}

/// The rows of `releases`, newest version first.
pub fn rows(releases: &[DeckhouseRelease]) -> Vec<Row> {
    let mut sorted: Vec<&DeckhouseRelease> = releases.iter().collect();
    sorted.sort_by_cached_key(|r| {
        std::cmp::Reverse(ReleaseVersion::parse(&r.spec.spec.version).ok())
    });
    sorted
        .into_iter()
        .map(|r| {
            let name = r.name_any();
            let status = r.status.clone().unwrap_or_default();
            let phase = status.phase.map_or("-", |p| p.as_str()).to_owned();
            let mut why = if status.message.is_empty() && status.phase.is_none() {
                "not reconciled yet".to_owned()
            } else {
                // One line per release, whatever the message holds.
                status
                    .message
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            if r.annotations().contains_key(keys::RELEASE_FORCE) {
                why = format!("{why} (forced: applies at the next reconcile)")
                    .trim_start()
                    .to_owned();
            }
            if phase == "Pending"
                && let Some(hint) = hint(&name, &status.message)
            {
                why = format!("{why} → {hint}");
            }
            Row {
                approved: r.is_manually_approved(),
                apply_after: r
                    .spec
                    .spec
                    .apply_after
                    .as_ref()
                    .map_or("-".to_owned(), |t| t.0.to_string()),
                name,
                phase,
                why,
            }
        })
        .collect()
}

/// The listing as text: a header about the settings and what runs, then a table.
pub fn render(settings: &DeckhouseSettings, running: Option<&str>, rows: &[Row]) -> String {
    let channel = settings
        .release_channel
        .map_or("none (dev mode)", |c| c.as_str());
    let mode = match settings.mode {
        release_plan::deploy::UpdateMode::Auto => "Auto",
        release_plan::deploy::UpdateMode::AutoPatch => "AutoPatch",
        release_plan::deploy::UpdateMode::Manual => "Manual",
    };
    let mut out = format!(
        "Running version: {}\nRelease channel: {channel}\nUpdate mode: {mode}\n\n",
        running.unwrap_or("unknown")
    );
    let headers = ["NAME", "PHASE", "APPROVED", "APPLY AFTER", "WHY"];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                r.phase.clone(),
                r.approved.to_string(),
                r.apply_after.clone(),
                r.why.clone(),
            ]
        })
        .collect();
    let mut widths = headers.map(str::len);
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cols: [&str; 5]| {
        let mut s = String::new();
        for (i, col) in cols.iter().enumerate() {
            if i + 1 == cols.len() {
                s.push_str(col);
            } else {
                s.push_str(&format!("{col:<width$}   ", width = widths[i]));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    out.push_str(&line(headers));
    for row in &cells {
        out.push_str(&line([&row[0], &row[1], &row[2], &row[3], &row[4]]));
    }
    if rows.is_empty() {
        out.push_str("(no releases)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use api::deckhouse_release::{DeckhouseReleasePhase, DeckhouseReleaseStatus};

    use super::*;

    fn release(
        version: &str,
        phase: Option<DeckhouseReleasePhase>,
        message: &str,
    ) -> DeckhouseRelease {
        let mut r = DeckhouseRelease::new(
            version,
            api::deckhouse_release::DeckhouseReleaseFields {
                approved: false,
                spec: api::deckhouse_release::DeckhouseReleaseSpec {
                    version: version.to_owned(),
                    ..Default::default()
                },
            },
        );
        r.status = phase.map(|p| DeckhouseReleaseStatus {
            phase: Some(p),
            message: message.to_owned(),
            ..Default::default()
        });
        r
    }

    #[test]
    fn rows_explain_why_and_what_to_do() {
        let releases = vec![
            release("v1.66.3", Some(DeckhouseReleasePhase::Deployed), ""),
            release(
                "v1.68.5",
                Some(DeckhouseReleasePhase::Pending),
                "awaiting for v1.67.11 release to be deployed",
            ),
            release(
                "v1.67.11",
                Some(DeckhouseReleasePhase::Pending),
                "Release is waiting for the 'release.deckhouse.io/approved: \"true\"' annotation",
            ),
            release("v1.69.0", None, ""),
        ];
        let rows = rows(&releases);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["v1.69.0", "v1.68.5", "v1.67.11", "v1.66.3"]);
        assert_eq!(rows[0].why, "not reconciled yet");
        let odd = rows_of_message(
            "\"k8s\" requirement for DeckhouseRelease \"1.69.0\" not met: \nminUsedControlPlaneKubernetesVersion\n is not set",
        );
        assert!(!odd.contains('\n'), "{odd}");
        assert_eq!(rows[0].phase, "-");
        assert_eq!(rows[1].why, "awaiting for v1.67.11 release to be deployed");
        assert_eq!(
            rows[2].why,
            "Release is waiting for the 'release.deckhouse.io/approved: \"true\"' annotation → approve: d8 release approve v1.67.11"
        );
        let text = render(&DeckhouseSettings::default(), Some("v1.66.3"), &rows);
        assert!(text.starts_with("Running version: v1.66.3\nRelease channel: none (dev mode)\nUpdate mode: AutoPatch\n"), "{text}");
        assert!(text.contains("NAME       PHASE"), "{text}");
        assert!(text.contains("v1.67.11   Pending"), "{text}");
    }

    fn rows_of_message(message: &str) -> String {
        rows(&[release(
            "v1.69.0",
            Some(DeckhouseReleasePhase::Pending),
            message,
        )])[0]
            .why
            .clone()
    }

    #[test]
    fn hints() {
        assert!(
            hint(
                "v1",
                "Release is waiting for the update window until 01 Jan 24 10:00 UTC"
            )
            .unwrap()
            .contains("d8 release apply-now v1")
        );
        assert!(hint("v1", "release blocked, disruption approval required: x").is_some());
        assert!(
            hint(
                "v1",
                "\"k8s\" requirement for DeckhouseRelease \"1.0.0\" not met: x"
            )
            .unwrap()
            .contains("force=true")
        );
        for requirement in [
            "requirements of the 'echo' module are not satisfied: 1.68.0 deckhouse version is not suitable: 1.68.0 is greater than or equal to 1.68",
            "migrated module 'echo' not found in any ModuleSource registry",
        ] {
            assert!(hint("v1", requirement).unwrap().contains("force=true"));
        }
        assert_eq!(
            hint("v1", "awaiting for v1.0.0 release to be deployed"),
            None
        );
    }
}
