//! Runs the preinstalled `kubectl` against a test server with its generated kubeconfig.
#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::time::Duration;

pub struct Kubectl<'a> {
    pub kubeconfig: &'a Path,
    pub home: &'a Path,
}

impl Kubectl<'_> {
    /// Starts kubectl with `args` (a watch, say) and hands back the running child, its stdout
    /// piped; it is killed when dropped.
    pub fn spawn(&self, args: &[&str]) -> tokio::process::Child {
        tokio::process::Command::new("kubectl")
            .args(args)
            .arg("--kubeconfig")
            .arg(self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.home.join("cache"))
            .env("HOME", self.home)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("kubectl is installed")
    }

    /// Runs kubectl with `args` and `stdin`; returns (success, stdout, stderr).
    pub async fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        use tokio::io::AsyncWriteExt as _;
        let mut cmd = tokio::process::Command::new("kubectl");
        cmd.args(args)
            .arg("--kubeconfig")
            .arg(self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.home.join("cache"))
            .env("HOME", self.home)
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("kubectl is installed");
        let mut input = child.stdin.take().unwrap();
        if let Some(s) = stdin {
            input.write_all(s.as_bytes()).await.unwrap();
        }
        drop(input);
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("kubectl finished in time")
            .unwrap();
        let r = (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        eprintln!("$ kubectl {}\n{}{}", args.join(" "), r.1, r.2);
        r
    }
}
