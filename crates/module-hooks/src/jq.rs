//! `jqFilter` programs, run with jaq as shell-operator runs them with gojq.

use serde_json::Value;

/// A jq program that compiled; it is compiled again for each run (filters are small).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JqProgram {
    source: String,
}

impl JqProgram {
    /// Compiles `source`; the error says why it does not.
    pub fn compile(source: &str) -> Result<Self, String> {
        jq::compile(source)?;
        Ok(Self {
            source: source.to_owned(),
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Runs the program on `input`: one output is the result, several become an array, none
    /// is null.
    pub fn run(&self, input: &Value) -> Result<Value, String> {
        let mut values = jq::run(&self.source, input)?;
        Ok(match values.len() {
            0 => Value::Null,
            1 => values.remove(0),
            _ => Value::Array(values),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn filters_objects() {
        let obj = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}});
        let rows = [
            (".metadata.labels", json!({"x": "1"})),
            (
                "{name: .metadata.name, k: .data.k}",
                json!({"name": "a", "k": "v"}),
            ),
            ("[.metadata.name, .data.k]", json!(["a", "v"])),
            (".metadata.name, .data.k", json!(["a", "v"])),
            ("empty", json!(null)),
        ];
        for (program, want) in rows {
            assert_eq!(
                JqProgram::compile(program).unwrap().run(&obj).unwrap(),
                want,
                "{program}"
            );
        }
        assert!(JqProgram::compile(".metadata.(").is_err());
    }
}
