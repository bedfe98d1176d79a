//! Module documentation builds. The module manager writes a ModuleDocumentation whenever a
//! module is installed or updated (a new release, or a ModulePullOverride's new digest); this
//! controller sends that version's docs to every documentation builder and records the outcome
//! per builder address in its status.
//!
//! Builders are the ready endpoints of the `documentation` module's Service (EndpointSlices in
//! `d8-system` labelled `app=documentation`, port `builder-http`). No endpoints — the
//! documentation module is not enabled — means nothing to do. Per builder, as Deckhouse's
//! docs-builder API wants it: `POST /api/v1/doc/<module>/<version>` with a tar of the module's
//! `docs*`, `crds*`, `openapi*`, `module.yaml` and `oss.yaml` (201), then `POST /api/v1/build`
//! (200). A failing builder is tried again with a doubling backoff.

pub mod plan;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use api::module_documentation::{DocumentationCondition, ModuleDocumentation};
use futures_util::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use release_controller::{Clock, SystemClock};
use serde_json::json;

use crate::Error;
use plan::Step;

/// Settings of the documentation controller.
#[derive(Clone, Debug)]
pub struct Options {
    /// The downloaded modules directory (`spec.path` is relative to it).
    pub downloaded: PathBuf,
    /// Namespace of the builder's EndpointSlices.
    pub namespace: String,
    /// First retry delay after a failure (doubled each time).
    pub retry_base: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// Timeout of one builder request.
    pub timeout: Duration,
    /// Where "now" comes from (conditions' transition times).
    pub clock: Arc<dyn Clock>,
}

impl Options {
    /// Deckhouse's settings for modules under `downloaded`.
    pub fn new(downloaded: impl Into<PathBuf>) -> Self {
        Self {
            downloaded: downloaded.into(),
            namespace: "d8-system".into(),
            retry_base: Duration::from_secs(10),
            retry_max: Duration::from_secs(300),
            timeout: Duration::from_secs(180),
            clock: Arc::new(SystemClock),
        }
    }
}

/// Failures per `module/version/checksum`: how many, and when the next try is due.
pub type Attempts = HashMap<String, (u32, tokio::time::Instant)>;

/// The controller.
pub struct Controller {
    client: Client,
    http: reqwest::Client,
    options: Options,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// A controller talking to `client`.
    pub fn new(client: Client, options: Options) -> Result<Self, Error> {
        let http = reqwest::Client::builder()
            .timeout(options.timeout)
            .build()
            .map_err(|e| Error::Refused(format!("HTTP client: {e}")))?;
        Ok(Self {
            client,
            http,
            options,
        })
    }

