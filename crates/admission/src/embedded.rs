//! The embedded API server's in-process transport: its admission hook runs
//! `api::validation` with the facts read from its own store, and its conversion hook is
//! [`crate::convert`] — the same code `d8 webhook` runs for kube-apiserver.

use std::collections::HashMap;

use api::validation::{Context, Operation, Request, validate_request};
use apiserver::{Attributes, Denial, GroupVersionKind, Objects, Validator};
use serde_json::Value;

use crate::Verdicts;
use crate::context::{ClusterObjects, context, needs_context};

/// The admission hook: every rule of ours on the kinds we own, with the cluster's facts.
#[derive(Debug)]
pub struct Admission {
    /// Plural of every kind we own, by (group, kind), for kube-apiserver's wording.
    plurals: HashMap<(String, String), String>,
    /// The rules answered here.
    verdicts: Verdicts,
}

impl Default for Admission {
    fn default() -> Self {
        Self::new()
    }
}

impl Admission {
    /// The hook for every CRD of `api::crds::all`, every rule.
    pub fn new() -> Self {
        Self::keeping(Verdicts::All)
    }

    /// The hook giving only `verdicts` ([`Verdicts::ApiServer`] while `d8 webhook` answers the
    /// rest).
    pub fn keeping(verdicts: Verdicts) -> Self {
        let plurals = api::crds::all()
            .into_iter()
            .map(|crd| {
                let key = (crd.spec.group, crd.spec.names.kind);
                (key, crd.spec.names.plural)
            })
            .collect();
        Self { plurals, verdicts }
    }
}

struct NoObjects;

impl Objects for NoObjects {
    fn list(&self, _: &str, _: &str) -> Vec<Value> {
        Vec::new()
    }
}

impl Validator for Admission {
    fn validate(
        &self,
        gvk: &GroupVersionKind,
        old: Option<&Value>,
        new: &Value,
    ) -> Result<Vec<String>, Denial> {
        let operation = if old.is_some() {
            apiserver::Operation::Update
        } else {
            apiserver::Operation::Create
        };
        let attributes = Attributes {
            gvk,
            operation,
            subresource: None,
            old,
            new: Some(new),
            dry_run: false,
        };
        self.admit(&attributes, &NoObjects)
    }

    fn admit(
        &self,
        request: &Attributes<'_>,
        objects: &dyn Objects,
    ) -> Result<Vec<String>, Denial> {
        let gvk = request.gvk;
        let Some(plural) = self.plurals.get(&(gvk.group.clone(), gvk.kind.clone())) else {
            return Ok(Vec::new());
        };
        let context = if needs_context(&gvk.kind) {
            context(&ClusterObjects::read(|group, kind| {
                objects.list(group, kind)
            }))
        } else {
            Context::default()
        };
        let operation = match request.operation {
            apiserver::Operation::Create => Operation::Create,
            apiserver::Operation::Update => Operation::Update,
            apiserver::Operation::Delete => Operation::Delete,
        };
        let verdict = self.verdicts.keep(validate_request(
            &Request {
                kind: &gvk.kind,
                operation,
                // The embedded server's users are its own components and its admin.
                user: None,
                old: request.old,
                new: request.new,
            },
            &context,
        ));
        verdict.map_err(|denial| {
            let object = request.new.or(request.old);
            let name = object
                .and_then(|o| o.pointer("/metadata/name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            Denial {
                code: denial.code(),
                message: denial.status_message(&gvk.kind, plural, &gvk.group, name),
                field: None,
            }
        })
    }
}

/// The conversion hook: [`crate::convert`] for the kinds we own, `apiVersion` only for others.
#[derive(Debug, Default, Clone, Copy)]
pub struct Conversion;

impl apiserver::Converter for Conversion {
    fn convert(&self, object: Value, desired_api_version: &str) -> Result<Value, String> {
        let group = |v: &str| v.rsplit_once('/').map(|(g, _)| g.to_string());
        let ours = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .and_then(group)
            .is_some_and(|g| g.ends_with("deckhouse.io"));
        if !ours {
            return apiserver::NoConversion.convert(object, desired_api_version);
        }
        crate::convert(object, desired_api_version).map_err(|e| e.to_string())
    }
}

/// `builder` serving every CRD of ours, the `d8-system` namespace, our admission rules and
/// conversions: the embedded server as `d8 apiserver` runs it (`verdicts` [`Verdicts::All`]),
/// and as `d8 up` runs it in front of `d8 webhook` ([`Verdicts::ApiServer`]).
pub fn platform(builder: apiserver::Builder, verdicts: Verdicts) -> apiserver::Builder {
    let crds = api::crds::all()
        .into_iter()
        .map(|crd| serde_json::to_value(crd).expect("a CRD serializes"));
    builder
        .crds(crds)
        .namespace("d8-system")
        .validator(Admission::keeping(verdicts))
        .converter(Conversion)
}
