//! `handler.cel` of a ValidationWebhook: rules evaluated in process.
//!
//! The field is YAML: a list of `{expression, message}` (or one bare expression). Each
//! expression sees `object`, `oldObject`, `request` (the AdmissionReview request) and
//! `snapshots` (context binding name → items, each `{"object": …, "filterResult": …}` as a
//! Python handler gets them) and must be true for the request to be admitted; the first false
//! one refuses it with its `message`, else `failed expression: <expression>` as a
//! ValidatingAdmissionPolicy words it.
//!
//! Pure: no I/O.

use serde_json::Value;

/// One compiled rule.
pub struct Rule {
    source: String,
    message: Option<String>,
    program: cel::Program,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("source", &self.source)
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}

/// What the rules say about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny(String),
    /// A rule could not be evaluated (a missing field, a non-boolean result).
    Error(String),
}

/// Compiles `handler.cel`; the error names the rule that does not parse.
pub fn compile(text: &str) -> Result<Vec<Rule>, String> {
    let doc: Value =
        serde_saphyr::from_str(text).map_err(|e| format!("handler.cel is not YAML: {e}"))?;
    let items: Vec<(String, Option<String>)> = match doc {
        Value::String(expr) => vec![(expr, None)],
        Value::Array(list) => list
            .into_iter()
            .map(|r| match r {
                Value::String(expr) => Ok((expr, None)),
                Value::Object(m) => {
                    let expr = m
                        .get("expression")
                        .and_then(Value::as_str)
                        .ok_or("handler.cel: every rule needs an expression")?;
                    Ok((
                        expr.to_string(),
                        m.get("message").and_then(Value::as_str).map(str::to_string),
                    ))
                }
                _ => Err("handler.cel: a rule is an expression or {expression, message}"),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err("handler.cel: a list of rules is expected".into()),
    };
    if items.is_empty() {
        return Err("handler.cel: no rules".into());
    }
    items
        .into_iter()
        .map(|(source, message)| {
            let program = cel::Program::compile(&source)
                .map_err(|e| format!("handler.cel: expression {source:?} does not compile: {e}"))?;
            Ok(Rule {
                source,
                message,
                program,
            })
        })
        .collect()
}

/// Evaluates the rules for an AdmissionReview request with the snapshots.
pub fn evaluate(rules: &[Rule], request: &Value, snapshots: &Value) -> Verdict {
    let mut ctx = cel::Context::default();
    let vars = [
        (
            "object",
            request.get("object").cloned().unwrap_or(Value::Null),
        ),
        (
            "oldObject",
            request.get("oldObject").cloned().unwrap_or(Value::Null),
        ),
        ("request", request.clone()),
        ("snapshots", snapshots.clone()),
    ];
    for (name, v) in vars {
        match cel::to_value(v) {
            Ok(v) => ctx.add_variable_from_value(name, v),
            Err(e) => return Verdict::Error(format!("{name}: {e}")),
        }
    }
    for r in rules {
        match r.program.execute(&ctx) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => {
                return Verdict::Deny(
                    r.message
                        .clone()
                        .unwrap_or_else(|| format!("failed expression: {}", r.source)),
                );
            }
            Ok(other) => {
                return Verdict::Error(format!(
                    "expression {:?} must evaluate to bool, got {other:?}",
                    r.source
                ));
            }
            Err(e) => {
                return Verdict::Error(format!("expression {:?}: {e}", r.source));
            }
        }
    }
    Verdict::Allow
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_admit_refuse_and_fail_clearly() {
        let rules = compile(
            "- expression: object.spec.replicas <= 3\n  message: at most 3 replicas\n- expression: object.metadata.name.startsWith('w')\n- expression: size(snapshots.limits) == 0 || object.spec.replicas <= snapshots.limits[0].filterResult.max\n",
        )
        .unwrap();
        let req = |replicas: i64, name: &str| json!({"object": {"metadata": {"name": name}, "spec": {"replicas": replicas}}, "oldObject": null});
        let no = json!({"limits": []});
        let two = json!({"limits": [{"filterResult": {"max": 2}}]});
        let table = [
            (req(1, "w1"), &no, Verdict::Allow),
            (req(4, "w1"), &no, Verdict::Deny("at most 3 replicas".into())),
            (req(1, "x"), &no, Verdict::Deny("failed expression: object.metadata.name.startsWith('w')".into())),
            (req(3, "w1"), &two, Verdict::Deny("failed expression: size(snapshots.limits) == 0 || object.spec.replicas <= snapshots.limits[0].filterResult.max".into())),
        ];
        for (r, snaps, want) in table {
            assert_eq!(evaluate(&rules, &r, snaps), want, "{r}");
        }
        let bad = compile("- expression: object.spec.replicas\n").unwrap();
        assert!(
            matches!(evaluate(&bad, &req(1, "w"), &no), Verdict::Error(m) if m.contains("must evaluate to bool"))
        );
        assert!(
            compile("- expression: 'object.(('\n")
                .unwrap_err()
                .contains("does not compile")
        );
        assert_eq!(compile("object.spec.replicas > 0").unwrap().len(), 1);
    }
}
