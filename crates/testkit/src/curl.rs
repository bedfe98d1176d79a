//! curl as a client that behaves as users' tools do (HTTP/2 by ALPN or prior knowledge, retries
//! of refused streams), for what reqwest would hide.

use std::path::Path;
use std::process::Command;

use crate::process::require_tool;

/// How curl speaks to the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1, over TLS or plain.
    Http1,
    /// HTTP/2, negotiated by ALPN over TLS.
    Http2,
    /// HTTP/2 over plain TCP without negotiation (h2c prior knowledge).
    Http2PriorKnowledge,
}

/// One curl request: `Ok(status)` for an answer, `Err(exit code and message)` when curl got none
/// (a reset connection, a refused stream it gave up retrying).
pub fn get_with_header(
    url: &str,
    ca_file: Option<&Path>,
    protocol: Protocol,
    header: (&str, usize),
    scratch: &Path,
) -> Result<u16, String> {
    let curl = require_tool("curl", "curl");
    let header_file = scratch.join(format!("header-{}-{}", header.0, header.1));
    if !header_file.exists() {
        std::fs::write(
            &header_file,
            format!("{}: {}\n", header.0, "a".repeat(header.1)),
        )
        .expect("write the header file");
    }
    let mut command = Command::new(curl);
    command
        .args(["--silent", "--show-error", "--output", "/dev/null"])
        .args(["--write-out", "%{http_code}", "--max-time", "20"])
        .arg("--header")
        .arg(format!("@{}", header_file.display()));
    command.arg(match protocol {
        Protocol::Http1 => "--http1.1",
        Protocol::Http2 => "--http2",
        Protocol::Http2PriorKnowledge => "--http2-prior-knowledge",
    });
    if let Some(ca) = ca_file {
        command.arg("--cacert").arg(ca);
    }
    let output = command.arg(url).output().expect("run curl");
    let code = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    match (output.status.success(), code.parse::<u16>()) {
        (true, Ok(status)) if status != 0 => Ok(status),
        _ => Err(format!(
            "curl exit {:?}: {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    }
}
