//! The API edge of a module run: server-side apply of rendered objects under one field manager
//! (`helm`, the manager nelm applies Deckhouse modules with), reads, deletes (background
//! propagation, as addon-operator uninstalls), and the release Secrets. Kinds are resolved
//! through discovery once per kind.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, Scope};
use kube::{Api, Client};
use serde_json::Value;

use super::converge::ObjectKey;
use super::release::{Release, secret_name};
use crate::Error;

/// The field manager of every apply (nelm's default, which addon-operator uses).
pub const FIELD_MANAGER: &str = "helm";

/// Applies objects and keeps release Secrets.
pub struct Applier {
    client: Client,
    kinds: Mutex<HashMap<(String, String), (ApiResource, bool)>>,
}

impl std::fmt::Debug for Applier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applier").finish_non_exhaustive()
    }
}

fn gvk(api_version: &str, kind: &str) -> GroupVersionKind {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, kind)
}

impl Applier {
    /// An applier using `client`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            kinds: Mutex::default(),
        }
    }

    /// The client.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The API resource of a kind and whether it is namespaced (discovery, cached).
    pub async fn resolve(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<(ApiResource, bool), Error> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(found) = self.kinds.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(found);
        }
        let (resource, caps): (ApiResource, ApiCapabilities) = kube::discovery::pinned_kind(
            &self.client,
            &gvk(api_version, kind),
        )
        .await
        .map_err(|e| {
            Error::kube(
                format!("resource mapping not found for kind {kind:?} in version {api_version:?}"),
                e,
            )
        })?;
        let found = (resource, caps.scope == Scope::Namespaced);
        if let Ok(mut m) = self.kinds.lock() {
            m.insert(key, found.clone());
        }
        Ok(found)
    }

    /// The key of a rendered object with its namespace settled: a namespaced object without
    /// one gets `default_namespace` (written into the object), a cluster-wide one has none.
    pub async fn settle(
        &self,
        object: &mut Value,
        default_namespace: &str,
    ) -> Result<ObjectKey, Error> {
        let mut key = ObjectKey::of(object).ok_or_else(|| Error::Render {
            module: String::new(),
            message: "an object without apiVersion, kind or name".into(),
        })?;
        let (_, namespaced) = self.resolve(&key.api_version, &key.kind).await?;
        if namespaced {
            let ns = key
                .namespace
                .clone()
                .unwrap_or_else(|| default_namespace.to_owned());
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("namespace".into(), Value::String(ns.clone()));
            }
            key.namespace = Some(ns);
        } else {
            key.namespace = None;
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("namespace");
            }
        }
        Ok(key)
    }

    async fn api(&self, key: &ObjectKey) -> Result<Api<DynamicObject>, Error> {
        let (resource, namespaced) = self.resolve(&key.api_version, &key.kind).await?;
        Ok(match (&key.namespace, namespaced) {
            (Some(ns), true) => Api::namespaced_with(self.client.clone(), ns, &resource),
            _ => Api::all_with(self.client.clone(), &resource),
        })
    }

    /// Server-side apply of `object` (its key settled) under [`FIELD_MANAGER`], taking fields
    /// over from other managers as Helm's upgrade does.
    pub async fn apply(&self, key: &ObjectKey, object: &Value) -> Result<DynamicObject, Error> {
        let api = self.api(key).await?;
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&key.name, &params, &Patch::Apply(object))
            .await
            .map_err(|e| Error::kube(format!("apply {key}"), e))
    }

    /// Reads an object; `None` when absent (or its kind is no longer served).
    pub async fn get(&self, key: &ObjectKey) -> Result<Option<DynamicObject>, Error> {
        let api = match self.api(key).await {
            Ok(api) => api,
            Err(Error::Kube { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        api.get_opt(&key.name)
            .await
            .map_err(|e| Error::kube(format!("get {key}"), e))
    }

    /// Deletes an object (background propagation); absent is fine. `true` when it existed.
    pub async fn delete(&self, key: &ObjectKey) -> Result<bool, Error> {
        let api = match self.api(key).await {
            Ok(api) => api,
            Err(Error::Kube { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        match api.delete(&key.name, &DeleteParams::background()).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(Error::kube(format!("delete {key}"), e)),
        }
    }

    /// Every stored revision of release `name` in `namespace` (undecodable ones skipped).
    pub async fn history(&self, namespace: &str, name: &str) -> Result<Vec<Release>, Error> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let list = api
            .list(&ListParams::default().labels(&format!("owner=helm,name={name}")))
            .await
            .map_err(|e| Error::kube(format!("list releases of {name}"), e))?;
        let mut out = Vec::new();
        for secret in list {
            let value = serde_json::to_value(&secret).unwrap_or_default();
            match Release::from_secret(&value) {
                Ok(r) => out.push(r),
                Err(e) => tracing::warn!(error = %e, "release secret skipped"),
            }
        }
        out.sort_by_key(|r| r.version);
        Ok(out)
    }

    /// The names of every release stored in `namespace`.
    pub async fn released(
        &self,
        namespace: &str,
    ) -> Result<std::collections::BTreeSet<String>, Error> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let list = api
            .list_metadata(&ListParams::default().labels("owner=helm"))
            .await
            .map_err(|e| Error::kube("list releases", e))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|s| s.metadata.labels?.get("name").cloned())
            .collect())
    }

    /// Creates or replaces the Secret of one revision in `storage`.
    pub async fn store(&self, storage: &str, release: &Release) -> Result<(), Error> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), storage);
        let secret: Secret =
            serde_json::from_value(release.to_secret(storage)).map_err(|e| Error::Render {
                module: release.name.clone(),
                message: format!("release secret: {e}"),
            })?;
        let name = secret_name(&release.name, release.version);
        let what = format!("store release {name}");
        match api
            .get_opt(&name)
            .await
            .map_err(|e| Error::kube(&what, e))?
        {
            None => api
                .create(&PostParams::default(), &secret)
                .await
                .map(drop)
                .map_err(|e| Error::kube(&what, e)),
            Some(old) => {
                let mut secret = secret;
                secret.metadata.resource_version = old.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &secret)
                    .await
                    .map(drop)
                    .map_err(|e| Error::kube(&what, e))
            }
        }
    }

    /// Deletes the Secret of one revision.
    pub async fn forget(&self, namespace: &str, name: &str, version: i64) -> Result<(), Error> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let secret = secret_name(name, version);
        match api.delete(&secret, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(Error::kube(format!("delete release {secret}"), e)),
        }
    }
}
