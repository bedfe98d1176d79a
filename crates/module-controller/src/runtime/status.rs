//! The Module status a run leads to, in Deckhouse's phases, condition reasons and messages:
//! a run starts as `Installing` (first install: the module was `Available`, `Downloading` or
//! `Downloaded`) or `Reconciling`; it ends `Ready` (IsReady True, LastReleaseDeployed True),
//! `Reconciling` while workloads roll out (IsReady False with what it waits for), or `Error`
//! (IsReady False, reason `ModuleError` or `HookError`, the error as message). Pure.

use api::module::{ModuleConditionReason as Reason, ModuleConditionType as Type, ModulePhase};

use super::readiness::Readiness;

/// A condition to merge into the Module status: type, status, reason, message.
pub type Condition = (Type, bool, Option<Reason>, String);

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Applied (or unchanged); the workloads' readiness.
    Done(Readiness),
    /// Rendering or applying failed.
    ModuleError(String),
    /// A hook failed.
    HookError(String),
    /// `maintenance: NoResourceReconciliation`: resources are left alone.
    Maintenance,
}

/// The phase and conditions when a run starts.
pub fn starting(current: Option<ModulePhase>) -> (ModulePhase, Vec<Condition>) {
    let installing = matches!(
        current,
        None | Some(ModulePhase::Available | ModulePhase::Downloading | ModulePhase::Downloaded)
    );
    if installing {
        (
            ModulePhase::Installing,
            vec![(
                Type::IsReady,
                false,
                Some(Reason::Installing),
                "installing".into(),
            )],
        )
    } else {
        // A ready module stays ready while it is reconciled; the phase tells what happens.
        (ModulePhase::Reconciling, vec![])
    }
}

/// The phase and conditions when a run ends.
pub fn ended(ending: &Ending) -> (ModulePhase, Vec<Condition>) {
    match ending {
        Ending::Done(Readiness::Ready) | Ending::Maintenance => (
            ModulePhase::Ready,
            vec![
                (Type::LastReleaseDeployed, true, None, String::new()),
                (Type::IsReady, true, None, String::new()),
            ],
        ),
        Ending::Done(Readiness::Waiting(why)) => (
            ModulePhase::Reconciling,
            vec![
                (Type::LastReleaseDeployed, true, None, String::new()),
                (Type::IsReady, false, Some(Reason::Reconciling), why.clone()),
            ],
        ),
        Ending::Done(Readiness::Failed(why)) => (
            ModulePhase::Error,
            vec![
                (Type::LastReleaseDeployed, true, None, String::new()),
                (Type::IsReady, false, Some(Reason::ModuleError), why.clone()),
            ],
        ),
        Ending::ModuleError(e) => (
            ModulePhase::Error,
            vec![
                (
                    Type::LastReleaseDeployed,
                    false,
                    Some(Reason::ModuleError),
                    e.clone(),
                ),
                (Type::IsReady, false, Some(Reason::ModuleError), e.clone()),
            ],
        ),
        Ending::HookError(e) => (
            ModulePhase::Error,
            vec![(Type::IsReady, false, Some(Reason::HookError), e.clone())],
        ),
    }
}

/// Whether every condition of `new` already holds in `old` (same status, reason and message):
/// then writing them would only move their probe times.
pub fn holds(
    old: &[api::conditions::ModuleCondition],
    new: &[api::conditions::ModuleCondition],
) -> bool {
    new.iter().all(|n| {
        old.iter().any(|o| {
            o.type_ == n.type_
                && o.status == n.status
                && o.reason == n.reason
                && o.message == n.message
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchanged_conditions_hold() {
        let c = |t: &str, s: &str, m: Option<&str>| api::conditions::ModuleCondition {
            type_: t.into(),
            status: s.into(),
            message: m.map(Into::into),
            ..Default::default()
        };
        let old = vec![
            c("IsReady", "True", None),
            c("LastReleaseDeployed", "True", None),
        ];
        assert!(holds(&old, &[c("IsReady", "True", None)]));
        assert!(holds(&old, &[]));
        assert!(!holds(&old, &[c("IsReady", "False", None)]));
        assert!(!holds(&old, &[c("IsReady", "True", Some("x"))]));
        assert!(!holds(&old, &[c("EnabledByModuleConfig", "True", None)]));
    }

    #[test]
    fn phases() {
        assert_eq!(starting(None).0, ModulePhase::Installing);
        assert_eq!(
            starting(Some(ModulePhase::Downloaded)).0,
            ModulePhase::Installing
        );
        assert_eq!(
            starting(Some(ModulePhase::Ready)),
            (ModulePhase::Reconciling, vec![])
        );
        assert_eq!(
            starting(Some(ModulePhase::Error)).0,
            ModulePhase::Reconciling
        );
        let rows: Vec<(Ending, ModulePhase, bool, Option<Reason>, &str)> = vec![
            (
                Ending::Done(Readiness::Ready),
                ModulePhase::Ready,
                true,
                None,
                "",
            ),
            (Ending::Maintenance, ModulePhase::Ready, true, None, ""),
            (
                Ending::Done(Readiness::Waiting(
                    "Deployment a/b: 0 of 1 replicas available".into(),
                )),
                ModulePhase::Reconciling,
                false,
                Some(Reason::Reconciling),
                "Deployment a/b: 0 of 1 replicas available",
            ),
            (
                Ending::Done(Readiness::Failed("Job j: the job failed".into())),
                ModulePhase::Error,
                false,
                Some(Reason::ModuleError),
                "Job j: the job failed",
            ),
            (
                Ending::ModuleError("render: boom".into()),
                ModulePhase::Error,
                false,
                Some(Reason::ModuleError),
                "render: boom",
            ),
            (
                Ending::HookError("hook x failed".into()),
                ModulePhase::Error,
                false,
                Some(Reason::HookError),
                "hook x failed",
            ),
        ];
        for (ending, phase, ready, reason, message) in rows {
            let (p, conditions) = ended(&ending);
            assert_eq!(p, phase, "{ending:?}");
            let is_ready = conditions.iter().find(|c| c.0 == Type::IsReady).unwrap();
            assert_eq!(
                (is_ready.1, is_ready.2, is_ready.3.as_str()),
                (ready, reason, message)
            );
        }
    }
}
