//! The push path to the cache leader: Service `registry-push` (rendered by the chart, without a
//! selector, port 5001 → the replicas' write listener 5003) sends to EndpointSlice
//! `registry-push-leader`, which the registry controller keeps holding **only the node IP of
//! the holder of Lease `registry-storage`** — pushes reach the leader and nobody else, and the
//! followers replicate from it. No leader (no holder, or its lease expired, or a holder whose
//! Node has no address) → no endpoint, so pushes are refused rather than landing on a follower.
//! The slice's address family follows the leader's IP: an address type cannot change, so a
//! family change recreates the slice. Any other slice of the Service is deleted. The slice is
//! owned by RegistryStorage `registry`, and exists only while it does (the cache on).
//!
//! Pure: the controller reads the slices, the Lease and the Node, and carries out [`plan`].

use std::net::IpAddr;

use api::registry::NAMESPACE;
use serde_json::{Value, json};

/// The Service in front of the leader's write listener (the chart renders it).
pub const SERVICE: &str = "registry-push";
/// The EndpointSlice the controller keeps.
pub const SLICE: &str = "registry-push-leader";
/// Label naming the Service of a slice (Kubernetes').
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Label naming who manages a slice (Kubernetes'), and the controller's value.
pub const MANAGED_BY: (&str, &str) = (
    "endpointslice.kubernetes.io/managed-by",
    "registry-controller.deckhouse.io",
);
/// Port name of Service [`SERVICE`] (the slice's port carries the same name).
pub const PORT_NAME: &str = "push";
/// The replicas' write listener (`--write-address`), the slice's port.
pub const WRITE_PORT: u16 = 5003;

/// A Node's `status.addresses` entry: (`type`, `address`).
pub type NodeAddress = (String, String);

/// The address pushes go to: the first `InternalIP` of the leader's Node that is an IP, else
/// its first `ExternalIP` (a node without an internal network).
pub fn node_ip(addresses: &[NodeAddress]) -> Option<IpAddr> {
    ["InternalIP", "ExternalIP"].iter().find_map(|kind| {
        addresses
            .iter()
            .filter(|(t, _)| t == kind)
            .find_map(|(_, a)| a.parse().ok())
    })
}

/// The slice's `addressType` for `ip`.
pub fn address_type(ip: IpAddr) -> &'static str {
    match ip {
        IpAddr::V4(_) => "IPv4",
        IpAddr::V6(_) => "IPv6",
    }
}

/// The owner of the slice: RegistryStorage `registry` (name, uid).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
}

/// The EndpointSlice [`SLICE`] for `leader` (no endpoint without one). Without a leader the
/// slice keeps `family` (the existing slice's address type; IPv4 when there is none). The owner
/// reference has no `blockOwnerDeletion`: nothing needs RegistryStorage's deletion to wait for
/// the slice, and setting it would need `update` on the owner's finalizers wherever
/// OwnerReferencesPermissionEnforcement is on.
pub fn slice(leader: Option<IpAddr>, family: Option<&str>, owner: &Owner) -> Value {
    let address_type = leader.map(address_type).or(family).unwrap_or("IPv4");
    let endpoints: Vec<Value> = leader
        .map(|ip| json!({"addresses": [ip.to_string()], "conditions": {"ready": true}}))
        .into_iter()
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": SLICE,
            "namespace": NAMESPACE,
            "labels": {SERVICE_NAME_LABEL: SERVICE, MANAGED_BY.0: MANAGED_BY.1, "app": "registry-storage"},
            "ownerReferences": [{
                "apiVersion": "deckhouse.io/v1alpha1",
                "kind": "RegistryStorage",
                "name": owner.name,
                "uid": owner.uid,
                "controller": true,
            }],
        },
        "addressType": address_type,
        "endpoints": endpoints,
        "ports": [{"name": PORT_NAME, "port": WRITE_PORT, "protocol": "TCP"}],
    })
}

/// What to do to one slice.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Create the slice.
    Create(Value),
    /// Replace the existing [`SLICE`] (same address type) with this one.
    Replace(Value),
    /// Delete a slice by name (a foreign slice of the Service, ours when the cache is off, or
    /// ours before recreating it with another address type).
    Delete(String),
}

