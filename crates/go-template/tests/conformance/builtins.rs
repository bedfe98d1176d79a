//! Per builtin function: results and errors. (`slice` is not here: Helm replaces Go's with
//! sprig's.)

use super::{Row, assert_helm_agrees, assert_we_agree, err, ok};

pub(crate) const LOGIC: &[Row] = &[
    ok(
        "{{ and 1 0 2 }} {{ and 1 2 }} {{ or 0 \"\" 3 }} {{ or 0 \"\" }}",
        "0 2 3 ",
    ),
    ok("{{ and .Values.s .Values.m.c }}", "map[d:deep]"),
    ok("{{ or .Values.missing \"dflt\" }}", "dflt"),
    ok(
        "{{ and 0 (index .Values.list 10) }}{{ or 1 (index .Values.list 10) }}",
        "01",
    ),
    ok(
        "{{ not 0 }} {{ not .Values.s }} {{ not .Values.missing }} {{ 0 | not }}",
        "true false true true",
    ),
    ok("{{ .Values.s | and 1 }}", "str"),
    err(
        "{{ and }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <and>: wrong number of args for and: want at least 1 got 0",
    ),
    err(
        "{{ not 1 2 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <not>: wrong number of args for not: want 1 got 2",
    ),
];

pub(crate) const LEN_INDEX: &[Row] = &[
    ok(
        "{{ len .Values.list }} {{ len .Values.m }} {{ len .Values.s }} {{ len \"é\" }} {{ len .Values.empty }}",
        "3 3 3 2 0",
    ),
    ok(
        "{{ index .Values.list 1 }} {{ index .Values.m \"c\" \"d\" }} {{ index \"abc\" 1 }} {{ index .Values.nums 0 }}",
        "a deep 98 3",
    ),
    ok(
        "{{ index .Values.m \"zz\" }}|{{ index .Values.list 2 }}|{{ index .Values.m }}",
        "<no value>|<no value>|map[a:1 b:2 c:map[d:deep]]",
    ),
    err(
        "{{ len .Values.missing }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <len .Values.missing>: error calling len: len of nil pointer",
    ),
    err(
        "{{ $x := .Values.missing }}{{ len $x }}",
        "template: t/templates/case.yaml:1:30: executing \"t/templates/case.yaml\" at <len $x>: error calling len: reflect: call of reflect.Value.Type on zero Value",
    ),
    err(
        "{{ .Values.missing | len }}",
        "template: t/templates/case.yaml:1:21: executing \"t/templates/case.yaml\" at <len>: error calling len: reflect: call of reflect.Value.Type on zero Value",
    ),
    err(
        "{{ len 3 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <len 3>: error calling len: len of type int",
    ),
    err(
        "{{ len .Values.n }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <len .Values.n>: error calling len: len of type float64",
    ),
    err(
        "{{ index .Values.list 5 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <index .Values.list 5>: error calling index: index out of range: 5",
    ),
    err(
        "{{ index .Values.list 3 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <index .Values.list 3>: error calling index: reflect: slice index out of range",
    ),
    err(
        "{{ index .Values.list -1 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <index .Values.list -1>: error calling index: index out of range: -1",
    ),
    err(
        "{{ index .Values.m 1 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <index .Values.m 1>: error calling index: value has type int; should be string",
    ),
    err(
        "{{ index .Values.missing \"a\" }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <index .Values.missing \"a\">: error calling index: index of untyped nil",
    ),
    err(
        "{{ index .Values.m \"zz\" \"y\" }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <index .Values.m \"zz\" \"y\">: error calling index: index of nil pointer",
    ),
    err(
        "{{ index 1 0 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <index 1 0>: error calling index: can't index item of type int",
    ),
];

