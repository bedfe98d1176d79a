//! `.helmignore`: Helm's rules for which files of a chart directory are not part of the chart
//! (`pkg/ignore`). Paths are `/`-separated and relative to the chart root. The directory
//! reader (the CLI) applies them; the rules themselves are pure.

use crate::glob::path_match;

/// The name of the ignore file.
pub const HELMIGNORE: &str = ".helmignore";

/// Why an ignore file was refused: Helm's text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IgnoreError {
    /// A rule with `**`.
    #[error("double-star (**) syntax is not supported")]
    DoubleStar,
    /// A rule Go's `filepath.Match` cannot compile.
    #[error("syntax error in pattern")]
    BadPattern,
}

#[derive(Clone, Debug)]
struct Rule {
    pattern: String,
    negate: bool,
    must_dir: bool,
    kind: RuleKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RuleKind {
    /// `/x`: matched against the whole path.
    Rooted,
    /// `a/b`: matched against the whole path.
    Structural,
    /// `x`: matched against the base name.
    Base,
}

/// A parsed `.helmignore`, with Helm's default rule (`templates/.?*`) appended.
#[derive(Clone, Debug)]
pub struct HelmIgnore {
    rules: Vec<Rule>,
}

impl Default for HelmIgnore {
    fn default() -> Self {
        let mut h = HelmIgnore { rules: Vec::new() };
        h.add_defaults();
        h
    }
}

impl HelmIgnore {
    /// Parses an ignore file (then adds Helm's defaults, as the directory loader does).
    pub fn parse(text: &str) -> Result<HelmIgnore, IgnoreError> {
        let mut h = HelmIgnore { rules: Vec::new() };
        for line in text.lines() {
            h.add(line)?;
        }
        h.add_defaults();
        Ok(h)
    }

    fn add_defaults(&mut self) {
        // A constant rule: it parses.
        let _ = self.add("templates/.?*");
    }

    fn add(&mut self, line: &str) -> Result<(), IgnoreError> {
        let rule = line.trim();
        if rule.is_empty() || rule.starts_with('#') {
            return Ok(());
        }
        if rule.contains("**") {
            return Err(IgnoreError::DoubleStar);
        }
        if path_match(rule, "abc").is_err() {
            return Err(IgnoreError::BadPattern);
        }
        let (negate, rule) = match rule.strip_prefix('!') {
            Some(r) => (true, r),
            None => (false, rule),
        };
        let (must_dir, rule) = match rule.strip_suffix('/') {
            Some(r) => (true, r),
            None => (false, rule),
        };
        let (kind, pattern) = if let Some(r) = rule.strip_prefix('/') {
            (RuleKind::Rooted, r)
        } else if rule.contains('/') {
            (RuleKind::Structural, rule)
        } else {
            (RuleKind::Base, rule)
        };
        self.rules.push(Rule {
            pattern: pattern.to_owned(),
            negate,
            must_dir,
            kind,
        });
        Ok(())
    }

    /// Whether `path` (relative, `/`-separated; `is_dir` for directories, whose whole
    /// subtree is then skipped) is ignored. Helm's semantics, including its reading of `!`
    /// rules: a negated rule that does *not* match ignores the path.
    pub fn ignore(&self, path: &str, is_dir: bool) -> bool {
        if path.is_empty() || path == "." || path == "./" {
            return false;
        }
        for r in &self.rules {
            let matches = || {
                let target = match r.kind {
                    RuleKind::Base => crate::chart::go_base(path),
                    _ => path,
                };
                path_match(&r.pattern, target).unwrap_or(false)
            };
            if r.negate {
                if r.must_dir && !is_dir {
                    return true;
                }
                if !matches() {
                    return true;
                }
                continue;
            }
            if r.must_dir && !is_dir {
                continue;
            }
            if matches() {
                return true;
            }
        }
        false
    }
}

/// Applies a chart's `.helmignore` (if among `files`) to an in-memory file list, as Helm's
/// directory loader does while walking: a file goes when it, or a directory above it, is
/// ignored.
pub fn filter_files(files: Vec<(String, Vec<u8>)>) -> Result<Vec<(String, Vec<u8>)>, IgnoreError> {
    let rules = match files.iter().find(|(p, _)| p == HELMIGNORE) {
        Some((_, data)) => HelmIgnore::parse(&String::from_utf8_lossy(data))?,
        None => HelmIgnore::default(),
    };
    Ok(files
        .into_iter()
        .filter(|(path, _)| {
            let mut dir = String::new();
            for part in path
                .split('/')
                .collect::<Vec<_>>()
                .split_last()
                .map_or(&[][..], |(_, d)| d)
            {
                if !dir.is_empty() {
                    dir.push('/');
                }
                dir.push_str(part);
                if rules.ignore(&dir, true) {
                    return false;
                }
            }
            !rules.ignore(path, false)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_as_helm_reads_them() {
        let h = HelmIgnore::parse("# c\n*.tmp\n/top.txt\nsecret/\ndocs/*.md\n").expect("parses");
        assert!(h.ignore("a.tmp", false));
        assert!(h.ignore("x/a.tmp", false));
        assert!(h.ignore("top.txt", false));
        assert!(!h.ignore("x/top.txt", false));
        assert!(h.ignore("secret", true));
        assert!(!h.ignore("secret", false));
        assert!(h.ignore("docs/a.md", false));
        assert!(!h.ignore("docs/x/a.md", false));
        assert!(h.ignore("templates/.hidden", false));
        assert!(!h.ignore("templates/a.yaml", false));
        assert_eq!(
            HelmIgnore::parse("a/**").err(),
            Some(IgnoreError::DoubleStar)
        );
        assert_eq!(HelmIgnore::parse("[").err(), Some(IgnoreError::BadPattern));
    }
}
