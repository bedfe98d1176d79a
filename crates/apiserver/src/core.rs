//! The object semantics of the API server, independent of HTTP: create, update, patch,
//! delete with finalizers, the status subresource, generation, schema checks and the hook.
//!
//! Everything here is synchronous (redb is); the HTTP layer calls it on blocking threads.

use crate::error::ApiError;
use crate::fields::Shape;
use crate::list::{self, Item};
use crate::managed;
use crate::meta;
use crate::patch::{self, PatchType};
use crate::resources::{self, Registry, ResourceDef};
use crate::schema::Cause;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{Change, Committed, Key, ListError, Store, prefix};
use crate::validate::{Attributes, Converter, GroupVersionKind, Objects, Operation, Validator};
use crate::watch::EventType;
use crate::webhook::{Attributes as HookAttributes, UserInfo};
use base64::Engine as _;
use serde_json::{Value, json};
use std::sync::{Arc, RwLock};

const CRD_GROUP: &str = "apiextensions.k8s.io";
const CRD_PLURAL: &str = "customresourcedefinitions";
/// The finalizer Kubernetes puts on CRDs so their objects are removed first.
pub(crate) const CRD_CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";
/// The finalizer of foreground cascading deletion.
pub(crate) const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer of orphaning deletion.
pub(crate) const ORPHAN: &str = "orphan";

/// How unknown fields in a write are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

/// Options of a write.
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteOpts {
    pub(crate) field_validation: FieldValidation,
    pub(crate) dry_run: bool,
    /// The field manager recorded in `managedFields` (`None`: the server's own writes, not
    /// recorded).
    pub(crate) manager: Option<String>,
    /// `force` of a server-side apply: take over conflicting fields.
    pub(crate) force: bool,
    /// Who writes (`userInfo` of admission reviews); `None` for the server's own writes.
    pub(crate) user: Option<UserInfo>,
}

/// A completed write.
#[derive(Debug)]
pub(crate) struct Written {
    pub(crate) object: Value,
    pub(crate) warnings: Vec<String>,
    pub(crate) created: bool,
}

/// Cascading deletion policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// Options of a delete.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOpts {
    pub(crate) propagation: Option<Propagation>,
    pub(crate) uid: Option<String>,
    pub(crate) resource_version: Option<String>,
    pub(crate) dry_run: bool,
    /// Who deletes (`userInfo` of admission reviews).
    pub(crate) user: Option<UserInfo>,
}

/// The outcome of a delete.
#[derive(Debug)]
pub(crate) enum Deleted {
    /// Finalizers remain: the object is marked with `deletionTimestamp`.
    Pending(Value),
    /// The object is gone; its last state.
    Gone(Value),
}

/// A page of a list.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) items: Vec<Item>,
    pub(crate) resource_version: u64,
    pub(crate) continue_token: Option<String>,
    /// `metadata.remainingItemCount`: objects after this page (only for unfiltered lists).
    pub(crate) remaining: Option<u64>,
}

impl Page {
    /// The objects, decoded.
    pub(crate) fn values(self) -> Result<Vec<Value>, ApiError> {
        self.items.into_iter().map(Item::value).collect()
    }
}

/// Query of a list.
#[derive(Debug, Default)]
pub(crate) struct ListQuery {
    pub(crate) namespace: Option<String>,
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
    pub(crate) limit: Option<usize>,
    pub(crate) continue_token: Option<String>,
}

/// The API server's state and semantics.
pub(crate) struct Core {
    pub(crate) store: Store,
    registry: RwLock<Arc<Registry>>,
    validator: Box<dyn Validator>,
    converter: Box<dyn Converter>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

fn conflict(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::conflict(
        &def.group,
        &def.plural,
        name,
        "the object has been modified; please apply your changes to the latest version and try again",
    )
}

/// The stored objects, as the injected hook reads them.
struct StoredObjects<'a>(&'a Core);

impl Objects for StoredObjects<'_> {
    fn list(&self, group: &str, kind: &str) -> Vec<Value> {
        let registry = self.0.registry();
        let Some(def) = registry.all().find(|d| d.group == group && d.kind == kind) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let scanned = self
            .0
            .store
            .scan(&prefix(&def.group, &def.plural, None), None, |_, v| {
                out.push(v);
                true
            });
        if let Err(e) = scanned {
            tracing::warn!(resource = %def.group_resource(), error = %e, "cannot read objects for admission");
        }
        out
    }
}

/// Whether the object is marked for deletion and nothing holds it any more.
fn finalized(obj: &Value) -> bool {
    meta::deleting(obj)
        && meta::finalizers(obj).is_empty()
        && obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
}

impl Core {
    /// A core over `store`, serving built-ins and the CRDs stored in it.
    pub(crate) fn new(
        store: Store,
        validator: Box<dyn Validator>,
        converter: Box<dyn Converter>,
    ) -> Result<Self, crate::Error> {
        let core = Self {
            store,
            registry: RwLock::new(Arc::new(Registry::default())),
            validator,
            converter,
        };
        core.refresh_registry()?;
        Ok(core)
    }

