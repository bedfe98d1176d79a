//! The watch endpoint: a chunked stream of JSON event lines, replayed from a
//! `resourceVersion`, with bookmarks, timeouts, and `410 Expired` for compacted versions.

use crate::core::Core;
use crate::core::ListQuery;
use crate::error::ApiError;
use crate::handlers::{AppState, event_line};
use crate::resources::ResourceDef;
use crate::watch::{Event, EventType};
use axum::body::{Body, Bytes};
use axum::response::Response;
use http::{HeaderValue, header};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// Longest watch the server keeps open when the client names no timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

struct Filter {
    resource: String,
    namespace: Option<String>,
    query: ListQuery,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        self.query.labels.matches(obj) && self.query.fields.matches(obj)
    }

    /// The event type to send for `ev`, if any: objects entering or leaving a selector's set
    /// are reported as ADDED and DELETED, as Kubernetes does.
    fn deliver(&self, ev: &Event) -> Option<&'static str> {
        if ev.resource != self.resource
            || self.namespace.as_ref().is_some_and(|n| *n != ev.namespace)
        {
            return None;
        }
        let now = self.matches(&ev.object);
        match ev.type_ {
            EventType::Added | EventType::Deleted => now.then(|| ev.type_.as_str()),
            EventType::Modified => match (ev.old.as_ref().is_some_and(|o| self.matches(o)), now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            },
        }
    }
}

fn expired_line(requested: u64, oldest: u64) -> Bytes {
    let e = ApiError::expired(format!("too old resource version: {requested} ({oldest})"));
    event_line("ERROR", &e.status())
}

fn bookmark(def: &ResourceDef, version: &str, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    event_line(
        "BOOKMARK",
        &json!({"kind": def.kind, "apiVersion": def.api_version(version), "metadata": meta}),
    )
}

/// A watch event's object, seen through the watched version: through the CRD's conversion
/// webhook when it has one (a blocking call, so off the async threads), else in process.
/// An object that does not convert ends the watch (logged), as kube-apiserver's watch encoder
/// does; the client watches again from its last version.
async fn event_object(
    core: &Arc<Core>,
    def: &Arc<ResourceDef>,
    version: &str,
    ev: &Event,
) -> Option<Value> {
    let converted = if def.conversion.is_some() {
        let (c, d, v, o) = (
            core.clone(),
            def.clone(),
            version.to_string(),
            ev.object.clone(),
        );
        tokio::task::spawn_blocking(move || c.convert(&d, &v, o))
            .await
            .unwrap_or_else(|e| Err(ApiError::internal(e.to_string())))
    } else {
        core.to_version(def, version, ev.object.clone())
    };
    converted
        .inspect_err(|e| {
            tracing::warn!(resource = %def.group_resource(), error = %e.message, "unable to encode watch object, ending the watch");
        })
        .ok()
}

/// Sends one event seen through the watched version; false ends the watch.
async fn send_event(
    tx: &mpsc::Sender<Bytes>,
    core: &Arc<Core>,
    def: &Arc<ResourceDef>,
    version: &str,
    type_: &str,
    ev: &Event,
) -> bool {
    match event_object(core, def, version, ev).await {
        Some(obj) => tx.send(event_line(type_, &obj)).await.is_ok(),
        None => false,
    }
}

/// Serves one watch request.
pub(crate) async fn watch(
    st: &Arc<AppState>,
    def: Arc<ResourceDef>,
    version: String,
    query: ListQuery,
    q: &HashMap<String, String>,
) -> Result<Response, ApiError> {
    let rv_param = q.get("resourceVersion").cloned().unwrap_or_default();
    let bookmarks = q
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true" || b == "1");
    let send_initial = q.get("sendInitialEvents").is_some_and(|b| b == "true");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT)
        .min(Duration::from_secs(3600));
    let initial = rv_param.is_empty() || rv_param == "0" || send_initial;
    let filter = Filter {
        resource: format!("{}/{}", def.group, def.plural),
        namespace: if def.namespaced {
            query.namespace.clone()
        } else {
            None
        },
        query,
    };
    let (tx, rx_body) = mpsc::channel::<Bytes>(64);
    let core = st.core.clone();
    let (initial_items, from) = if initial {
        let lq = ListQuery {
            namespace: filter.query.namespace.clone(),
            labels: filter.query.labels.clone(),
            fields: filter.query.fields.clone(),
            limit: None,
            continue_token: None,
        };
        let (d, v, c) = (def.clone(), version.clone(), core.clone());
        let page = tokio::task::spawn_blocking(move || c.list(&d, &v, &lq))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))??;
        let rv = page.resource_version;
        (page.values()?, rv)
    } else {
        let rv = rv_param
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv_param:?}")))?;
        (Vec::new(), rv)
    };
    let sub = core.store.hub().subscribe(from);
    let interval = st.bookmark_interval;
    tokio::spawn(async move {
        let (backlog, mut live) = match sub {
            Ok(s) => s,
            Err(too_old) => {
                let _ = tx
                    .send(expired_line(too_old.requested, too_old.oldest))
                    .await;
                return;
            }
        };
        for obj in initial_items {
            if tx.send(event_line("ADDED", &obj)).await.is_err() {
                return;
            }
        }
        if send_initial && bookmarks && tx.send(bookmark(&def, &version, from, true)).await.is_err()
        {
            return;
        }
        let mut last_rv = from;
        for ev in backlog {
            last_rv = last_rv.max(ev.rv);
            if let Some(t) = filter.deliver(&ev)
                && !send_event(&tx, &core, &def, &version, t, &ev).await
            {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(interval);
        tick.reset();
        loop {
            tokio::select! {
                r = live.recv() => match r {
                    Ok(ev) => {
                        if ev.rv <= last_rv {
                            continue;
                        }
                        last_rv = ev.rv;
                        if let Some(t) = filter.deliver(&ev)
                            && !send_event(&tx, &core, &def, &version, t, &ev).await {
                                return;
                            }
                    }
                    // Too slow a reader: end the stream; the client resumes from its last version.
                    Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = tick.tick(), if bookmarks => {
                    if tx.send(bookmark(&def, &version, last_rv, false)).await.is_err() {
                        return;
                    }
                }
                () = &mut deadline => return,
                () = tx.closed() => return,
            }
        }
    });
    let stream = futures_util::stream::unfold(rx_body, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<Bytes, std::convert::Infallible>(b), rx))
    });
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}
