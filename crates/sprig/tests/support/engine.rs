//! Shared by the table tests: a snippet run as Helm's engine runs a template
//! (`missingkey=zero`, named as Helm names it) with sprig's functions and a stand-in `toJson`
//! (the real one lives with the YAML functions in helm-render).

use go_template::{Func, MissingKey, Signature, Templates, Ty, Value};

/// The snippet's output with `dot` as its data, or the error's text.
pub(crate) fn render_with(snippet: &str, dot: &Value) -> Result<String, String> {
    let mut funcs = sprig::funcs();
    funcs.insert(
        "toJson".into(),
        Func::new(Signature::fixed(&[Ty::Any]), |a| {
            let json = a.first().and_then(Value::to_json).unwrap_or_default();
            Ok(Value::from(
                serde_json::to_string(&json).unwrap_or_default(),
            ))
        }),
    );
    let mut t = Templates::new(funcs);
    t.set_missing_key(MissingKey::Zero);
    let name = "t/templates/case.yaml";
    t.parse(name, snippet).map_err(|e| e.to_string())?;
    t.execute(name, dot).map_err(|e| e.to_string())
}
