//! Per construct: literals, trim markers, comments, variables, if/with/range, templates,
//! fields and missing values, function arguments, and the parse errors of each.

use super::{Row, assert_helm_agrees, assert_we_agree, err, ok};

pub(crate) const LITERALS: &[Row] = &[
    ok(r#"{{ "x" }}"#, "x"),
    ok(r#"{{ `raw\n` }}"#, r"raw\n"),
    ok(r#"{{ "a\tb\u00e9\x41" }}"#, "a\tbéA"),
    ok("{{ 'a' }} {{ '\\n' }} {{ '\\u00e9' }}", "97 10 233"),
    ok(
        "{{ 0x1F }} {{ 0o17 }} {{ 017 }} {{ 0b101 }} {{ 1_000 }}",
        "31 15 15 5 1000",
    ),
    ok(
        "{{ 1.5 }} {{ 1e3 }} {{ 1.0 }} {{ -2 }} {{ +3 }} {{ .5 }} {{ 0x1p4 }}",
        "1.5 1000 1 -2 3 0.5 16",
    ),
    ok(
        "{{ 1e21 }} {{ 1e-7 }} {{ 123456789.0 }}",
        "1e+21 1e-07 1.23456789e+08",
    ),
    ok("{{ true }}{{ false }}", "truefalse"),
    ok(
        "{{ .Values.s }} {{ .Values.n }} {{ .Values.f }} {{ .Values.big }} {{ .Values.t }}",
        "str 1 1.5 1.2345678e+07 true",
    ),
    ok("{{ .Values.list }} {{ .Values.empty }}", "[1 a <nil>] []"),
    ok("{{ .Values.m }}", "map[a:1 b:2 c:map[d:deep]]"),
    ok(
        "{{ .Values.nul }}|{{ .Values.missing }}|{{ .Values.m.missing }}",
        "<no value>|<no value>|<no value>",
    ),
    ok("{{ 9223372036854775807 }}", "9223372036854775807"),
    err(
        "{{ 9223372036854775808 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <9223372036854775808>: 9223372036854775808 overflows int",
    ),
    err(
        "{{ 08 }}",
        "template: t/templates/case.yaml:1: integer overflow: \"08\"",
    ),
    err(
        "{{ 1x }}",
        "template: t/templates/case.yaml:1: bad number syntax: \"1x\"",
    ),
    err(
        "{{ 'ab' }}",
        "template: t/templates/case.yaml:1: malformed character constant: 'ab'",
    ),
    err(
        "{{ \"abc }}",
        "template: t/templates/case.yaml:1: unterminated quoted string",
    ),
    err(
        "{{ `abc }}",
        "template: t/templates/case.yaml:1: unterminated raw quoted string",
    ),
    err(
        "{{ nil }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <nil>: nil is not a command",
    ),
    err(
        "{{ \"a\".b }}",
        "template: t/templates/case.yaml:1: unexpected . after term \"\\\"a\\\"\"",
    ),
];

pub(crate) const TRIM_AND_COMMENTS: &[Row] = &[
    ok("a  {{- 1 -}}  b", "a1b"),
    ok("a\n{{- 1 }}\nb", "a1\nb"),
    ok("{{ 1 -}}\n\n  x", "1x"),
    ok("a {{-1}}", "a -1"),
    ok("{{ if true -}}\n  yes\n{{- end }}", "yes"),
    ok("x\n  {{- /* c */ -}}\n  y", "xy"),
    ok("x {{/* c */}} y", "x  y"),
    ok("[{{- /* multi\nline */ -}}]", "[]"),
    ok("a\n{{- \"b\" -}}\n\tc\n", "abc\n"),
    err(
        "{{ /* c */ }}",
        "template: t/templates/case.yaml:1: unexpected \"/\" in command",
    ),
    err(
        "{{/* c */ 1 }}",
        "template: t/templates/case.yaml:1: comment ends before closing delimiter",
    ),
    err(
        "{{/* c }}",
        "template: t/templates/case.yaml:1: unclosed comment",
    ),
];

pub(crate) const VARIABLES: &[Row] = &[
    ok("{{ $x := 1 }}{{ $x }}", "1"),
    ok("{{ $x := 1 }}{{ $x = 2 }}{{ $x }}", "2"),
    ok(
        "{{ $x := 1 }}{{ if true }}{{ $x := 2 }}{{ $x }}{{ end }}{{ $x }}",
        "21",
    ),
    ok(
        "{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}",
        "2",
    ),
    ok("{{ $.Values.s }}", "str"),
    ok(
        "{{ with .Values.m }}{{ $.Values.s }}{{ .a }}{{ end }}",
        "str1",
    ),
    ok("{{ $x := .Values.list }}{{ len $x }}", "3"),
    ok("{{ $x := .Values.m }}{{ $x.c.d }}", "deep"),
    ok("{{ $x := .Values.missing }}{{ $x }}", "<no value>"),
    err(
        "{{ $x }}",
        "template: t/templates/case.yaml:1: undefined variable \"$x\"",
    ),
    err(
        "{{ if true }}{{ $x := 1 }}{{ end }}{{ $x }}",
        "template: t/templates/case.yaml:1: undefined variable \"$x\"",
    ),
    err(
        "{{ $x = 1 }}",
        "template: t/templates/case.yaml:1:8: executing \"t/templates/case.yaml\" at <1>: undefined variable: $x",
    ),
    err(
        "{{ $x, $y := 1 }}",
        "template: t/templates/case.yaml:1: too many declarations in command",
    ),
    err(
        "{{ $x := }}",
        "template: t/templates/case.yaml:1: missing value for command",
    ),
];

pub(crate) const IF_WITH: &[Row] = &[
    ok("{{ if .Values.t }}a{{ else }}b{{ end }}", "a"),
    ok(
        "{{ if .Values.zero }}a{{ else if .Values.emptys }}b{{ else if .Values.empty }}c{{ else }}d{{ end }}",
        "d",
    ),
    ok(
        "{{ if .Values.missing }}a{{ else }}b{{ end }}{{ if .Values.nul }}y{{ else }}n{{ end }}",
        "bn",
    ),
    ok(
        "{{ if .Values.m }}y{{ end }}{{ if .Values.f }}y{{ end }}",
        "yy",
    ),
    ok("{{ with .Values.m.c }}{{ .d }}{{ end }}", "deep"),
    ok("{{ with .Values.missing }}x{{ else }}none{{ end }}", "none"),
    ok(
        "{{ with .Values.zero }}x{{ else with .Values.s }}{{ . }}{{ end }}",
        "str",
    ),
    ok(
        "{{ with $x := .Values.s }}{{ $x }}{{ . }}{{ end }}",
        "strstr",
    ),
    err(
        "{{ if }}{{ end }}",
        "template: t/templates/case.yaml:1: missing value for if",
    ),
    err(
        "{{ if true }}",
        "template: t/templates/case.yaml:1: unexpected EOF",
    ),
    err(
        "{{ end }}",
        "template: t/templates/case.yaml:1: unexpected {{end}}",
    ),
    err(
        "{{ else }}",
        "template: t/templates/case.yaml:1: unexpected {{else}}",
    ),
    err(
        "{{ if true }}{{ else }}{{ else }}{{ end }}",
        "template: t/templates/case.yaml:1: expected end; found {{else}}",
    ),
    err(
        "{{ with 1 }}{{ else if 2 }}{{ end }}",
        "template: t/templates/case.yaml:1: unexpected <if> in input",
    ),
    err(
        "{{ if 0 }}{{ else with 2 }}{{ end }}",
        "template: t/templates/case.yaml:1: unexpected <with> in input",
    ),
    err(
        "{{ if 1 }}\n{{ else }}\n{{ end }}\n{{ end }}",
        "template: t/templates/case.yaml:4: unexpected {{end}}",
    ),
];

pub(crate) const RANGE: &[Row] = &[
    ok(
        "{{ range .Values.list }}[{{ . }}]{{ end }}",
        "[1][a][<no value>]",
    ),
    ok(
        "{{ range $i, $v := .Values.nums }}{{ $i }}={{ $v }} {{ end }}",
        "0=3 1=1 2=2 ",
    ),
    ok("{{ range $k, $v := .Values.m }}{{ $k }}{{ end }}", "abc"),
    ok("{{ range $v := .Values.nums }}{{ $v }}{{ end }}", "312"),
    ok(
        "{{ range .Values.empty }}x{{ else }}empty{{ end }}",
        "empty",
    ),
    ok(
        "{{ range .Values.missing }}x{{ else }}none{{ end }}",
        "none",
    ),
    err(
        "{{ range 3 }}{{ . }}{{ end }}",
        "template: t/templates/case.yaml:1:9: executing \"t/templates/case.yaml\" at <3>: range can't iterate over 3",
    ),
    ok(
        "{{ range .Values.nums }}{{ if eq . 1.0 }}{{ break }}{{ end }}{{ . }}{{ end }}",
        "3",
    ),
    ok(
        "{{ range .Values.nums }}{{ if eq . 1.0 }}{{ continue }}{{ end }}{{ . }}{{ end }}",
        "32",
    ),
    ok(
        "{{ $x := 0 }}{{ range $x = .Values.nums }}{{ end }}{{ $x }}",
        "2",
    ),
    ok(
        "{{ range $i, $e := list \"a\" \"b\" }}{{ $i }}{{ $e }}{{ end }}",
        "0a1b",
    ),
    err(
        "{{ range $i, $e := 3 }}{{ end }}",
        "template: t/templates/case.yaml:1:19: executing \"t/templates/case.yaml\" at <3>: range can't iterate over 3",
    ),
    err(
        "{{ range .Values.s }}{{ end }}",
        "template: t/templates/case.yaml:1:16: executing \"t/templates/case.yaml\" at <.Values.s>: range can't iterate over str",
    ),
    err(
        "{{ range .Values.f }}{{ end }}",
        "template: t/templates/case.yaml:1:16: executing \"t/templates/case.yaml\" at <.Values.f>: range can't iterate over 1.5",
    ),
    err(
        "{{ range $v := .Values.nums }}{{ end }}{{ $v }}",
        "template: t/templates/case.yaml:1: undefined variable \"$v\"",
    ),
    err(
        "{{ break }}",
        "template: t/templates/case.yaml:1: {{break}} outside {{range}}",
    ),
    err(
        "{{ range .Values.nums }}{{ continue 1 }}{{ end }}",
        "template: t/templates/case.yaml:1: unexpected \"1\" in {{continue}}",
    ),
    err(
        "{{ range $a, $b, $c := .Values.nums }}{{ end }}",
        "template: t/templates/case.yaml:1: too many declarations in range",
    ),
    err(
        "{{ range $a, 1 }}{{ end }}",
        "template: t/templates/case.yaml:1: range can only initialize variables",
    ),
];

pub(crate) const TEMPLATES: &[Row] = &[
    ok("{{ template \"x\" 1 }}", "X1"),
    ok("{{ template \"x\" }}", "X<no value>"),
    ok("{{ template \"dollar\" \"hi\" }}", "hi"),
    ok("{{ block \"blk1\" .Values.s }}<{{ . }}>{{ end }}", "<str>"),
    ok(
        "{{ include \"inc\" \"v\" }}{{ include \"x\" 2 | len }}",
        "[v]2",
    ),
    ok("{{ tpl \"{{ .Values.s }}-{{ 1 }}\" . }}", "str-1"),
    ok(
        "{{ include \"field\" nil }}|{{ template \"field\" }}|{{ include \"inc\" .Values.missing }}",
        "<no value>|<no value>|[<no value>]",
    ),
    err(
        "{{ template \"nope\" }}",
        "template: t/templates/case.yaml:1:12: executing \"t/templates/case.yaml\" at <{{template \"nope\"}}>: template \"nope\" not defined",
    ),
    err(
        "{{ template \"fails\" .Values }}",
        "template: t/templates/_defs.tpl:5:8: executing \"fails\" at <.nope.deeper>: nil pointer evaluating interface {}.deeper",
    ),
    err(
        "{{ include \"nope\" . }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <include \"nope\" .>: error calling include: template: no template \"nope\" associated with template \"gotpl\"",
    ),
    err(
        "{{ template .Values.s }}",
        "template: t/templates/case.yaml:1: unexpected \".Values\" in template clause",
    ),
    err(
        "{{ define \"x\" }}{{ end }}{{ define \"x\" }}a{{ end }}{{ define \"x\" }}b{{ end }}",
        "template: t/templates/case.yaml:1: template: multiple definition of template \"x\"",
    ),
    err(
        "{{ define \"y\" }}",
        "template: t/templates/case.yaml:1: unexpected EOF",
    ),
    err(
        "{{ define \"y\" }}{{ else }}{{ end }}",
        "template: t/templates/case.yaml:1: unexpected {{else}} in define clause",
    ),
    err(
        "{{ define y }}{{ end }}",
        "template: t/templates/case.yaml:1: unexpected \"y\" in define clause",
    ),
];

pub(crate) const FIELDS_AND_CALLS: &[Row] = &[
    ok("{{ .Values.m.c.d }}", "deep"),
    ok("{{ (.Values.m).c.d }}", "deep"),
    ok("{{ .Values.s | upper }}", "STR"),
    ok("{{ upper .Values.s | printf \"%s!\" }}", "STR!"),
    ok("{{ repeat 2 \"ab\" }}{{ \"cd\" | repeat 2 }}", "ababcdcd"),
    ok(
        "{{ list 1 \"a\" 2.5 nil .Values.missing }}",
        "[1 a 2.5 <nil> <nil>]",
    ),
    ok("{{ atoi \"42\" | printf \"%T\" }}", "int"),
    err(
        "{{ .Values.missing.deeper }}",
        "template: t/templates/case.yaml:1:10: executing \"t/templates/case.yaml\" at <.Values.missing.deeper>: nil pointer evaluating interface {}.deeper",
    ),
    err(
        "{{ .Values.s.x }}",
        "template: t/templates/case.yaml:1:10: executing \"t/templates/case.yaml\" at <.Values.s.x>: can't evaluate field x in type interface {}",
    ),
    err(
        "{{ $x := .Values.s }}{{ $x.y }}",
        "template: t/templates/case.yaml:1:26: executing \"t/templates/case.yaml\" at <$x.y>: can't evaluate field y in type string",
    ),
    err(
        "{{ upper .Values.missing }}",
        "template: t/templates/case.yaml:1:16: executing \"t/templates/case.yaml\" at <.Values.missing>: wrong type for value; expected string; got interface {}",
    ),
    err(
        "{{ .Values.missing | upper }}",
        "template: t/templates/case.yaml:1:21: executing \"t/templates/case.yaml\" at <upper>: invalid value; expected string",
    ),
    err(
        "{{ upper .Values.n }}",
        "template: t/templates/case.yaml:1:16: executing \"t/templates/case.yaml\" at <.Values.n>: wrong type for value; expected string; got float64",
    ),
    err(
        "{{ upper 1 }}",
        "template: t/templates/case.yaml:1:9: executing \"t/templates/case.yaml\" at <1>: expected string; found 1",
    ),
    err(
        "{{ repeat 1.5 \"a\" }}",
        "template: t/templates/case.yaml:1:10: executing \"t/templates/case.yaml\" at <1.5>: expected integer; found 1.5",
    ),
    err(
        "{{ repeat \"a\" \"b\" }}",
        "template: t/templates/case.yaml:1:10: executing \"t/templates/case.yaml\" at <\"a\">: expected integer; found \"a\"",
    ),
    err(
        "{{ upper nil }}",
        "template: t/templates/case.yaml:1:9: executing \"t/templates/case.yaml\" at <nil>: cannot assign nil to string",
    ),
    err(
        "{{ upper }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <upper>: wrong number of args for upper: want 1 got 0",
    ),
    err(
        "{{ upper \"a\" \"b\" }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <upper>: wrong number of args for upper: want 1 got 2",
    ),
    err(
        "{{ printf }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <printf>: wrong number of args for printf: want at least 1 got 0",
    ),
    err(
        "{{ .Values.m.a 1 }}",
        "template: t/templates/case.yaml:1:10: executing \"t/templates/case.yaml\" at <.Values.m.a>: a is not a method but has arguments",
    ),
    err(
        "{{ 1 | .Values.s }}",
        "template: t/templates/case.yaml:1:14: executing \"t/templates/case.yaml\" at <.Values.s>: s is not a method but has arguments",
    ),
    err(
        "{{ \"a\" | 1 }}",
        "template: t/templates/case.yaml:1: non executable command in pipeline stage 2",
    ),
    err(
        "{{ $x := 1 }}{{ $x 2 }}",
        "template: t/templates/case.yaml:1:16: executing \"t/templates/case.yaml\" at <$x>: can't give argument to non-function $x",
    ),
    err(
        "{{ nope }}",
        "template: t/templates/case.yaml:1: function \"nope\" not defined",
    ),
    err(
        "{{ (1) 2 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <(1) 2>: can't give argument to non-function 1",
    ),
    err(
        "{{ (1 }}",
        "template: t/templates/case.yaml:1: unclosed left paren",
    ),
    err(
        "{{ 1) }}",
        "template: t/templates/case.yaml:1: unexpected right paren",
    ),
    err(
        "{{ 1 ",
        "template: t/templates/case.yaml:1: unclosed action",
    ),
    err(
        "{{ 1\n\n",
        "template: t/templates/case.yaml:3: unclosed action started at t/templates/case.yaml:1",
    ),
    err(
        "{{ | . }}",
        "template: t/templates/case.yaml:1: unexpected \"|\" in command",
    ),
    err(
        "{{ . := 1 }}",
        "template: t/templates/case.yaml:1: unexpected \":=\" in operand",
    ),
    err(
        "{{ $x := 1 }}{{ $x.a.b }}",
        "template: t/templates/case.yaml:1:18: executing \"t/templates/case.yaml\" at <$x.a.b>: can't evaluate field a in type int",
    ),
    err(
        "{{ # }}",
        "template: t/templates/case.yaml:1: unexpected \"#\" in command",
    ),
    err(
        "{{ \u{1} }}",
        "template: t/templates/case.yaml:1: unrecognized character in action: U+0001",
    ),
    err(
        "{{ .a@ }}",
        "template: t/templates/case.yaml:1: bad character U+0040 '@'",
    ),
];

#[test]
fn helm_agrees_with_the_construct_tables() {
    let all: Vec<Row> = [
        LITERALS,
        TRIM_AND_COMMENTS,
        VARIABLES,
        IF_WITH,
        RANGE,
        TEMPLATES,
        FIELDS_AND_CALLS,
    ]
    .concat();
    assert_helm_agrees(&all);
}

#[test]
fn we_agree_with_the_construct_tables() {
    let all: Vec<Row> = [
        LITERALS,
        TRIM_AND_COMMENTS,
        VARIABLES,
        IF_WITH,
        RANGE,
        TEMPLATES,
        FIELDS_AND_CALLS,
    ]
    .concat();
    assert_we_agree(&all);
}