pub(crate) const COMPARISON: &[Row] = &[
    ok(
        "{{ eq 1 1 }} {{ eq \"a\" \"b\" }} {{ eq .Values.n 1.0 }} {{ eq .Values.s \"str\" }} {{ eq true true }}",
        "true false true true true",
    ),
    ok(
        "{{ eq 1 2 3 1 }} {{ eq .Values.s \"x\" \"y\" \"str\" }} {{ eq 1 2 3 }}",
        "true true false",
    ),
    ok(
        "{{ eq .Values.missing \"x\" }} {{ eq .Values.missing nil }} {{ eq nil nil }} {{ ne .Values.missing 1 }}",
        "false true true true",
    ),
    ok(
        "{{ ne 1 2 }} {{ lt 1 2 }} {{ le 2 2 }} {{ gt \"b\" \"a\" }} {{ ge 1.5 2.5 }} {{ lt .Values.n 2.0 }}",
        "true true true true false true",
    ),
    ok(
        "{{ eq (len .Values.list) 3 }} {{ lt (len .Values.s) 4 }}",
        "true true",
    ),
    err(
        "{{ eq 1 1.0 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <eq 1 1.0>: error calling eq: incompatible types for comparison",
    ),
    err(
        "{{ eq .Values.n 1 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <eq .Values.n 1>: error calling eq: incompatible types for comparison",
    ),
    err(
        "{{ eq .Values.s 1 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <eq .Values.s 1>: error calling eq: incompatible types for comparison",
    ),
    err(
        "{{ eq 1 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <eq 1>: error calling eq: missing argument for comparison",
    ),
    err(
        "{{ eq .Values.list .Values.list }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <eq .Values.list .Values.list>: error calling eq: non-comparable type [%!s(float64=1) a <nil>]: []interface {}",
    ),
    err(
        "{{ eq .Values.list .Values.m }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <eq .Values.list .Values.m>: error calling eq: non-comparable types [%!s(float64=1) a <nil>]: []interface {}, map[string]interface {}: map[a:1 b:2 c:map[d:deep]]",
    ),
    err(
        "{{ lt 1 1.5 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <lt 1 1.5>: error calling lt: incompatible types for comparison",
    ),
    err(
        "{{ lt true false }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <lt true false>: error calling lt: invalid type for comparison",
    ),
    err(
        "{{ lt .Values.missing 1 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <lt .Values.missing 1>: error calling lt: invalid type for comparison",
    ),
    err(
        "{{ gt .Values.list 1 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <gt .Values.list 1>: error calling gt: invalid type for comparison",
    ),
    err(
        "{{ ne 1 2 3 }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <ne>: wrong number of args for ne: want 2 got 3",
    ),
];

pub(crate) const PRINTING_AND_ESCAPING: &[Row] = &[
    ok(
        "{{ print 1 2 \"a\" \"b\" 3 .Values.missing }}",
        "1 2ab3 <nil>",
    ),
    ok("{{ println 1 \"a\" }}", "1 a\n"),
    ok(
        "{{ printf \"%d-%s-%v-%q\" 1 \"a\" .Values.n \"q\" }}",
        "1-a-1-\"q\"",
    ),
    ok(
        "{{ printf \"%v\" .Values.missing }} {{ printf \"%T\" .Values.n }} {{ printf \"%d\" }}",
        "<nil> float64 %!d(MISSING)",
    ),
    ok(
        "{{ html .Values.html }}",
        "&lt;a href=&#39;x&#39;&gt;&amp;&#34;&lt;/a&gt;",
    ),
    ok(
        "{{ html 1 \"<\" }} {{ html .Values.missing }} {{ html }}",
        "1&lt; &lt;no value&gt; ",
    ),
    ok(
        "{{ js .Values.html }}",
        "\\u003Ca href\\u003D\\'x\\'\\u003E\\u0026\\\"\\u003C/a\\u003E",
    ),
    ok("{{ js \"a\\nb=é\\u2028\" }}", "a\\u000Ab\\u003Dé\\u2028"),
    ok(
        "{{ urlquery \"a b&c=d/é\" }} {{ urlquery .Values.n \"x\" }}",
        "a+b%26c%3Dd%2F%C3%A9 1x",
    ),
    ok("{{ .Values.s | printf \"%s|%s\" \"a\" }}", "a|str"),
];

pub(crate) const CALL: &[Row] = &[
    err(
        "{{ call .Values.missing }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <call .Values.missing>: error calling call: call of nil",
    ),
    err(
        "{{ call .Values.s }}",
        "template: t/templates/case.yaml:1:3: executing \"t/templates/case.yaml\" at <call .Values.s>: error calling call: non-function .Values.s of type string",
    ),
];

#[test]
fn helm_agrees_with_the_builtin_tables() {
    let all: Vec<Row> = [LOGIC, LEN_INDEX, COMPARISON, PRINTING_AND_ESCAPING, CALL].concat();
    assert_helm_agrees(&all);
}

#[test]
fn we_agree_with_the_builtin_tables() {
    let all: Vec<Row> = [LOGIC, LEN_INDEX, COMPARISON, PRINTING_AND_ESCAPING, CALL].concat();
    assert_we_agree(&all);
}
