//! A container of the rendered chart as a kubelet would start it on a node: the arguments with
//! `$(VAR)` expanded from the container's env, and every path under a `volumeMounts` entry
//! mapped to the directory standing for that volume on the node. Pure: manifests in, command
//! lines out.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

/// The documents of a rendering (`---`-separated YAML), comments and empty ones left out.
pub(crate) fn documents(rendered: &str) -> Vec<Value> {
    rendered
        .split("\n---")
        .filter_map(|doc| serde_saphyr::from_str::<Value>(doc).ok())
        .filter(Value::is_object)
        .collect()
}

/// The object of `kind` named `name`.
pub(crate) fn object<'a>(docs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

/// The pod spec of a workload (`spec.template.spec`) or of a Pod (`spec`).
pub(crate) fn pod_spec(object: &Value) -> &Value {
    if object["kind"] == "Pod" {
        &object["spec"]
    } else {
        &object["spec"]["template"]["spec"]
    }
}

/// A container's command line on a node.
#[derive(Debug, PartialEq)]
pub(crate) struct NodeCommand {
    /// The arguments, expanded and mapped.
    pub(crate) args: Vec<String>,
    /// The container's environment, `fieldRef`s resolved.
    pub(crate) env: BTreeMap<String, String>,
    /// `mountPath` → the node directory standing for its volume, longest path first.
    pub(crate) mounts: Vec<(String, PathBuf)>,
}

/// `container` of `pod` on a node: `fields` answers `fieldRef.fieldPath`s (`spec.nodeName`,
/// `status.podIP`), `volumes` gives each volume's directory. An env var, volume or path the
/// node does not provide is an error naming it, so a chart change the node cannot follow
/// fails loudly.
pub(crate) fn node_command(
    pod: &Value,
    container: &str,
    fields: &BTreeMap<&str, String>,
    volumes: &BTreeMap<&str, PathBuf>,
) -> Result<NodeCommand, String> {
    let c = pod["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == container))
        .ok_or_else(|| format!("no container {container:?}"))?;
    let mut env = BTreeMap::new();
    for var in c["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap_or_default().to_owned();
        let value = if let Some(value) = var["value"].as_str() {
            value.to_owned()
        } else if let Some(path) = var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            fields
                .get(path)
                .cloned()
                .ok_or_else(|| format!("env {name}: field {path} is not provided"))?
        } else {
            return Err(format!(
                "env {name}: unsupported source {}",
                var["valueFrom"]
            ));
        };
        env.insert(name, value);
    }
    let mut mounts = Vec::new();
    for mount in c["volumeMounts"].as_array().into_iter().flatten() {
        let volume = mount["name"].as_str().unwrap_or_default();
        let dir = volumes
            .get(volume)
            .ok_or_else(|| format!("volume {volume:?} has no directory on the node"))?;
        mounts.push((
            mount["mountPath"].as_str().unwrap_or_default().to_owned(),
            dir.clone(),
        ));
    }
    mounts.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    let mut args = Vec::new();
    for arg in c["args"].as_array().into_iter().flatten() {
        let arg = expand(arg.as_str().unwrap_or_default(), &env);
        args.push(map_arg(&arg, &mounts)?);
    }
    Ok(NodeCommand { args, env, mounts })
}

/// Kubernetes' `$(VAR)` expansion: a defined variable is replaced, `$$` is a literal `$`, an
/// undefined reference stays as written.
pub(crate) fn expand(arg: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some(inner) = tail.strip_prefix("$(")
            && let Some(end) = inner.find(')')
            && let Some(value) = env.get(&inner[..end])
        {
            out.push_str(value);
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// An argument whose value (after `=`, or the whole argument) is an absolute path: the path
/// under the mount holding it. A path under no mount is an error: the container would find
/// nothing there (or, with a read-only root, could not write).
pub(crate) fn map_arg(arg: &str, mounts: &[(String, PathBuf)]) -> Result<String, String> {
    let (flag, value) = match arg.split_once('=') {
        Some((flag, value)) if flag.starts_with("--") => (Some(flag), value),
        _ => (None, arg),
    };
    if !value.starts_with('/') {
        return Ok(arg.to_owned());
    }
    let mapped = map_path(value, mounts)
        .ok_or_else(|| format!("{arg}: {value} is under no volume mount"))?;
    Ok(match flag {
        Some(flag) => format!("{flag}={}", mapped.display()),
        None => mapped.display().to_string(),
    })
}

/// `path` under the longest mount that holds it (whole path components only).
pub(crate) fn map_path(path: &str, mounts: &[(String, PathBuf)]) -> Option<PathBuf> {
    mounts.iter().find_map(|(mount, dir)| {
        let rest = path.strip_prefix(mount.trim_end_matches('/'))?;
        if rest.is_empty() {
            Some(dir.clone())
        } else {
            rest.strip_prefix('/').map(|rest| dir.join(rest))
        }
    })
}

/// `(flag, default)` of every flag whose default (`[default: …]` in clap's `--help`) is an
/// absolute path: where the binary reads or writes when the manifest does not say.
pub(crate) fn path_defaults(help: &str) -> Vec<(String, String)> {
    let mut flag = None;
    let mut out = Vec::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        if let Some(at) = trimmed.find("--")
            && (at == 0 || trimmed.starts_with('-'))
        {
            let name: String = trimmed[at..]
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '=')
                .collect();
            flag = Some(name);
        }
        if let Some(start) = line.find("[default: ")
            && let Some(f) = &flag
        {
            let value = &line[start + "[default: ".len()..];
            let value = value.split(']').next().unwrap_or_default();
            if value.starts_with('/') {
                out.push((f.clone(), value.to_owned()));
            }
        }
    }
    out
}

