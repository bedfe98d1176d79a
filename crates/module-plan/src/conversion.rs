//! Settings conversions: `openapi/conversions/vN.yaml` files, each
//! `{version: N, conversions: [<jq>, …]}`, convert settings written for version `N-1` to
//! version `N`. A file's expressions are joined with ` | ` into one program; converting from
//! `X` runs the programs of `X+1 … latest` in order. They are jq (Deckhouse runs them with
//! gojq); here they run on jaq with its standard library.
//!
//! Known versions are 1, the latest, and every `N` and `N-1` a file names; a step without a
//! file changes nothing.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use crate::Error;

/// Deckhouse's message when a conversion does not produce an object.
pub const MSG_NOT_AN_OBJECT: &str = "cannot unmarshal after converting";

#[derive(Deserialize)]
struct RawFile {
    version: i64,
    #[serde(default)]
    conversions: Vec<String>,
}

/// One conversion step (`vN.yaml`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The file it came from, for messages.
    pub file: String,
    /// The expressions as written.
    pub expressions: Vec<String>,
}

impl Step {
    /// The program run for the step: the expressions joined with ` | `.
    pub fn program(&self) -> String {
        self.expressions.join(" | ")
    }
}

/// The conversions of one module, by target version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conversions {
    steps: BTreeMap<i64, Step>,
}

impl Conversions {
    /// No conversions: only version 1 exists.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a conversion file. The version is the file's `version` field; the program must
    /// compile. `file` names it in messages (`openapi/conversions/v2.yaml`).
    pub fn add_file(&mut self, file: &str, yaml: &str) -> Result<(), Error> {
        let bad = |reason: String| Error::ConversionFile {
            file: file.to_owned(),
            reason,
        };
        let raw: RawFile = serde_saphyr::from_str(yaml).map_err(|e| bad(e.to_string()))?;
        if raw.version < 2 {
            return Err(bad(format!(
                "version {} converts from nothing: conversions start at version 2",
                raw.version
            )));
        }
        if self.steps.contains_key(&raw.version) {
            return Err(bad(format!(
                "a conversion to version {} already exists",
                raw.version
            )));
        }
        let step = Step {
            file: file.to_owned(),
            expressions: raw.conversions,
        };
        jq::compile(&step.program()).map_err(bad)?;
        self.steps.insert(raw.version, step);
        Ok(())
    }

    /// Adds a step from already parsed expressions (ModuleSettingsDefinition, tests).
    pub fn add_step(&mut self, version: i64, expressions: Vec<String>) -> Result<(), Error> {
        let file = format!("openapi/conversions/v{version}.yaml");
        let step = Step { file, expressions };
        jq::compile(&step.program()).map_err(|reason| Error::ConversionFile {
            file: step.file.clone(),
            reason,
        })?;
        self.steps.insert(version, step);
        Ok(())
    }

    /// The steps, by target version.
    pub fn steps(&self) -> &BTreeMap<i64, Step> {
        &self.steps
    }

    /// The latest version: the highest step, at least 1.
    pub fn latest(&self) -> i64 {
        self.steps.keys().next_back().copied().unwrap_or(1).max(1)
    }

    /// Every version settings may be written for.
    pub fn known_versions(&self) -> BTreeSet<i64> {
        let mut known = BTreeSet::from([1, self.latest()]);
        for version in self.steps.keys() {
            known.insert(*version);
            known.insert(version - 1);
        }
        known
    }

    /// Converts settings written for `from` to `to`; nothing runs when `from >= to`.
    pub fn convert(&self, from: i64, to: i64, settings: &Value) -> Result<Value, Error> {
        let mut value = if settings.is_null() {
            Value::Object(Default::default())
        } else {
            settings.clone()
        };
        if from >= to {
            return Ok(value);
        }
        for (version, step) in self.steps.range(from + 1..=to) {
            value = run_program(&step.program(), &value).map_err(|reason| Error::Conversion {
                from,
                to,
                reason: format!("v{version}: {reason}"),
            })?;
            match value {
                Value::Object(_) => {}
                Value::Null => value = Value::Object(Default::default()),
                _ => {
                    return Err(Error::Conversion {
                        from,
                        to,
                        reason: MSG_NOT_AN_OBJECT.to_owned(),
                    });
                }
            }
        }
        Ok(value)
    }
}

