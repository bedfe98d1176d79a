//! A CA bundle read from a file and re-read when the file changes on disk (its modification
//! time or size): when `d8 controller` issues or renews a CA kept in a Secret, the kubelet
//! updates the mounted Secret and the reader follows without a restart — `webhook-handler`'s
//! `caBundle` (`ca.crt` of its Secret), the cache replicas' ingress client CA
//! (`ingress-client-ca.crt` of Secret `registry-storage`). A file that holds no certificate
//! (half-written) keeps the previous CA in use.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// What identifies one version of the file: its modification time and size.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// Whether `text` is a CA bundle to register: at least one whole PEM certificate.
pub fn usable(text: &str) -> bool {
    text.split("-----BEGIN CERTIFICATE-----")
        .skip(1)
        .any(|rest| rest.contains("-----END CERTIFICATE-----"))
}

/// The CA bundle, from a file.
#[derive(Debug)]
pub struct CaFile {
    path: PathBuf,
    current: Mutex<(Stamp, String)>,
}

impl CaFile {
    /// Follows a file that may not hold a certificate yet (missing, or the key not yet in the
    /// Secret): [`CaFile::current`] is empty until it does.
    pub fn watch(path: impl Into<PathBuf>) -> Arc<Self> {
        let path = path.into();
        let loaded = Self {
            path,
            current: Mutex::new((None, String::new())),
        };
        loaded.current();
        Arc::new(loaded)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file; fails when it holds no certificate now.
    pub fn load(path: impl Into<PathBuf>) -> Result<Arc<Self>, String> {
        let path = path.into();
        let stamp = stamp(&path);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if !usable(&text) {
            return Err(format!(
                "{}: no PEM certificate in the file",
                path.display()
            ));
        }
        Ok(Arc::new(Self {
            path,
            current: Mutex::new((stamp, text)),
        }))
    }

    /// The CA bundle (PEM): re-read when the file changed since the last read; empty while a
    /// watched file never held a certificate.
    pub fn current(&self) -> String {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let now = stamp(&self.path);
        if now.is_some() && now != current.0 {
            match std::fs::read_to_string(&self.path) {
                Ok(text) if usable(&text) => {
                    if text != current.1 {
                        tracing::info!(path = %self.path.display(), "CA reloaded");
                    }
                    *current = (now, text);
                }
                Ok(_) => tracing::warn!(
                    path = %self.path.display(),
                    "the CA file holds no certificate; keeping the previous CA"
                ),
                Err(error) => tracing::warn!(
                    path = %self.path.display(), %error,
                    "cannot read the CA file; keeping the previous CA"
                ),
            }
        }
        current.1.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_is_usable_with_one_whole_certificate() {
        let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        for (text, want) in [
            (cert.to_owned(), true),
            (format!("{cert}{cert}"), true),
            ("-----BEGIN CERTIFICATE-----\nMIIB\n".to_owned(), false),
            (String::new(), false),
            (
                "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n".to_owned(),
                false,
            ),
        ] {
            assert_eq!(usable(&text), want, "{text:?}");
        }
    }

    #[test]
    fn the_file_is_re_read_when_it_changes_and_a_broken_one_keeps_the_previous() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        let one = "-----BEGIN CERTIFICATE-----\none\n-----END CERTIFICATE-----\n";
        let two = "-----BEGIN CERTIFICATE-----\ntwo, longer\n-----END CERTIFICATE-----\n";
        assert!(CaFile::load(&path).is_err(), "no file yet");
        std::fs::write(&path, "half").unwrap();
        assert!(CaFile::load(&path).is_err());
        std::fs::write(&path, one).unwrap();
        let ca = CaFile::load(&path).unwrap();
        assert_eq!(ca.current(), one);
        std::fs::write(&path, "-----BEGIN CERTIFICATE-----\n").unwrap();
        assert_eq!(ca.current(), one);
        std::fs::write(&path, two).unwrap();
        assert_eq!(ca.current(), two);
    }

    #[test]
    fn a_watched_file_may_appear_later() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ingress-client-ca.crt");
        let one = "-----BEGIN CERTIFICATE-----\none\n-----END CERTIFICATE-----\n";
        let ca = CaFile::watch(&path);
        assert_eq!(ca.current(), "");
        std::fs::write(&path, "half").unwrap();
        assert_eq!(ca.current(), "");
        std::fs::write(&path, one).unwrap();
        assert_eq!(ca.current(), one);
        // Removed (the key left the Secret): the last CA stays.
        std::fs::remove_file(&path).unwrap();
        assert_eq!(ca.current(), one);
    }
}
