//! The shared libraries a dynamically linked binary needs, as `ldd` reports them. The parser is
//! pure; [`needed`] is the one place that runs a program.

use std::path::{Path, PathBuf};

use crate::Error;

/// What `ldd` said about a binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Linkage {
    /// Statically linked: nothing else is needed.
    Static,
    /// Dynamically linked: these files (the dynamic loader included), at the paths the binary
    /// looks for them.
    Dynamic(Vec<PathBuf>),
}

/// Parses `ldd`'s standard output. `linux-vdso.so.1` (provided by the kernel) is skipped; a
/// library `ldd` could not find is an error naming it.
pub fn parse(output: &str) -> Result<Linkage, String> {
    let mut paths = Vec::new();
    for line in output.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("statically linked") || line == "not a dynamic executable" {
            return Ok(Linkage::Static);
        }
        // `libm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x…)` or `/lib64/ld-linux-x86-64.so.2 (0x…)`
        let (name, rest) = match line.split_once(" => ") {
            Some((name, rest)) => (name.trim(), rest.trim()),
            None => (line, line),
        };
        if rest.starts_with("not found") {
            return Err(format!("{name} not found"));
        }
        let path = rest.split(" (").next().unwrap_or(rest).trim();
        if path.starts_with('/') {
            paths.push(PathBuf::from(path));
        } else if !name.starts_with("linux-vdso") && !name.starts_with("linux-gate") {
            return Err(format!("unexpected line {line:?}"));
        }
    }
    paths.sort();
    paths.dedup();
    Ok(Linkage::Dynamic(paths))
}

/// Runs `ldd BINARY` and parses its answer.
pub fn needed(binary: &Path) -> Result<Linkage, Error> {
    let fail = |reason: String| Error::Libraries {
        binary: binary.to_path_buf(),
        reason,
    };
    let output = std::process::Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| fail(format!("run ldd: {e}")))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // ldd exits 1 for a static binary and says so on stdout or stderr, depending on the libc.
    if !output.status.success() {
        return match parse(&format!("{stdout}\n{stderr}")) {
            Ok(Linkage::Static) => Ok(Linkage::Static),
            _ => Err(fail(format!("ldd: {}", stderr.trim()))),
        };
    }
    parse(&stdout).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_binary() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd)\n\
            \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f1)\n\
            \tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f2)\n\
            \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f3)\n\
            \t/lib64/ld-linux-x86-64.so.2 (0x00007f4)\n";
        assert_eq!(
            parse(out).unwrap(),
            Linkage::Dynamic(vec![
                "/lib/x86_64-linux-gnu/libc.so.6".into(),
                "/lib/x86_64-linux-gnu/libgcc_s.so.1".into(),
                "/lib/x86_64-linux-gnu/libm.so.6".into(),
                "/lib64/ld-linux-x86-64.so.2".into(),
            ])
        );
    }

    #[test]
    fn static_binaries() {
        assert_eq!(
            parse("\tnot a dynamic executable\n").unwrap(),
            Linkage::Static
        );
        assert_eq!(parse("\tstatically linked\n").unwrap(), Linkage::Static);
    }

    #[test]
    fn a_missing_library_is_named() {
        let out = "\tlibfoo.so.1 => not found\n";
        assert_eq!(parse(out).unwrap_err(), "libfoo.so.1 not found");
    }

    #[test]
    fn ldd_of_a_real_binary_names_libc_and_the_loader() {
        let Linkage::Dynamic(paths) = needed(Path::new("/bin/sh")).unwrap() else {
            panic!("/bin/sh is dynamic on Debian")
        };
        assert!(paths.iter().any(|p| p.ends_with("libc.so.6")), "{paths:?}");
        assert!(
            paths
                .iter()
                .any(|p| p.to_string_lossy().contains("ld-linux")),
            "{paths:?}"
        );
    }
}
