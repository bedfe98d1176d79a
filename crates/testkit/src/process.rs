//! Child processes for real components: found on `PATH` or a clear failure naming the Debian
//! package, logs kept in a file, stopped on drop, log printed when the test fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Finds `tool` on `PATH`; panics with the Debian package to install when it is missing.
///
/// Tests never skip silently: a missing tool is a failure that says how to fix it.
pub fn require_tool(tool: &str, package: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|dir| dir.join(tool))
        .find(|candidate| is_executable(candidate))
        .unwrap_or_else(|| {
            panic!(
                "`{tool}` is not installed: run `apt-get install -y --no-install-recommends \
                 {package}` (or `.ci/run`, which installs every tool the tests use)"
            )
        })
}

pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A free TCP port on 127.0.0.1, for tools that take an address rather than a listener.
///
/// Picked at random below the kernel's ephemeral range, not by binding port 0: a port the
/// kernel hands out for port 0 comes from the range it also takes the local ports of outgoing
/// connections from, so between this call and the tool's own bind any connection on the
/// machine (the parallel tests make many) could take it — CI saw `Address already in use`.
pub fn free_port() -> u16 {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_low);
    if high > low + 1000 {
        for attempt in 0..64u64 {
            let port = low + (random(attempt) % u64::from(high - low)) as u16;
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("bind 127.0.0.1:0")
}

/// A number different in every call and every process (std's randomly keyed hasher).
fn random(salt: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(salt);
    hasher.write_u64(CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// A running child process whose output goes to a log file.
///
/// On drop it is sent SIGTERM, then SIGKILL if it has not exited within five seconds. When the
/// current thread is panicking (a failing test), the log's tail is printed to stderr first.
#[derive(Debug)]
pub struct Service {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Service {
    /// Spawns `command` with stdout and stderr appended to `log`.
    pub fn spawn(name: &str, mut command: Command, log: PathBuf) -> std::io::Result<Self> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let err = out.try_clone()?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()?;
        Ok(Self {
            name: name.to_owned(),
            child: Some(child),
            log,
        })
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The whole log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Panics with the log when the process has exited: used while waiting for readiness.
    pub fn assert_running(&mut self) {
        if let Some(child) = self.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            panic!(
                "{} exited early ({status}); its log:\n{}",
                self.name,
                self.log()
            );
        }
    }

    /// Stops the process: SIGTERM, then SIGKILL after five seconds.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id();
        signal(pid, "TERM");
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = child.wait();
            let _ = done.send(());
        });
        if wait.recv_timeout(Duration::from_secs(5)).is_err() {
            signal(pid, "KILL");
            let _ = wait.recv_timeout(Duration::from_secs(5));
        }
    }

    /// Kills the process with SIGKILL at once, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

impl Drop for Service {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(200).collect();
            eprintln!("----- {} log ({}) -----", self.name, self.log.display());
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
            eprintln!("----- end of {} log -----", self.name);
        }
        self.stop();
    }
}

/// Polls `ready` every 50 ms until it returns true, the service dies, or `timeout` passes;
/// panics with the service's log unless it became ready.
pub async fn wait_until<F, Fut>(service: &mut Service, timeout: Duration, ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    if let Err(status) = wait_ready(service, timeout, ready).await {
        panic!(
            "{} exited early ({status}); its log:\n{}",
            service.name,
            service.log()
        );
    }
}

/// Like [`wait_until`], but an early exit is returned (with its status) rather than a panic,
/// so that the caller can react, e.g. retry on another port.
pub async fn wait_ready<F, Fut>(
    service: &mut Service,
    timeout: Duration,
    mut ready: F,
) -> Result<(), std::process::ExitStatus>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(child) = service.child.as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            service.child = None;
            return Err(status);
        }
        if ready().await {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            panic!(
                "{} not ready after {timeout:?}; its log:\n{}",
                service.name,
                service.log()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "apt-get install -y --no-install-recommends no-such-package")]
    fn missing_tool_names_the_package() {
        require_tool("d8-no-such-tool", "no-such-package");
    }

    #[test]
    fn free_ports_lie_below_the_ephemeral_range_and_can_be_bound() {
        let ephemeral_low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let ports: std::collections::BTreeSet<u16> = (0..20).map(|_| free_port()).collect();
        assert!(ports.len() > 15, "spread: {ports:?}");
        for port in ports {
            assert!((10_000..ephemeral_low).contains(&port), "{port}");
            std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        }
    }

    #[test]
    fn present_tool_is_found() {
        assert!(require_tool("sh", "dash").ends_with("sh"));
    }

    #[tokio::test]
    async fn stop_terminates_and_log_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; exec sleep 60"]);
        let mut service = Service::spawn("sleeper", cmd, dir.path().join("log")).unwrap();
        wait_until(&mut service, Duration::from_secs(5), || {
            let log = std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
            async move { log.contains("started") }
        })
        .await;
        let pid = service.pid().unwrap();
        service.stop();
        assert!(!Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid));
        assert_eq!(service.log(), "started\n");
    }

    fn is_zombie(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
    }
}
