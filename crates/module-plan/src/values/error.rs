//! Why values cannot be built or changed, worded as addon-operator words it.

/// Which values a hook's patch was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// `VALUES_JSON_PATCH_PATH`: the values in memory.
    Values,
    /// `CONFIG_VALUES_JSON_PATCH_PATH`: the config values (the ModuleConfig's settings).
    ConfigValues,
}

/// Why values cannot be built, patched or rendered. `Display` is addon-operator's text;
/// [`ValuesError::for_hook`] adds what addon-operator says around a hook's failure, and
/// [`ValuesError::status_message`] is the one-line form Deckhouse puts on statuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValuesError {
    /// The module's values files (`openapi/values.yaml`, `values.yaml`) are unusable.
    #[error(transparent)]
    Definition(#[from] crate::Error),
    /// The ModuleConfig's settings are refused (Deckhouse's ModuleConfig validator message,
    /// e.g. `spec.settings are not valid (version 1): …`).
    #[error("{message}")]
    ConfigValues {
        /// The module (kebab-case, or `global`).
        module: String,
        /// Deckhouse's message.
        message: String,
    },
    /// The assembled values do not match `openapi/values.yaml`.
    #[error("validate values: {}", go_multierror(errors))]
    Invalid {
        /// The module.
        module: String,
        /// go-openapi's messages (`echo.internal.x is a forbidden property`).
        errors: Vec<String>,
    },
    /// The values lack what `x-required-for-helm` asks for (checked before rendering).
    #[error("check helm values: {}", go_multierror(errors))]
    Helm {
        /// The module.
        module: String,
        /// go-openapi's messages (`echo.internal.cert is required`).
        errors: Vec<String>,
    },
    /// A hook's patch file is not JSON patch data (`bad json-patch data: …`).
    #[error("{reason}")]
    PatchParse {
        /// The module.
        module: String,
        /// Which patch.
        kind: PatchKind,
        /// addon-operator's message.
        reason: String,
    },
    /// A hook's patch touches a path it may not, uses `replace`, or does not apply.
    #[error("{reason}")]
    Patch {
        /// The module.
        module: String,
        /// Which patch.
        kind: PatchKind,
        /// addon-operator's message (`merge module 'echo' values failed: …`).
        reason: String,
    },
    /// The patched values do not match the schema; nothing was applied.
    #[error("{}", patch_invalid(module, *kind, errors))]
    PatchInvalid {
        /// The module.
        module: String,
        /// Which patch.
        kind: PatchKind,
        /// go-openapi's messages.
        errors: Vec<String>,
    },
    /// Recomputing the values with the stored patches failed.
    #[error("error on commit values: {reason}")]
    Commit {
        /// The module.
        module: String,
        /// Why.
        reason: String,
    },
}

impl ValuesError {
    /// The module the error is about (`global` for global values); empty for file errors.
    pub fn module(&self) -> &str {
        match self {
            ValuesError::Definition(_) => "",
            ValuesError::ConfigValues { module, .. }
            | ValuesError::Invalid { module, .. }
            | ValuesError::Helm { module, .. }
            | ValuesError::PatchParse { module, .. }
            | ValuesError::Patch { module, .. }
            | ValuesError::PatchInvalid { module, .. }
            | ValuesError::Commit { module, .. } => module,
        }
    }

    /// What addon-operator reports when hook `hook` produced this error: the hook's name and
    /// the values it was changing around the message, as in
    /// `module hook 'hooks/a.py': dynamic module values update error: merge module 'echo'
    /// values failed: …`.
    pub fn for_hook(&self, hook: &str) -> String {
        let global = self.module() == super::patch::GLOBAL_KEY;
        match self {
            ValuesError::PatchParse { .. } if global => {
                format!("global hook '{hook}' failed: {self}")
            }
            ValuesError::PatchParse { .. } => format!("module hook '{hook}' failed: {self}"),
            ValuesError::Patch { kind, .. } => match (global, kind) {
                (false, PatchKind::Values) => {
                    format!("module hook '{hook}': dynamic module values update error: {self}")
                }
                (false, PatchKind::ConfigValues) => {
                    format!("module hook '{hook}': kube module config values update error: {self}")
                }
                (true, PatchKind::Values) => {
                    format!("global hook '{hook}': dynamic global values update error: {self}")
                }
                (true, PatchKind::ConfigValues) => {
                    format!("global hook '{hook}': kube config global values update error: {self}")
                }
            },
            other => other.to_string(),
        }
    }

