use super::*;

struct NoFuncs;

impl FuncNames for NoFuncs {
    fn has(&self, name: &str) -> bool {
        crate::builtins::is_builtin(name)
    }
}

fn parse_err(text: &str) -> String {
    match parse("t", text, &NoFuncs) {
        Ok(_) => panic!("{text:?} parsed"),
        Err(e) => e,
    }
}

#[test]
fn nodes_print_as_go_prints_them() {
    let trees = parse(
        "t",
        "{{ $x := index .a 1 | printf \"%d\" }}{{ (len .b).c }}",
        &NoFuncs,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let text = trees[0].root.to_string();
    assert_eq!(text, "{{$x := index .a 1 | printf \"%d\"}}{{(len .b).c}}");
}

#[test]
fn deep_parentheses_are_refused_not_overflowed() {
    let text = format!("{{{{ {}1{} }}}}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(parse_err(&text).ends_with("max expression depth exceeded"));
    let text = format!(
        "{}{}",
        "{{ if 1 }}".repeat(100_000),
        "{{ end }}".repeat(100_000)
    );
    assert!(parse_err(&text).ends_with("max expression depth exceeded"));
}

#[test]
fn numbers_read_as_go_reads_them() {
    let n = |s: &str| new_number(0, s, ItemType::Number);
    assert_eq!(n("0x1F").map(|n| n.int).ok(), Some(31));
    assert_eq!(n("0o17").map(|n| n.int).ok(), Some(15));
    assert_eq!(n("017").map(|n| n.int).ok(), Some(15));
    assert_eq!(n("0b101").map(|n| n.int).ok(), Some(5));
    assert_eq!(n("1_000").map(|n| n.int).ok(), Some(1000));
    assert_eq!(
        n("1e3").map(|n| (n.is_int, n.int, n.float)).ok(),
        Some((true, 1000, 1000.0))
    );
    assert_eq!(n("0x1p-2").map(|n| n.float).ok(), Some(0.25));
    assert_eq!(n("08").err(), Some("integer overflow: \"08\"".into()));
    assert_eq!(
        n("1__0").err(),
        Some("illegal number syntax: \"1__0\"".into())
    );
}
