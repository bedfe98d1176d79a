//! `matchConditions` of a webhook: CEL expressions (the `cel` crate, as the webhook handler
//! evaluates its rules) over `object`, `oldObject` and `request`, decided as kube-apiserver's
//! matcher decides them: any false skips the webhook; otherwise an error follows the webhook's
//! `failurePolicy` (`Fail` refuses the request, `Ignore` skips the webhook); all true calls it.
//!
//! Pure: no I/O.

use serde_json::Value;

/// One `matchConditions` entry, compiled.
pub(crate) struct Condition {
    name: String,
    expression: String,
    /// The compiled program, or why it does not compile.
    program: Result<cel::Program, String>,
}

impl std::fmt::Debug for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condition")
            .field("name", &self.name)
            .field("expression", &self.expression)
            .finish_non_exhaustive()
    }
}

impl Condition {
    /// Reads and compiles one entry (`name`, `expression`).
    pub(crate) fn parse(v: &Value) -> Self {
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (name, expression) = (s("name"), s("expression"));
        let program =
            cel::Program::compile(&expression).map_err(|e| format!("compilation failed: {e}"));
        Self {
            name,
            expression,
            program,
        }
    }
}

/// What the conditions say about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Matched {
    /// Call the webhook.
    Call,
    /// Do not call it (a condition is false, or an error under `failurePolicy: Ignore`).
    Skip,
    /// Refuse the request (an error under `failurePolicy: Fail`): the errors.
    Fail(String),
}

/// Evaluates `conditions` for an AdmissionReview `request` (its `object` and `oldObject` are
/// the variables of the same names).
pub(crate) fn evaluate(conditions: &[Condition], request: &Value, fail_closed: bool) -> Matched {
    if conditions.is_empty() {
        return Matched::Call;
    }
    let mut context = cel::Context::default();
    let field = |k: &str| request.get(k).cloned().unwrap_or(Value::Null);
    let mut errors = Vec::new();
    for (name, value) in [
        ("object", field("object")),
        ("oldObject", field("oldObject")),
        ("request", request.clone()),
    ] {
        match cel::to_value(value) {
            Ok(v) => context.add_variable_from_value(name, v),
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    if errors.is_empty() {
        for c in conditions {
            let result = match &c.program {
                Ok(program) => program.execute(&context).map_err(|e| e.to_string()),
                Err(e) => Err(e.clone()),
            };
            match result {
                Ok(cel::Value::Bool(true)) => {}
                Ok(cel::Value::Bool(false)) => return Matched::Skip,
                Ok(other) => errors.push(format!(
                    "matchCondition {:?}: expression {:?} must evaluate to bool, got {other:?}",
                    c.name, c.expression
                )),
                Err(e) => errors.push(format!("matchCondition {:?}: {e}", c.name)),
            }
        }
    }
    match (errors.is_empty(), fail_closed) {
        (true, _) => Matched::Call,
        (false, false) => Matched::Skip,
        (false, true) if errors.len() == 1 => Matched::Fail(errors.remove(0)),
        // k8s.io/apimachinery's aggregate of several errors.
        (false, true) => Matched::Fail(format!("[{}]", errors.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conditions(list: &[(&str, &str)]) -> Vec<Condition> {
        list.iter()
            .map(|(n, e)| Condition::parse(&json!({"name": n, "expression": e})))
            .collect()
    }

    #[test]
    fn all_true_calls_any_false_skips_errors_follow_the_failure_policy() {
        let request = json!({
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": {"metadata": {"name": "w1", "labels": {"tier": "gold"}}, "spec": {"replicas": 2}},
            "oldObject": null,
        });
        let not_system = (
            "not-system",
            "!request.userInfo.username.startsWith('system:')",
        );
        let gold = ("gold", "object.metadata.labels.tier == 'gold'");
        let silver = ("silver", "object.metadata.labels.tier == 'silver'");
        let missing = ("missing", "object.spec.missing == 1");
        let number = ("number", "object.spec.replicas");
        type List<'a> = &'a [(&'a str, &'a str)];
        let table: &[(List<'_>, bool, Matched)] = &[
            (&[], true, Matched::Call),
            (&[not_system, gold], true, Matched::Call),
            (&[not_system, silver], true, Matched::Skip),
            // A false condition skips even when another one fails.
            (&[missing, silver], true, Matched::Skip),
            (&[missing, gold], false, Matched::Skip),
            (&[("bad", "object.((")], false, Matched::Skip),
        ];
        for (list, fail_closed, want) in table {
            assert_eq!(
                evaluate(&conditions(list), &request, *fail_closed),
                *want,
                "{list:?}"
            );
        }
        for list in [
            &[missing, gold][..],
            &[number][..],
            &[("bad", "object.((")][..],
        ] {
            let Matched::Fail(message) = evaluate(&conditions(list), &request, true) else {
                panic!("{list:?} should fail the request");
            };
            assert!(message.starts_with("matchCondition \""), "{message}");
        }
        let two = evaluate(&conditions(&[missing, number]), &request, true);
        assert!(
            matches!(&two, Matched::Fail(m) if m.starts_with('[') && m.contains("\"missing\"") && m.contains("\"number\"")),
            "{two:?}"
        );
        // DELETE: object is null, oldObject is set.
        let delete = json!({"operation": "DELETE", "object": null, "oldObject": {"metadata": {"name": "w1"}}});
        assert_eq!(
            evaluate(
                &conditions(&[("old", "oldObject.metadata.name == 'w1' && object == null")]),
                &delete,
                true
            ),
            Matched::Call
        );
    }
}