/// The steps from `existing` (every EndpointSlice labelled with Service [`SERVICE`]) to the
/// slice the cluster must have: `want` (from [`slice`]; `None` while there is no
/// RegistryStorage). Other slices go first; a slice already as wanted is left alone.
pub fn plan(existing: &[Value], want: Option<&Value>) -> Vec<Action> {
    let name = |s: &Value| {
        s.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut actions: Vec<Action> = existing
        .iter()
        .filter(|s| name(s) != SLICE)
        .map(|s| Action::Delete(name(s)))
        .collect();
    let ours = existing.iter().find(|s| name(s) == SLICE);
    match (ours, want) {
        (None, None) => {}
        (Some(_), None) => actions.push(Action::Delete(SLICE.to_owned())),
        (None, Some(want)) => actions.push(Action::Create(want.clone())),
        (Some(current), Some(want)) => {
            if current.get("addressType") != want.get("addressType") {
                actions.push(Action::Delete(SLICE.to_owned()));
                actions.push(Action::Create(want.clone()));
            } else if !matches(current, want) {
                actions.push(Action::Replace(want.clone()));
            }
        }
    }
    actions
}

/// Whether `existing` already is `want` in what the controller writes (labels, owner,
/// endpoints, ports); what the API server adds is not compared.
fn matches(existing: &Value, want: &Value) -> bool {
    let endpoints = |v: &Value| {
        v.get("endpoints")
            .and_then(Value::as_array)
            .map(|e| {
                e.iter()
                    .map(|e| {
                        (
                            e.get("addresses").cloned(),
                            e.pointer("/conditions/ready").cloned(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let owner = |v: &Value| v.pointer("/metadata/ownerReferences/0/uid").cloned();
    let ports = |v: &Value| {
        v.get("ports")
            .and_then(Value::as_array)
            .map(|p| {
                p.iter()
                    .map(|p| (p.get("name").cloned(), p.get("port").cloned()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    existing.pointer("/metadata/labels") == want.pointer("/metadata/labels")
        && owner(existing) == owner(want)
        && endpoints(existing) == endpoints(want)
        && ports(existing) == ports(want)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Owner {
        Owner {
            name: "registry".into(),
            uid: "u-1".into(),
        }
    }

    fn addr(t: &str, a: &str) -> NodeAddress {
        (t.to_owned(), a.to_owned())
    }

    #[test]
    fn the_leaders_internal_ip_first_then_its_external_one() {
        let table: [(Vec<NodeAddress>, Option<&str>); 5] = [
            (vec![], None),
            (vec![addr("Hostname", "master-0")], None),
            (
                vec![
                    addr("ExternalIP", "203.0.113.5"),
                    addr("InternalIP", "10.0.0.4"),
                ],
                Some("10.0.0.4"),
            ),
            (vec![addr("ExternalIP", "203.0.113.5")], Some("203.0.113.5")),
            (
                vec![
                    addr("InternalIP", "not-an-ip"),
                    addr("InternalIP", "fd00::4"),
                ],
                Some("fd00::4"),
            ),
        ];
        for (addresses, want) in table {
            assert_eq!(
                node_ip(&addresses),
                want.map(|w| w.parse().unwrap()),
                "{addresses:?}"
            );
        }
    }

    #[test]
    fn the_slice_holds_the_leader_alone_and_nothing_without_one() {
        let v4 = slice(Some("10.0.0.4".parse().unwrap()), None, &owner());
        assert_eq!(v4["addressType"], "IPv4");
        assert_eq!(
            v4["endpoints"],
            json!([{"addresses": ["10.0.0.4"], "conditions": {"ready": true}}])
        );
        assert_eq!(
            v4["ports"],
            json!([{"name": "push", "port": 5003, "protocol": "TCP"}])
        );
        assert_eq!(
            v4["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
            "registry-controller.deckhouse.io"
        );
        assert_eq!(
            v4["metadata"]["labels"]["kubernetes.io/service-name"],
            "registry-push"
        );
        assert_eq!(
            v4["metadata"]["ownerReferences"][0]["kind"],
            "RegistryStorage"
        );
        assert_eq!(v4["metadata"]["ownerReferences"][0]["uid"], "u-1");
        let v6 = slice(Some("fd00::4".parse().unwrap()), Some("IPv4"), &owner());
        assert_eq!(v6["addressType"], "IPv6");
        for (family, want) in [(None, "IPv4"), (Some("IPv6"), "IPv6")] {
            let none = slice(None, family, &owner());
            assert_eq!(none["endpoints"], json!([]));
            assert_eq!(none["addressType"], want, "{family:?}");
        }
    }

    #[test]
    fn the_plan_creates_follows_recreates_and_deletes() {
        let at = |ip: &str| slice(Some(ip.parse().unwrap()), None, &owner());
        let mut served = at("10.0.0.4");
        served["metadata"]["uid"] = "slice-uid".into();
        served["metadata"]["resourceVersion"] = "7".into();
        let mut foreign = at("10.0.0.9");
        foreign["metadata"]["name"] = "registry-push-abcde".into();
        let other_owner = slice(
            Some("10.0.0.4".parse().unwrap()),
            None,
            &Owner {
                name: "registry".into(),
                uid: "u-2".into(),
            },
        );
        type Case = (&'static str, Vec<Value>, Option<Value>, Vec<Action>);
        let table: Vec<Case> = vec![
            ("nothing, nothing wanted", vec![], None, vec![]),
            (
                "none yet",
                vec![],
                Some(at("10.0.0.4")),
                vec![Action::Create(at("10.0.0.4"))],
            ),
            (
                "as wanted",
                vec![served.clone()],
                Some(at("10.0.0.4")),
                vec![],
            ),
            (
                "the lease moved",
                vec![served.clone()],
                Some(at("10.0.0.5")),
                vec![Action::Replace(at("10.0.0.5"))],
            ),
            (
                "no leader",
                vec![served.clone()],
                Some(slice(None, Some("IPv4"), &owner())),
                vec![Action::Replace(slice(None, Some("IPv4"), &owner()))],
            ),
            (
                "family change",
                vec![served.clone()],
                Some(at("fd00::5")),
                vec![Action::Delete(SLICE.into()), Action::Create(at("fd00::5"))],
            ),
            (
                "a new RegistryStorage",
                vec![served.clone()],
                Some(other_owner.clone()),
                vec![Action::Replace(other_owner)],
            ),
            (
                "a foreign slice",
                vec![foreign, served.clone()],
                Some(at("10.0.0.4")),
                vec![Action::Delete("registry-push-abcde".into())],
            ),
            (
                "the cache off",
                vec![served],
                None,
                vec![Action::Delete(SLICE.into())],
            ),
        ];
        for (case, existing, want, actions) in table {
            assert_eq!(plan(&existing, want.as_ref()), actions, "{case}");
        }
    }
}
