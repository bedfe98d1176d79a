//! `jqFilter` programs, run with jaq as shell-operator runs them with gojq.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data, unwrap_valr};
use jaq_json::Val;
use serde_json::Value;

/// A jq program that compiled; it is compiled again for each run (filters are small).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JqProgram {
    source: String,
}

type Filter = jaq_core::compile::Filter<jaq_core::Native<data::JustLut<Val>>>;

fn with_filter<T>(program: &str, f: impl FnOnce(&Filter) -> T) -> Result<T, String> {
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs());
    let loader = Loader::new(defs);
    let arena = Arena::default();
    let modules = loader
        .load(
            &arena,
            File {
                code: program,
                path: (),
            },
        )
        .map_err(|errors| {
            let detail: Vec<String> = errors
                .iter()
                .map(|(_, e)| match e {
                    jaq_core::load::Error::Io(l) => format!("{l:?}"),
                    jaq_core::load::Error::Lex(l) => format!("{l:?}"),
                    jaq_core::load::Error::Parse(l) => format!("{l:?}"),
                })
                .collect();
            format!("cannot parse {program:?}: {}", detail.join("; "))
        })?;
    let filter = Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|errors| {
            let detail: Vec<String> = errors.iter().map(|(_, e)| format!("{e:?}")).collect();
            format!("cannot compile {program:?}: {}", detail.join("; "))
        })?;
    Ok(f(&filter))
}

impl JqProgram {
    /// Compiles `source`; the error says why it does not.
    pub fn compile(source: &str) -> Result<Self, String> {
        with_filter(source, |_| ())?;
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
        let text = serde_json::to_vec(input).map_err(|e| e.to_string())?;
        let input = jaq_json::read::parse_single(&text).map_err(|e| e.to_string())?;
        let outputs = with_filter(&self.source, |filter| {
            let ctx = Ctx::<data::JustLut<Val>>::new(&filter.lut, Vars::new([]));
            filter
                .id
                .run((ctx, input))
                .map(unwrap_valr)
                .map(|r| r.map(|v| v.to_string()).map_err(|e| e.to_string()))
                .collect::<Result<Vec<String>, String>>()
        })??;
        let mut values = outputs
            .iter()
            .map(|s| serde_json::from_str::<Value>(s).map_err(|e| e.to_string()))
            .collect::<Result<Vec<Value>, String>>()?;
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
