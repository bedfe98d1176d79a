//! The disruption checks Deckhouse registers for releases that declare `disruptions`: whether a
//! release's minor version would disrupt this cluster, and why.
//!
//! `ingressNginx` (Deckhouse's `modules/402-ingress-nginx/requirements/disruption.go`, fed by
//! the module's `discover_minimal_nginx_version` hook): the hook stores `hasDisruption` only
//! when an IngressNginxController without `spec.controllerVersion` falls back to a default
//! version `0.33`, and stores then whether two controllers of one ingress class straddle
//! version 1.0. The check reads it: no value stored is a disruption without a reason (the
//! release waits for approval with an empty reason), `true` is a disruption with the reason
//! below, `false` none.

/// The reason of the `ingressNginx` disruption, Deckhouse's words.
pub const INGRESS_NGINX_REASON: &str = "Default IngressNginxController version 0.33 will be automatically changed to 1.1, this action will restart all controllers with non-specified version";

/// The disruption key of the ingress-nginx module.
pub const INGRESS_NGINX: &str = "ingressNginx";

/// What the `ingressNginx` check reads of one IngressNginxController.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngressController {
    /// `spec.ingressClass` (the hook ignores controllers without one).
    pub ingress_class: Option<String>,
    /// `spec.controllerVersion`, empty or absent when unset.
    pub controller_version: Option<String>,
}

/// The `ingressNginx:hasDisruption` value the hook stores: `None` when it stores none.
/// `default_version` is the module's `defaultControllerVersion`.
pub fn ingress_nginx_has_disruption(
    controllers: &[IngressController],
    default_version: Option<&str>,
) -> Option<bool> {
    let default_version = default_version.unwrap_or_default();
    let mut falls_back_to_0_33 = false;
    let mut incompatible = false;
    let mut by_class: Vec<(&str, (u64, u64, u64))> = Vec::new();
    for controller in controllers {
        let Some(class) = controller.ingress_class.as_deref() else {
            continue;
        };
        let mut version = controller.controller_version.as_deref().unwrap_or_default();
        if version.is_empty() {
            version = default_version;
            if version == "0.33" {
                falls_back_to_0_33 = true;
            }
        }
        // The hook fails on a version it cannot parse and stores nothing new.
        let version = lenient_version(version)?;
        if let Some((_, previous)) = by_class.iter().find(|(c, _)| *c == class)
            && straddle_1_0(*previous, version)
        {
            incompatible = true;
        }
        by_class.retain(|(c, _)| *c != class);
        by_class.push((class, version));
    }
    falls_back_to_0_33.then_some(incompatible)
}

/// The `ingressNginx` check on the stored value: `Some(reason)` when the release disrupts.
pub fn ingress_nginx_disruption(has_disruption: Option<bool>) -> Option<String> {
    match has_disruption {
        None => Some(String::new()),
        Some(true) => Some(INGRESS_NGINX_REASON.to_owned()),
        Some(false) => None,
    }
}

/// One version above 1.0.0 and the other below it (1.0.0 itself is neither).
fn straddle_1_0(a: (u64, u64, u64), b: (u64, u64, u64)) -> bool {
    let border = (1, 0, 0);
    (a > border && b < border) || (a < border && b > border)
}

/// A version as Masterminds' `NewVersion` reads it: `v` optional, minor and patch optional.
fn lenient_version(text: &str) -> Option<(u64, u64, u64)> {
    let text = text.strip_prefix('v').unwrap_or(text);
    let core = text.split(['-', '+']).next()?;
    let mut parts = core.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    let patch = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    if parts.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctrl(class: Option<&str>, version: Option<&str>) -> IngressController {
        IngressController {
            ingress_class: class.map(str::to_owned),
            controller_version: version.map(str::to_owned),
        }
    }

    #[test]
    fn ingress_nginx_value_as_the_hook_stores_it() {
        type Case<'a> = (
            &'a str,
            Vec<IngressController>,
            Option<&'a str>,
            Option<bool>,
        );
        let table: &[Case<'_>] = &[
            ("no controllers", vec![], Some("0.33"), None),
            (
                "every version set",
                vec![ctrl(Some("nginx"), Some("1.1"))],
                Some("0.33"),
                None,
            ),
            (
                "falls back to another default",
                vec![ctrl(Some("nginx"), None)],
                Some("1.9"),
                None,
            ),
            (
                "falls back to 0.33, one class",
                vec![
                    ctrl(Some("nginx"), Some("")),
                    ctrl(Some("other"), Some("1.1")),
                ],
                Some("0.33"),
                Some(false),
            ),
            (
                "falls back to 0.33 beside a 1.x controller of the same class",
                vec![ctrl(Some("nginx"), Some("1.1")), ctrl(Some("nginx"), None)],
                Some("0.33"),
                Some(true),
            ),
            (
                "1.0 itself straddles nothing",
                vec![ctrl(Some("nginx"), Some("1.0")), ctrl(Some("nginx"), None)],
                Some("0.33"),
                Some(false),
            ),
            (
                "controllers without a class are ignored",
                vec![ctrl(None, None), ctrl(None, Some("1.1"))],
                Some("0.33"),
                None,
            ),
            (
                "an unparsable version stores nothing",
                vec![
                    ctrl(Some("nginx"), None),
                    ctrl(Some("nginx"), Some("latest")),
                ],
                Some("0.33"),
                None,
            ),
        ];
        for (name, controllers, default, want) in table {
            assert_eq!(
                ingress_nginx_has_disruption(controllers, *default),
                *want,
                "{name}"
            );
        }
    }

    #[test]
    fn ingress_nginx_check_reads_the_value() {
        assert_eq!(ingress_nginx_disruption(None), Some(String::new()));
        assert_eq!(
            ingress_nginx_disruption(Some(true)).as_deref(),
            Some(INGRESS_NGINX_REASON)
        );
        assert_eq!(ingress_nginx_disruption(Some(false)), None);
    }

    #[test]
    fn lenient_versions() {
        for (text, want) in [
            ("0.33", Some((0, 33, 0))),
            ("1.1", Some((1, 1, 0))),
            ("v1.9.3", Some((1, 9, 3))),
            ("1", Some((1, 0, 0))),
            ("", None),
            ("1.x", None),
            ("1.2.3.4", None),
        ] {
            assert_eq!(lenient_version(text), want, "{text}");
        }
    }
}