/// Runs a jq program on `input` and returns its first output.
pub fn run_program(program: &str, input: &Value) -> Result<Value, String> {
    jq::run(program, input)?
        .into_iter()
        .next()
        .ok_or_else(|| "the conversion produced no value".to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Deckhouse's documented example: conversions to version 4.
    const V4: &str = r#"
version: 4
conversions:
  - '.arrayField=["v1","v2","v3"]'
  - del(.tempField)
  - del(.objectForDelete.key) | if .objectForDelete == {} then del(.objectForDelete) end
"#;

    fn example() -> Conversions {
        let mut c = Conversions::new();
        c.add_file(
            "v2.yaml",
            "version: 2\nconversions:\n  - .renamed = .old | del(.old)\n",
        )
        .unwrap();
        c.add_file(
            "v3.yaml",
            "version: 3\nconversions:\n  - 'if has(\"replicas\") then .replicas |= tonumber else . end'\n",
        )
        .unwrap();
        c.add_file("v4.yaml", V4).unwrap();
        c
    }

    #[test]
    fn documented_example_converts_to_the_latest() {
        let c = Conversions::new();
        assert_eq!(c.latest(), 1);
        let mut c = c;
        c.add_file("v4.yaml", V4).unwrap();
        let out = c
            .convert(
                3,
                4,
                &json!({"tempField": 1, "objectForDelete": {"key": "x"}, "keep": true}),
            )
            .unwrap();
        assert_eq!(out, json!({"arrayField": ["v1", "v2", "v3"], "keep": true}));
        // A non-empty object survives the `if … end` (jq 1.7's optional `else`).
        let out = c
            .convert(3, 4, &json!({"objectForDelete": {"key": "x", "other": 1}}))
            .unwrap();
        assert_eq!(
            out,
            json!({"arrayField": ["v1", "v2", "v3"], "objectForDelete": {"other": 1}})
        );
    }

    #[test]
    fn del_of_a_missing_path_is_a_no_op_as_in_gojq() {
        for (program, input, output) in [
            ("del(.a.b)", json!({"x": 1}), json!({"x": 1})),
            ("del(.a.b.c)", json!({"a": {}}), json!({"a": {}})),
            ("del(.a)", json!({"a": null, "b": 1}), json!({"b": 1})),
            (
                "del(.a.b)",
                json!({"a": {"b": 1, "c": 2}}),
                json!({"a": {"c": 2}}),
            ),
            ("del(.[0, 1])", json!([1, 2, 3]), json!([3])),
            ("del(.a[1])", json!({"a": [1, 2, 3]}), json!({"a": [1, 3]})),
        ] {
            assert_eq!(
                run_program(program, &input),
                Ok(output),
                "{program} on {input}"
            );
        }
    }

    #[test]
    fn several_steps_run_in_order() {
        let c = example();
        assert_eq!(c.latest(), 4);
        assert_eq!(c.known_versions(), BTreeSet::from([1, 2, 3, 4]));
        let out = c
            .convert(
                1,
                4,
                &json!({"old": "x", "replicas": "3", "tempField": 0, "objectForDelete": {"key": 1}}),
            )
            .unwrap();
        assert_eq!(
            out,
            json!({"renamed": "x", "replicas": 3, "arrayField": ["v1", "v2", "v3"]})
        );
        // From the latest nothing runs; from 3 only v4.
        assert_eq!(c.convert(4, 4, &json!({"a": 1})).unwrap(), json!({"a": 1}));
        assert_eq!(
            c.convert(3, 4, &json!({"old": 1})).unwrap(),
            json!({"old": 1, "arrayField": ["v1", "v2", "v3"]})
        );
        assert_eq!(
            c.convert(1, 4, &Value::Null).unwrap()["arrayField"],
            json!(["v1", "v2", "v3"])
        );
    }

    #[test]
    fn failures_say_which_step_and_why() {
        let c = example();
        let err = c.convert(2, 4, &json!({"replicas": "many"})).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("spec.settings conversion from version 2 to 4: v3: "),
            "{text}"
        );
        let mut c = Conversions::new();
        c.add_step(2, vec!["[1]".into()]).unwrap();
        assert_eq!(
            c.convert(1, 2, &json!({})).unwrap_err().to_string(),
            "spec.settings conversion from version 1 to 2: cannot unmarshal after converting"
        );
        let mut c = Conversions::new();
        c.add_step(2, vec!["empty".into()]).unwrap();
        let err = c.convert(1, 2, &json!({})).unwrap_err().to_string();
        assert!(err.ends_with("the conversion produced no value"), "{err}");
    }

    #[test]
    fn invalid_files_are_refused() {
        let mut c = Conversions::new();
        let err = c
            .add_file("v2.yaml", "version: 2\nconversions: ['.a = ']\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid conversion v2.yaml: cannot parse"),
            "{err}"
        );
        let err = c
            .add_file("v2.yaml", "version: 2\nconversions: ['nosuchfn(1)']\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot compile"), "{err}");
        let err = c
            .add_file("v1.yaml", "version: 1\nconversions: []\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("conversions start at version 2"), "{err}");
        let err = c.add_file("v.yaml", "conversions: [.]").unwrap_err();
        assert!(matches!(err, Error::ConversionFile { .. }), "{err}");
    }
}