    /// Runs until `stopped` resolves: on every change of a ModuleDocumentation or of the
    /// builder's endpoints, and when a retry is due.
    pub async fn run(&self, stopped: impl std::future::Future<Output = ()>) {
        tokio::pin!(stopped);
        let docs: Api<ModuleDocumentation> = Api::all(self.client.clone());
        let slices: Api<EndpointSlice> =
            Api::namespaced(self.client.clone(), &self.options.namespace);
        let config = kube::runtime::watcher::Config::default().labels(plan::BUILDER_SELECTOR);
        let mut events = futures_util::stream::select(
            kube::runtime::watcher(docs, Default::default())
                .map(|e| e.is_ok())
                .boxed(),
            kube::runtime::watcher(slices, config)
                .map(|e| e.is_ok())
                .boxed(),
        );
        let mut attempts = Attempts::new();
        loop {
            let wait = match self.pass(&mut attempts).await {
                Ok(wait) => wait,
                Err(e) => {
                    tracing::warn!(error = %e, "documentation pass failed");
                    Some(self.options.retry_base)
                }
            };
            let sleep = tokio::time::sleep(wait.unwrap_or(Duration::from_secs(3600)));
            tokio::pin!(sleep);
            tokio::select! {
                _ = &mut stopped => return,
                _ = &mut sleep => {}
                event = events.next() => {
                    if event.is_none() { return }
                    // Let a burst of events (and our own status writes) settle.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    /// One pass: every ModuleDocumentation not rendered on every builder is sent; returns when
    /// the next retry is due.
    pub async fn pass(&self, attempts: &mut Attempts) -> Result<Option<Duration>, Error> {
        let addresses = self.builders().await?;
        if addresses.is_empty() {
            return Ok(None);
        }
        let docs: Api<ModuleDocumentation> = Api::all(self.client.clone());
        let list = docs
            .list(&Default::default())
            .await
            .map_err(|e| Error::kube("list ModuleDocumentations", e))?;
        let mut next: Option<Duration> = None;
        for doc in &list.items {
            if doc.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let key = format!(
                "{}/{}/{}",
                doc.name_any(),
                doc.spec.version,
                doc.spec.checksum.as_deref().unwrap_or_default()
            );
            let status = doc.status.clone().unwrap_or_default();
            let steps = plan::steps(&doc.spec, &status.conditions, &addresses);
            if steps.iter().all(|s| matches!(s, Step::Keep(_)))
                && status.conditions.len() == steps.len()
            {
                attempts.remove(&key);
                continue;
            }
            let attempt = attempts.get(&key).copied();
            let now = tokio::time::Instant::now();
            if let Some((_, due)) = attempt
                && due > now
            {
                // Not due yet: an event (our own status write) is no reason to retry early.
                let wait = due - now;
                next = Some(next.map_or(wait, |w| w.min(wait)));
                continue;
            }
            let conditions = self.render(doc, steps).await;
            let result = plan::result(&conditions);
            self.write_status(doc, &conditions, result).await?;
            if result == plan::RENDERED {
                attempts.remove(&key);
            } else {
                let n = attempt.map_or(0, |(n, _)| n);
                let wait = plan::backoff(n, self.options.retry_base, self.options.retry_max);
                attempts.insert(key, (n + 1, tokio::time::Instant::now() + wait));
                tracing::warn!(module = %doc.name_any(), result, retry_in = ?wait, "documentation not rendered on every builder");
                next = Some(next.map_or(wait, |w| w.min(wait)));
            }
        }
        Ok(next)
    }

    async fn builders(&self) -> Result<Vec<String>, Error> {
        let slices: Api<EndpointSlice> =
            Api::namespaced(self.client.clone(), &self.options.namespace);
        let list = slices
            .list(&ListParams::default().labels(plan::BUILDER_SELECTOR))
            .await
            .map_err(|e| Error::kube("list documentation builder endpoints", e))?;
        Ok(plan::builder_addresses(&list.items))
    }

    async fn render(
        &self,
        doc: &ModuleDocumentation,
        steps: Vec<Step>,
    ) -> Vec<DocumentationCondition> {
        let module = doc.name_any();
        let version = &doc.spec.version;
        let archive = docs_archive(&self.options.downloaded, &module, doc);
        let now = self.options.clock.now();
        let now = Time(Timestamp::from_second(now.as_second()).unwrap_or(now));
        let mut out = Vec::with_capacity(steps.len());
        for step in steps {
            let address = match step {
                Step::Keep(condition) => {
                    out.push(condition);
                    continue;
                }
                Step::Send(address) => address,
            };
            let outcome = match &archive {
                Ok(bytes) => self.send(&address, &module, version, bytes.clone()).await,
                Err(e) => Err(e.clone()),
            };
            out.push(DocumentationCondition {
                type_: Some(
                    if outcome.is_ok() {
                        plan::RENDERED
                    } else {
                        plan::ERROR
                    }
                    .into(),
                ),
                version: Some(version.clone()),
                checksum: doc.spec.checksum.clone(),
                address: Some(address),
                last_transition_time: Some(now.clone()),
                message: outcome.err(),
            });
        }
        out
    }

    async fn send(
        &self,
        base: &str,
        module: &str,
        version: &str,
        archive: Vec<u8>,
    ) -> Result<(), String> {
        let url = format!("{base}/api/v1/doc/{module}/{version}");
        self.post(&url, Some(archive), reqwest::StatusCode::CREATED)
            .await
            .map_err(|e| format!("send documentation: {e}"))?;
        let url = format!("{base}/api/v1/build");
        self.post(&url, None, reqwest::StatusCode::OK)
            .await
            .map_err(|e| format!("build documentation: {e}"))
    }

    async fn post(
        &self,
        url: &str,
        body: Option<Vec<u8>>,
        expected: reqwest::StatusCode,
    ) -> Result<(), String> {
        let mut request = self.http.post(url);
        if let Some(body) = body {
            request = request
                .header("Content-Type", "application/x-tar")
                .body(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("POST {url:?}: {}", without_url(&e)))?;
        let status = response.status();
        if status == expected {
            return Ok(());
        }
        let text = response.text().await.unwrap_or_default();
        let text: String = text.chars().take(512).collect();
        Err(format!("POST {url:?}: [{}] {text:?}", status.as_u16()))
    }

    async fn write_status(
        &self,
        doc: &ModuleDocumentation,
        conditions: &[DocumentationCondition],
        result: &str,
    ) -> Result<(), Error> {
        let docs: Api<ModuleDocumentation> = Api::all(self.client.clone());
        let patch = json!({"status": {"result": result, "conditions": conditions}});
        match docs
            .patch_status(
                &doc.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(Error::kube(
                format!("update ModuleDocumentation {} status", doc.name_any()),
                e,
            )),
        }
    }
}

/// reqwest's error text without the URL (it is already in the message).
fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(&format!(" ({url})"), "");
    }
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

/// Where the module's files are: `spec.path` under the downloaded directory, else
/// `<downloaded>/<module>/<version>`.
fn module_dir(downloaded: &Path, module: &str, doc: &ModuleDocumentation) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(path) = &doc.spec.path {
        let relative = path.trim_start_matches('/');
        if !relative.split('/').any(|part| part == "..") {
            candidates.push(downloaded.join(relative));
        }
    }
    candidates.push(downloaded.join(module).join(&doc.spec.version));
    candidates.into_iter().find(|dir| dir.is_dir())
}

/// The tar the builder wants: the documentation files of the module, paths relative to it.
fn docs_archive(
    downloaded: &Path,
    module: &str,
    doc: &ModuleDocumentation,
) -> Result<Vec<u8>, String> {
    let failed = |e: String| {
        format!("failed to get {module} module documentation from local directory with error: {e}")
    };
    let dir = module_dir(downloaded, module, doc).ok_or_else(|| {
        failed(format!(
            "{} isn't a directory",
            downloaded
                .join(
                    doc.spec
                        .path
                        .as_deref()
                        .unwrap_or_default()
                        .trim_start_matches('/')
                )
                .display()
        ))
    })?;
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    let mut stack = vec![dir.clone()];
    let mut files = Vec::new();
    while let Some(current) = stack.pop() {
        let entries = std::fs::read_dir(&current)
            .map_err(|e| failed(format!("{}: {e}", current.display())))?;
        for entry in entries {
            let entry = entry.map_err(|e| failed(e.to_string()))?;
            let path = entry.path();
            let Ok(relative) = path.strip_prefix(&dir) else {
                continue;
            };
            let relative = relative.to_string_lossy().into_owned();
            let kind = entry.file_type().map_err(|e| failed(e.to_string()))?;
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() && plan::is_docs_path(&relative) {
                files.push((relative, path));
            }
        }
    }
    files.sort();
    for (relative, path) in files {
        builder
            .append_path_with_name(&path, &relative)
            .map_err(|e| failed(format!("{}: {e}", path.display())))?;
    }
    builder.into_inner().map_err(|e| failed(e.to_string()))
}
