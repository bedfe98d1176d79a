//! README.md's walkthrough as a test: every shell block README marks with
//! `<!-- walkthrough: NAME [background] [retry] -->` runs exactly as written, in README's order —
//! `d8 up`, the bundle of your own image, the push (README's and the one `d8 up` prints), the
//! ConfigMap, the containerd pull through the agent, the switch to an upstream with
//! `examples/moduleconfig-registry.yaml`, and the pull with the upstream stopped.
//!
//! What the test chooses is what README tells a user to choose: the values of the variables of
//! its `vars` block (the data directory, containerd's hosts directory, the image, the bundle
//! path) and the edit of the example file (address and credentials of the upstream). Around the
//! commands it sets only the machine's facts: `PATH` holding `d8`, `CONTAINERD_ADDRESS` (the
//! private containerd's socket), `SSL_CERT_FILE` for the bundle (the CA of the image's
//! registry), a `sudo` that just runs its command (the test runs as root), and README's
//! default ports, which must be free.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use testkit::image::Layout as ImageLayout;
use testkit::push::Registry;
use testkit::{Certs, Containerd, ImageBuilder, Upstream, UpstreamOptions};

/// One marked block of README.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Block {
    name: String,
    background: bool,
    retry: bool,
    script: String,
}

/// The marked blocks of `readme`, in order. A marker is the line before a ```` ```sh ```` fence.
fn blocks(readme: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let Some(marker) = line
            .trim()
            .strip_prefix("<!-- walkthrough:")
            .and_then(|m| m.strip_suffix("-->"))
        else {
            continue;
        };
        let mut words = marker.split_whitespace();
        let name = words.next().unwrap_or_default().to_owned();
        let flags: Vec<&str> = words.collect();
        assert_eq!(
            lines.next().map(str::trim),
            Some("```sh"),
            "the walkthrough marker {name:?} must stand right before a ```sh block"
        );
        let script: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        out.push(Block {
            name,
            background: flags.contains(&"background"),
            retry: flags.contains(&"retry"),
            script: script.join("\n") + "\n",
        });
    }
    out
}

/// The names the `vars` block assigns (`NAME=value  # comment`).
fn variables(block: &Block) -> Vec<String> {
    block
        .script
        .lines()
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim().to_owned()))
        .filter(|n| !n.is_empty() && !n.starts_with('#'))
        .collect()
}

#[test]
fn walkthrough_blocks_are_read_with_their_flags() {
    let readme = "text\n<!-- walkthrough: up background -->\n```sh\nsudo d8 up \\\n    --x\n```\n\
                  <!-- walkthrough: vars -->\n```sh\nA=1   # one\nB=$HOME/b\n```\n\
                  ```sh\nnot marked\n```\n<!-- walkthrough: wait retry -->\n```sh\ntrue\n```\n";
    let found = blocks(readme);
    assert_eq!(
        found
            .iter()
            .map(|b| (b.name.as_str(), b.background, b.retry))
            .collect::<Vec<_>>(),
        [
            ("up", true, false),
            ("vars", false, false),
            ("wait", false, true)
        ]
    );
    assert_eq!(found[0].script, "sudo d8 up \\\n    --x\n");
    assert_eq!(variables(&found[1]), ["A", "B"]);
}

/// The steps the walkthrough must hold, in order: a README that drops or reorders one fails.
const STEPS: [&str; 9] = [
    "vars",
    "up",
    "bundle",
    "push",
    "configmap",
    "pull-bundle",
    "upstream",
    "pull-upstream",
    "pull-cached",
];

/// README's default ports (`d8 up` without port flags).
const PORTS: [u16; 7] = [6443, 5001, 5002, 5003, 4281, 4284, 4286];

struct Shell {
    workdir: PathBuf,
    prelude: String,
    env: Vec<(String, String)>,
    logs: PathBuf,
}

impl Shell {
    fn command(&self, script: &str) -> Command {
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(format!("{}{script}", self.prelude))
            .current_dir(&self.workdir)
            .stdin(Stdio::null());
        for (k, v) in &self.env {
            command.env(k, v);
        }
        command
    }

