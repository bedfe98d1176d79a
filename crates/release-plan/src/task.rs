//! The task calculator: what to do with a Pending release, given every release of the same
//! kind (every DeckhouseRelease, or every ModuleRelease of one module).
//!
//! - A higher **forced** release exists → Skip. The Deployed release is higher → Skip; equal →
//!   [`Error::ReleaseIsAlreadyDeployed`].
//! - **Update constraints** (ModuleRelease `spec.updateConstraints`): the release they point to
//!   is processed as a minor jump from the deployed version; the Pending releases between the
//!   deployed one and it are skipped ("skipped by update constraints").
//! - Compared with the previous release: when this is not a patch of it (or of the Deployed
//!   release) it is a minor update, and it **awaits** a Pending previous release, a jump of more
//!   than one minor (more than 10 on the LTS channel for the platform), or a major jump other
//!   than 0 → 1.
//! - Only the newest patch of a minor is applied: a release followed by one of the same minor is
//!   skipped.
//!
//! The "previous" release is the nearest lower one that is Pending or Deployed (Suspended,
//! Superseded and Skipped ones are passed over), and a forced previous release is not waited for.

use crate::Error;
use crate::version::{Phase, ReleaseKind, ReleaseVersion};

/// The LTS channel may jump at most this many minors at once (platform releases only).
pub const MAX_MINOR_VERSION_DIFF_FOR_LTS: u64 = 10;

/// The status message of a release skipped because update constraints jump over it.
pub const MSG_SKIPPED_BY_UPDATE_CONSTRAINTS: &str = "skipped by update constraints";

/// One `spec.updateConstraints.versions[]` entry of a ModuleRelease: a module deployed in
/// `[from, to)` may jump straight to `to` (or to the newest patch of `to`'s minor).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateConstraint {
    /// Lowest deployed version the jump applies to (inclusive), e.g. `1.67`.
    pub from: String,
    /// The version to jump to (the deployed version must be lower), e.g. `1.70`.
    pub to: String,
}

/// What the calculator needs to know about one release.
#[derive(Clone, Debug)]
pub struct Release {
    /// `metadata.name`, e.g. `v1.69.3` or `echo-v1.2.3`.
    pub name: String,
    /// `spec.version`.
    pub version: ReleaseVersion,
    /// `status.phase`.
    pub phase: Phase,
    /// The `release.deckhouse.io/force: "true"` annotation.
    pub forced: bool,
    /// `status.message`: an awaiting message is passed on to the next release.
    pub message: String,
    /// `spec.updateConstraints.versions` (ModuleRelease only).
    pub update_constraints: Vec<UpdateConstraint>,
}

impl Release {
    /// A release with no annotation, message or constraints.
    pub fn new(name: impl Into<String>, version: ReleaseVersion, phase: Phase) -> Self {
        Self {
            name: name.into(),
            version,
            phase,
            forced: false,
            message: String::new(),
            update_constraints: Vec::new(),
        }
    }
}

/// Settings that change the calculation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    /// Platform or module releases.
    pub kind: ReleaseKind,
    /// Whether the release channel is LTS (compared case-insensitively by the caller with `lts`).
    pub lts: bool,
}

/// The decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskType {
    /// Mark the release Skipped (with [`Task::message`]).
    Skip,
    /// Keep it Pending with [`Task::message`] and look again later.
    Await,
    /// Go on with the deploy-time checks.
    Process,
}

impl TaskType {
    /// Deckhouse's name for the task type (`skip`, `await`, `process`), used in `update-info`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::Await => "await",
            Self::Process => "process",
        }
    }
}

/// The Deployed release the task is relative to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeployedRelease {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: ReleaseVersion,
}

/// How far the Deployed release is behind the newest release, for metrics and alerts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueDepth {
    /// Majors behind.
    pub major: u64,
    /// Minors behind (within the deployed major when a major is also pending).
    pub minor: u64,
    /// Patches behind (only when no minor is pending).
    pub patch: u64,
}

impl QueueDepth {
    /// The `ReleaseQueueDepth` metric label: the minor gap, or 1 for patches only, or 0.
    pub fn release_queue_depth(&self) -> u64 {
        if self.minor > 0 {
            self.minor
        } else if self.patch > 0 {
            1
        } else {
            0
        }
    }

    /// The `MajorReleaseDepth` metric label.
    pub fn major_release_depth(&self) -> u64 {
        self.major
    }
}