/// The flags of `defaults` the arguments do not set, mapped to the node's directories.
pub(crate) fn default_paths(
    args: &[String],
    defaults: &[(String, String)],
    mounts: &[(String, PathBuf)],
) -> Result<Vec<String>, String> {
    defaults
        .iter()
        .filter(|(flag, _)| {
            !args
                .iter()
                .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
        })
        .map(|(flag, path)| map_arg(&format!("{flag}={path}"), mounts))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn expansion_follows_kubernetes() {
        let vars = env(&[("POD_IP", "10.0.0.4"), ("N", "x")]);
        for (arg, expected) in [
            (
                "--read-address=$(POD_IP):5001",
                "--read-address=10.0.0.4:5001",
            ),
            ("$(N)$(N)", "xx"),
            ("$$(POD_IP)", "$(POD_IP)"),
            ("$(UNSET)", "$(UNSET)"),
            ("cost $5", "cost $5"),
            ("$(POD_IP", "$(POD_IP"),
            ("plain", "plain"),
        ] {
            assert_eq!(expand(arg, &vars), expected, "{arg}");
        }
    }

    #[test]
    fn paths_map_under_the_longest_mount() {
        let mounts = vec![
            (
                "/etc/kubernetes/registry-agent".to_owned(),
                PathBuf::from("/n/agent"),
            ),
            ("/etc".to_owned(), PathBuf::from("/n/etc")),
        ];
        for (arg, expected) in [
            (
                "--kubeconfig=/etc/kubernetes/registry-agent/kubeconfig",
                Ok("--kubeconfig=/n/agent/kubeconfig"),
            ),
            ("--x=/etc/hosts", Ok("--x=/n/etc/hosts")),
            ("--x=/etcetera", Err(())),
            ("--dir=/etc", Ok("--dir=/n/etc")),
            ("/etc/a", Ok("/n/etc/a")),
            ("--listen=127.0.0.1:5001", Ok("--listen=127.0.0.1:5001")),
            ("registry", Ok("registry")),
            ("--data=/opt/x", Err(())),
        ] {
            assert_eq!(
                map_arg(arg, &mounts).map_err(|_| ()),
                expected.map(str::to_owned),
                "{arg}"
            );
        }
    }

    #[test]
    fn path_defaults_come_from_long_and_short_help() {
        let help = "Options:
      --listen-address <LISTEN_ADDRESS>
          Where it listens

          [default: 127.0.0.1:5001]

      --pki-dir <PKI_DIR>
          The PKI

          [default: /etc/kubernetes/registry-agent/pki]

  -n, --trust-dir <DIR>  Extra CAs [default: /opt/ca]
      --interval <I>  How often [default: 30s]
";
        assert_eq!(
            path_defaults(help),
            vec![
                (
                    "--pki-dir".to_owned(),
                    "/etc/kubernetes/registry-agent/pki".to_owned()
                ),
                ("--trust-dir".to_owned(), "/opt/ca".to_owned()),
            ]
        );
    }

    #[test]
    fn defaults_set_by_the_manifest_are_left_alone_and_the_rest_must_be_mounted() {
        let mounts = vec![("/etc/k".to_owned(), PathBuf::from("/n/k"))];
        let defaults = vec![
            ("--pki-dir".to_owned(), "/etc/k/pki".to_owned()),
            ("--kubeconfig".to_owned(), "/etc/k/kubeconfig".to_owned()),
        ];
        let args = vec!["--kubeconfig=/n/k/kubeconfig".to_owned()];
        assert_eq!(
            default_paths(&args, &defaults, &mounts).unwrap(),
            vec!["--pki-dir=/n/k/pki".to_owned()]
        );
        let outside = vec![("--cache".to_owned(), "/var/lib/x".to_owned())];
        let error = default_paths(&args, &outside, &mounts).unwrap_err();
        assert!(
            error.contains("/var/lib/x is under no volume mount"),
            "{error}"
        );
    }

    #[test]
    fn a_volume_the_node_lacks_is_named() {
        let pod: Value = serde_json::json!({"containers": [{
            "name": "c", "args": ["--a=/data/x"],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "new", "mountPath": "/new"}],
        }]});
        let volumes = BTreeMap::from([("data", PathBuf::from("/n/data"))]);
        let error = node_command(&pod, "c", &BTreeMap::new(), &volumes).unwrap_err();
        assert_eq!(error, "volume \"new\" has no directory on the node");
    }

    #[test]
    fn env_from_fields_feeds_the_arguments() {
        let pod: Value = serde_json::json!({"containers": [{
            "name": "c",
            "args": ["--addr=$(POD_IP):5001", "--data=/data"],
            "env": [
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "MODE", "value": "x"},
            ],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        }]});
        let fields = BTreeMap::from([("status.podIP", "10.77.0.4".to_owned())]);
        let volumes = BTreeMap::from([("data", PathBuf::from("/n/data"))]);
        let command = node_command(&pod, "c", &fields, &volumes).unwrap();
        assert_eq!(command.args, ["--addr=10.77.0.4:5001", "--data=/n/data"]);
        assert_eq!(command.env["MODE"], "x");
        let missing = node_command(&pod, "c", &BTreeMap::new(), &volumes).unwrap_err();
        assert_eq!(missing, "env POD_IP: field status.podIP is not provided");
    }
}
