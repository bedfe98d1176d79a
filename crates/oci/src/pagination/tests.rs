use super::*;
use proptest::prelude::*;

fn tags(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn pages_table() {
    let all = tags(&["v2", "latest", "v10", "v1", "V1", "v1"]);
    // (n, last, expected page, expected next `last`)
    type Case<'a> = (Option<u32>, Option<&'a str>, &'a [&'a str], Option<&'a str>);
    let cases: &[Case<'_>] = &[
        (None, None, &["V1", "latest", "v1", "v10", "v2"], None),
        (Some(2), None, &["V1", "latest"], Some("latest")),
        (Some(2), Some("latest"), &["v1", "v10"], Some("v10")),
        (Some(2), Some("v10"), &["v2"], None),
        (Some(3), Some("v10"), &["v2"], None),
        (Some(5), None, &["V1", "latest", "v1", "v10", "v2"], None),
        (Some(0), None, &[], None),
        (None, Some("v2"), &[], None),
        (None, Some("m"), &["v1", "v10", "v2"], None),
        (None, Some("zzz"), &[], None),
    ];
    for (n, last, want, next) in cases {
        let p = paginate(all.clone(), *n, *last);
        assert_eq!(p.items, tags(want), "n={n:?} last={last:?}");
        assert_eq!(p.next_last.as_deref(), *next, "n={n:?} last={last:?}");
    }
}

#[test]
fn link_headers() {
    let p = paginate(tags(&["a", "b c", "d"]), Some(2), None);
    assert_eq!(
        p.link("/v2/library/nginx/tags/list", 2).as_deref(),
        Some("</v2/library/nginx/tags/list?n=2&last=b+c>; rel=\"next\"")
    );
    assert_eq!(paginate(tags(&["a"]), Some(2), None).link("/x", 2), None);
    assert_eq!(
        next_link("/v2/_catalog", 1, "a/b"),
        "</v2/_catalog?n=1&last=a%2Fb>; rel=\"next\""
    );
    assert_eq!(
        parse_next_link("</v2/x/tags/list?n=2&last=b>; rel=\"next\""),
        Some("/v2/x/tags/list?n=2&last=b")
    );
    assert_eq!(
        parse_next_link("<https://a/p>; rel=prev, <https://a/n>; REL = \"next\""),
        Some("https://a/n")
    );
    assert_eq!(parse_next_link("<https://a/p>; rel=\"prev\""), None);
    assert_eq!(parse_next_link("garbage"), None);
}

#[test]
fn bodies() {
    let t: TagList = serde_json::from_str(r#"{"name":"test/img","tags":null}"#).unwrap();
    assert!(t.tags.is_empty());
    let t: TagList = serde_json::from_str(r#"{"name":"test/img","tags":["v1"]}"#).unwrap();
    assert_eq!(
        serde_json::to_string(&t).unwrap(),
        r#"{"name":"test/img","tags":["v1"]}"#
    );
    let c: Catalog = serde_json::from_str(r#"{"repositories":["test/img"]}"#).unwrap();
    assert_eq!(c.repositories, ["test/img"]);
}

proptest! {
    #[test]
    fn walking_pages_yields_everything_once(items in proptest::collection::vec("[a-zA-Z0-9._-]{1,6}", 0..40), n in 1u32..7) {
        let mut expected = items.clone();
        expected.sort();
        expected.dedup();
        let mut seen = Vec::new();
        let mut last: Option<String> = None;
        for _ in 0..100 {
            let page = paginate(items.clone(), Some(n), last.as_deref());
            prop_assert!(page.items.len() <= n as usize);
            seen.extend(page.items);
            match page.next_last {
                Some(l) => last = Some(l),
                None => break,
            }
        }
        prop_assert_eq!(seen, expected);
    }
}