/// The calculator's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    /// Skip, Await or Process.
    pub task_type: TaskType,
    /// The status message for Skip and Await (may be empty for Skip).
    pub message: String,
    /// A major update (an awaited major jump, or a constraint jump across a major).
    pub is_major: bool,
    /// Processed as the endpoint of update constraints.
    pub is_from_to: bool,
    /// A patch of the previous and of the Deployed release; patches follow the patch rules.
    pub is_patch: bool,
    /// The only release.
    pub is_single: bool,
    /// The newest release.
    pub is_latest: bool,
    /// The Deployed release (becomes Superseded when this one is applied).
    pub deployed: Option<DeployedRelease>,
    /// The queue depth; `None` for skipped releases.
    pub queue_depth: Option<QueueDepth>,
}

impl Task {
    fn skip(message: &str, is_patch: bool) -> Self {
        Self {
            task_type: TaskType::Skip,
            message: message.to_owned(),
            is_major: false,
            is_from_to: false,
            is_patch,
            is_single: false,
            is_latest: false,
            deployed: None,
            queue_depth: None,
        }
    }

    fn with(
        task_type: TaskType,
        message: String,
        deployed: &Option<DeployedRelease>,
        queue_depth: QueueDepth,
    ) -> Self {
        Self {
            task_type,
            message,
            is_major: false,
            is_from_to: false,
            is_patch: false,
            is_single: false,
            is_latest: false,
            deployed: deployed.clone(),
            queue_depth: Some(queue_depth),
        }
    }
}

/// Decides what to do with the Pending release named `current`, among `releases` (which must
/// include it; order does not matter).
pub fn calculate(releases: &[Release], current: &str, context: Context) -> Result<Task, Error> {
    let release =
        releases
            .iter()
            .find(|r| r.name == current)
            .ok_or_else(|| Error::ReleaseNotListed {
                name: current.to_owned(),
            })?;
    if release.phase != Phase::Pending {
        return Err(Error::ReleasePhaseIsNotPending);
    }

    let mut sorted: Vec<&Release> = releases.iter().collect();
    if sorted.len() == 1 {
        let mut task = Task::with(
            TaskType::Process,
            String::new(),
            &None,
            QueueDepth::default(),
        );
        task.is_single = true;
        task.is_latest = true;
        return Ok(task);
    }
    sorted.sort_by(|a, b| a.version.cmp(&b.version));

    if let Some(forced) = sorted.iter().rev().find(|r| r.forced)
        && forced.version > release.version
    {
        return Ok(Task::skip("", false));
    }

    let deployed_index = sorted.iter().position(|r| r.phase == Phase::Deployed);
    let deployed = deployed_index.map(|i| DeployedRelease {
        name: sorted[i].name.clone(),
        version: sorted[i].version.clone(),
    });
    if let Some(d) = &deployed {
        if d.version > release.version {
            return Ok(Task::skip("", false));
        }
        if d.version == release.version {
            return Err(Error::ReleaseIsAlreadyDeployed);
        }
    }

    let index = sorted
        .iter()
        .position(|r| r.version == release.version)
        .ok_or_else(|| Error::ReleaseNotListed {
            name: current.to_owned(),
        })?;
    let last = sorted.len() - 1;
    let queue_depth = queue_depth(&sorted, deployed.as_ref());
    let is_latest = index == last;

    if let (Some(d), Some(deployed_index)) = (&deployed, deployed_index)
        && let Some(endpoint) = constraint_endpoint(&sorted, deployed_index, &d.version)
    {
        if index > deployed_index && index < endpoint {
            return Ok(Task::skip(MSG_SKIPPED_BY_UPDATE_CONSTRAINTS, false));
        }
        if index == endpoint {
            let mut task = Task::with(TaskType::Process, String::new(), &deployed, queue_depth);
            task.is_from_to = true;
            task.is_major = release.version.major() > d.version.major();
            task.is_latest = endpoint == last;
            return Ok(task);
        }
    }

    let mut is_patch = true;
    // The previous release is the nearest lower one that is Pending or Deployed: Suspended,
    // Superseded and Skipped releases are passed over.
    let prev = sorted[..index]
        .iter()
        .rev()
        .find(|r| matches!(r.phase, Phase::Pending | Phase::Deployed));
    if let Some(prev) = prev {
        let patch_of_deployed = deployed
            .as_ref()
            .is_none_or(|d| d.version.is_patch_before(&release.version));
        if !prev.version.is_patch_before(&release.version) || !patch_of_deployed {
            is_patch = false;

            // A forced previous release is not waited for: it is being applied regardless.
            if prev.phase == Phase::Pending && !prev.forced {
                let message = if prev.message.contains("awaiting") {
                    prev.message.clone()
                } else {
                    format!("awaiting for v{} release to be deployed", prev.version)
                };
                return Ok(Task::with(TaskType::Await, message, &deployed, queue_depth));
            }

            let (v, p) = (&release.version, &prev.version);
            if v.major() == p.major() {
                // Deckhouse subtracts on unsigned integers: minor 0 wraps around, so a release
                // `X.0.*` that is not a patch of its predecessor always awaits here.
                if !context.lts && v.minor().wrapping_sub(1) > p.minor() {
                    let message = format!(
                        "minor version is greater than deployed {} by one",
                        p.original()
                    );
                    return Ok(Task::with(TaskType::Await, message, &deployed, queue_depth));
                }
                if context.lts
                    && context.kind == ReleaseKind::Deckhouse
                    && v.minor() > p.minor().saturating_add(MAX_MINOR_VERSION_DIFF_FOR_LTS)
                {
                    let message = format!(
                        "minor version is greater than deployed {} by {}, it's more than acceptable channel limitation",
                        p.original(),
                        v.minor() - p.minor()
                    );
                    return Ok(Task::with(TaskType::Await, message, &deployed, queue_depth));
                }
            }

            if v.major() > p.major() && (p.major() != 0 || v.major() != 1) {
                let message = format!("major version is greater than deployed {}", p.original());
                let mut task = Task::with(TaskType::Await, message, &deployed, queue_depth);
                task.is_major = deployed
                    .as_ref()
                    .is_some_and(|d| v.major() > d.version.major());
                return Ok(task);
            }
        }
    }

    if index < last {
        let next = &sorted[index + 1].version;
        let v = &release.version;
        if v.major() < next.major() || v.minor() < next.minor() {
            let mut task = Task::with(TaskType::Process, String::new(), &deployed, queue_depth);
            task.is_patch = is_patch;
            task.is_latest = is_latest;
            return Ok(task);
        }
        return Ok(Task::skip("", is_patch));
    }

    let mut task = Task::with(TaskType::Process, String::new(), &deployed, queue_depth);
    task.is_patch = is_patch;
    task.is_latest = is_latest;
    Ok(task)
}

