//! Which verdicts a transport gives. In Deckhouse a rule lives in one of two places: in
//! kube-apiserver itself (a CEL rule of the CRD, a ValidatingAdmissionPolicy) or in Deckhouse's
//! admission webhook. When the embedded API server runs the rules in process *and* calls
//! `d8 webhook` (as `d8 up` does), each side keeps the verdicts of its own place, so that no rule
//! answers twice and each refusal is worded by the mechanism Deckhouse uses for it.

use api::validation::{Denial, DeniedBy, Warnings};

/// The verdicts a transport keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verdicts {
    /// Every rule: `d8 webhook` in a cluster (kube-apiserver knows none of our rules there), and
    /// the embedded API server when no `d8 webhook` is registered with it.
    #[default]
    All,
    /// The rules kube-apiserver runs itself in Deckhouse (CRD validation rules, admission
    /// policies): the embedded API server in process while `d8 webhook` answers the rest.
    ApiServer,
    /// The rules of Deckhouse's admission webhook, with its warnings: `d8 webhook` behind the
    /// embedded API server.
    Webhook,
}

impl Verdicts {
    /// The verdict of the rules as this transport gives it: a refusal from the other place
    /// admits here (the other transport refuses), and warnings are the webhook's.
    pub fn keep(self, verdict: Result<Warnings, Denial>) -> Result<Warnings, Denial> {
        let webhook = |d: &Denial| matches!(d.by, DeniedBy::Webhook { .. });
        match (self, verdict) {
            (Self::All, verdict) => verdict,
            (Self::ApiServer, Err(d)) if !webhook(&d) => Err(d),
            (Self::ApiServer, _) => Ok(Vec::new()),
            (Self::Webhook, Err(d)) if !webhook(&d) => Ok(Vec::new()),
            (Self::Webhook, verdict) => verdict,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::validation::Cause;

    fn denial(by: DeniedBy) -> Denial {
        Denial {
            by,
            causes: vec![Cause {
                field: String::new(),
                value: None,
                message: "no".into(),
            }],
        }
    }

    #[test]
    fn each_transport_keeps_the_verdicts_of_its_place() {
        let schema = || Err(denial(DeniedBy::Schema));
        let policy = || {
            Err(denial(DeniedBy::Policy {
                policy: "p",
                binding: "p",
            }))
        };
        let webhook = || Err(denial(DeniedBy::Webhook { name: "w" }));
        let warned = || Ok(vec!["careful".to_string()]);
        type Verdict = Result<Warnings, Denial>;
        let table: Vec<(Verdicts, Verdict, Verdict)> = vec![
            (Verdicts::All, schema(), schema()),
            (Verdicts::All, webhook(), webhook()),
            (Verdicts::All, warned(), warned()),
            (Verdicts::ApiServer, schema(), schema()),
            (Verdicts::ApiServer, policy(), policy()),
            (Verdicts::ApiServer, webhook(), Ok(vec![])),
            (Verdicts::ApiServer, warned(), Ok(vec![])),
            (Verdicts::Webhook, schema(), Ok(vec![])),
            (Verdicts::Webhook, policy(), Ok(vec![])),
            (Verdicts::Webhook, webhook(), webhook()),
            (Verdicts::Webhook, warned(), warned()),
        ];
        for (verdicts, verdict, want) in table {
            assert_eq!(
                verdicts.keep(verdict.clone()),
                want,
                "{verdicts:?} {verdict:?}"
            );
        }
    }
}
