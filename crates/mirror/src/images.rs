//! Images of your own in a bundle (`d8 mirror pull --image REF`, `--images-file FILE`): which
//! references to pull and where each goes in the bundle. Pure: text in, a plan out.
//!
//! A reference is read as `docker pull` reads it (`alpine` is `docker.io/library/alpine:latest`,
//! `127.0.0.1:5000/app@sha256:…` is pinned by digest). In the bundle an image keeps its
//! repository path, so `registry.example.com/team/app:v1` pushed into `HOST/system/deckhouse` is
//! `HOST/system/deckhouse/team/app:v1`. A tag pulled with a digest (`app:v1@sha256:…`) is pushed
//! as that tag, and only if the tag still names that digest at the source.

use std::collections::BTreeMap;

use crate::error::Error;

/// The package of a bundle that holds the images given with `--image` and `--images-file`.
pub const PACKAGE: &str = "images";

/// One image to pull.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Wanted {
    /// As normalised (`docker.io/library/alpine:latest`).
    pub reference: oci::Reference,
    /// The repository path in the bundle (and under the push target).
    pub repository: String,
    /// What the bundle's index entry is pushed as: the tag, or `@sha256:…` for by digest.
    pub short_tag: String,
    /// What to ask the source for: the digest when pinned, else the tag.
    pub fetch: String,
}

/// An image made on the spot from a local directory (`--image-dir DIR=REPOSITORY:TAG`): one
/// layer holding the directory's tree, owned by root, with the modes it has on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirImage {
    /// The directory.
    pub dir: std::path::PathBuf,
    /// The repository path in the bundle.
    pub repository: String,
    /// The tag.
    pub tag: String,
}

/// Parses `DIR=REPOSITORY:TAG` (the last `=` splits, so a directory may hold one).
pub fn parse_dir_image(text: &str) -> Result<DirImage, Error> {
    let bad = |why: &str| {
        Error::InvalidArgument(format!(
            "--image-dir {text:?}: {why}; expected DIR=REPOSITORY:TAG (e.g. ./site=team/site:v1)"
        ))
    };
    let (dir, name) = text.rsplit_once('=').ok_or_else(|| bad("no `=`"))?;
    if dir.is_empty() {
        return Err(bad("no directory"));
    }
    let (repository, tag) = name
        .rsplit_once(':')
        .filter(|(r, _)| !r.is_empty())
        .ok_or_else(|| bad("no tag"))?;
    oci::Repository::parse(repository).map_err(|e| bad(&e.to_string()))?;
    oci::Tag::parse(tag).map_err(|e| bad(&e.to_string()))?;
    Ok(DirImage {
        dir: dir.into(),
        repository: repository.to_owned(),
        tag: tag.to_owned(),
    })
}

/// Reads an images file: one reference per line; blank lines and `#` comments are skipped.
/// Line numbers in errors count from 1.
pub fn parse_file(text: &str) -> Result<Vec<String>, Error> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        if line.split_whitespace().nth(1).is_some() {
            return Err(Error::InvalidArgument(format!(
                "images file line {}: {line:?} holds more than one reference; put one image per line",
                n + 1
            )));
        }
        out.push(line.to_owned());
    }
    Ok(out)
}

/// Parses references and decides where each goes; duplicates collapse, and two references that
/// would land on the same repository and tag with different sources are refused.
pub fn plan(references: &[String]) -> Result<Vec<Wanted>, Error> {
    let mut by_target: BTreeMap<(String, String), Wanted> = BTreeMap::new();
    for text in references {
        let reference = oci::Reference::parse(text.trim()).map_err(|e| {
            Error::InvalidArgument(format!(
                "--image {text:?} is not an image reference ({e}); expected \
                 [REGISTRY/]REPOSITORY[:TAG][@sha256:DIGEST]"
            ))
        })?;
        let repository = reference.repository().as_str().to_owned();
        // `oci::Reference` always has a tag or a digest (`latest` when neither was given).
        let short_tag = match reference.tag() {
            Some(tag) => tag.as_str().to_owned(),
            None => format!("@{}", reference.manifest_reference()),
        };
        let wanted = Wanted {
            fetch: reference.manifest_reference(),
            repository,
            short_tag,
            reference,
        };
        let key = (wanted.repository.clone(), wanted.short_tag.clone());
        match by_target.get(&key) {
            Some(seen) if seen.reference != wanted.reference => {
                return Err(Error::InvalidArgument(format!(
                    "--image {} and --image {} would both be {}:{} in the bundle; keep one",
                    seen.reference, wanted.reference, key.0, key.1
                )));
            }
            Some(_) => {}
            None => {
                by_target.insert(key, wanted);
            }
        }
    }
    Ok(by_target.into_values().collect())
}

