//! `d8 queue list`: the module runtime's task queues — `main` and the named ones — with each
//! queue's length and head (the task running or waiting, how often it failed and why), read
//! from the leading `d8 controller` (its `/queue/list`, next to `/metrics`), as
//! `deckhouse-controller queue list` reads addon-operator's.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `d8 queue` subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Each queue with its length and head.
    List {
        /// Where the controller serves `/metrics` (`d8 controller --metrics-address`).
        #[arg(long, default_value = "127.0.0.1:4281")]
        address: SocketAddr,
    },
}

/// Runs `d8 queue …`.
pub(crate) async fn run(command: Command) -> anyhow::Result<()> {
    let Command::List { address } = command;
    let body = tokio::time::timeout(Duration::from_secs(10), get(address, "/queue/list"))
        .await
        .with_context(|| format!("{address}: no answer in 10s"))??;
    let mut out = std::io::stdout().lock();
    out.write_all(body.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// One plain HTTP/1.1 GET; the body of a 200 answer.
async fn get(address: SocketAddr, path: &str) -> anyhow::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .with_context(|| format!("connecting to the controller at {address}"))?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
    let mut answer = Vec::new();
    stream.take(16 << 20).read_to_end(&mut answer).await?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .context("the controller's answer is not HTTP")?;
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200 ") {
        anyhow::bail!("{address}{path}: {status}: {}", body.trim());
    }
    Ok(body.to_owned())
}
