//! Version constraints of module requirements (`requirements.deckhouse`,
//! `requirements.kubernetes`, `requirements.modules`): Go's Masterminds semver, as Deckhouse
//! reads them — one implementation, the release engine's [`Constraint`], shared by platform and
//! module releases and the enabling chain — and the lenient version reading they are checked
//! against.

pub use release_plan::requirements::Constraint;
use semver::Version;

use crate::Error;

fn version_text(text: &str) -> &str {
    text.strip_prefix('v').unwrap_or(text)
}

/// Reads a version leniently: `v` prefix, missing minor or patch (`1.29` = `1.29.0`).
pub fn parse_version(text: &str) -> Result<Version, Error> {
    let body = version_text(text.trim());
    let (core, rest) = match body.find(['-', '+']) {
        Some(i) => body.split_at(i),
        None => (body, ""),
    };
    let parts = core.split('.').count();
    let padded = match parts {
        1 => format!("{core}.0.0{rest}"),
        2 => format!("{core}.0{rest}"),
        _ => body.to_owned(),
    };
    Version::parse(&padded).map_err(|e| Error::Constraint {
        constraint: text.to_owned(),
        reason: format!("not a version: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn m(constraint: &str, version: &str) -> bool {
        Constraint::parse(constraint)
            .unwrap()
            .matches(&parse_version(version).unwrap())
    }

    #[test]
    fn deckhouse_spellings() {
        for (c, v, want) in [
            (">= 1.26 < 1.30", "1.29.3", true),
            (">= 1.26 < 1.30", "1.30.0", false),
            (">=1.26, <1.30", "1.25.9", false),
            (">= v1.60", "v1.69.3", true),
            ("> 1.60 || = 1.50", "1.50.4", true),
            ("> 1.60 || = 1.50", "1.55.0", false),
            ("1.2 - 1.4", "1.4.0", true),
            ("1.2 - 1.4", "1.4.1", true),
            ("1.2 - 1.4", "1.5.0", false),
            ("1.2", "1.2.9", true),
            ("1.2", "1.3.0", false),
            ("~1.2", "1.2.5", true),
            ("^1.2", "1.9.0", true),
            ("*", "0.0.1", true),
            ("1.2.x", "1.2.7", true),
        ] {
            assert_eq!(m(c, v), want, "{c} on {v}");
        }
    }

    #[test]
    fn refusals() {
        for bad in ["", ">=", "1.2 -", ">= banana", "a || "] {
            assert!(Constraint::parse(bad).is_err(), "{bad}");
        }
        assert!(!m("!= 1.2", "1.2.4"), "Masterminds reads != with wildcards");
        assert!(m("!= 1.2", "1.3.0"));
        assert!(parse_version("x.y").is_err());
        assert_eq!(parse_version("v1.29").unwrap(), Version::new(1, 29, 0));
        assert_eq!(parse_version("2").unwrap(), Version::new(2, 0, 0));
    }

    proptest! {
        #[test]
        fn spaced_and_comma_forms_agree(a in 0u64..5, b in 0u64..40, c in 0u64..5, d in 0u64..40,
                                         x in 0u64..6, y in 0u64..45, z in 0u64..9) {
            let v = Version::new(x, y, z);
            let spaced = Constraint::parse(&format!(">= {a}.{b} < {c}.{d}")).unwrap();
            let commas = Constraint::parse(&format!(">={a}.{b}, <{c}.{d}")).unwrap();
            prop_assert_eq!(spaced.matches(&v), commas.matches(&v));
            let lower = Version::new(a, b, 0);
            let upper = Version::new(c, d, 0);
            prop_assert_eq!(spaced.matches(&v), v >= lower && v < upper);
        }

        #[test]
        fn never_panics(text in ".{0,40}") {
            let _ = Constraint::parse(&text);
            let _ = parse_version(&text);
        }
    }
}
