//! Progress for people and scripts: indicatif bars per phase on a terminal, plain lines when
//! stderr is not one, nothing in quiet mode, and JSON lines on stdout for scripts.
//!
//! JSON events, one object per line: `{"event":"phase","phase":…,"items":…,"bytes":…}`,
//! `{"event":"progress","phase":…,"items_done":…,"bytes_done":…}` (at most four a second per
//! phase, and at the end), `{"event":"message","level":"info"|"warn","text":…}`,
//! `{"event":"phase_end","phase":…,"items_done":…,"bytes_done":…,"seconds":…}`,
//! `{"event":"summary",…}`; the CLI adds `{"event":"error","message":…}` on failure.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Bars on a terminal, plain lines otherwise.
    #[default]
    Auto,
    /// Plain lines on stderr.
    Plain,
    /// Nothing but errors.
    Quiet,
    /// JSON lines on stdout.
    Json,
}

/// The progress reporter of one command. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Progress {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    mode: Mode,
    bars: Option<MultiProgress>,
    out: Mutex<()>,
}

impl Progress {
    /// A reporter in `mode` (`Auto` picks bars when stderr is a terminal).
    pub fn new(mode: Mode) -> Self {
        let mode = match mode {
            Mode::Auto if std::io::stderr().is_terminal() => Mode::Auto,
            Mode::Auto => Mode::Plain,
            other => other,
        };
        let bars = (mode == Mode::Auto)
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(8)));
        Self {
            inner: Arc::new(Inner {
                mode,
                bars,
                out: Mutex::new(()),
            }),
        }
    }

    /// The effective mode.
    pub fn mode(&self) -> Mode {
        self.inner.mode
    }

    fn json(&self, value: serde_json::Value) {
        let _guard = self.inner.out.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{value}");
        let _ = out.flush();
    }

    fn line(&self, text: &str) {
        match &self.inner.bars {
            Some(bars) => {
                let _ = bars.println(text);
            }
            None => {
                let _guard = self.inner.out.lock().unwrap_or_else(|e| e.into_inner());
                let _ = writeln!(std::io::stderr().lock(), "{text}");
            }
        }
    }

    /// An informational line.
    pub fn info(&self, text: &str) {
        match self.inner.mode {
            Mode::Quiet => {}
            Mode::Json => {
                self.json(serde_json::json!({"event": "message", "level": "info", "text": text}))
            }
            _ => self.line(text),
        }
    }

    /// A warning line.
    pub fn warn(&self, text: &str) {
        match self.inner.mode {
            Mode::Quiet => {}
            Mode::Json => {
                self.json(serde_json::json!({"event": "message", "level": "warn", "text": text}))
            }
            _ => self.line(&format!("warning: {text}")),
        }
    }

    /// The final summary: `fields` for JSON, `text` for people.
    pub fn summary(&self, fields: serde_json::Value, text: &str) {
        match self.inner.mode {
            Mode::Quiet => {}
            Mode::Json => {
                let mut value = serde_json::json!({"event": "summary"});
                if let (Some(map), serde_json::Value::Object(extra)) =
                    (value.as_object_mut(), fields)
                {
                    map.extend(extra);
                }
                self.json(value);
            }
            _ => self.line(text),
        }
    }

    /// An error line (JSON mode only: people get the error from the CLI's exit message).
    pub fn error(&self, message: &str) {
        if self.inner.mode == Mode::Json {
            self.json(serde_json::json!({"event": "error", "message": message}));
        }
    }

    /// Starts a phase of `items` items and `bytes` bytes (either may be 0 when unknown).
    pub fn phase(&self, name: &str, items: u64, bytes: u64) -> Phase {
        let bar = self.inner.bars.as_ref().map(|bars| {
            let bar = bars.add(ProgressBar::new(bytes.max(1)));
            let style = ProgressStyle::with_template(
                "{prefix:>9} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(name.to_owned());
            bar.set_message(format!("0/{items}"));
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        match self.inner.mode {
            Mode::Json => {
                self.json(serde_json::json!({"event": "phase", "phase": name, "items": items, "bytes": bytes}))
            }
            Mode::Plain => self.line(&format!(
                "{name}: {items} item(s), {}",
                human_bytes(bytes)
            )),
            _ => {}
        }
        Phase {
            progress: self.clone(),
            name: name.to_owned(),
            items,
            bar,
            items_done: Arc::new(AtomicU64::new(0)),
            bytes_done: Arc::new(AtomicU64::new(0)),
            started: Instant::now(),
            last_json: Arc::new(Mutex::new(Instant::now())),
        }
    }
}

/// One phase's progress. Cheap to clone; every clone feeds the same bar.
#[derive(Clone, Debug)]
pub struct Phase {
    progress: Progress,
    name: String,
    items: u64,
    bar: Option<ProgressBar>,
    items_done: Arc<AtomicU64>,
    bytes_done: Arc<AtomicU64>,
    started: Instant,
    last_json: Arc<Mutex<Instant>>,
}

impl Phase {
    /// `n` more bytes done.
    pub fn bytes(&self, n: u64) {
        self.bytes_done.fetch_add(n, Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
        self.maybe_json(false);
    }

    /// One more item done.
    pub fn item(&self) {
        let done = self.items_done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{done}/{}", self.items));
        }
        self.maybe_json(false);
    }

    /// Bytes done so far.
    pub fn bytes_done(&self) -> u64 {
        self.bytes_done.load(Ordering::Relaxed)
    }

    fn maybe_json(&self, force: bool) {
        if self.progress.inner.mode != Mode::Json {
            return;
        }
        {
            let mut last = self.last_json.lock().unwrap_or_else(|e| e.into_inner());
            if !force && last.elapsed() < Duration::from_millis(250) {
                return;
            }
            *last = Instant::now();
        }
        self.progress.json(serde_json::json!({
            "event": "progress", "phase": self.name,
            "items_done": self.items_done.load(Ordering::Relaxed),
            "bytes_done": self.bytes_done.load(Ordering::Relaxed),
        }));
    }

    /// Ends the phase.
    pub fn finish(self) {
        let seconds = self.started.elapsed().as_secs_f64();
        let items = self.items_done.load(Ordering::Relaxed);
        let bytes = self.bytes_done.load(Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        match self.progress.inner.mode {
            Mode::Json => {
                self.maybe_json(true);
                self.progress.json(serde_json::json!({
                    "event": "phase_end", "phase": self.name, "items_done": items,
                    "bytes_done": bytes, "seconds": seconds,
                }));
            }
            Mode::Quiet => {}
            _ => self.progress.line(&format!(
                "{}: done, {items} item(s), {} in {seconds:.1}s",
                self.name,
                human_bytes(bytes)
            )),
        }
    }
}

/// `1.5 GiB`, `12.0 MiB`, `512 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(2 << 30), "2.0 GiB");
    }
}
