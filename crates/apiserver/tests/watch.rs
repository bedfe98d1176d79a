//! Watches: kube-rs watchers and reflectors see every change in order; compacted versions
//! give 410 Gone and the watcher relists.

#[path = "support/common.rs"]
mod common;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{reflector, watcher};
use serde_json::json;
use std::time::Duration;

fn cm(name: &str, labels: serde_json::Value, v: u64) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"v": v.to_string()}}),
    )
    .unwrap()
}

fn value(c: &ConfigMap) -> u64 {
    c.data
        .as_ref()
        .and_then(|d| d.get("v"))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[tokio::test]
async fn watcher_sees_every_change_in_order_and_reflector_converges() {
    let s = common::start().await;
    let client = s.admin().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(
        &PostParams::default(),
        &cm("counter", json!({"app": "w"}), 0),
    )
    .await
    .unwrap();

    let (reader, writer) = reflector::store::<ConfigMap>();
    let mut events = Box::pin(reflector(
        writer,
        watcher(api.clone(), watcher::Config::default().labels("app=w")),
    ));
    // Wait for the initial list.
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::InitDone => break,
            _ => continue,
        }
    }
    const N: u64 = 200;
    let writer_api = api.clone();
    let writes = tokio::spawn(async move {
        for v in 1..=N {
            writer_api
                .patch(
                    "counter",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"v": v.to_string()}})),
                )
                .await
                .unwrap();
        }
        writer_api
            .delete("counter", &Default::default())
            .await
            .unwrap();
    });
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::Apply(c) => seen.push(value(&c)),
            watcher::Event::Delete(c) => {
                assert_eq!(value(&c), N);
                break;
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    writes.await.unwrap();
    assert_eq!(
        seen,
        (1..=N).collect::<Vec<_>>(),
        "every change, in order, exactly once"
    );
    assert!(reader.is_empty(), "the reflector saw the deletion");
}

#[tokio::test]
async fn compacted_versions_are_gone_and_the_watcher_relists() {
    let s = common::start_with(|b| b.watch_history(5)).await;
    let client = s.admin().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let first = api
        .create(
            &PostParams::default(),
            &cm("m1", json!({"app": "watched"}), 1),
        )
        .await
        .unwrap();
    let old_rv = first.metadata.resource_version.unwrap();
    for i in 0..10 {
        api.create(
            &PostParams::default(),
            &cm(&format!("noise{i}"), json!({}), i),
        )
        .await
        .unwrap();
    }
    // A raw watch from the compacted version: one ERROR event, 410 Expired.
    let mut raw = api
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(Duration::from_secs(5), raw.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("expected 410, got {other:?}"),
    }
    // A recent version still works.
    let latest = api
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut ok = api
        .watch(&WatchParams::default(), &latest)
        .await
        .unwrap()
        .boxed();
    api.patch(
        "m1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    match tokio::time::timeout(Duration::from_secs(5), ok.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Modified(c) => assert_eq!(value(&c), 2),
        other => panic!("expected MODIFIED, got {other:?}"),
    }

    // A kube-rs watcher whose watch times out after its resource version was compacted
    // (no bookmarks, only unrelated changes meanwhile) gets 410 and relists.
    let cfg = watcher::Config::default()
        .labels("app=watched")
        .timeout(1)
        .disable_bookmarks();
    let mut w = watcher(api.clone(), cfg).boxed();
    let mut inits = 0;
    let mut gone = 0;
    let mut relisted: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    // Keep the history moving with unrelated changes while the watcher's version goes stale.
    let noise_api = api.clone();
    let noise = tokio::spawn(async move {
        for i in 100.. {
            noise_api
                .create(
                    &PostParams::default(),
                    &cm(&format!("noise{i}"), json!({}), 0),
                )
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    while inits < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no relist after 410"
        );
        match tokio::time::timeout(Duration::from_secs(5), w.next())
            .await
            .unwrap()
            .unwrap()
        {
            Ok(watcher::Event::Init) => inits += 1,
            Err(watcher::Error::WatchError(st)) => {
                assert_eq!(st.code, 410);
                gone += 1;
            }
            _ => {}
        }
    }
    noise.abort();
    assert!(gone >= 1, "the watcher was told its version is gone");
    loop {
        match tokio::time::timeout(Duration::from_secs(5), w.next())
            .await
            .unwrap()
            .unwrap()
        {
            Ok(watcher::Event::InitApply(c)) => relisted.push(c.metadata.name.unwrap()),
            Ok(watcher::Event::InitDone) => break,
            _ => {}
        }
    }
    assert_eq!(relisted, ["m1"]);
}

#[tokio::test]
async fn watch_filters_by_label_transitions_and_bookmarks() {
    let s = common::start_with(|b| b.bookmark_interval(Duration::from_millis(100))).await;
    let client = s.admin().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let rv = api
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut w = api
        .watch(&WatchParams::default().labels("app=x"), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("a", json!({"app": "y"}), 1))
        .await
        .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "x"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "z"}}})),
    )
    .await
    .unwrap();
    let mut kinds = Vec::new();
    let mut bookmarks = 0;
    while kinds.len() < 3 || bookmarks == 0 {
        match tokio::time::timeout(Duration::from_secs(5), w.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            WatchEvent::Added(_) => kinds.push("ADDED"),
            WatchEvent::Modified(_) => kinds.push("MODIFIED"),
            WatchEvent::Deleted(_) => kinds.push("DELETED"),
            WatchEvent::Bookmark(_) => bookmarks += 1,
            WatchEvent::Error(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(
        kinds,
        ["ADDED", "MODIFIED", "DELETED"],
        "entering and leaving the selector"
    );
}
