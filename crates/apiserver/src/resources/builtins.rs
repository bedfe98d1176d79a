//! The built-in kinds a module chart can contain, as Kubernetes 1.31 serves them: group,
//! version, plural, scope, short names, categories, subresources and `kubectl get` columns.
//!
//! Objects of these kinds are stored, not run: there is no kubelet or controller manager, so
//! a test that needs a Deployment available sets its `status` as those would.

use super::{Column, ResourceDef, ScalePaths, VersionDef};

/// What the server knows of one built-in kind.
struct Builtin {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    scale: bool,
    generation: bool,
}

const NS: bool = true;
const CLUSTER: bool = false;
const ALL: &[&str] = &["all"];

#[allow(clippy::too_many_arguments, clippy::fn_params_excessive_bools)]
const fn b(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    (status, scale, generation): (bool, bool, bool),
) -> Builtin {
    Builtin {
        group,
        version,
        plural,
        kind,
        namespaced,
        short,
        categories,
        status,
        scale,
        generation,
    }
}

/// (status, scale, generation) of the usual shapes.
const PLAIN: (bool, bool, bool) = (false, false, false);
const STATUS: (bool, bool, bool) = (true, false, false);
const SPEC: (bool, bool, bool) = (false, false, true);
const SPEC_STATUS: (bool, bool, bool) = (true, false, true);
const SCALED: (bool, bool, bool) = (true, true, true);

const RBAC: &str = "rbac.authorization.k8s.io";
const ADMISSION: &str = "admissionregistration.k8s.io";
const NET: &str = "networking.k8s.io";