/// The version gap between the Deployed release and the newest one (`releases` sorted).
fn queue_depth(releases: &[&Release], deployed: Option<&DeployedRelease>) -> QueueDepth {
    let mut depth = QueueDepth::default();
    let (Some(deployed), Some(latest)) = (deployed, releases.last()) else {
        return depth;
    };
    let (d, l) = (&deployed.version, &latest.version);
    if l.major() > d.major() {
        depth.major = l.major() - d.major();
        if let Some(same_major) = releases
            .iter()
            .rev()
            .find(|r| r.version.major() == d.major())
            && same_major.version.minor() > d.minor()
        {
            depth.minor = same_major.version.minor() - d.minor();
        }
        return depth;
    }
    if l.minor() > d.minor() {
        depth.minor = l.minor() - d.minor();
        return depth;
    }
    if l.patch() > d.patch() {
        depth.patch = l.patch() - d.patch();
    }
    depth
}

/// The index of the release that update constraints let the deployed version jump to: over
/// every Pending release above the deployed one that has constraints, each constraint whose
/// `to` has that release's minor and whose `[from, to)` holds the deployed version points to the
/// newest release of `to`'s minor; the highest such index wins.
fn constraint_endpoint(
    releases: &[&Release],
    deployed_index: usize,
    deployed: &ReleaseVersion,
) -> Option<usize> {
    let mut best: Option<usize> = None;
    for holder in releases.iter().skip(deployed_index + 1) {
        if holder.phase != Phase::Pending {
            continue;
        }
        for constraint in &holder.update_constraints {
            let Ok(to) = ReleaseVersion::parse(&constraint.to) else {
                continue;
            };
            if holder.version.major() != to.major() || holder.version.minor() != to.minor() {
                continue;
            }
            let Ok(from) = ReleaseVersion::parse(&constraint.from) else {
                continue;
            };
            if *deployed < from || *deployed >= to {
                continue;
            }
            let start = best.unwrap_or(deployed_index).max(deployed_index);
            for (i, r) in releases.iter().enumerate().skip(start) {
                if r.version.major() == to.major()
                    && r.version.minor() == to.minor()
                    && best.is_none_or(|b| b < i)
                {
                    best = Some(i);
                }
            }
        }
    }
    best
}

#[cfg(test)]
mod tests;
