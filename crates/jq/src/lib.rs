//! jq programs as Deckhouse runs them with gojq — settings conversions
//! (`openapi/conversions/vN.yaml`) and hooks' `jqFilter` — on jaq with its standard library.
//!
//! Pure: JSON in, JSON out. Where the two differ in a way Deckhouse's programs rely on, a
//! prelude makes jaq behave as gojq: `del` of a path through a missing (null) parent is a no-op
//! in gojq and an error in jaq.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data, unwrap_valr};
use jaq_json::Val;
use serde_json::Value;

type Filter = jaq_core::compile::Filter<jaq_core::Native<data::JustLut<Val>>>;

/// Definitions put before every program (see the crate's documentation).
const GOJQ_PRELUDE: &str = "def del(f): . as $r | delpaths([path(f) | select(. as $p | length < 2 or ($r | getpath($p[:-1])) != null)] | sort | reverse);";

/// Checks that `program` compiles; the error says why it does not.
pub fn compile(program: &str) -> Result<(), String> {
    with_filter(program, |_| ())
}

/// Runs `program` on `input` and returns its outputs, in order; the error is the first one a
/// run raised (or why the program does not compile).
pub fn run(program: &str, input: &Value) -> Result<Vec<Value>, String> {
    let text = serde_json::to_vec(input).map_err(|e| e.to_string())?;
    let input = jaq_json::read::parse_single(&text).map_err(|e| e.to_string())?;
    let outputs = with_filter(program, |filter| {
        let ctx = Ctx::<data::JustLut<Val>>::new(&filter.lut, Vars::new([]));
        filter
            .id
            .run((ctx, input))
            .map(unwrap_valr)
            .map(|r| r.map(|v| v.to_string()).map_err(|e| e.to_string()))
            .collect::<Result<Vec<String>, String>>()
    })??;
    outputs
        .iter()
        .map(|s| serde_json::from_str(s).map_err(|e| e.to_string()))
        .collect()
}

fn errors_text<E: std::fmt::Debug>(errors: &[E]) -> String {
    errors
        .iter()
        .map(|e| format!("{e:?}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Compiles the prelude and `program` and runs `f` with the filter.
fn with_filter<T>(program: &str, f: impl FnOnce(&Filter) -> T) -> Result<T, String> {
    let code = format!("{GOJQ_PRELUDE} {program}");
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
                code: &code,
                path: (),
            },
        )
        .map_err(|errors| {
            let detail: Vec<String> = errors
                .iter()
                .map(|(_, e)| match e {
                    jaq_core::load::Error::Io(list) => errors_text(list),
                    jaq_core::load::Error::Lex(list) => errors_text(list),
                    jaq_core::load::Error::Parse(list) => errors_text(list),
                })
                .collect();
            format!("cannot parse {program:?}: {}", detail.join("; "))
        })?;
    let filter = Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|errors| {
            let detail: Vec<String> = errors.iter().map(|(_, e)| errors_text(e)).collect();
            format!("cannot compile {program:?}: {}", detail.join("; "))
        })?;
    Ok(f(&filter))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn outputs_in_order_and_errors_in_words() {
        let obj = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}});
        assert_eq!(run(".metadata.labels", &obj), Ok(vec![json!({"x": "1"})]));
        assert_eq!(
            run(".metadata.name, .data.k", &obj),
            Ok(vec![json!("a"), json!("v")])
        );
        assert_eq!(run("empty", &obj), Ok(vec![]));
        assert!(
            compile(".metadata.(")
                .unwrap_err()
                .starts_with("cannot parse")
        );
        assert!(run(".data.k | tonumber", &obj).is_err());
    }

    #[test]
    fn del_through_a_missing_parent_is_a_no_op_as_in_gojq() {
        let obj = json!({"a": 1});
        assert_eq!(run("del(.b.c)", &obj), Ok(vec![json!({"a": 1})]));
        assert_eq!(run("del(.a)", &obj), Ok(vec![json!({})]));
    }
}
