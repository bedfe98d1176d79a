//! The push path's EndpointSlice: observed (the Service's slices, Lease `registry-storage`, the
//! holder's Node), decided by [`registry_controller_plan::push`], written here.

use api::registry::{NAMESPACE, RegistryStorage};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{ListParams, PostParams};
use registry_controller_plan::push::{self, Action, Owner};
use serde_json::Value;

use crate::Controller;
use crate::error::{Error, kube};

impl Controller {
    /// Converges the slices of Service `registry-push` on [`push::plan`]: EndpointSlice
    /// `registry-push-leader` with the lease holder's node IP while `storage` (RegistryStorage
    /// `registry`) exists, nothing otherwise.
    pub(crate) async fn sync_push(&self, storage: Option<&RegistryStorage>) -> Result<(), Error> {
        let slices: Api<EndpointSlice> = Api::namespaced(self.client.clone(), NAMESPACE);
        let existing: Vec<Value> = slices
            .list(&ListParams::default().labels(&format!(
                "{}={}",
                push::SERVICE_NAME_LABEL,
                push::SERVICE
            )))
            .await
            .map_err(kube("listing the EndpointSlices of Service registry-push"))?
            .items
            .iter()
            .filter_map(|s| serde_json::to_value(s).ok())
            .collect();
        let want = match storage {
            None => None,
            Some(storage) => {
                let owner = Owner {
                    name: storage.metadata.name.clone().unwrap_or_default(),
                    uid: storage.metadata.uid.clone().unwrap_or_default(),
                };
                let family = existing
                    .iter()
                    .find(|s| {
                        s.pointer("/metadata/name").and_then(Value::as_str) == Some(push::SLICE)
                    })
                    .and_then(|s| s.get("addressType"))
                    .and_then(Value::as_str);
                Some(push::slice(self.leader_ip().await?, family, &owner))
            }
        };
        for action in push::plan(&existing, want.as_ref()) {
            match action {
                Action::Delete(name) => {
                    tracing::info!(slice = %name, "deleting an EndpointSlice of Service registry-push");
                    self.delete(&slices, &name, &format!("EndpointSlice {name}"))
                        .await?;
                }
                Action::Create(slice) => {
                    tracing::info!(endpoints = %slice["endpoints"], "EndpointSlice registry-push-leader created");
                    let object = to_slice(slice)?;
                    slices
                        .create(&PostParams::default(), &object)
                        .await
                        .map_err(kube("creating EndpointSlice registry-push-leader"))?;
                }
                Action::Replace(slice) => {
                    tracing::info!(endpoints = %slice["endpoints"], "EndpointSlice registry-push-leader follows the lease");
                    let mut object = to_slice(slice)?;
                    let current = slices
                        .get(push::SLICE)
                        .await
                        .map_err(kube("reading EndpointSlice registry-push-leader"))?;
                    object.metadata.resource_version = current.metadata.resource_version;
                    slices
                        .replace(push::SLICE, &PostParams::default(), &object)
                        .await
                        .map_err(kube("writing EndpointSlice registry-push-leader"))?;
                }
            }
        }
        Ok(())
    }

    /// The node IP of the holder of Lease `registry-storage` (`None`: no live holder, or its
    /// Node is gone or has no address).
    async fn leader_ip(&self) -> Result<Option<std::net::IpAddr>, Error> {
        let Some(holder) = self.storage_lease_holder().await? else {
            return Ok(None);
        };
        let nodes: Api<Node> = Api::all(self.client.clone());
        let node = nodes
            .get_opt(&holder)
            .await
            .map_err(kube(format!("reading Node {holder}")))?;
        let addresses: Vec<push::NodeAddress> = node
            .and_then(|n| n.status)
            .and_then(|s| s.addresses)
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        Ok(push::node_ip(&addresses))
    }
}

fn to_slice(slice: Value) -> Result<EndpointSlice, Error> {
    serde_json::from_value(slice).map_err(|source| Error::Render {
        what: "EndpointSlice registry-push-leader".into(),
        source,
    })
}
