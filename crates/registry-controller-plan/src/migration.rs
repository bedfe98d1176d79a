//! The migration gate: this implementation takes over only once the previous one (a state
//! machine configured in `deckhouse` ModuleConfig `settings.registry`, its state in Secret
//! `registry-state`) has let go of the pull path — both configure the same thing on every node,
//! and running both would race them. First match wins:
//!
//! 1. marker Secret `registry-v2-switch` exists → this implementation;
//! 2. the legacy state cannot be read → blocked;
//! 3. no legacy state → this implementation;
//! 4. `target_mode` ∉ {"", mode, Unmanaged} → blocked (moving);
//! 5. empty mode → blocked;
//! 6. `Direct` → this implementation only if the `registry` ModuleConfig is Managed with a source
//!    of images, else blocked;
//! 7. `Proxy`/`Local` (any other mode but Unmanaged) → blocked until brought to Unmanaged;
//! 8. otherwise → this implementation.

use serde::Deserialize;

use crate::Error;

/// The part of the legacy state the gate reads (`state` key of `registry-state`, YAML).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct LegacyState {
    /// The mode the previous implementation is in.
    #[serde(default)]
    pub mode: String,
    /// The mode it is moving to.
    #[serde(default)]
    pub target_mode: String,
}

/// Reads the `state` key; `None` when the Secret or the key is absent or empty.
pub fn read_legacy_state(state: Option<&[u8]>) -> Result<Option<LegacyState>, Error> {
    let Some(state) = state.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let text = std::str::from_utf8(state).map_err(|e| Error::LegacyState(e.to_string()))?;
    serde_saphyr::from_str(text)
        .map(Some)
        .map_err(|e| Error::LegacyState(e.to_string()))
}

/// Which implementation runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// This implementation (`V2`); create the marker if it is missing.
    V2,
    /// The previous one keeps the pull path; the reason is the metric label.
    Blocked(String),
}

impl Gate {
    /// `Legacy` or `V2`, as recorded for the release requirement.
    pub fn implementation(&self) -> &'static str {
        match self {
            Gate::V2 => "V2",
            Gate::Blocked(_) => "Legacy",
        }
    }
}

/// Decides the gate.
pub fn gate(
    switched: bool,
    legacy: &Result<Option<LegacyState>, Error>,
    module_configured: bool,
) -> Gate {
    if switched {
        return Gate::V2;
    }
    let state = match legacy {
        Err(error) => return Gate::Blocked(error.to_string()),
        Ok(None) => return Gate::V2,
        Ok(Some(state)) => state,
    };
    let (mode, target) = (state.mode.as_str(), state.target_mode.as_str());
    if !target.is_empty() && target != mode && target != "Unmanaged" {
        return Gate::Blocked(format!(
            "the legacy implementation is transitioning to {target:?}; wait for it to settle"
        ));
    }
    match mode {
        "" => Gate::Blocked("the legacy implementation has not recorded a mode yet".into()),
        "Direct" if module_configured => Gate::V2,
        "Direct" => Gate::Blocked(
            "the cluster is in the \"Direct\" mode of the legacy implementation and the registry \
             ModuleConfig has no configuration of its own: set mode: Managed with primary.upstream, \
             or bring registry.mode to \"Unmanaged\""
                .into(),
        ),
        "Unmanaged" => Gate::V2,
        other => Gate::Blocked(format!(
            "the cluster is in the {other:?} mode of the legacy implementation; bring it to \
             \"Unmanaged\" first"
        )),
    }
}

/// One preflight check (`d8_registry_migration_preflight{check,detail,blocking}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// `mode`, `not_local`, `node_containerd_registry_config` or `upstream_reachable`.
    pub check: &'static str,
    /// What was found.
    pub detail: String,
    /// Whether the migration must not start while it fails.
    pub blocking: bool,
}

