//! Re-executing the test binary as a child process (a server to kill, or a writer).
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;
use tokio::io::AsyncBufReadExt as _;

/// Starts this test binary running only the ignored helper test `name`, with `envs`.
pub fn spawn(name: &str, envs: &[(&str, String)]) -> tokio::process::Child {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args([
        "--ignored",
        "--exact",
        name,
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::inherit())
    .kill_on_drop(true);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Reads the child's stdout until a line containing `prefix`; returns the rest of it.
pub async fn wait_line(child: &mut tokio::process::Child, prefix: &str) -> String {
    let out = child.stdout.as_mut().unwrap();
    let mut lines = tokio::io::BufReader::new(out).lines();
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            // libtest prints "test <name> ... " before the test's own output on the same line.
            if let Some(i) = l.find(prefix) {
                return l[i + prefix.len()..].trim().to_string();
            }
        }
        panic!("child exited before printing {prefix:?}");
    })
    .await
    .expect("child became ready in time")
}
