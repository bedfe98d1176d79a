//! `limit`/`continue` as kube-apiserver pages a list: every page from the first page's
//! snapshot, `remainingItemCount`, its continue token format, and 410 Expired once the
//! history no longer reaches back to the token — through raw HTTP and kubectl.

#[path = "support/common.rs"]
mod common;
#[path = "support/kubectl.rs"]
mod kubectl;

use base64::Engine as _;
use http_body_util::BodyExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const PATH: &str = "/api/v1/namespaces/default/configmaps";

/// GET `path_and_query` with the admin's credentials: (status, body).
async fn get(client: &kube::Client, path_and_query: &str) -> (u16, Value) {
    get_as(client, path_and_query, "application/json").await
}

/// What kubectl's human-readable `get` asks for: a Table, JSON as the fallback.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

/// GET `path_and_query` with `accept`: (status, body).
async fn get_as(client: &kube::Client, path_and_query: &str, accept: &str) -> (u16, Value) {
    let req = http::Request::get(path_and_query)
        .header(http::header::ACCEPT, accept)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap())
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn cm(name: &str, v: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "x"}}, "data": {"v": v}}),
    )
    .unwrap()
}

async fn create(api: &Api<ConfigMap>, names: &[&str]) {
    for n in names {
        api.create(&PostParams::default(), &cm(n, "0"))
            .await
            .unwrap();
    }
}

fn enc(s: &str) -> String {
    s.replace('=', "%3D").replace(',', "%2C")
}

#[tokio::test]
async fn pages_come_from_the_first_pages_snapshot() {
    let s = common::start().await;
    let client = s.admin().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&api, &["a", "b", "c", "d", "e"]).await;

    let (code, first) = get(&client, &format!("{PATH}?limit=2")).await;
    assert_eq!(code, 200);
    assert_eq!(names(&first), ["a", "b"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    // kube-apiserver's format: base64url (no padding) of {"v","rv","start"}, start relative to
    // the listed prefix and just after the last key returned.
    let decoded: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&token)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(decoded["v"], "meta.k8s.io/v1");
    assert_eq!(decoded["rv"], rv.parse::<i64>().unwrap());
    assert_eq!(decoded["start"], "b\u{0}");

    // Changes after the first page are not seen by the later ones.
    api.delete("c", &DeleteParams::default()).await.unwrap();
    api.patch(
        "d",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "changed"}})),
    )
    .await
    .unwrap();
    create(&api, &["bb", "f"]).await;

    let (code, second) = get(&client, &format!("{PATH}?limit=2&continue={token}")).await;
    assert_eq!(code, 200, "{second}");
    assert_eq!(names(&second), ["c", "d"]);
    assert_eq!(second["items"][1]["data"]["v"], "0");
    assert_eq!(second["metadata"]["resourceVersion"], rv.as_str());
    assert_eq!(second["metadata"]["remainingItemCount"], 1);
    let token = second["metadata"]["continue"].as_str().unwrap();
    let (_, last) = get(&client, &format!("{PATH}?limit=2&continue={token}")).await;
    assert_eq!(names(&last), ["e"]);
    assert!(last["metadata"].get("continue").is_none());
    assert!(last["metadata"].get("remainingItemCount").is_none());
    assert_eq!(last["items"][0]["apiVersion"], "v1");
    assert_eq!(last["items"][0]["kind"], "ConfigMap");

    // A fresh list sees the changes.
    let (_, now) = get(&client, PATH).await;
    assert_eq!(names(&now), ["a", "b", "bb", "d", "e", "f"]);
    assert!(now["metadata"].get("remainingItemCount").is_none());
}

fn row_names(table: &Value) -> Vec<String> {
    table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"][0].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn table_pages_carry_continue_and_remaining_count() {
    let s = common::start().await;
    let client = s.admin().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&api, &["a", "b", "c", "d", "e"]).await;

    let (code, first) = get_as(&client, &format!("{PATH}?limit=2"), TABLE).await;
    assert_eq!(code, 200, "{first}");
    assert_eq!(first["kind"], "Table");
    assert_eq!(row_names(&first), ["a", "b"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let rv = first["metadata"]["resourceVersion"].clone();
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();

    // The later pages come from the first page's snapshot, as the JSON list's do.
    api.delete("c", &DeleteParams::default()).await.unwrap();
    let (code, second) = get_as(&client, &format!("{PATH}?limit=2&continue={token}"), TABLE).await;
    assert_eq!(code, 200, "{second}");
    assert_eq!(row_names(&second), ["c", "d"]);
    assert_eq!(second["metadata"]["resourceVersion"], rv);
    assert_eq!(second["metadata"]["remainingItemCount"], 1);
    let token = second["metadata"]["continue"].as_str().unwrap();
    let (_, last) = get_as(&client, &format!("{PATH}?limit=2&continue={token}"), TABLE).await;
    assert_eq!(row_names(&last), ["e"]);
    assert!(last["metadata"].get("continue").is_none(), "{last}");
    assert!(
        last["metadata"].get("remainingItemCount").is_none(),
        "{last}"
    );

    // A filtered list has no count; the Table of one object carries its resourceVersion.
    let (_, filtered) = get_as(
        &client,
        &format!("{PATH}?limit=1&labelSelector={}", enc("app=x")),
        TABLE,
    )
    .await;
    assert!(filtered["metadata"]["continue"].is_string(), "{filtered}");
    assert!(filtered["metadata"].get("remainingItemCount").is_none());
    let (_, one) = get_as(&client, &format!("{PATH}/d"), TABLE).await;
    assert_eq!(row_names(&one), ["d"]);
    assert_eq!(
        one["metadata"]["resourceVersion"],
        api.get("d")
            .await
            .unwrap()
            .metadata
            .resource_version
            .unwrap()
    );
}

#[tokio::test]
async fn a_selector_pages_without_a_remaining_count() {
    let s = common::start().await;
    let client = s.admin().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&api, &["a", "b", "c"]).await;
    let (_, page) = get(
        &client,
        &format!("{PATH}?limit=1&labelSelector={}", enc("app=x")),
    )
    .await;
    assert_eq!(names(&page), ["a"]);
    assert!(page["metadata"]["continue"].is_string());
    assert!(page["metadata"].get("remainingItemCount").is_none());
}

