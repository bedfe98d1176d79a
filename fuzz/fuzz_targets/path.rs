//! The request-path parser on arbitrary input: never panics, and whatever parses re-parses
//! to the same request from its canonical form.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let (path, query) = match text.split_once('?') {
        Some((p, q)) => (p.to_owned(), Some(q)),
        None => (text.to_string(), None),
    };
    // Half the inputs get the /v2/ prefix so the fuzzer spends its time past the first check.
    let path = if mode & 1 == 0 { format!("/v2/{path}") } else { path };
    if let Ok(req) = oci::path::parse(&path, query) {
        let canonical = req.route.path();
        let mut q: Vec<String> = req.route.query().into_iter().collect();
        if let Some(ns) = &req.ns {
            q.push(format!("ns={}", ns.as_str().replace('[', "%5B").replace(']', "%5D").replace(':', "%3A")));
        }
        let again = oci::path::parse(&canonical, Some(&q.join("&")))
            .unwrap_or_else(|e| panic!("canonical form {canonical:?} of {path:?} does not parse: {e}"));
        assert_eq!(again, req, "canonical form of {path:?} parses differently");
        assert!(!canonical.contains("/../") && !canonical.contains('\0'));
    }
});