    /// Runs `block` once (retried for up to a minute when README says to try again); panics
    /// with its output when it fails.
    async fn run(&self, block: &Block, extra_env: &[(&str, &str)]) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let mut command = self.command(&block.script);
            for (k, v) in extra_env {
                command.env(k, v);
            }
            let output = tokio::process::Command::from(command)
                .kill_on_drop(true)
                .output()
                .await
                .expect("run bash");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            if output.status.success() {
                return text;
            }
            assert!(
                block.retry && tokio::time::Instant::now() < deadline,
                "README step {:?} failed ({}):\n{}\n--- output ---\n{text}\n--- d8 up ---\n{}",
                block.name,
                output.status,
                block.script,
                std::fs::read_to_string(self.logs.join("up.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The background `d8 up`, in its own process group: SIGTERM to the group on stop, SIGKILL on
/// drop.
struct Background {
    child: Child,
    log: PathBuf,
}

impl Background {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg("--")
            .arg(format!("-{}", self.child.id()))
            .status();
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("----- d8 up -----\n{}\n----- end -----", self.log());
        }
        if self.child.try_wait().ok().flatten().is_none() {
            self.signal("KILL");
            let _ = self.child.wait();
        }
    }
}

/// The push command `d8 up` printed, with `BUNDLE` left for the user (here: the variable).
fn printed_push(log: &str) -> String {
    let mut lines = log
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("d8 mirror push "));
    let mut command = String::new();
    for line in lines.by_ref() {
        command.push_str(line.trim());
        command.push('\n');
        if !line.trim_end().ends_with('\\') {
            break;
        }
    }
    assert!(!command.is_empty(), "d8 up printed no push command:\n{log}");
    command.replacen(" BUNDLE ", " \"$BUNDLE\" ", 1)
}

/// The user's edit of `examples/moduleconfig-registry.yaml`: their upstream's address, path and
/// license, plain HTTP (README's own note for a registry you trust), the cache on.
fn edit_example(example: &str, upstream: &str, license: &str) -> String {
    let mut text = example.to_owned();
    for (from, to) in [
        (
            "        host: registry.deckhouse.io\n",
            format!("        scheme: HTTP\n        host: \"{upstream}\"\n"),
        ),
        (
            "        path: /deckhouse/ee\n",
            "        path: /dkp\n".to_owned(),
        ),
        ("license: <LICENSE_KEY>", format!("license: {license}")),
        ("    # storage:\n", "    storage:\n".to_owned()),
        ("    #   cache: true", "      cache: true".to_owned()),
    ] {
        assert!(
            text.contains(from),
            "examples/moduleconfig-registry.yaml no longer holds {from:?}, which README tells the user to edit"
        );
        text = text.replacen(from, &to, 1);
    }
    text
}

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[tokio::test]
async fn readme_walkthrough() {
    let readme = std::fs::read_to_string(repository_root().join("README.md")).unwrap();
    let all = blocks(&readme);
    let names: Vec<&str> = all.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, STEPS, "README's walkthrough steps");
    let step: BTreeMap<&str, &Block> = all.iter().map(|b| (b.name.as_str(), b)).collect();
    for port in PORTS {
        assert!(
            std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
            "port {port} is taken: README's walkthrough runs d8 up on its default ports"
        );
    }

    // The image of your own, on a registry with its own CA; the upstream with release channels.
    let ca = Certs::new("images-ca");
    let images_registry = Upstream::start(UpstreamOptions::default().tls(&ca)).await;
    let layout = ImageLayout::new(&images_registry.scratch_dir().join("images")).unwrap();
    let alpine = ImageBuilder::new("alpine").layer(20_000).build(&layout);
    Registry::of(&images_registry)
        .push_image("library/alpine", Some("3.20"), &alpine)
        .await
        .unwrap();
    let mut upstream =
        Upstream::start(UpstreamOptions::default().token_auth("license-token", "s3cret")).await;
    let channel = ImageBuilder::new("channel").layer(3_000).build(&layout);
    Registry::of(&upstream)
        .push_image("dkp/release-channel", Some("stable"), &channel)
        .await
        .unwrap();
    let containerd = Containerd::start().await;