    /// The message on one line, as Deckhouse cleans multi-line errors for a status field.
    pub fn status_message(&self) -> String {
        one_line(&self.to_string())
    }
}

/// hashicorp/go-multierror's list format (`1 error occurred:\n\t* …\n\n`).
pub fn go_multierror(errors: &[String]) -> String {
    if errors.len() == 1 {
        return format!("1 error occurred:\n\t* {}\n\n", errors[0]);
    }
    let points: Vec<String> = errors.iter().map(|e| format!("* {e}")).collect();
    format!(
        "{} errors occurred:\n\t{}\n\n",
        errors.len(),
        points.join("\n\t")
    )
}

/// A multi-line message on one line: every line trimmed and put after a space (Deckhouse's
/// clean-up of multi-line errors; the same form as [`crate::settings::multierror_one_line`]).
/// Single-line messages are left as they are.
pub fn one_line(text: &str) -> String {
    if !text.contains('\n') {
        return text.to_owned();
    }
    text.split('\n').map(|l| format!(" {}", l.trim())).collect()
}

fn patch_invalid(module: &str, kind: PatchKind, errors: &[String]) -> String {
    let what = match kind {
        PatchKind::Values => "values patch",
        PatchKind::ConfigValues => "config values patch",
    };
    if module == super::patch::GLOBAL_KEY {
        // Global hooks wrap the validation error.
        format!(
            "cannot apply {what} for global values: {}",
            go_multierror(errors)
        )
    } else {
        // Module hooks append the validation errors to their own.
        let mut all = vec![format!("cannot apply {what} for module values")];
        all.extend(errors.iter().cloned());
        go_multierror(&all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multierror_and_one_line() {
        assert_eq!(go_multierror(&["a".into()]), "1 error occurred:\n\t* a\n\n");
        assert_eq!(
            go_multierror(&["a".into(), "b".into()]),
            "2 errors occurred:\n\t* a\n\t* b\n\n"
        );
        assert_eq!(
            one_line(&go_multierror(&["a".into()])),
            crate::settings::multierror_one_line(&["a".into()])
        );
        assert_eq!(one_line("plain"), "plain");
    }

    #[test]
    fn hook_wrappers() {
        let patch = |module: &str, kind| ValuesError::Patch {
            module: module.into(),
            kind,
            reason: "R".into(),
        };
        assert_eq!(
            patch("echo", PatchKind::Values).for_hook("h"),
            "module hook 'h': dynamic module values update error: R"
        );
        assert_eq!(
            patch("echo", PatchKind::ConfigValues).for_hook("h"),
            "module hook 'h': kube module config values update error: R"
        );
        assert_eq!(
            patch("global", PatchKind::Values).for_hook("h"),
            "global hook 'h': dynamic global values update error: R"
        );
        assert_eq!(
            patch("global", PatchKind::ConfigValues).for_hook("h"),
            "global hook 'h': kube config global values update error: R"
        );
        let invalid = |module: &str, kind| ValuesError::PatchInvalid {
            module: module.into(),
            kind,
            errors: vec!["echo.x is a forbidden property".into()],
        };
        assert_eq!(
            invalid("echo", PatchKind::Values).for_hook("h"),
            "2 errors occurred:\n\t* cannot apply values patch for module values\n\t* echo.x is a forbidden property\n\n"
        );
        assert_eq!(
            invalid("echo", PatchKind::ConfigValues).to_string(),
            "2 errors occurred:\n\t* cannot apply config values patch for module values\n\t* echo.x is a forbidden property\n\n"
        );
        assert_eq!(
            invalid("global", PatchKind::Values).to_string(),
            "cannot apply values patch for global values: 1 error occurred:\n\t* echo.x is a forbidden property\n\n"
        );
        assert_eq!(
            invalid("echo", PatchKind::Values).status_message(),
            " 2 errors occurred: * cannot apply values patch for module values * echo.x is a forbidden property  "
        );
    }
}
