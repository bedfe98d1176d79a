//! State directories only their owner can read: the process creates files 0600 and directories
//! 0700 (umask 077, inherited by child processes), and state left by earlier versions loses its
//! group and other bits at start.

use std::path::Path;

use anyhow::Context as _;

/// The mode `mode` becomes: group and other bits cleared, the owner's kept (hooks stay
/// executable).
fn tightened(mode: u32) -> u32 {
    mode & !0o077
}

/// Sets umask 077 for this process and its children, creates `dir` and clears group and other
/// permission bits of everything under it (symbolic links are left alone).
pub(crate) fn make_private(dir: &Path) -> anyhow::Result<()> {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    tighten(dir)
}

fn tighten(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta =
        std::fs::symlink_metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mode = meta.permissions().mode();
    if tightened(mode) != mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(tightened(mode)))
            .with_context(|| format!("restricting {}", path.display()))?;
    }
    if meta.is_dir() {
        for entry in
            std::fs::read_dir(path).with_context(|| format!("listing {}", path.display()))?
        {
            tighten(&entry?.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_and_other_bits_go_the_owners_stay() {
        for (mode, want) in [
            (0o100644, 0o100600),
            (0o100755, 0o100700),
            (0o040755, 0o040700),
            (0o100600, 0o100600),
            (0o100777, 0o100700),
        ] {
            assert_eq!(tightened(mode), want, "{mode:o}");
        }
    }
}