    // The machine: d8 and a root's sudo on PATH, the example file in the working directory.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_d8"), bin.join("d8")).unwrap();
    std::fs::write(bin.join("sudo"), "#!/bin/sh\nexec \"$@\"\n").unwrap();
    std::fs::set_permissions(
        bin.join("sudo"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let workdir = dir.path().join("repo");
    std::fs::create_dir_all(workdir.join("examples")).unwrap();
    let example =
        std::fs::read_to_string(repository_root().join("examples/moduleconfig-registry.yaml"))
            .unwrap();
    let ca_file = dir.path().join("images-ca.crt");
    std::fs::write(&ca_file, ca.ca_pem()).unwrap();

    // The variables README lets the user choose, and nothing else.
    let values = BTreeMap::from([
        ("DATA_DIR", dir.path().join("data").display().to_string()),
        ("HOSTS_DIR", containerd.hosts_dir().display().to_string()),
        (
            "IMAGE",
            format!("{}/library/alpine:3.20", images_registry.host()),
        ),
        ("BUNDLE", dir.path().join("bundle").display().to_string()),
    ]);
    let mut assigned = variables(step["vars"]);
    assigned.sort();
    assert_eq!(
        assigned,
        values.keys().copied().collect::<Vec<_>>(),
        "README's walkthrough variables (give the test a value for each)"
    );
    let mut prelude = "set -euo pipefail\n".to_owned();
    for (name, value) in &values {
        prelude.push_str(&format!("{name}='{value}'\n"));
    }
    let shell = Shell {
        workdir: workdir.clone(),
        prelude,
        env: vec![
            (
                "PATH".into(),
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            ),
            (
                "CONTAINERD_ADDRESS".into(),
                containerd
                    .root()
                    .join("containerd.sock")
                    .display()
                    .to_string(),
            ),
        ],
        logs: dir.path().to_owned(),
    };

    // d8 up, in the background as in a first terminal.
    let log = dir.path().join("up.log");
    let out = std::fs::File::create(&log).unwrap();
    let mut command = shell.command(&step["up"].script);
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let child = command
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let mut up = Background { child, log };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !up.log().contains("Ctrl-C stops.") {
        assert!(
            up.child.try_wait().unwrap().is_none(),
            "d8 up exited:\n{}",
            up.log()
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "d8 up not up:\n{}",
            up.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Air-gapped: the bundle, README's push and the one d8 up printed, the pull.
    let ca_env = ca_file.display().to_string();
    shell
        .run(step["bundle"], &[("SSL_CERT_FILE", ca_env.as_str())])
        .await;
    shell.run(step["push"], &[]).await;
    let printed = Block {
        name: "the push d8 up printed".into(),
        background: false,
        retry: false,
        script: printed_push(&up.log()),
    };
    shell.run(&printed, &[]).await;
    shell.run(step["configmap"], &[]).await;
    shell.run(step["pull-bundle"], &[]).await;

    // Through the upstream, after the user's edit of the example.
    std::fs::write(
        workdir.join("examples/moduleconfig-registry.yaml"),
        edit_example(&example, &upstream.host(), "s3cret"),
    )
    .unwrap();
    shell.run(step["upstream"], &[]).await;
    // As README says: the pull waits for the cache replica to run with the upstream (a pull
    // while it restarts goes around it, and nothing of it is kept for the next step).
    let host = upstream.host();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !up
        .log()
        .lines()
        .any(|l| l.contains("storage replica started") && l.contains(&host))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache replica did not restart with the upstream:\n{}",
            up.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    shell.run(step["pull-upstream"], &[]).await;
    upstream.stop();
    shell.run(step["pull-cached"], &[]).await;

    up.signal("TERM");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = up.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "d8 up did not stop on SIGTERM:\n{}",
            up.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "d8 up on SIGTERM: {status}\n{}", up.log());
}