/// The registries to talk to, each once, sorted.
pub fn registries(wanted: &[Wanted]) -> Vec<oci::RegistryHost> {
    let set: std::collections::BTreeSet<&oci::RegistryHost> =
        wanted.iter().map(|w| w.reference.registry()).collect();
    set.into_iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Wanted {
        plan(&[text.to_owned()]).unwrap().remove(0)
    }

    #[test]
    fn references_land_under_their_repository_path() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let table: &[(&str, &str, &str, &str, &str)] = &[
            // given, registry, repository, pushed as, fetched as
            (
                "127.0.0.1:5000/team/app:v1",
                "127.0.0.1:5000",
                "team/app",
                "v1",
                "v1",
            ),
            ("localhost/app", "localhost", "app", "latest", "latest"),
            ("alpine:3.20", "docker.io", "library/alpine", "3.20", "3.20"),
            ("alpine", "docker.io", "library/alpine", "latest", "latest"),
        ];
        for (given, registry, repository, short, fetch) in table {
            let w = one(given);
            assert_eq!(w.reference.registry().as_str(), *registry, "{given}");
            assert_eq!(w.repository, *repository, "{given}");
            assert_eq!(w.short_tag, *short, "{given}");
            assert_eq!(w.fetch, *fetch, "{given}");
        }
        let by_digest = one(&format!("registry.example.com/app@{digest}"));
        assert_eq!(by_digest.short_tag, format!("@{digest}"));
        assert_eq!(by_digest.fetch, digest);
        let pinned = one(&format!("registry.example.com/app:v2@{digest}"));
        assert_eq!(pinned.short_tag, "v2", "a pinned tag is pushed as the tag");
        assert_eq!(pinned.fetch, digest, "and fetched by its digest");
    }

    #[test]
    fn bad_references_and_clashes_are_refused_in_words() {
        let table: &[(&[&str], &str)] = &[
            (&["Bad Name"], "is not an image reference"),
            (&["app@sha256:123"], "is not an image reference"),
            (
                &["a.example/app:v1", "b.example/app:v1"],
                "would both be app:v1 in the bundle",
            ),
        ];
        for (given, expected) in table {
            let refs: Vec<String> = given.iter().map(|s| (*s).to_owned()).collect();
            let err = plan(&refs).unwrap_err().to_string();
            assert!(err.contains(expected), "{given:?}: {err}");
        }
        let same = plan(&["a.example/app:v1".into(), "a.example/app:v1".into()]).unwrap();
        assert_eq!(same.len(), 1, "a reference given twice is pulled once");
    }

    #[test]
    fn directory_images_name_a_repository_and_a_tag() {
        let ok = parse_dir_image("./my=site=team/site:v1").unwrap();
        assert_eq!(ok.dir, std::path::PathBuf::from("./my=site"));
        assert_eq!(
            (ok.repository.as_str(), ok.tag.as_str()),
            ("team/site", "v1")
        );
        for (given, why) in [
            ("./site", "no `=`"),
            ("=site:v1", "no directory"),
            ("./site=site", "no tag"),
            ("./site=:v1", "no tag"),
            ("./site=Site:v1", "expected DIR=REPOSITORY:TAG"),
            ("./site=site:-bad", "expected DIR=REPOSITORY:TAG"),
        ] {
            let err = parse_dir_image(given).unwrap_err().to_string();
            assert!(err.contains(why), "{given}: {err}");
        }
    }

    #[test]
    fn images_files_hold_one_reference_per_line() {
        let text = "# my images\nregistry.example.com/app:v1\n\n  alpine:3.20   # the base\n";
        assert_eq!(
            parse_file(text).unwrap(),
            ["registry.example.com/app:v1", "alpine:3.20"]
        );
        let err = parse_file("a:v1 b:v2\n").unwrap_err().to_string();
        assert!(
            err.contains("line 1") && err.contains("one image per line"),
            "{err}"
        );
    }

    #[test]
    fn registries_are_listed_once_sorted() {
        let wanted = plan(&[
            "b.example/x:1".into(),
            "a.example/y:1".into(),
            "b.example/z:1".into(),
        ])
        .unwrap();
        let hosts: Vec<String> = registries(&wanted)
            .iter()
            .map(|h| h.as_str().to_owned())
            .collect();
        assert_eq!(hosts, ["a.example", "b.example"]);
    }
}