#[tokio::test]
async fn a_continue_token_older_than_the_history_is_gone() {
    let s = common::start_with(|b| b.watch_history(3)).await;
    let client = s.admin().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&api, &["a", "b", "c"]).await;
    let (_, first) = get(&client, &format!("{PATH}?limit=1")).await;
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    // Four more changes: the history of three no longer reaches the first page's revision.
    create(&api, &["d", "e"]).await;
    api.delete("b", &DeleteParams::default()).await.unwrap();
    create(&api, &["f"]).await;

    let (code, gone) = get(&client, &format!("{PATH}?limit=1&continue={token}")).await;
    assert_eq!(code, 410);
    assert_eq!(gone["reason"], "Expired");
    assert_eq!(
        gone["message"],
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    );
    // The token in the Status continues at the latest revision, after the same key.
    let inconsistent = gone["metadata"]["continue"].as_str().unwrap();
    let (code, rest) = get(&client, &format!("{PATH}?continue={inconsistent}")).await;
    assert_eq!(code, 200);
    assert_eq!(names(&rest), ["c", "d", "e", "f"]);
}

#[tokio::test]
async fn a_bad_continue_token_is_a_bad_request() {
    let s = common::start().await;
    let client = s.admin().await;
    let (code, e) = get(&client, &format!("{PATH}?continue=%%%")).await;
    assert_eq!(code, 400, "{e}");
    let (code, e) = get(&client, &format!("{PATH}?continue=bm90LWpzb24")).await;
    assert_eq!(code, 400);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid continue token: continue key is not valid: "),
        "{e}"
    );
    let zero = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#);
    let (code, e) = get(&client, &format!("{PATH}?continue={zero}")).await;
    assert_eq!(code, 400);
    assert_eq!(
        e["message"],
        "invalid continue token: continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
    );
}

#[tokio::test]
async fn a_continue_with_a_resource_version_is_a_bad_request() {
    let s = common::start().await;
    let client = s.admin().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&api, &["a", "b", "c"]).await;
    let (code, first) = get(&client, &format!("{PATH}?limit=1")).await;
    assert_eq!(code, 200, "{first}");
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    let rv = first["metadata"]["resourceVersion"].as_str().unwrap();
    let (code, e) = get(
        &client,
        &format!("{PATH}?limit=1&continue={token}&resourceVersion={rv}"),
    )
    .await;
    assert_eq!(code, 400, "{e}");
    assert_eq!(e["reason"], "BadRequest");
    assert_eq!(
        e["message"],
        "specifying resource version is not allowed when using continue"
    );
    // "0" (and no resourceVersion) is allowed with a continue, as kube-apiserver allows it.
    for rv in ["&resourceVersion=0", ""] {
        let (code, page) = get(&client, &format!("{PATH}?limit=1&continue={token}{rv}")).await;
        assert_eq!(code, 200, "{page}");
        assert_eq!(names(&page), ["b"]);
    }
}

#[tokio::test]
async fn kubectl_lists_in_chunks() {
    let s = common::start().await;
    let client = s.admin().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let all: Vec<String> = (0..7).map(|i| format!("cm-{i}")).collect();
    create(&api, &all.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let home = tempfile::tempdir().unwrap();
    let k = kubectl::Kubectl {
        kubeconfig: s.server.admin_kubeconfig(),
        home: home.path(),
    };
    let (ok, out, err) = k
        .run(
            &[
                "get",
                "configmaps",
                "-n",
                "default",
                "--chunk-size=2",
                "-o",
                "name",
                "-v=6",
            ],
            None,
        )
        .await;
    assert!(ok, "{err}");
    let listed: Vec<&str> = out.lines().collect();
    assert_eq!(
        listed,
        all.iter()
            .map(|n| format!("configmap/{n}"))
            .collect::<Vec<_>>()
    );
    // kubectl asked for pages of two and followed the continue tokens.
    assert!(err.contains("limit=2"), "{err}");
    assert!(err.contains("continue="), "{err}");
    // The human-readable output pages through Tables: one header, every row once.
    let (ok, out, err) = k
        .run(
            &[
                "get",
                "configmaps",
                "-n",
                "default",
                "--chunk-size=3",
                "-v=6",
            ],
            None,
        )
        .await;
    assert!(ok, "{err}");
    let mut lines = out.lines();
    assert!(lines.next().unwrap().starts_with("NAME "), "{out}");
    let rows: Vec<&str> = lines
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(rows, all);
    assert_eq!(err.matches("limit=3").count(), 3, "{err}");
    let (ok, out, _) = k
        .run(&["get", "--raw", &format!("{PATH}?limit=3")], None)
        .await;
    assert!(ok);
    let page: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(page["metadata"]["remainingItemCount"], 4);
}
