//! Several "machines" on one: network namespaces joined by veth pairs to a bridge, as the nodes
//! of a cluster are joined by their network.
//!
//! A [`Network`] is a namespace of its own holding the bridge (the "switch"), so nothing is
//! added to the host's namespace: every run has its own isolated `10.77.0.0/24`, and parallel
//! runs cannot collide. Each [`Node`] is a namespace with its own loopback (its own
//! `127.0.0.1:5001`) and `eth0` at `10.77.0.N`. Names are unique per run
//! (`d8t<pid>x<n>-<node>`); namespaces are deleted when the network is dropped (a failing test
//! included), and those left behind by a run that was killed are deleted by the next one.
//!
//! Needs root (`ip netns`); [`Network::unavailable`] says why it cannot run, for a test to skip
//! with that message.

use std::ffi::OsStr;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::process::require_tool;

static RUNS: AtomicU32 = AtomicU32::new(0);

/// The bridge network and every namespace made on it; all deleted on drop.
#[derive(Debug)]
pub struct Network {
    prefix: String,
    lan: String,
    nodes: Vec<String>,
}

/// One node: a network namespace with `eth0` on the bridge.
#[derive(Clone, Debug)]
pub struct Node {
    name: String,
    netns: String,
    lan: String,
    port: String,
    ip: Ipv4Addr,
}

impl Network {
    /// `Some(reason)` when this process cannot create network namespaces.
    pub fn unavailable() -> Option<String> {
        if !rustix::process::geteuid().is_root() {
            return Some(
                "network namespaces need root (`ip netns add`): run the test as root".to_owned(),
            );
        }
        None
    }

    /// Creates the bridge namespace. Panics (with `ip`'s message) when that fails.
    pub fn create() -> Self {
        require_tool("ip", "iproute2");
        remove_leftovers();
        let prefix = format!(
            "d8t{}x{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        );
        let lan = format!("{prefix}-lan");
        ip(&["netns", "add", &lan]);
        let network = Self {
            prefix,
            lan: lan.clone(),
            nodes: Vec::new(),
        };
        ip(&["-n", &lan, "link", "set", "lo", "up"]);
        ip(&["-n", &lan, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &lan, "link", "set", "br0", "up"]);
        network
    }

    /// Adds node `name` at `10.77.0.<2 + its index>`: a namespace with loopback up and `eth0`
    /// on the bridge.
    pub fn node(&mut self, name: &str) -> Node {
        let index = self.nodes.len();
        let netns = format!("{}-{name}", self.prefix);
        ip(&["netns", "add", &netns]);
        self.nodes.push(netns.clone());
        let node = Node {
            name: name.to_owned(),
            netns: netns.clone(),
            lan: self.lan.clone(),
            port: format!("p{index}"),
            ip: Ipv4Addr::new(
                10,
                77,
                0,
                2 + u8::try_from(index).expect("at most 250 nodes"),
            ),
        };
        ip(&["-n", &netns, "link", "set", "lo", "up"]);
        ip(&[
            "-n", &self.lan, "link", "add", &node.port, "type", "veth", "peer", "name", "eth0",
            "netns", &netns,
        ]);
        ip(&["-n", &self.lan, "link", "set", &node.port, "master", "br0"]);
        ip(&["-n", &self.lan, "link", "set", &node.port, "up"]);
        ip(&[
            "-n",
            &netns,
            "addr",
            "add",
            &format!("{}/24", node.ip),
            "dev",
            "eth0",
        ]);
        ip(&["-n", &netns, "link", "set", "eth0", "up"]);
        node
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for netns in self.nodes.iter().chain([&self.lan]) {
            let _ = quiet_ip(&["netns", "del", netns]);
        }
    }
}

impl Node {
    /// The node's name as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace's name (`ip netns exec NAME …`).
    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// The address of its `eth0`.
    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// `program` run inside the namespace (`ip netns exec NAME program`; `ip` execs it, so the
    /// child's pid is the program's).
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(require_tool("ip", "iproute2"));
        command.args(["netns", "exec", &self.netns]).arg(program);
        command
    }

    /// Cuts the node off the network: its bridge port goes down, so packets to and from it are
    /// dropped (no reset: peers see silence, as with a pulled cable or a dead switch port).
    pub fn cut(&self) {
        ip(&["-n", &self.lan, "link", "set", &self.port, "down"]);
    }

