//! One hook process: stdout and stderr read line by line into logs (JSON log lines parsed as
//! shell-operator's log proxy does), a timeout, and the stderr tail on failure.

use std::time::Duration;

use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One line a hook printed.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub stream: Stream,
    /// `level` of a JSON line.
    pub level: Option<String>,
    /// `msg` of a JSON line (or "hook result"), or the plain line.
    pub message: String,
    /// The other fields of a JSON line (without `time`), logged as `hook_<key>`.
    pub fields: Map<String, Value>,
}

/// Parses one output line as shell-operator's proxy logger does.
pub(crate) fn parse_line(stream: Stream, line: &str) -> Option<LogLine> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    if line.starts_with('{')
        && let Ok(Value::Object(mut m)) = serde_json::from_str::<Value>(line)
    {
        let level = m
            .remove("level")
            .and_then(|v| v.as_str().map(str::to_owned));
        let message = m
            .remove("msg")
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "hook result".to_owned());
        m.remove("time");
        return Some(LogLine {
            stream,
            level,
            message,
            fields: m,
        });
    }
    let mut message = line.to_owned();
    if message.len() > 10_000 {
        let mut cut = 10_000;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push_str(":truncated");
    }
    Some(LogLine {
        stream,
        level: None,
        message,
        fields: Map::new(),
    })
}

/// The last 4 KiB of stderr, on a line boundary.
pub(crate) fn tail(stderr: &str) -> String {
    const MAX: usize = 4096;
    let s = stderr.trim_end();
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut start = s.len() - MAX;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    let cut = &s[start..];
    cut.find('\n')
        .map(|i| &cut[i + 1..])
        .unwrap_or(cut)
        .to_owned()
}

pub(crate) enum RunError {
    Spawn(std::io::Error),
    Timeout,
    Failed {
        exit_code: Option<i32>,
        message: String,
    },
}

fn emit(hook: &str, line: &LogLine) {
    let output = match line.stream {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
    };
    let fields = if line.fields.is_empty() {
        String::new()
    } else {
        Value::Object(line.fields.clone()).to_string()
    };
    match line.level.as_deref() {
        Some("error" | "fatal") => tracing::error!(
            hook,
            output,
            proxyJsonLog = line.level.is_some(),
            fields,
            "{}",
            line.message
        ),
        Some("warn" | "warning") => tracing::warn!(
            hook,
            output,
            proxyJsonLog = true,
            fields,
            "{}",
            line.message
        ),
        Some("debug" | "trace") => tracing::debug!(
            hook,
            output,
            proxyJsonLog = true,
            fields,
            "{}",
            line.message
        ),
        _ => tracing::info!(hook, output, fields, "{}", line.message),
    }
}

/// Runs `cmd`, logging its lines; fails with the stderr tail on a non-zero exit.
pub(crate) async fn run_logged(
    mut cmd: tokio::process::Command,
    hook: &str,
    timeout: Duration,
) -> Result<Vec<LogLine>, RunError> {
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let read = |pipe: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>, stream: Stream| async move {
        let mut lines_out = Vec::new();
        let mut raw = String::new();
        if let Some(pipe) = pipe {
            let mut lines = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                raw.push_str(&line);
                raw.push('\n');
                if let Some(l) = parse_line(stream, &line) {
                    lines_out.push(l);
                }
            }
        }
        (lines_out, raw)
    };
    let out_task = read(stdout.map(|p| Box::new(p) as _), Stream::Stdout);
    let err_task = read(stderr.map(|p| Box::new(p) as _), Stream::Stderr);
    let work = async {
        let ((out_lines, _), (err_lines, err_raw), status) =
            tokio::join!(out_task, err_task, child.wait());
        (out_lines, err_lines, err_raw, status)
    };
    let (out_lines, err_lines, err_raw, status) = match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => return Err(RunError::Timeout),
    };
    let status = status.map_err(RunError::Spawn)?;
    let mut logs = out_lines;
    logs.extend(err_lines);
    for l in &logs {
        emit(hook, l);
    }
    if !status.success() {
        let tail = tail(&err_raw);
        let message = if tail.is_empty() {
            format!("cmd run: {status}")
        } else {
            tail
        };
        return Err(RunError::Failed {
            exit_code: status.code(),
            message,
        });
    }
    Ok(logs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_plain_lines() {
        let l = parse_line(
            Stream::Stderr,
            r#"{"level":"warn","msg":"careful","time":"x","n":1}"#,
        )
        .unwrap();
        assert_eq!(l.level.as_deref(), Some("warn"));
        assert_eq!(l.message, "careful");
        assert_eq!(l.fields.len(), 1);
        let l = parse_line(Stream::Stdout, "plain text").unwrap();
        assert_eq!((l.level, l.message.as_str()), (None, "plain text"));
        assert!(parse_line(Stream::Stdout, "   ").is_none());
        assert_eq!(tail("a\nb\n"), "a\nb");
    }
}