    /// The current resource registry.
    pub(crate) fn registry(&self) -> Arc<Registry> {
        self.registry
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Rebuilds the registry from the stored CRDs.
    pub(crate) fn refresh_registry(&self) -> Result<(), crate::Error> {
        let mut crds = Vec::new();
        self.store
            .scan(&prefix(CRD_GROUP, CRD_PLURAL, None), None, |_, v| {
                crds.push(v);
                true
            })?;
        let (reg, errors) = Registry::build(&crds);
        for (name, e) in errors {
            tracing::warn!(crd = %name, error = %e, "stored CRD is not served");
        }
        *self.registry.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(reg);
        Ok(())
    }

    /// The storage key of an object.
    pub(crate) fn key(def: &ResourceDef, namespace: Option<&str>, name: &str) -> Key {
        let ns = if def.namespaced {
            namespace.unwrap_or_default()
        } else {
            ""
        };
        Key::new(&def.group, &def.plural, ns, name)
    }

    /// The object as seen through `version`: custom resources stored in another version go
    /// through the injected converter (kube-apiserver's CRD conversion), a failure of which is
    /// the client's 500 with the converter's message.
    pub(crate) fn to_version(
        &self,
        def: &ResourceDef,
        version: &str,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        let desired = def.api_version(version);
        let current = obj.get("apiVersion").and_then(Value::as_str);
        if def.custom && current.is_some_and(|c| c != desired) {
            obj = self.converter.convert(obj, &desired).map_err(|e| {
                ApiError::internal(format!(
                    "conversion of {} to {desired} failed: {e}",
                    def.group_resource()
                ))
            })?;
        }
        if let Value::Object(m) = &mut obj {
            m.insert("apiVersion".into(), Value::String(desired));
            m.insert("kind".into(), Value::String(def.kind.clone()));
        }
        Ok(obj)
    }

    fn storage_version(def: &ResourceDef) -> &str {
        def.versions
            .iter()
            .find(|v| v.storage)
            .or(def.versions.first())
            .map(|v| v.name.as_str())
            .unwrap_or("v1")
    }

    fn commit(
        &self,
        def: &ResourceDef,
        key: &Key,
        dry_run: bool,
        mut decide: impl FnMut(Option<Value>) -> Result<Change, ApiError>,
    ) -> Result<Committed, ApiError> {
        if dry_run {
            let current = self.store.get(key)?;
            return match decide(current.clone())? {
                Change::Put(object) => Ok(Committed {
                    object,
                    event: Some(if current.is_some() {
                        EventType::Modified
                    } else {
                        EventType::Added
                    }),
                }),
                Change::Delete => Ok(Committed {
                    object: current
                        .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, &key.name))?,
                    event: Some(EventType::Deleted),
                }),
                Change::Unchanged => Ok(Committed {
                    object: current
                        .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, &key.name))?,
                    event: None,
                }),
            };
        }
        let committed = self.commit_decided(key, decide)?;
        self.committed(def, &committed)?;
        Ok(committed)
    }

    /// Decides and commits under the store's write lock.
    fn commit_locked(
        &self,
        def: &ResourceDef,
        key: &Key,
        decide: impl FnOnce(Option<Value>) -> Result<Change, ApiError>,
    ) -> Result<Committed, ApiError> {
        let committed = self.store.mutate(key, decide)?;
        self.committed(def, &committed)?;
        Ok(committed)
    }

    /// What follows a commit: a changed CRD changes the served resources.
    fn committed(&self, def: &ResourceDef, committed: &Committed) -> Result<(), ApiError> {
        if def.group == CRD_GROUP && def.plural == CRD_PLURAL && committed.event.is_some() {
            self.refresh_registry()?;
        }
        Ok(())
    }

    /// A request's write is decided outside the store's write lock — admission (schema,
    /// defaults, managedFields, the hook, webhooks that may take seconds or write to this
    /// server itself) runs concurrently with the other writers — then committed if the object
    /// has not changed meanwhile, else decided again, as kube-apiserver's optimistic update
    /// retries. Only the comparison and the store's write are serialised.
    fn commit_decided(
        &self,
        key: &Key,
        mut decide: impl FnMut(Option<Value>) -> Result<Change, ApiError>,
    ) -> Result<Committed, ApiError> {
        const ATTEMPTS: usize = 5;
        for _ in 1..ATTEMPTS {
            let current = self.store.get(key)?;
            let change = decide(current.clone())?;
            if let Some(committed) = self.store.mutate_seen(key, current, change)? {
                return Ok(committed);
            }
        }
        self.store.mutate(key, decide)
    }

    /// Reads one object.
    pub(crate) fn get(
        &self,
        def: &ResourceDef,
        version: &str,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let obj = self
            .store
            .get(&Self::key(def, ns, name))?
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
        self.convert(def, version, obj)
    }

    /// Lists objects, filtered and paginated as kube-apiserver does: every page of a list is
    /// read at the revision of its first one while the watch history reaches back to it (else
    /// 410 Expired, with a token that continues at the latest revision), and
    /// `remainingItemCount` is given when no selector filters the list.
    pub(crate) fn list(
        &self,
        def: &ResourceDef,
        version: &str,
        q: &ListQuery,
    ) -> Result<Page, ApiError> {
        let ns = if def.namespaced {
            q.namespace.as_deref()
        } else {
            Some("")
        };
        let pfx = prefix(&def.group, &def.plural, ns);
        let cont = match &q.continue_token {
            Some(t) => Some(list::decode_continue(&pfx, t)?),
            None => None,
        };
        let from = cont.as_ref().map_or(pfx.as_str(), |c| c.from.as_str());
        let at = cont.as_ref().and_then(|c| c.rv);
        let limit = q.limit.filter(|l| *l > 0);
        let filtered = !(q.labels.is_empty() && q.fields.is_empty());
        let desired = def.api_version(version);
        let mut items = Vec::new();
        let mut last_key = String::new();
        // A consistent list's later pages know from the token how many objects follow.
        let known = cont
            .as_ref()
            .and_then(|c| c.remaining)
            .filter(|_| at.is_some() && !filtered);
        let count_rest = limit.is_some() && !filtered && known.is_none();
        let listed = self.store.list(&pfx, from, at, count_rest, |k, item| {
            let item = if filtered {
                let obj = item.value()?;
                if !(q.labels.matches(&obj) && q.fields.matches(&obj)) {
                    return Ok(true);
                }
                Item::Value(obj)
            } else {
                item
            };
            if limit.is_some_and(|l| items.len() >= l) {
                return Ok(false);
            }
            last_key = k.to_string();
            items.push(item.servable(&desired, &def.kind)?);
            Ok(true)
        });
        let listed = match listed {
            Ok(l) => l,
            Err(ListError::TooOld) => {
                let mut e = ApiError::expired(list::TOO_OLD);
                e.continue_token = Some(list::encode_continue(&pfx, from, None, None));
                return Err(e);
            }
            Err(ListError::Other(e)) => return Err(e),
        };
        let more = listed.rest > 0;
        let remaining = (more && !filtered).then(|| match known {
            Some(n) => n.saturating_sub(items.len() as u64),
            None => listed.rest,
        });
        let continue_token = more.then(|| {
            let from = format!("{last_key}\u{0}");
            list::encode_continue(&pfx, &from, Some(listed.rv), remaining)
        });
        Ok(Page {
            items: self.convert_items(def, version, items)?,
            resource_version: listed.rv,
            continue_token,
            remaining,
        })
    }

    /// Converts the decoded items to the served version (one webhook call for all of them);
    /// stored JSON already in that version stays as it is.
    fn convert_items(
        &self,
        def: &ResourceDef,
        version: &str,
        mut items: Vec<Item>,
    ) -> Result<Vec<Item>, ApiError> {
        let mut at = Vec::new();
        let mut values = Vec::new();
        for (i, item) in items.iter_mut().enumerate() {
            if let Item::Value(v) = item {
                at.push(i);
                values.push(std::mem::take(v));
            }
        }
        if values.is_empty() {
            return Ok(items);
        }
        for (i, v) in at.into_iter().zip(self.convert_all(def, version, values)?) {
            items[i] = Item::Value(v);
        }
        Ok(items)
    }

    /// Schema, metadata, built-in rules and the hook: the checks of every write.
    #[allow(clippy::too_many_arguments)]
    fn admit(
        &self,
        def: &ResourceDef,
        version: &str,
        subresource: Option<&str>,
        old: Option<&Value>,
        mut new: Value,
        opts: &WriteOpts,
        warnings: &mut Vec<String>,
    ) -> Result<Change, ApiError> {
        if def.group.is_empty() && def.plural == "secrets" {
            fold_string_data(&mut new);
        }
        if let Some(m) = new.as_object_mut() {
            m.insert("apiVersion".into(), Value::String(def.api_version(version)));
            m.insert("kind".into(), Value::String(def.kind.clone()));
        }
        let attrs = HookAttributes {
            def,
            version,
            subresource,
            operation: if old.is_some() { "UPDATE" } else { "CREATE" },
            dry_run: opts.dry_run,
            user: opts.user.as_ref(),
        };
        // Mutating webhooks see the object decoded (defaulted) as kube-apiserver decodes it.
        if let Some(schema) = def.version(version).and_then(|v| v.schema.as_ref()) {
            schema.apply_defaults(&mut new);
        }
        self.mutating_admission(&attrs, old, &mut new, warnings)?;
        let name = meta::get(&new, "name").unwrap_or_default().to_string();
        let mut causes = meta::validate_maps(&new);
        if let Some(vdef) = def.version(version) {
            if let Some(schema) = &vdef.schema {
                schema.apply_defaults(&mut new);
                let pruned = schema.prune(&mut new);
                match opts.field_validation {
                    FieldValidation::Strict if !pruned.is_empty() => {
                        let list: Vec<String> = pruned
                            .iter()
                            .map(|p| format!("unknown field {p:?}"))
                            .collect();
                        return Err(ApiError::bad_request(format!(
                            "{} in version {:?} cannot be handled as a {}: strict decoding error: {}",
                            def.kind,
                            def.api_version(version),
                            def.kind,
                            list.join(", ")
                        )));
                    }
                    FieldValidation::Warn => {
                        warnings.extend(pruned.iter().map(|p| format!("unknown field {p:?}")));
                    }
                    _ => {}
                }
                causes.extend(schema.validate(&new));
            }
            if let Some(w) = &vdef.deprecation_warning {
                warnings.push(w.clone());
            }
        }
        if def.group == CRD_GROUP
            && def.plural == CRD_PLURAL
            && let Err(e) = resources::from_crd(&new)
        {
            let (field, message) = e.split_once(": ").unwrap_or(("", &e));
            causes.push(Cause {
                reason: "FieldValueInvalid".into(),
                field: field.into(),
                message: message.into(),
            });
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid(&def.group, &def.kind, &name, &causes));
        }
        // The hook sees both objects in the request's version, as a webhook does.
        let old_seen = old
            .map(|o| self.convert(def, version, o.clone()))
            .transpose()?;
        warnings.extend(self.run_validator(
            def,
            version,
            &name,
            Operation::Update,
            old_seen.as_ref(),
            Some(&new),
            opts.dry_run,
            subresource,
        )?);
        self.validating_admission(&attrs, old, Some(&new), warnings)?;
        let mut new = self.convert(def, Self::storage_version(def), new)?;
        if let Some(m) = new.as_object_mut() {
            m.insert("kind".into(), Value::String(def.kind.clone()));
        }
        if let Some(old) = old {
            if finalized(&new) {
                return Ok(Change::Delete);
            }
            if meta::same_but_revision(&new, old) {
                return Ok(Change::Unchanged);
            }
        }
        Ok(Change::Put(new))
    }

    /// Runs the injected hook on one request and turns its denial into the API error.
    #[allow(clippy::too_many_arguments)]
    fn run_validator(
        &self,
        def: &ResourceDef,
        version: &str,
        name: &str,
        operation: Operation,
        old: Option<&Value>,
        new: Option<&Value>,
        dry_run: bool,
        subresource: Option<&str>,
    ) -> Result<Vec<String>, ApiError> {
        let gvk = GroupVersionKind::new(&def.group, version, &def.kind);
        let operation = match (operation, old) {
            (Operation::Update, None) => Operation::Create,
            (op, _) => op,
        };
        let attributes = Attributes {
            gvk: &gvk,
            operation,
            subresource,
            old,
            new,
            dry_run,
        };
        match self.validator.admit(&attributes, &StoredObjects(self)) {
            Ok(w) => Ok(w),
            Err(d) if d.code == 403 => Err(ApiError::forbidden(d.message)),
            // The hook's message is the complete Status message, verbatim.
            Err(d) => {
                let cause = Cause {
                    reason: "FieldValueInvalid".into(),
                    field: d.field.unwrap_or_default(),
                    message: d.message.clone(),
                };
                let mut e = ApiError::invalid(&def.group, &def.kind, name, &[cause]);
                e.message = d.message;
                Err(e)
            }
        }
    }

    fn check_namespace(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
    ) -> Result<(), ApiError> {
        if !def.namespaced {
            return Ok(());
        }
        let ns = ns.filter(|n| !n.is_empty()).ok_or_else(|| {
            ApiError::bad_request(
                "the namespace of the object must be set for a namespaced resource",
            )
        })?;
        match self.store.get(&Key::new("", "namespaces", "", ns))? {
            None => Err(ApiError::not_found("", "namespaces", ns)),
            Some(n) if meta::deleting(&n) => Err(ApiError::forbidden(format!(
                "{} {name:?} is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                def.group_resource()
            ))),
            Some(_) => Ok(()),
        }
    }

    fn check_body(def: &ResourceDef, version: &str, body: &Value) -> Result<(), ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        }
        if let Some(k) = body.get("kind").and_then(Value::as_str)
            && k != def.kind
        {
            return Err(ApiError::bad_request(format!(
                "the kind of the object ({k}) does not match the resource kind ({})",
                def.kind
            )));
        }
        if let Some(av) = body.get("apiVersion").and_then(Value::as_str)
            && (def
                .version(av.rsplit('/').next().unwrap_or_default())
                .is_none()
                || av.contains('/') == def.group.is_empty())
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                def.api_version(version)
            )));
        }
        Ok(())
    }

    /// The merge rules of `def` at `version` for server-side apply and `managedFields`.
    fn shape<'a>(def: &'a ResourceDef, version: &str) -> Shape<'a> {
        if def.custom {
            Shape::custom(
                &def.group,
                &def.kind,
                def.version(version)
                    .and_then(|v| v.schema.as_ref())
                    .map(|s| s.raw()),
            )
        } else {
            Shape::builtin(&def.group, &def.kind)
        }
    }

    /// Creates an object (`generateName` supported).
    pub(crate) fn create(
        &self,
        def: &ResourceDef,
        version: &str,
        ns: Option<&str>,
        body: Value,
        opts: WriteOpts,
    ) -> Result<Written, ApiError> {
        self.create_with(def, version, ns, body, opts, None)
    }

    /// Creates an object; `applied_fields` are the `managedFields` a server-side apply computed.
    fn create_with(
        &self,
        def: &ResourceDef,
        version: &str,
        ns: Option<&str>,
        mut body: Value,
        opts: WriteOpts,
        applied_fields: Option<Value>,
    ) -> Result<Written, ApiError> {
        Self::check_body(def, version, &body)?;
        let m = meta::meta_mut(&mut body);
        if def.namespaced {
            match (m.get("namespace").and_then(Value::as_str), ns) {
                (Some(b), Some(u)) if !b.is_empty() && b != u => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                (_, Some(u)) => {
                    m.insert("namespace".into(), Value::String(u.into()));
                }
                _ => {}
            }
        } else {
            m.remove("namespace");
        }
        let mut name = m
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if name.is_empty()
            && let Some(g) = m
                .get("generateName")
                .and_then(Value::as_str)
                .filter(|g| !g.is_empty())
        {
            name = format!("{g}{}", meta::name_suffix());
            m.insert("name".into(), Value::String(name.clone()));
        }
        if name.is_empty() {
            return Err(ApiError::invalid(
                &def.group,
                &def.kind,
                "",
                &[Cause {
                    reason: "FieldValueRequired".into(),
                    field: "metadata.name".into(),
                    message: "Required value: name or generateName is required".into(),
                }],
            ));
        }
        let checked = if def.group == "rbac.authorization.k8s.io" {
            // RBAC objects are named by path segments (`d8:module:role`), as in Kubernetes.
            meta::validate_path_segment(&name)
        } else {
            meta::validate_name(&name, def.plural == "namespaces")
        };
        if let Some(c) = checked {
            return Err(ApiError::invalid(&def.group, &def.kind, &name, &[c]));
        }
        let ns_value = m
            .get("namespace")
            .and_then(Value::as_str)
            .map(str::to_string);
        self.check_namespace(def, ns_value.as_deref(), &name)?;
        for f in [
            "uid",
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
        ] {
            m.remove(f);
        }
        m.insert("uid".into(), Value::String(meta::uuid()));
        m.insert("creationTimestamp".into(), Value::String(meta::now()));
        if def.generation {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
        if def.version(version).is_some_and(|v| v.status)
            && let Some(o) = body.as_object_mut()
        {
            o.remove("status");
        }
        if def.group.is_empty() && def.plural == "namespaces" {
            body["spec"] = json!({"finalizers": ["kubernetes"]});
            body["status"] = json!({"phase": "Active"});
        }
        if def.group == CRD_GROUP && def.plural == CRD_PLURAL {
            body["status"] = resources::crd_status(&body, &meta::now());
            meta::set_finalizers(&mut body, &[CRD_CLEANUP.to_string()]);
        }
        match (applied_fields, &opts.manager) {
            (Some(fields), _) => {
                meta::meta_mut(&mut body).insert("managedFields".into(), fields);
            }
            (None, Some(manager)) => {
                let api_version = def.api_version(version);
                let now = meta::now();
                let w = managed::Writer {
                    manager,
                    api_version: &api_version,
                    subresource: None,
                    has_status: def.version(version).is_some_and(|v| v.status),
                    now: &now,
                };
                managed::update(None, &mut body, &Self::shape(def, version), &w);
            }
            (None, None) => {}
        }
        let key = Self::key(def, ns_value.as_deref(), &name);
        let mut warnings = Vec::new();
        let committed = self.commit(def, &key, opts.dry_run, |current| {
            if current.is_some() {
                return Err(ApiError::already_exists(&def.group, &def.plural, &name));
            }
            warnings.clear();
            self.admit(def, version, None, None, body.clone(), &opts, &mut warnings)
        })?;
        Ok(Written {
            object: self.convert(def, version, committed.object)?,
            warnings,
            created: true,
        })
    }

    /// The common path of PUT and PATCH once the desired object is known.
    #[allow(clippy::too_many_arguments)]
    fn update_from(
        &self,
        def: &ResourceDef,
        version: &str,
        name: &str,
        old: Value,
        mut new: Value,
        subresource: Option<&str>,
        opts: &WriteOpts,
        applied_fields: Option<Value>,
        warnings: &mut Vec<String>,
    ) -> Result<Change, ApiError> {
        Self::check_body(def, version, &new)?;
        let has_status = def.version(version).is_some_and(|v| v.status);
        let old_rv = meta::get(&old, "resourceVersion")
            .unwrap_or_default()
            .to_string();
        match meta::get(&new, "resourceVersion") {
            Some(rv) if !rv.is_empty() && rv != old_rv => return Err(conflict(def, name)),
            _ => {}
        }
        if let Some(n) = meta::get(&new, "name")
            && n != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        match subresource {
            Some("status") => {
                if !has_status {
                    return Err(ApiError::no_route());
                }
                let status = new.get("status").cloned();
                new = old.clone();
                match status {
                    Some(s) => new["status"] = s,
                    None => {
                        if let Some(o) = new.as_object_mut() {
                            o.remove("status");
                        }
                    }
                }
            }
            Some(_) => return Err(ApiError::no_route()),
            None => {
                if has_status {
                    match old.get("status") {
                        Some(s) => new["status"] = s.clone(),
                        None => {
                            if let Some(o) = new.as_object_mut() {
                                o.remove("status");
                            }
                        }
                    }
                }
                if def.group.is_empty() && def.plural == "namespaces" {
                    // spec.finalizers is changed only through the finalize subresource.
                    new["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
                }
                let om = old.get("metadata").cloned().unwrap_or(json!({}));
                let m = meta::meta_mut(&mut new);
                for f in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "namespace",
                ] {
                    match om.get(f) {
                        Some(v) => m.insert(f.into(), v.clone()),
                        None => m.remove(f),
                    };
                }
                m.insert("name".into(), Value::String(name.into()));
                m.remove("managedFields");
                if meta::deleting(&old) {
                    let before = meta::finalizers(&old);
                    if meta::finalizers(&new).iter().any(|f| !before.contains(f)) {
                        return Err(ApiError::invalid(&def.group, &def.kind, name, &[Cause {
                            reason: "FieldValueForbidden".into(),
                            field: "metadata.finalizers".into(),
                            message: "Forbidden: no new finalizers can be added if the object is being deleted".into(),
                        }]));
                    }
                }
            }
        }
        if def.generation {
            let current_gen = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let bumped = !meta::same_spec(&old, &new, has_status);
            meta::meta_mut(&mut new).insert(
                "generation".into(),
                json!(if bumped { current_gen + 1 } else { current_gen }),
            );
        }
        if def.group == CRD_GROUP && def.plural == CRD_PLURAL && subresource.is_none() {
            new["status"] = resources::crd_status(&new, &meta::now());
            if let Some(old_conds) = old.pointer("/status/conditions") {
                new["status"]["conditions"] = old_conds.clone();
            }
        }
        match (applied_fields, &opts.manager) {
            (Some(fields), _) => {
                meta::meta_mut(&mut new).insert("managedFields".into(), fields);
            }
            (None, Some(manager)) => {
                let api_version = def.api_version(version);
                let now = meta::now();
                let w = managed::Writer {
                    manager,
                    api_version: &api_version,
                    subresource,
                    has_status,
                    now: &now,
                };
                managed::update(Some(&old), &mut new, &Self::shape(def, version), &w);
            }
            (None, None) => match old.pointer("/metadata/managedFields") {
                Some(f) => {
                    meta::meta_mut(&mut new).insert("managedFields".into(), f.clone());
                }
                None => {
                    meta::meta_mut(&mut new).remove("managedFields");
                }
            },
        }
        self.admit(def, version, subresource, Some(&old), new, opts, warnings)
    }

    /// Replaces an object (PUT), or its status.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn update(
        &self,
        def: &ResourceDef,
        version: &str,
        ns: Option<&str>,
        name: &str,
        body: Value,
        subresource: Option<&str>,
        opts: WriteOpts,
    ) -> Result<Written, ApiError> {
        let key = Self::key(def, ns, name);
        self.rewrite(def, version, &key, name, subresource, &opts, |_| {
            Ok((body.clone(), None))
        })
    }

    /// Rewrites a stored object: `edit` turns it into the new body and, for an apply, the
    /// managed fields to record (`None`: recorded as an `Update`); then the checks and the
    /// commit of every update.
    #[allow(clippy::too_many_arguments)]
    fn rewrite(
        &self,
        def: &ResourceDef,
        version: &str,
        key: &Key,
        name: &str,
        subresource: Option<&str>,
        opts: &WriteOpts,
        mut edit: impl FnMut(&Value) -> Result<(Value, Option<Value>), ApiError>,
    ) -> Result<Written, ApiError> {
        let mut warnings = Vec::new();
        let committed = self.commit(def, key, opts.dry_run, |current| {
            warnings.clear();
            let old = current.ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
            let (new, fields) = edit(&old)?;
            self.update_from(
                def,
                version,
                name,
                old,
                new,
                subresource,
                opts,
                fields,
                &mut warnings,
            )
        })?;
        Ok(Written {
            object: self.convert(def, version, committed.object)?,
            warnings,
            created: false,
        })
    }

    /// Patches an object or its status; server-side apply creates a missing object.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch(
        &self,
        def: &ResourceDef,
        version: &str,
        ns: Option<&str>,
        name: &str,
        ty: PatchType,
        body: &[u8],
        subresource: Option<&str>,
        opts: WriteOpts,
    ) -> Result<Written, ApiError> {
        if ty == PatchType::Apply {
            return self.server_side_apply(def, version, ns, name, body, subresource, opts);
        }
        let key = Self::key(def, ns, name);
        self.rewrite(def, version, &key, name, subresource, &opts, |old| {
            let mut doc = self.convert(def, version, old.clone())?;
            patch::apply(ty, &mut doc, body, def.custom).map_err(|e| {
                // As kube-apiserver: a JSON patch that does not apply (a failed `test`) is 422.
                if ty == PatchType::Json && e.starts_with("the JSON patch could not be applied") {
                    ApiError::unprocessable(e)
                } else {
                    ApiError::bad_request(e)
                }
            })?;
            Ok((doc, None))
        })
    }

    /// Server-side apply (`application/apply-patch+yaml`): see [`managed`].
    #[allow(clippy::too_many_arguments)]
    fn server_side_apply(
        &self,
        def: &ResourceDef,
        version: &str,
        ns: Option<&str>,
        name: &str,
        body: &[u8],
        subresource: Option<&str>,
        opts: WriteOpts,
    ) -> Result<Written, ApiError> {
        let manager = opts.manager.clone().unwrap_or_default();
        let mut config = patch::parse_apply(body).map_err(ApiError::bad_request)?;
        Self::check_body(def, version, &config)?;
        if def.group.is_empty() && def.plural == "secrets" {
            // Folded before ownership is computed: the manager owns the `data` keys the object
            // keeps, so re-applying the same `stringData` is a no-op like any other apply.
            fold_string_data(&mut config);
        }
        if let Some(n) = meta::get(&config, "name")
            && n != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        let api_version = def.api_version(version);
        let shape = Self::shape(def, version);
        let has_status = def.version(version).is_some_and(|v| v.status);
        let key = Self::key(def, ns, name);
        let now = meta::now();
        let w = managed::Writer {
            manager: &manager,
            api_version: &api_version,
            subresource,
            has_status,
            now: &now,
        };
        if subresource.is_none() && self.store.get(&key)?.is_none() {
            let mut obj = managed::apply(&json!({}), &config, &shape, &w, opts.force)?;
            let fields = meta::meta_mut(&mut obj).remove("managedFields");
            let m = meta::meta_mut(&mut obj);
            m.insert("name".into(), Value::String(name.into()));
            obj["apiVersion"] = json!(api_version);
            obj["kind"] = json!(def.kind);
            match self.create_with(def, version, ns, obj, opts.clone(), fields) {
                Err(e) if e.reason == "AlreadyExists" => {} // lost a race: apply below
                other => return other,
            }
        }
        self.rewrite(def, version, &key, name, subresource, &opts, |old| {
            let live = self.convert(def, version, old.clone())?;
            let mut doc = managed::apply(&live, &config, &shape, &w, opts.force)?;
            let fields = meta::meta_mut(&mut doc).remove("managedFields");
            Ok((doc, fields))
        })
    }

    /// The `scale` subresource of an object.
    pub(crate) fn get_scale(
        &self,
        def: &ResourceDef,
        version: &str,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let paths = def
            .version(version)
            .and_then(|v| v.scale.clone())
            .ok_or_else(ApiError::no_route)?;
        let obj = self.get(def, version, ns, name)?;
        Ok(crate::scale::to_scale(&paths, &obj, !def.custom))
    }

    /// Replaces (`ty` = `None`) or patches the `scale` subresource: sets the replicas.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write_scale(
        &self,
        def: &ResourceDef,
        version: &str,
        ns: Option<&str>,
        name: &str,
        ty: Option<PatchType>,
        body: &[u8],
        opts: WriteOpts,
    ) -> Result<Written, ApiError> {
        let paths = def
            .version(version)
            .and_then(|v| v.scale.clone())
            .ok_or_else(ApiError::no_route)?;
        let key = Self::key(def, ns, name);
        let mut warnings = Vec::new();
        let committed = self.commit(def, &key, opts.dry_run, |current| {
            let old = current.ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
            let mut scale = crate::scale::to_scale(&paths, &old, !def.custom);
            match ty {
                None => {
                    scale = serde_json::from_slice(body).map_err(|e| {
                        ApiError::bad_request(format!("the request body is not a valid Scale: {e}"))
                    })?;
                    match meta::get(&scale, "resourceVersion") {
                        Some(rv)
                            if !rv.is_empty() && Some(rv) != meta::get(&old, "resourceVersion") =>
                        {
                            return Err(conflict(def, name));
                        }
                        _ => {}
                    }
                }
                Some(t) => {
                    patch::apply(t, &mut scale, body, true).map_err(ApiError::bad_request)?
                }
            }
            let mut new = self.convert(def, version, old.clone())?;
            crate::scale::set_replicas(&paths, &mut new, &scale).map_err(|m| {
                let (field, message) = m.split_once(": ").unwrap_or(("", &m));
                ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    name,
                    &[Cause {
                        reason: "FieldValueInvalid".into(),
                        field: field.into(),
                        message: message.into(),
                    }],
                )
            })?;
            meta::meta_mut(&mut new).remove("resourceVersion");
            self.update_from(
                def,
                version,
                name,
                old,
                new,
                None,
                &opts,
                None,
                &mut warnings,
            )
        })?;
        Ok(Written {
            object: crate::scale::to_scale(&paths, &committed.object, !def.custom),
            warnings,
            created: false,
        })
    }

    /// Deletes an object: marks it when finalizers remain, removes it otherwise.
    pub(crate) fn delete(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOpts,
    ) -> Result<Deleted, ApiError> {
        let key = Self::key(def, ns, name);
        let committed = self.commit(def, &key, opts.dry_run, |current| {
            let old = current.ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))?;
            if let Some(uid) = &opts.uid {
                let have = meta::get(&old, "uid").unwrap_or_default();
                if have != uid {
                    return Err(ApiError::conflict(&def.group, &def.plural, name, &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"
                    )));
                }
            }
            if let Some(rv) = &opts.resource_version {
                let have = meta::get(&old, "resourceVersion").unwrap_or_default();
                if have != rv {
                    return Err(ApiError::conflict(&def.group, &def.plural, name, &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"
                    )));
                }
            }
            // Deletion rules (kube-apiserver admits a DELETE before marking the object).
            self.run_validator(
                def,
                Self::storage_version(def),
                name,
                Operation::Delete,
                Some(&old),
                None,
                opts.dry_run,
                None,
            )?;
            self.validating_admission(
                &HookAttributes {
                    def,
                    version: Self::storage_version(def),
                    subresource: None,
                    operation: "DELETE",
                    dry_run: opts.dry_run,
                    user: opts.user.as_ref(),
                },
                Some(&old),
                None,
                &mut Vec::new(),
            )?;
            let mut new = old.clone();
            let mut fins = meta::finalizers(&old);
            match opts.propagation {
                Some(Propagation::Foreground) if !fins.iter().any(|f| f == FOREGROUND) => {
                    fins.retain(|f| f != ORPHAN);
                    fins.push(FOREGROUND.into());
                }
                Some(Propagation::Orphan) if !fins.iter().any(|f| f == ORPHAN) => {
                    fins.retain(|f| f != FOREGROUND);
                    fins.push(ORPHAN.into());
                }
                _ => {}
            }
            meta::set_finalizers(&mut new, &fins);
            let ns_pending = def.group.is_empty() && def.plural == "namespaces";
            if fins.is_empty() && !ns_pending {
                return Ok(Change::Delete);
            }
            if !meta::deleting(&new) {
                let m = meta::meta_mut(&mut new);
                m.insert("deletionTimestamp".into(), Value::String(meta::now()));
                m.insert("deletionGracePeriodSeconds".into(), json!(0));
                if ns_pending {
                    new["status"] = json!({"phase": "Terminating"});
                }
            }
            if new == old { Ok(Change::Unchanged) } else { Ok(Change::Put(new)) }
        })?;
        let version = Self::storage_version(def);
        let obj = self.to_version(def, version, committed.object)?;
        Ok(match committed.event {
            Some(EventType::Deleted) => Deleted::Gone(obj),
            _ => Deleted::Pending(obj),
        })
    }

    /// Internal write used by controllers inside the server (GC, namespace and CRD cleanup):
    /// re-reads the object, applies `edit`, and stores it (or removes it if finalized).
    pub(crate) fn edit(
        &self,
        key: &Key,
        edit: impl FnOnce(&mut Value) -> bool,
    ) -> Result<(), ApiError> {
        let reg = self.registry();
        let Some(def) = reg.get(&key.group, &key.plural) else {
            return Ok(());
        };
        // The server's own writes call no webhook: decided under the lock.
        let r = self.commit_locked(&def, key, |current| {
            let Some(old) = current else {
                return Ok(Change::Unchanged);
            };
            let mut new = old.clone();
            if !edit(&mut new) || new == old {
                return Ok(Change::Unchanged);
            }
            if finalized(&new) {
                Ok(Change::Delete)
            } else {
                Ok(Change::Put(new))
            }
        });
        r.map(|_| ())
    }
}

