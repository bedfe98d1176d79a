//! What an Application's hooks patched, kept in its namespace so that it survives a restart
//! of the controller: the compacted values patch in the Secret `package-hooks.<name>`
//! (`patch.json`, RFC 6902 operations). A Secret, as Helm keeps a release's values: hooks
//! often generate credentials.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use module_plan::values::{Operation, ValuesPatch};
use serde_json::{Map, Value, json};

use crate::Error;

/// The key of the patch in the Secret.
pub const KEY: &str = "patch.json";
/// Label: the Application the Secret keeps the hooks' values of.
pub const LABEL_APPLICATION: &str = "packages.deckhouse.io/application";

/// The Secret of Application `name`.
pub fn secret_name(name: &str) -> String {
    format!("package-hooks.{name}")
}

/// The operations as the JSON patch document kept.
pub fn encode(ops: &[Operation]) -> Vec<u8> {
    let doc: Vec<Value> = ops
        .iter()
        .map(|o| {
            let mut m = Map::new();
            m.insert("op".into(), json!(o.op));
            m.insert("path".into(), json!(o.path));
            if let Some(v) = &o.value {
                m.insert("value".into(), v.clone());
            }
            if let Some(f) = &o.from {
                m.insert("from".into(), json!(f));
            }
            Value::Object(m)
        })
        .collect();
    serde_json::to_vec(&doc).unwrap_or_default()
}

/// The operations of a kept document.
pub fn decode(data: &[u8]) -> Result<Vec<Operation>, String> {
    ValuesPatch::parse(data).map(|p| p.operations)
}

/// The patch kept for Application `namespace/name` (empty when there is none).
pub async fn load(client: &Client, namespace: &str, name: &str) -> Result<Vec<Operation>, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api
        .get_opt(&secret_name(name))
        .await
        .map_err(|e| Error::kube("get the Secret of the package hooks' values", e))?;
    let Some(data) = secret
        .and_then(|s| s.data)
        .and_then(|d| d.get(KEY).cloned())
    else {
        return Ok(Vec::new());
    };
    decode(&data.0).map_err(|e| Error::Install(format!("Secret {}: {e}", secret_name(name))))
}

/// Keeps `ops` for Application `namespace/name`.
pub async fn save(
    client: &Client,
    namespace: &str,
    name: &str,
    ops: &[Operation],
) -> Result<(), Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(secret_name(name)),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                ("heritage".to_owned(), "deckhouse".to_owned()),
                (LABEL_APPLICATION.to_owned(), name.to_owned()),
            ])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(KEY.to_owned(), ByteString(encode(ops)))])),
        type_: Some("Opaque".to_owned()),
        ..Default::default()
    };
    api.patch(
        &secret_name(name),
        &PatchParams::apply("deckhouse").force(),
        &Patch::Apply(&secret),
    )
    .await
    .map_err(|e| Error::kube("keep the package hooks' values", e))?;
    Ok(())
}

/// Forgets what the hooks of Application `namespace/name` patched.
pub async fn delete(client: &Client, namespace: &str, name: &str) -> Result<(), Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    match api
        .delete(&secret_name(name), &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(Error::kube("delete the package hooks' values", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_round_trip() {
        let ops = vec![
            Operation::add("/echo/boots", json!(2)),
            Operation::remove("/echo/old"),
            Operation {
                op: "move".into(),
                path: "/echo/b".into(),
                value: None,
                from: Some("/echo/a".into()),
            },
        ];
        let bytes = encode(&ops);
        assert_eq!(
            serde_json::from_slice::<Value>(&bytes).unwrap(),
            json!([
                {"op": "add", "path": "/echo/boots", "value": 2},
                {"op": "remove", "path": "/echo/old"},
                {"op": "move", "path": "/echo/b", "from": "/echo/a"},
            ])
        );
        assert_eq!(decode(&bytes), Ok(ops));
        assert_eq!(decode(b""), Ok(Vec::new()));
        assert!(decode(b"{not json").is_err());
        assert_eq!(secret_name("shop"), "package-hooks.shop");
    }
}
