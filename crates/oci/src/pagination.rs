//! Tag and catalog listings: lexical order, `n`/`last` pagination and the `Link` header.
//!
//! As in distribution: entries are sorted by byte order and de-duplicated, entries up to and
//! including `last` are skipped, at most `n` are returned, and when more remain the answer
//! carries `Link: <path?n=N&last=L>; rel="next"` with `L` the last entry returned. `n = 0`
//! returns an empty list without a link.

use serde::{Deserialize, Serialize};

use crate::encoding::query_escape;

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The entries, sorted.
    pub items: Vec<String>,
    /// The `last` to ask for the next page with, if there is one.
    pub next_last: Option<String>,
}

impl Page {
    /// The `Link` header value for the next page of the listing at `path`
    /// (e.g. `/v2/library/nginx/tags/list`), if there is a next page.
    pub fn link(&self, path: &str, n: u32) -> Option<String> {
        self.next_last
            .as_deref()
            .map(|last| next_link(path, n, last))
    }
}

/// Sorts, de-duplicates and cuts one page out of `items`.
pub fn paginate<I: IntoIterator<Item = String>>(
    items: I,
    n: Option<u32>,
    last: Option<&str>,
) -> Page {
    let mut all: Vec<String> = items.into_iter().collect();
    all.sort_unstable();
    all.dedup();
    let start = last.map_or(0, |l| all.partition_point(|x| x.as_str() <= l));
    let mut items = all.split_off(start);
    let more = match n {
        Some(n) if items.len() > n as usize => {
            items.truncate(n as usize);
            true
        }
        _ => false,
    };
    let next_last = if more { items.last().cloned() } else { None };
    Page { items, next_last }
}

/// `<path?n=N&last=L>; rel="next"`.
pub fn next_link(path: &str, n: u32, last: &str) -> String {
    format!("<{path}?n={n}&last={}>; rel=\"next\"", query_escape(last))
}

/// Reads the target of a `Link: <…>; rel="next"` header, if it has one.
pub fn parse_next_link(value: &str) -> Option<&str> {
    value.split(',').find_map(|link| {
        let (target, params) = link.trim().strip_prefix('<')?.split_once('>')?;
        let is_next = params.split(';').any(|p| {
            let p = p.trim().replace(' ', "");
            p.eq_ignore_ascii_case("rel=\"next\"") || p.eq_ignore_ascii_case("rel=next")
        });
        is_next.then_some(target)
    })
}

/// The body of `GET /v2/<name>/tags/list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagList {
    /// The repository.
    pub name: String,
    /// The tags (distribution sends `null` for none; both read as empty).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub tags: Vec<String>,
}

/// The body of `GET /v2/_catalog`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    /// The repositories.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub repositories: Vec<String>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests;
