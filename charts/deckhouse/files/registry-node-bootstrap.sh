#!/bin/bash
# Prepares a node for the registry agent (what Deckhouse's bashible does), idempotently: a second
# run changes nothing and restarts nothing.
#   1. installs the registry CA into the node's trust store (REGISTRY_CA_FILE, optional);
#   2. writes the agent's static pod manifest (AGENT_MANIFEST, default: registry-agent.yaml next
#      to this script) into /etc/kubernetes/manifests;
#   3. points containerd's CRI registry at the drop-in directory the agent writes
#      (config_path = "/etc/containerd/registry.d"): containerd 1.x (config version 2,
#      plugin "io.containerd.grpc.v1.cri") and 2.x (version 3, "io.containerd.cri.v1.images"),
#      and restarts containerd only when its configuration changed.
# D8_ROOT prefixes every path the script writes (for tests); CONTAINERD_CONFIG names
# containerd's file; CONTAINERD_REGISTRY_DIR the drop-in directory (default
# /etc/containerd/registry.d, the agent's --containerd-registry-dir; written into containerd's
# file as given); D8_NO_RESTART=1 skips the restart. Prints one line per change.
set -euo pipefail

root="${D8_ROOT:-}"
here="$(cd "$(dirname "$0")" && pwd)"
config="${CONTAINERD_CONFIG:-$root/etc/containerd/config.toml}"
dropin="${CONTAINERD_REGISTRY_DIR:-/etc/containerd/registry.d}"
containerd_changed=0

# install_file SRC DST MODE: copies when the content differs; returns 0 when it changed.
install_file() {
    if [ -f "$2" ] && cmp -s "$1" "$2"; then
        return 1
    fi
    mkdir -p "$(dirname "$2")"
    install -m "$3" "$1" "$2.d8-tmp"
    mv -f "$2.d8-tmp" "$2"
    echo "changed: $2"
}

# 1. The CA.
if [ -n "${REGISTRY_CA_FILE:-}" ]; then
    if install_file "$REGISTRY_CA_FILE" "$root/usr/local/share/ca-certificates/d8-registry-ca.crt" 0644 \
        && [ -z "$root" ] && command -v update-ca-certificates >/dev/null; then
        update-ca-certificates >/dev/null
    fi
fi

# 2. The agent's static pod.
manifest="${AGENT_MANIFEST:-$here/registry-agent.yaml}"
mkdir -p "$root$dropin"
install_file "$manifest" "$root/etc/kubernetes/manifests/registry-agent.yaml" 0600 || true

# 3. containerd's config_path.
mkdir -p "$(dirname "$config")"
[ -f "$config" ] || printf 'version = 2\n' >"$config"
if grep -Eq '^[[:space:]]*version[[:space:]]*=[[:space:]]*3' "$config"; then
    section='[plugins."io.containerd.cri.v1.images".registry]'
else
    section='[plugins."io.containerd.grpc.v1.cri".registry]'
fi
# Sets config_path in $section (replacing the value there, adding the key at the end of the
# table, or appending the table); quotes in headers are compared as double quotes, so
# containerd 2's single-quoted headers match.
awk -v section="$section" -v value="$dropin" '
    function header(line) { gsub(/\047/, "\"", line); gsub(/^[ \t]+|[ \t]+$/, "", line); return line }
    function emit() { print indent "config_path = \"" value "\""; done = 1 }
    /^[ \t]*\[/ {
        if (inside && !done) emit()
        inside = (header($0) == section)
        if (inside) { found = 1; match($0, /^[ \t]*/); indent = substr($0, 1, RLENGTH) "  " }
        print; next
    }
    inside && /^[ \t]*config_path[ \t]*=/ { if (!done) emit(); next }
    { print }
    END {
        if (inside && !done) emit()
        if (!found) { print ""; print section; indent = "  "; emit() }
    }' "$config" >"$config.d8-tmp"
if cmp -s "$config" "$config.d8-tmp"; then
    rm -f "$config.d8-tmp"
else
    mv -f "$config.d8-tmp" "$config"
    echo "changed: $config"
    containerd_changed=1
fi

if [ "$containerd_changed" = 1 ] && [ -z "$root" ] && [ "${D8_NO_RESTART:-}" != 1 ]; then
    systemctl restart containerd
    echo "restarted: containerd"
fi
