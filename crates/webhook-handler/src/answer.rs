//! A hook's run turned into the answer to kube-apiserver, with shell-operator's words.
//!
//! Pure: no I/O.

use module_hooks::{Error as HookError, HookOutput};
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};

/// What a validating handler decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow {
        warnings: Vec<String>,
    },
    Deny {
        message: String,
    },
    /// No answer within the webhook's timeout: the handler answers 500 so that the API server's
    /// `failurePolicy` decides, as it would had the call timed out.
    Unavailable {
        message: String,
    },
}

/// A Python handler's run as a decision: its `VALIDATING_RESPONSE_PATH`, or why it failed.
pub fn from_hook(result: Result<HookOutput, HookError>) -> Decision {
    match result {
        Ok(out) => match out.validating_response {
            Some(r) => from_response(&r),
            None => Decision::Deny {
                message: "Hook failed: the hook wrote no validating response".into(),
            },
        },
        Err(HookError::Timeout { hook, timeout }) => Decision::Unavailable {
            message: format!(
                "hook {hook} was killed after {:.1}s: it did not answer within the webhook's timeout",
                timeout.as_secs_f64()
            ),
        },
        Err(HookError::Failed {
            exit_code, message, ..
        }) => Decision::Deny {
            message: match exit_code {
                Some(c) => format!("Hook failed (exit code {c}): {}", message.trim()),
                None => format!("Hook failed: {}", message.trim()),
            },
        },
        Err(e) => Decision::Deny {
            message: format!("Hook failed: {e}"),
        },
    }
}

/// `{"allowed": …, "message": …, "warnings": […]}` as shell-operator reads it.
pub fn from_response(r: &Value) -> Decision {
    let warnings: Vec<String> = r
        .get("warnings")
        .and_then(Value::as_array)
        .map(|w| {
            w.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if r.get("allowed").and_then(Value::as_bool).unwrap_or(false) {
        Decision::Allow { warnings }
    } else {
        Decision::Deny {
            message: r
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }
    }
}

/// The AdmissionReview answer (HTTP 200), or the status and message of a 500.
pub fn admission_review(uid: &Value, d: &Decision) -> Result<Value, String> {
    let response = match d {
        Decision::Allow { warnings } => {
            let mut r = json!({"uid": uid, "allowed": true});
            if !warnings.is_empty() {
                r["warnings"] = json!(warnings);
            }
            r
        }
        Decision::Deny { message } => json!({
            "uid": uid, "allowed": false, "status": {"code": 403, "message": message},
        }),
        Decision::Unavailable { message } => return Err(message.clone()),
    };
    Ok(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

/// The ConversionReview answer.
pub fn conversion_review(uid: &Value, result: Result<Vec<Value>, String>) -> Value {
    let response = match result {
        Ok(objects) => {
            json!({"uid": uid, "result": {"status": "Success"}, "convertedObjects": objects})
        }
        Err(message) => json!({"uid": uid, "result": {"status": "Failure", "message": message}}),
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response})
}

/// The steps from one version to another through the conversions a ConversionWebhook has
/// (shell-operator's conversion chain): the shortest, `None` when there is none.
pub fn chain(pairs: &[(String, String)], from: &str, to: &str) -> Option<Vec<(String, String)>> {
    if from == to {
        return Some(Vec::new());
    }
    let mut prev: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    while let Some(v) = queue.pop_front() {
        for (a, b) in pairs.iter().filter(|(a, _)| a == v) {
            if b == from || prev.contains_key(b.as_str()) {
                continue;
            }
            prev.insert(b, (a, b));
            if b == to {
                let mut steps = Vec::new();
                let mut cur = to;
                while cur != from {
                    let (a, b) = prev[cur];
                    steps.push((a.to_string(), b.to_string()));
                    cur = a;
                }
                steps.reverse();
                return Some(steps);
            }
            queue.push_back(b);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn hook_results_become_decisions_in_shell_operators_words() {
        let out = |r: Value| {
            Ok(HookOutput {
                validating_response: Some(r),
                ..HookOutput::default()
            })
        };
        let table = [
            (out(json!({"allowed": true})), Decision::Allow { warnings: vec![] }),
            (out(json!({"allowed": true, "warnings": ["w"]})), Decision::Allow { warnings: vec!["w".into()] }),
            (out(json!({"allowed": false, "message": "no"})), Decision::Deny { message: "no".into() }),
            (Ok(HookOutput::default()), Decision::Deny { message: "Hook failed: the hook wrote no validating response".into() }),
            (
                Err(HookError::Failed { hook: "h".into(), exit_code: Some(1), message: "NameError: name 'x' is not defined\n".into() }),
                Decision::Deny { message: "Hook failed (exit code 1): NameError: name 'x' is not defined".into() },
            ),
            (
                Err(HookError::Timeout { hook: "h".into(), timeout: Duration::from_millis(1500) }),
                Decision::Unavailable { message: "hook h was killed after 1.5s: it did not answer within the webhook's timeout".into() },
            ),
        ];
        for (r, want) in table {
            assert_eq!(from_hook(r), want);
        }
        let review = admission_review(
            &json!("u"),
            &Decision::Deny {
                message: "no".into(),
            },
        )
        .unwrap();
        assert_eq!(
            review["response"],
            json!({"uid": "u", "allowed": false, "status": {"code": 403, "message": "no"}})
        );
        assert!(
            admission_review(
                &json!("u"),
                &Decision::Unavailable {
                    message: "m".into()
                }
            )
            .is_err()
        );
    }

    #[test]
    fn conversions_chain_through_the_shortest_path() {
        let p = |a: &str, b: &str| (a.to_string(), b.to_string());
        let pairs = [p("v1", "v2"), p("v2", "v3"), p("v3", "v2"), p("v2", "v1")];
        assert_eq!(
            chain(&pairs, "v1", "v3"),
            Some(vec![p("v1", "v2"), p("v2", "v3")])
        );
        assert_eq!(
            chain(&pairs, "v3", "v1"),
            Some(vec![p("v3", "v2"), p("v2", "v1")])
        );
        assert_eq!(chain(&pairs, "v1", "v1"), Some(vec![]));
        assert_eq!(chain(&pairs, "v1", "v9"), None);
    }
}