    /// Puts the node back on the network.
    pub fn restore(&self) {
        ip(&["-n", &self.lan, "link", "set", &self.port, "up"]);
    }

    /// Limits what the node sends to `rate` (tc's units, e.g. `16mbit`): a slower link, so that
    /// a transfer from it lasts long enough to be interrupted.
    pub fn limit_egress(&self, rate: &str) {
        let status = self
            .command(require_tool("tc", "iproute2"))
            .args([
                "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "64kb",
                "latency", "200ms",
            ])
            .status()
            .expect("run tc");
        assert!(status.success(), "tc qdisc on {}: {status}", self.netns);
    }

    /// Runs `f` on a thread that joined the namespace: sockets it creates belong to the node.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.netns);
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let file =
                        std::fs::File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
                    rustix::thread::move_into_link_name_space(
                        file.as_fd(),
                        Some(rustix::thread::LinkNameSpaceType::Network),
                    )
                    .unwrap_or_else(|e| panic!("setns {path}: {e}"));
                    f()
                })
                .join()
                .expect("thread in the namespace")
        })
    }

    /// Listens on `<node ip>:port` inside the node and relays every connection to `target` in
    /// the test's own namespace — how a service on the host (a registry, say) appears on the
    /// node's network. Stops when the returned handle is dropped.
    pub async fn expose(&self, port: u16, target: SocketAddr) -> Exposed {
        let address = SocketAddr::from((self.ip, port));
        let listener = self
            .run(|| {
                let listener = std::net::TcpListener::bind(address)?;
                listener.set_nonblocking(true)?;
                Ok::<_, std::io::Error>(listener)
            })
            .unwrap_or_else(|e| panic!("listen on {address} in {}: {e}", self.netns));
        let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Exposed { address, task }
    }
}

/// A relay made by [`Node::expose`]; stops listening on drop.
#[derive(Debug)]
pub struct Exposed {
    address: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Exposed {
    /// `<node ip>:port`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for Exposed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The pid in a namespace name `d8t<pid>x<n>-…`, if it has that form.
fn owner_pid(netns: &str) -> Option<u32> {
    let rest = netns.strip_prefix("d8t")?;
    let (pid, _) = rest.split_once('x')?;
    pid.parse().ok()
}

/// Deletes namespaces made by test processes that no longer run (killed before their drop).
fn remove_leftovers() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = owner_pid(&name)
            && !std::path::Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = quiet_ip(&["netns", "del", &name]);
        }
    }
}

fn ip(args: &[&str]) {
    let output = quiet_ip(args);
    assert!(
        output.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn quiet_ip(args: &[&str]) -> std::process::Output {
    Command::new(require_tool("ip", "iproute2"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run ip")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_reads_only_our_names() {
        for (name, pid) in [
            ("d8t123x0-lan", Some(123)),
            ("d8t9x12-cp-0", Some(9)),
            ("d8tx0-lan", None),
            ("cni-1234", None),
            ("d8t12-lan", None),
        ] {
            assert_eq!(owner_pid(name), pid, "{name}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nodes_reach_each_other_and_a_cut_node_is_unreachable() {
        if let Some(reason) = Network::unavailable() {
            eprintln!("skipped: {reason}");
            return;
        }
        let mut network = Network::create();
        let a = network.node("a");
        let b = network.node("b");
        let host = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = host.local_addr().unwrap();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            while let Ok((mut socket, _)) = host.accept().await {
                let _ = socket.write_all(b"hello from the host").await;
            }
        });
        let exposed = a.expose(7000, target).await;
        let address = exposed.address();
        let read = |node: &Node| {
            node.run(|| {
                use std::io::Read;
                let mut stream = std::net::TcpStream::connect_timeout(
                    &address,
                    std::time::Duration::from_secs(2),
                )?;
                stream.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
                let mut text = String::new();
                stream.read_to_string(&mut text)?;
                Ok::<_, std::io::Error>(text)
            })
        };
        let from_b = tokio::task::block_in_place(|| read(&b)).unwrap();
        assert_eq!(from_b, "hello from the host");
        a.cut();
        assert!(tokio::task::block_in_place(|| read(&b)).is_err());
        a.restore();
        let names = [a.netns().to_owned(), b.netns().to_owned()];
        drop(network);
        for name in names {
            assert!(!std::path::Path::new(&format!("/run/netns/{name}")).exists());
        }
    }
}