/// A Secret's write-only `stringData` merged into `data` (base64; a key in both takes the
/// `stringData` value) and dropped, as the Kubernetes API server stores it. Non-string values
/// are left for validation to refuse.
fn fold_string_data(secret: &mut Value) {
    let Some(object) = secret.as_object_mut() else {
        return;
    };
    let Some(Value::Object(strings)) = object.get("stringData").cloned() else {
        return;
    };
    if strings.values().any(|v| !v.is_string()) {
        return;
    }
    object.remove("stringData");
    let data = object
        .entry("data")
        .or_insert_with(|| Value::Object(Default::default()));
    if !data.is_object() {
        *data = Value::Object(Default::default());
    }
    if let Value::Object(data) = data {
        for (key, value) in strings {
            let text = value.as_str().unwrap_or_default();
            data.insert(
                key,
                Value::String(base64::engine::general_purpose::STANDARD.encode(text)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_is_folded_into_data_and_wins_over_it() {
        let mut secret = json!({
            "metadata": {"name": "s"},
            "data": {"kept": "a2VwdA==", "both": "b2xk"},
            "stringData": {"both": "new", "plain": "user:pass"}
        });
        fold_string_data(&mut secret);
        assert_eq!(
            secret,
            json!({
                "metadata": {"name": "s"},
                "data": {"kept": "a2VwdA==", "both": "bmV3", "plain": "dXNlcjpwYXNz"}
            })
        );
        let mut only = json!({"stringData": {"k": "v"}});
        fold_string_data(&mut only);
        assert_eq!(only, json!({"data": {"k": "dg=="}}));
        let mut odd = json!({"stringData": {"k": 1}});
        fold_string_data(&mut odd);
        assert_eq!(odd, json!({"stringData": {"k": 1}}), "left for validation");
    }
}