/// The failing preflight checks. `upstream_reachable` is `Some(false)` when the probe of the
/// registry the cluster pulls from failed.
pub fn preflight(
    switched: bool,
    legacy: &Result<Option<LegacyState>, Error>,
    upstream_reachable: Option<bool>,
) -> Vec<Check> {
    if switched {
        return Vec::new();
    }
    let mut checks = Vec::new();
    match legacy {
        Ok(Some(state)) => {
            let moving = !state.target_mode.is_empty()
                && state.target_mode != state.mode
                && state.target_mode != "Unmanaged";
            if state.mode == "Local" {
                checks.push(Check {
                    check: "not_local",
                    detail: "the cluster's registry is the cluster (Local)".into(),
                    blocking: true,
                });
            }
            if moving || !matches!(state.mode.as_str(), "Unmanaged" | "Direct") {
                checks.push(Check {
                    check: "mode",
                    detail: format!("mode {:?}, target {:?}", state.mode, state.target_mode),
                    blocking: true,
                });
            }
        }
        Ok(None) => {}
        Err(_) => checks.push(Check {
            check: "mode",
            detail: "the legacy state cannot be read".into(),
            blocking: true,
        }),
    }
    if upstream_reachable == Some(false) {
        checks.push(Check {
            check: "upstream_reachable",
            detail: "the registry the cluster pulls from does not pass the probe".into(),
            blocking: false,
        });
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(mode: &str, target: &str) -> Result<Option<LegacyState>, Error> {
        Ok(Some(LegacyState {
            mode: mode.into(),
            target_mode: target.into(),
        }))
    }

    #[test]
    fn the_eight_rules_in_order() {
        let unreadable = || Err(Error::LegacyState("bad".into()));
        type Row = (
            &'static str,
            bool,
            Result<Option<LegacyState>, Error>,
            bool,
            Option<&'static str>,
        );
        let rows: Vec<Row> = vec![
            (
                "1: the marker wins over anything",
                true,
                unreadable(),
                false,
                None,
            ),
            (
                "1: marker over Proxy",
                true,
                state("Proxy", ""),
                false,
                None,
            ),
            (
                "2: unreadable blocks",
                false,
                unreadable(),
                true,
                Some("cannot be read"),
            ),
            ("3: no legacy state", false, Ok(None), false, None),
            (
                "4: moving to Proxy blocks",
                false,
                state("Unmanaged", "Proxy"),
                true,
                Some("transitioning to \"Proxy\""),
            ),
            (
                "4: moving blocks even Direct",
                false,
                state("Direct", "Local"),
                true,
                Some("transitioning"),
            ),
            (
                "4: heading to Unmanaged is no move",
                false,
                state("Unmanaged", "Unmanaged"),
                false,
                None,
            ),
            (
                "5: empty mode",
                false,
                state("", ""),
                true,
                Some("not recorded a mode"),
            ),
            (
                "6: Direct with a configured module",
                false,
                state("Direct", ""),
                true,
                None,
            ),
            (
                "6: Direct without",
                false,
                state("Direct", ""),
                false,
                Some("\"Direct\" mode"),
            ),
            (
                "7: Proxy",
                false,
                state("Proxy", "Unmanaged"),
                true,
                Some("\"Proxy\" mode"),
            ),
            (
                "7: Local",
                false,
                state("Local", ""),
                true,
                Some("\"Local\" mode"),
            ),
            ("8: Unmanaged", false, state("Unmanaged", ""), false, None),
        ];
        for (what, switched, legacy, configured, blocked) in rows {
            match (gate(switched, &legacy, configured), blocked) {
                (Gate::V2, None) => {}
                (Gate::Blocked(reason), Some(part)) => {
                    assert!(reason.contains(part), "{what}: {reason}")
                }
                (got, want) => panic!("{what}: got {got:?}, want blocked={want:?}"),
            }
        }
    }

    #[test]
    fn the_state_is_read_from_yaml() {
        let text = b"mode: Proxy\ntarget_mode: Unmanaged\nconditions: []\n";
        assert_eq!(
            read_legacy_state(Some(text)).unwrap(),
            Some(LegacyState {
                mode: "Proxy".into(),
                target_mode: "Unmanaged".into()
            })
        );
        assert_eq!(read_legacy_state(None).unwrap(), None);
        assert_eq!(read_legacy_state(Some(b"")).unwrap(), None);
        assert!(read_legacy_state(Some(b"mode: [")).is_err());
        assert_eq!(gate(false, &Ok(None), false).implementation(), "V2");
    }

    #[test]
    fn preflight_checks() {
        let names = |checks: Vec<Check>| {
            checks
                .into_iter()
                .map(|c| (c.check, c.blocking))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(preflight(false, &state("Local", ""), None)),
            [("not_local", true), ("mode", true)]
        );
        assert_eq!(
            names(preflight(false, &state("Direct", ""), Some(false))),
            [("upstream_reachable", false)]
        );
        assert!(preflight(true, &state("Local", ""), Some(false)).is_empty());
        assert!(preflight(false, &state("Unmanaged", ""), Some(true)).is_empty());
    }
}
