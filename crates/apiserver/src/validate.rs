//! The injected admission hook: the platform's own validation functions run on every write.

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

/// Validation run on every create and update (also of the `status` subresource), after
/// schema defaulting and validation. `old` is `None` on create.
///
/// Returns warnings (sent as `Warning` headers) or a denial.
pub trait Validator: Send + Sync + 'static {
    /// Checks one write.
    fn validate(
        &self,
        gvk: &GroupVersionKind,
        old: Option<&Value>,
        new: &Value,
    ) -> Result<Vec<String>, Denial>;
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