#[rustfmt::skip]
const BUILTINS: &[Builtin] = &[
    b("", "v1", "namespaces", "Namespace", CLUSTER, &["ns"], &[], STATUS),
    b("", "v1", "nodes", "Node", CLUSTER, &["no"], &[], STATUS),
    b("", "v1", "secrets", "Secret", NS, &[], &[], PLAIN),
    b("", "v1", "configmaps", "ConfigMap", NS, &["cm"], &[], PLAIN),
    b("", "v1", "events", "Event", NS, &["ev"], &[], PLAIN),
    b("", "v1", "services", "Service", NS, &["svc"], ALL, STATUS),
    b("", "v1", "serviceaccounts", "ServiceAccount", NS, &["sa"], &[], PLAIN),
    b("", "v1", "pods", "Pod", NS, &["po"], ALL, STATUS),
    b("", "v1", "endpoints", "Endpoints", NS, &["ep"], &[], PLAIN),
    b("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", NS, &["pvc"], &[], STATUS),
    b("", "v1", "persistentvolumes", "PersistentVolume", CLUSTER, &["pv"], &[], STATUS),
    b("", "v1", "limitranges", "LimitRange", NS, &["limits"], &[], PLAIN),
    b("", "v1", "resourcequotas", "ResourceQuota", NS, &["quota"], &[], STATUS),
    b("events.k8s.io", "v1", "events", "Event", NS, &["ev"], &[], PLAIN),
    b("coordination.k8s.io", "v1", "leases", "Lease", NS, &[], &[], PLAIN),
    b("apps", "v1", "deployments", "Deployment", NS, &["deploy"], ALL, SCALED),
    b("apps", "v1", "daemonsets", "DaemonSet", NS, &["ds"], ALL, SPEC_STATUS),
    b("apps", "v1", "statefulsets", "StatefulSet", NS, &["sts"], ALL, SCALED),
    b("apps", "v1", "replicasets", "ReplicaSet", NS, &["rs"], ALL, SCALED),
    b("apps", "v1", "controllerrevisions", "ControllerRevision", NS, &[], &[], PLAIN),
    b("batch", "v1", "jobs", "Job", NS, &[], ALL, SPEC_STATUS),
    b("batch", "v1", "cronjobs", "CronJob", NS, &["cj"], ALL, SPEC_STATUS),
    b("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", NS, &["pdb"], &[], SPEC_STATUS),
    b("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", NS, &["hpa"], ALL, SPEC_STATUS),
    b(NET, "v1", "ingresses", "Ingress", NS, &["ing"], &[], SPEC_STATUS),
    b(NET, "v1", "ingressclasses", "IngressClass", CLUSTER, &[], &[], SPEC),
    b(NET, "v1", "networkpolicies", "NetworkPolicy", NS, &["netpol"], &[], SPEC),
    b("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", NS, &[], &[], PLAIN),
    b(RBAC, "v1", "roles", "Role", NS, &[], &[], PLAIN),
    b(RBAC, "v1", "rolebindings", "RoleBinding", NS, &[], &[], PLAIN),
    b(RBAC, "v1", "clusterroles", "ClusterRole", CLUSTER, &[], &[], PLAIN),
    b(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", CLUSTER, &[], &[], PLAIN),
    b(ADMISSION, "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", CLUSTER, &[], &["api-extensions"], SPEC),
    b(ADMISSION, "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", CLUSTER, &[], &["api-extensions"], SPEC),
    b("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", CLUSTER, &["pc"], &[], PLAIN),
    b("storage.k8s.io", "v1", "storageclasses", "StorageClass", CLUSTER, &["sc"], &[], PLAIN),
    b("apiregistration.k8s.io", "v1", "apiservices", "APIService", CLUSTER, &[], &["api-extensions"], STATUS),
    b("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", CLUSTER, &["crd", "crds"], &["api-extensions"], SPEC_STATUS),
];

fn col(name: &str, type_: &str, json_path: &str) -> Column {
    Column {
        name: name.into(),
        type_: type_.into(),
        format: String::new(),
        description: String::new(),
        priority: 0,
        json_path: json_path.into(),
    }
}

fn wide(name: &str, json_path: &str) -> Column {
    Column {
        priority: 1,
        ..col(name, "string", json_path)
    }
}

/// The `Age` column every kind has.
pub(crate) fn age() -> Column {
    col("Age", "date", ".metadata.creationTimestamp")
}

fn created_at() -> Column {
    col("Created At", "string", ".metadata.creationTimestamp")
}

fn pod_template_wide() -> [Column; 3] {
    [
        wide("Containers", ".spec.template.spec.containers[*].name"),
        wide("Images", ".spec.template.spec.containers[*].image"),
        wide("Selector", "#selector .spec.selector"),
    ]
}

/// The columns `kubectl get` shows for a built-in kind (the special `#…` paths are evaluated
/// by `table::eval`).
fn columns(group: &str, kind: &str) -> Vec<Column> {
    let int = |n: &str, p: &str| col(n, "integer", p);
    let s = |n: &str, p: &str| col(n, "string", p);
    let mut c = match (group, kind) {
        ("", "Namespace") => vec![s("Status", ".status.phase"), age()],
        ("", "Node") => vec![
            s("Status", "#nodestatus"),
            s("Roles", "#noderoles"),
            age(),
            s("Version", ".status.nodeInfo.kubeletVersion"),
        ],
        ("", "Secret") => vec![s("Type", ".type"), int("Data", "#count .data"), age()],
        ("", "ConfigMap") => vec![int("Data", "#count .data"), age()],
        ("", "Event") => vec![
            s("Last Seen", "#date .lastTimestamp"),
            s("Type", ".type"),
            s("Reason", ".reason"),
            s("Object", "#object .involvedObject"),
            s("Message", ".message"),
        ],
        ("events.k8s.io", "Event") => vec![
            s("Type", ".type"),
            s("Reason", ".reason"),
            s("Object", "#object .regarding"),
            s("Message", ".note"),
            age(),
        ],
        ("", "Service") => vec![
            s("Type", "#or ClusterIP|.spec.type"),
            s("Cluster-IP", "#or <none>|.spec.clusterIP"),
            s("External-IP", "#svcexternal"),
            s("Port(s)", "#svcports"),
            age(),
            wide("Selector", "#map .spec.selector"),
        ],
        ("", "ServiceAccount") => vec![int("Secrets", "#count .secrets"), age()],
        ("", "Pod") => vec![
            s("Ready", "#podready"),
            s("Status", "#podstatus"),
            int("Restarts", "#restarts"),
            age(),
            wide("IP", ".status.podIP"),
            wide("Node", ".spec.nodeName"),
        ],
        ("", "Endpoints") => vec![s("Endpoints", "#endpoints"), age()],
        ("", "PersistentVolumeClaim") => vec![
            s("Status", ".status.phase"),
            s("Volume", ".spec.volumeName"),
            s("Capacity", ".status.capacity.storage"),
            s("Access Modes", "#accessmodes .status.accessModes"),
            s("StorageClass", ".spec.storageClassName"),
            s(
                "VolumeAttributesClass",
                "#or <unset>|.spec.volumeAttributesClassName",
            ),
            age(),
        ],
        ("", "PersistentVolume") => vec![
            s("Capacity", ".spec.capacity.storage"),
            s("Access Modes", "#accessmodes .spec.accessModes"),
            s("Reclaim Policy", ".spec.persistentVolumeReclaimPolicy"),
            s("Status", ".status.phase"),
            s("Claim", "#claim"),
            s("StorageClass", ".spec.storageClassName"),
            s(
                "VolumeAttributesClass",
                "#or <unset>|.spec.volumeAttributesClassName",
            ),
            s("Reason", ".status.reason"),
            age(),
        ],
        ("", "LimitRange") => vec![created_at()],
        ("", "ResourceQuota") => vec![
            age(),
            s("Request", "#quota requests"),
            s("Limit", "#quota limits"),
        ],
        (_, "Lease") => vec![s("Holder", ".spec.holderIdentity"), age()],
        ("apps", "Deployment") => {
            let mut v = vec![
                s("Ready", "#ready"),
                int("Up-to-date", "#or 0|.status.updatedReplicas"),
                int("Available", "#or 0|.status.availableReplicas"),
                age(),
            ];
            v.extend(pod_template_wide());
            v
        }
        ("apps", "DaemonSet") => {
            let mut v = vec![
                int("Desired", "#or 0|.status.desiredNumberScheduled"),
                int("Current", "#or 0|.status.currentNumberScheduled"),
                int("Ready", "#or 0|.status.numberReady"),
                int("Up-to-date", "#or 0|.status.updatedNumberScheduled"),
                int("Available", "#or 0|.status.numberAvailable"),
                s("Node Selector", "#map .spec.template.spec.nodeSelector"),
                age(),
            ];
            v.extend(pod_template_wide());
            v
        }
        ("apps", "StatefulSet") => {
            let mut v = vec![s("Ready", "#ready"), age()];
            v.extend(pod_template_wide().into_iter().take(2));
            v
        }
        ("apps", "ReplicaSet") => {
            let mut v = vec![
                int("Desired", "#or 1|.spec.replicas"),
                int("Current", "#or 0|.status.replicas"),
                int("Ready", "#or 0|.status.readyReplicas"),
                age(),
            ];
            v.extend(pod_template_wide());
            v
        }
        ("apps", "ControllerRevision") => vec![
            s("Controller", "#controller"),
            int("Revision", ".revision"),
            age(),
        ],
        ("batch", "Job") => {
            let mut v = vec![
                s("Status", "#jobstatus"),
                s("Completions", "#completions"),
                s("Duration", "#duration"),
                age(),
            ];
            v.extend(pod_template_wide());
            v
        }
        ("batch", "CronJob") => vec![
            s("Schedule", ".spec.schedule"),
            s("Timezone", "#or <none>|.spec.timeZone"),
            s("Suspend", "#bool .spec.suspend"),
            int("Active", "#count .status.active"),
            s("Last Schedule", "#date .status.lastScheduleTime"),
            age(),
            wide(
                "Containers",
                ".spec.jobTemplate.spec.template.spec.containers[*].name",
            ),
            wide(
                "Images",
                ".spec.jobTemplate.spec.template.spec.containers[*].image",
            ),
            wide("Selector", "#selector .spec.jobTemplate.spec.selector"),
        ],
        ("policy", "PodDisruptionBudget") => vec![
            s("Min Available", "#or N/A|.spec.minAvailable"),
            s("Max Unavailable", "#or N/A|.spec.maxUnavailable"),
            int("Allowed Disruptions", "#or 0|.status.disruptionsAllowed"),
            age(),
        ],
        ("autoscaling", "HorizontalPodAutoscaler") => vec![
            s("Reference", "#reference .spec.scaleTargetRef"),
            s("Targets", "#hpatargets"),
            s("MinPods", "#or 1|.spec.minReplicas"),
            int("MaxPods", ".spec.maxReplicas"),
            int("Replicas", "#or 0|.status.currentReplicas"),
            age(),
        ],
        (NET, "Ingress") => vec![
            s("Class", "#or <none>|.spec.ingressClassName"),
            s("Hosts", "#ingresshosts"),
            s("Address", "#lbaddress"),
            s("Ports", "#ingressports"),
            age(),
        ],
        (NET, "IngressClass") => vec![
            s("Controller", ".spec.controller"),
            s("Parameters", "#reference .spec.parameters"),
            age(),
        ],
        (NET, "NetworkPolicy") => {
            vec![s("Pod-Selector", "#selector .spec.podSelector"), age()]
        }
        ("discovery.k8s.io", "EndpointSlice") => vec![
            s("AddressType", ".addressType"),
            s("Ports", "#or <unset>|.ports[*].port"),
            s("Endpoints", "#or <unset>|.endpoints[*].addresses[*]"),
            age(),
        ],
        (RBAC, "Role" | "ClusterRole") => vec![created_at()],
        (RBAC, "RoleBinding" | "ClusterRoleBinding") => vec![
            s("Role", "#reference .roleRef"),
            age(),
            wide("Users", r#".subjects[?(@.kind=="User")].name"#),
            wide("Groups", r#".subjects[?(@.kind=="Group")].name"#),
            wide("ServiceAccounts", "#serviceaccounts"),
        ],
        (ADMISSION, _) => vec![int("Webhooks", "#count .webhooks"), age()],
        ("scheduling.k8s.io", "PriorityClass") => vec![
            int("Value", ".value"),
            s("Global-Default", "#bool .globalDefault"),
            age(),
            s(
                "PreemptionPolicy",
                "#or PreemptLowerPriority|.preemptionPolicy",
            ),
        ],
        ("storage.k8s.io", "StorageClass") => vec![
            s("Provisioner", ".provisioner"),
            s("ReclaimPolicy", "#or Delete|.reclaimPolicy"),
            s("VolumeBindingMode", "#or Immediate|.volumeBindingMode"),
            s("AllowVolumeExpansion", "#bool .allowVolumeExpansion"),
            age(),
        ],
        ("apiregistration.k8s.io", "APIService") => vec![
            s("Service", "#apiservice"),
            s("Available", "#available"),
            age(),
        ],
        (_, "CustomResourceDefinition") => vec![created_at()],
        _ => vec![age()],
    };
    c.sort_by_key(|c| c.priority);
    c
}

fn def(b: &Builtin) -> ResourceDef {
    ResourceDef {
        group: b.group.into(),
        plural: b.plural.into(),
        singular: b.kind.to_lowercase(),
        kind: b.kind.into(),
        list_kind: format!("{}List", b.kind),
        namespaced: b.namespaced,
        short_names: b.short.iter().map(|s| (*s).to_string()).collect(),
        categories: b.categories.iter().map(|s| (*s).to_string()).collect(),
        versions: vec![VersionDef {
            name: b.version.into(),
            storage: true,
            status: b.status,
            scale: b.scale.then(ScalePaths::workload),
            schema: None,
            columns: columns(b.group, b.kind),
            deprecation_warning: None,
        }],
        generation: b.generation,
        custom: false,
        conversion: None,
    }
}

/// Every built-in resource.
pub(crate) fn all() -> impl Iterator<Item = ResourceDef> {
    BUILTINS.iter().map(def)
}

/// Whether `group` is one of Kubernetes' own API groups.
pub(crate) fn is_builtin_group(group: &str) -> bool {
    BUILTINS.iter().any(|b| b.group == group)
}
