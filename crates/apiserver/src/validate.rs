//! The injected admission and conversion hooks: the platform's own validation and conversion
//! functions, run in process on every write, delete and read (the embedded server's stand-in for
//! kube-apiserver calling admission and conversion webhooks).

use serde_json::Value;

/// Group, version and kind of an object being written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupVersionKind {
    /// API group; empty for the core group.
    pub group: String,
    /// API version, e.g. `v1alpha1`.
    pub version: String,
    /// Kind, e.g. `ModuleConfig`.
    pub kind: String,
}

impl GroupVersionKind {
    /// Builds a GVK from its parts.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }
}

/// Why a write was refused by the hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// HTTP status: 422 (Invalid) for rule violations, 403 (Forbidden) for policy refusals.
    pub code: u16,
    /// The complete `Status` message shown to the client, verbatim (e.g. `ModuleUpdatePolicy
    /// "x" is invalid: spec.update.windows[0]: Invalid value: ...`).
    pub message: String,
    /// The offending field path, when one field is to blame.
    pub field: Option<String>,
}

impl Denial {
    /// A rule violation (HTTP 422 Invalid), the way CEL rules and schema checks fail.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            code: 422,
            message: message.into(),
            field: None,
        }
    }

    /// A refusal (HTTP 403 Forbidden), the way a validating webhook denies.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self {
            code: 403,
            message: message.into(),
            field: None,
        }
    }

    /// Names the field at fault.
    pub fn at(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
}

/// What a request does, as admission sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A new object.
    Create,
    /// A change to an existing object (also of its `status`).
    Update,
    /// Deleting an object (before finalizers run).
    Delete,
}

/// One request the admission hook checks.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    /// The object's group, version (the request's) and kind.
    pub gvk: &'a GroupVersionKind,
    /// What the request does.
    pub operation: Operation,
    /// `status` for writes of the status subresource.
    pub subresource: Option<&'a str>,
    /// The stored object (update and delete).
    pub old: Option<&'a Value>,
    /// The object as it would be stored (create and update).
    pub new: Option<&'a Value>,
    /// The request is a dry run.
    pub dry_run: bool,
}

/// Read access to the stored objects, for hooks whose rules need cluster facts (the objects
/// seen as of the moment of the request, in their storage version).
pub trait Objects {
    /// Every stored object of `kind` in `group`, across namespaces; empty when the kind is not
    /// served.
    fn list(&self, group: &str, kind: &str) -> Vec<Value>;
}

/// Validation run on every create and update (also of the `status` subresource), after
/// schema defaulting and validation, and on every delete.
///
/// Returns warnings (sent as `Warning` headers) or a denial.
pub trait Validator: Send + Sync + 'static {
    /// Checks one write. `old` is `None` on create.
    fn validate(
        &self,
        gvk: &GroupVersionKind,
        old: Option<&Value>,
        new: &Value,
    ) -> Result<Vec<String>, Denial>;

    /// Checks one request with read access to the cluster's objects. The default checks
    /// creates and updates with [`Validator::validate`] and admits deletes.
    fn admit(
        &self,
        request: &Attributes<'_>,
        objects: &dyn Objects,
    ) -> Result<Vec<String>, Denial> {
        let _ = objects;
        match request.new {
            Some(new) if request.operation != Operation::Delete => {
                self.validate(request.gvk, request.old, new)
            }
            _ => Ok(Vec::new()),
        }
    }
}

/// Conversion between the served versions of a kind, run when an object is read or written
/// through a version other than the stored one (kube-apiserver's CRD conversion).
pub trait Converter: Send + Sync + 'static {
    /// `object` (whose `apiVersion` names its version) as `desired_api_version`
    /// (`group/version`). An error is reported to the client as a conversion failure.
    fn convert(&self, object: Value, desired_api_version: &str) -> Result<Value, String>;
}

/// The converter of CRDs with `strategy: None`: only `apiVersion` changes.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoConversion;

impl Converter for NoConversion {
    fn convert(&self, mut object: Value, desired_api_version: &str) -> Result<Value, String> {
        if let Value::Object(m) = &mut object {
            m.insert(
                "apiVersion".into(),
                Value::String(desired_api_version.into()),
            );
        }
        Ok(object)
    }
}

/// The hook that admits everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Validator for AllowAll {
    fn validate(
        &self,
        _: &GroupVersionKind,
        _: Option<&Value>,
        _: &Value,
    ) -> Result<Vec<String>, Denial> {
        Ok(Vec::new())
    }
}

impl<F> Validator for F
where
    F: Fn(&GroupVersionKind, Option<&Value>, &Value) -> Result<Vec<String>, Denial>
        + Send
        + Sync
        + 'static,
{
    fn validate(
        &self,
        gvk: &GroupVersionKind,
        old: Option<&Value>,
        new: &Value,
    ) -> Result<Vec<String>, Denial> {
        self(gvk, old, new)
    }
}
