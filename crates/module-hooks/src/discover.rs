//! Finding hooks: every executable under a module's `hooks/` (addon-operator's walk), and the
//! Go `module-sdk` binaries among them.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Directories never searched: `lib` (shell libraries), `venv` (a module's Python), hidden.
const EXCLUDED_DIRS: &[&str] = &["lib", "venv"];

/// Executable files under `dir`, sorted by path; hidden entries and `lib` / `venv`
/// directories are skipped. A missing `dir` has no hooks.
pub fn executable_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    walk(dir, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let meta = std::fs::metadata(&path)?;
        if meta.is_dir() {
            if !EXCLUDED_DIRS.contains(&name.as_ref()) {
                walk(&path, out)?;
            }
        } else if meta.permissions().mode() & 0o111 != 0 {
            out.push(path);
        } else {
            tracing::debug!(path = %path.display(), "no executable permissions, chmod +x is required to run this hook");
        }
    }
    Ok(())
}

/// Whether `hook list` output is a module-sdk binary's: `Found N items:` with N ≥ 1.
pub fn is_batch_listing(stdout: &str) -> bool {
    stdout.lines().any(|line| {
        let Some(rest) = line.find("Found ").map(|i| &line[i + 6..]) else {
            return false;
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        !digits.is_empty()
            && digits.len() <= 4
            && !digits.starts_with('0')
            && rest[digits.len()..].starts_with(" items")
    })
}

/// Only extension-less executables can be module-sdk binaries.
pub fn may_be_batch(path: &Path) -> bool {
    path.extension().is_none()
}

/// The hook's name, addon-operator's: its path relative to `base` (the global hooks
/// directory, or the module's directory), after `<prefix>/` for a module hook — the module's
/// directory as the modules directory names it, so `040-node-manager/hooks/a.sh`.
pub fn hook_name(prefix: Option<&str>, base: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(base).unwrap_or(path).to_string_lossy();
    match prefix {
        Some(prefix) if !prefix.is_empty() => format!("{prefix}/{relative}"),
        _ => relative.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_names_are_paths_relative_to_the_modules_directory() {
        let cases: &[(Option<&str>, &str, &str, &str)] = &[
            (
                Some("040-node-manager"),
                "/modules/040-node-manager",
                "/modules/040-node-manager/hooks/a.sh",
                "040-node-manager/hooks/a.sh",
            ),
            // A downloaded module: its release directory is `<module>/v1.2.3`, its name in
            // the modules directory the module's.
            (
                Some("hooked"),
                "/downloaded/hooked/v1.2.3",
                "/downloaded/hooked/v1.2.3/hooks/sub/b.py",
                "hooked/hooks/sub/b.py",
            ),
            (None, "/global-hooks", "/global-hooks/tint.sh", "tint.sh"),
            (None, "/global-hooks", "/global-hooks/a/b.sh", "a/b.sh"),
        ];
        for (prefix, base, path, want) in cases {
            assert_eq!(
                hook_name(*prefix, Path::new(base), Path::new(path)),
                *want,
                "{path}"
            );
        }
    }

    #[test]
    fn batch_listing() {
        assert!(is_batch_listing("Found 2 items:\n0 - a\n1 - b\n"));
        assert!(is_batch_listing("Found 1 items:\n0 - a\n"));
        assert!(!is_batch_listing("Found 0 items:\n"));
        assert!(!is_batch_listing("usage: hook.sh\n"));
        assert!(!is_batch_listing(""));
    }
}
