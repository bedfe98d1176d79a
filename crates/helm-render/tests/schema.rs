//! Conformance: `values.schema.json` — Helm's report of values that break a chart's (or a
//! subchart's) schema, in gojsonschema's words and order. Each row is checked against the real
//! `helm` and against our renderer.
//!
//! Helm visits a schema's properties in Go's random map order, so every row keeps its failures
//! to one property path (plus the object's own keywords), where Helm's order is fixed.

#[path = "support/common.rs"]
mod common;

struct Row {
    name: &'static str,
    schema: &'static str,
    values: &'static str,
    args: &'static [&'static str],
    want: Result<&'static str, &'static str>,
}

const HEAD: &str =
    "Error: values don't meet the specifications of the schema(s) in the following chart(s):\n";
const OK: Result<&str, &str> = Ok("---\n# Source: t/templates/a.yaml\na: 1\n");

const ROWS: &[Row] = &[
    Row {
        name: "object keywords before the properties: required, additionalProperties, then a property's type",
        schema: r#"{"type":"object","properties":{"a":{"type":"string"}},"required":["x","a","w"],"additionalProperties":false}"#,
        values: "a: 1\nb: 2\n",
        args: &[],
        want: Err(
            "t:\n- (root): x is required\n- (root): w is required\n- (root): Additional property b is not allowed\n- a: Invalid type. Expected: string, given: integer",
        ),
    },
    Row {
        name: "the root is an object: a schema for a string fails at (root)",
        schema: r#"{"type":"string"}"#,
        values: "a: 1\n",
        args: &[],
        want: Err("t:\n- (root): Invalid type. Expected: string, given: object"),
    },
    Row {
        name: "string keywords: const and enum before minLength, pattern and format",
        schema: r#"{"properties":{"q":{"enum":["xx","yy",1,null],"minLength":5,"pattern":"^z","format":"email","const":"ww"}}}"#,
        values: "q: abc\n",
        args: &[],
        want: Err(
            "t:\n- q: q does not match: \"ww\"\n- q: q must be one of the following: \"xx\", \"yy\", 1, null\n- q: String length must be greater than or equal to 5\n- q: Does not match pattern '^z'\n- q: Does not match format 'email'",
        ),
    },
    Row {
        name: "a list of types is printed as [a,b] in the schema's order",
        schema: r#"{"properties":{"s":{"type":["integer","null"]}}}"#,
        values: "s: abc\n",
        args: &[],
        want: Err("t:\n- s: Invalid type. Expected: [integer,null], given: string"),
    },
    Row {
        name: "a null value from values.yaml is given: null; a whole float is an integer",
        schema: r#"{"properties":{"a":{"properties":{"b":{"type":"boolean"},"c":{"type":"integer"},"d":{"type":"object"}}}}}"#,
        values: "a:\n  b: true\n  c: 2.0\n  d: null\n",
        args: &[],
        want: Err("t:\n- a.d: Invalid type. Expected: object, given: null"),
    },
    Row {
        name: "combinators in gojsonschema's order: anyOf (closest branch), oneOf, allOf after its branches, not, dependencies, then",
        schema: r#"{"type":"object","anyOf":[{"required":["a"]},{"required":["b","c"],"properties":{"d":{"type":"string"}}}],"oneOf":[{"required":["d"]},{"required":["d"]}],"allOf":[{"required":["x"]},{"properties":{"d":{"minimum":3}}}],"not":{"required":["d"]},"if":{"required":["d"]},"then":{"required":["w"]},"dependencies":{"d":["q"]}}"#,
        values: "d: 1\n",
        args: &[],
        want: Err(
            "t:\n- (root): Must validate at least one schema (anyOf)\n- (root): a is required\n- (root): Must validate one and only one schema (oneOf)\n- (root): x is required\n- d: Must be greater than or equal to 3\n- (root): Must validate all the schemas (allOf)\n- (root): Must not validate the schema (not)\n- (root): Has a dependency on q\n- (root): Must validate \"then\" as \"if\" was valid\n- (root): w is required",
        ),
    },
    Row {
        name: "else: the else branch's errors after its line",
        schema: r#"{"if":{"required":["a"]},"else":{"properties":{"b":{"maxLength":1}}}}"#,
        values: "b: long\n",
        args: &[],
        want: Err(
            "t:\n- (root): Must validate \"else\" as \"if\" was not valid\n- b: String length must be less than or equal to 1",
        ),
    },
    Row {
        name: "number limits print as Go's %v of a float64: multipleOf before minimum",
        schema: r#"{"properties":{"num":{"minimum":12345678901,"multipleOf":7}}}"#,
        values: "num: 3\n",
        args: &[],
        want: Err(
            "t:\n- num: Must be a multiple of 7\n- num: Must be greater than or equal to 1.2345678901e+10",
        ),
    },
    Row {
        name: "maximum and exclusiveMaximum (draft 6 numbers)",
        schema: r#"{"properties":{"num":{"maximum":0.1,"exclusiveMaximum":1e-7}}}"#,
        values: "num: 1\n",
        args: &[],
        want: Err("t:\n- num: Must be less than or equal to 0.1\n- num: Must be less than 1e-07"),
    },
    Row {
        name: "draft 4 boolean exclusiveMinimum is read in a schema without $schema",
        schema: r#"{"properties":{"e":{"minimum":100,"exclusiveMinimum":true}}}"#,
        values: "e: 100\n",
        args: &[],
        want: Err("t:\n- e: Must be greater than 100"),
    },
    Row {
        name: "draft 4 schema with boolean exclusiveMaximum",
        schema: r#"{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"g":{"maximum":100,"exclusiveMaximum":true}}}"#,
        values: "g: 1000\n",
        args: &[],
        want: Err("t:\n- g: Must be less than 100"),
    },
    Row {
        name: "items: each item's errors, then minItems",
        schema: r#"{"properties":{"arr":{"type":"array","items":{"type":"string"},"minItems":5}}}"#,
        values: "arr: [1, x, 2]\n",
        args: &[],
        want: Err(
            "t:\n- arr.0: Invalid type. Expected: string, given: integer\n- arr.2: Invalid type. Expected: string, given: integer\n- arr: Array must have at least 5 items",
        ),
    },
    Row {
        name: "tuple items and additionalItems false",
        schema: r#"{"properties":{"e":{"items":[{"type":"string"}],"additionalItems":false}}}"#,
        values: "e: [1, 2]\n",
        args: &[],
        want: Err(
            "t:\n- e.0: Invalid type. Expected: string, given: integer\n- e: No additional items allowed on array",
        ),
    },
    Row {
        name: "maxItems and uniqueItems (every repeat, with the latest earlier index)",
        schema: r#"{"properties":{"b":{"maxItems":1,"uniqueItems":true}}}"#,
        values: "b: [1, 1, 1]\n",
        args: &[],
        want: Err(
            "t:\n- b: Array must have at most 1 items\n- b: array items[0,1] must be unique\n- b: array items[1,2] must be unique",
        ),
    },
    Row {
        name: "minProperties and propertyNames (the name's failure reported at the object)",
        schema: r#"{"properties":{"c":{"minProperties":3,"propertyNames":{"maxLength":1}}}}"#,
        values: "c: {long: 1}\n",
        args: &[],
        want: Err(
            "t:\n- c: Must have at least 3 properties\n- c: Property name of \"long\" does not match\n- c: String length must be less than or equal to 1",
        ),
    },
    Row {
        name: "maxProperties",
        schema: r#"{"properties":{"c":{"maxProperties":0}}}"#,
        values: "c: {k: 1}\n",
        args: &[],
        want: Err("t:\n- c: Must have at most 0 properties"),
    },
    Row {
        name: "patternProperties name the key",
        schema: r#"{"properties":{"d":{"patternProperties":{"^x":{"type":"string"}},"additionalProperties":{"type":"string"}}}}"#,
        values: "d: {xa: 1}\n",
        args: &[],
        want: Err("t:\n- d.xa: Invalid type. Expected: string, given: integer"),
    },
    Row {
        name: "additionalProperties schema: the field is the key",
        schema: r#"{"properties":{"o":{"additionalProperties":{"type":"string"}}}}"#,
        values: "o: {z: 1}\n",
        args: &[],
        want: Err("t:\n- o.z: Invalid type. Expected: string, given: integer"),
    },
    Row {
        name: "const of an object is printed as compact JSON",
        schema: r#"{"properties":{"h":{"const":{"a":[1],"b":"<"}}}}"#,
        values: "h: 1\n",
        args: &[],
        want: Err("t:\n- h: h does not match: {\"a\":[1],\"b\":\"\\u003c\"}"),
    },
    Row {
        name: "$ref to definitions",
        schema: r##"{"definitions":{"p":{"type":"integer","maximum":3}},"properties":{"a":{"$ref":"#/definitions/p"}}}"##,
        values: "a: 9\n",
        args: &[],
        want: Err("t:\n- a: Must be less than or equal to 3"),
    },
    Row {
        name: "nested paths: list indexes and keys joined with dots",
        schema: r#"{"properties":{"l":{"items":{"required":["name"],"properties":{"port":{"type":"integer"}}}}}}"#,
        values: "l:\n- name: a\n  port: x\n",
        args: &["--set", "l[1].port=1"],
        want: Err("t:\n- l.1: name is required"),
    },
    Row {
        name: "--set and --set-string values are what is checked",
        schema: r#"{"properties":{"n":{"type":"integer"}}}"#,
        values: "n: 1\n",
        args: &["--set-string", "n=2"],
        want: Err("t:\n- n: Invalid type. Expected: integer, given: string"),
    },
    Row {
        name: "a whole float (2.0 in values.yaml) is an integer",
        schema: r#"{"properties":{"n":{"type":"integer"}}}"#,
        values: "n: 2.0\n",
        args: &[],
        want: OK,
    },
    Row {
        name: "date-time: a bare date passes, a time without a zone does not",
        schema: r#"{"properties":{"g":{"format":"date-time"},"h":{"format":"date-time"}}}"#,
        values: "g: \"2020-01-01\"\nh: \"2020-01-01T00:00:00\"\n",
        args: &[],
        want: Err("t:\n- h: Does not match format 'date-time'"),
    },
    Row {
        name: "oneOf with two valid branches",
        schema: r#"{"oneOf":[{"type":"object"},{"required":["a"]}]}"#,
        values: "a: 1\n",
        args: &[],
        want: Err("t:\n- (root): Must validate one and only one schema (oneOf)"),
    },
    Row {
        name: "a schema that is not JSON: the bare reason, no dash",
        schema: r#"{"type": "object","#,
        values: "a: 1\n",
        args: &[],
        want: Err("t:\nunexpected EOF"),
    },
    Row {
        name: "valid values render",
        schema: r#"{"type":"object","required":["a"],"properties":{"a":{"type":"integer","minimum":1}}}"#,
        values: "a: 1\n",
        args: &[],
        want: OK,
    },
];

const SUB_ROWS: &[Row] = &[
    Row {
        name: "subchart schemas check the subchart's values (with global copied in), after the parent's",
        schema: r#"{"required":["top"]}"#,
        values: "sub:\n  port: x\n",
        args: &[],
        want: Err(
            "t:\n- (root): top is required\nsub:\n- (root): Additional property global is not allowed\n- port: Invalid type. Expected: integer, given: string",
        ),
    },
    Row {
        name: "a disabled subchart's schema is not checked",
        schema: r#"{}"#,
        values: "sub:\n  enabled: false\n  port: x\n",
        args: &[],
        want: OK,
    },
];

const SUB_CHART: &str = "apiVersion: v2\nname: t\nversion: 0.1.0\ndependencies:\n- name: sub\n  version: 0.2.0\n  condition: sub.enabled\n";
const SUB_SCHEMA: &str =
    r#"{"additionalProperties":false,"properties":{"port":{"type":"integer"},"enabled":{}}}"#;

fn files(row: &Row, sub: bool) -> Vec<(&'static str, &'static str)> {
    let mut f = vec![
        ("templates/a.yaml", "a: 1\n"),
        ("values.schema.json", row.schema),
    ];
    if sub {
        f.extend([
            ("Chart.yaml", SUB_CHART),
            (
                "charts/sub/Chart.yaml",
                "apiVersion: v2\nname: sub\nversion: 0.2.0\n",
            ),
            ("charts/sub/values.schema.json", SUB_SCHEMA),
        ]);
    }
    f
}

fn wants() -> Vec<(&'static str, Result<String, String>)> {
    ROWS.iter()
        .chain(SUB_ROWS)
        .map(|r| {
            (
                r.name,
                r.want.map(str::to_owned).map_err(|e| format!("{HEAD}{e}")),
            )
        })
        .collect()
}

fn run(side: impl Fn(&[(&str, &str)], &str, &[&str]) -> Result<String, String>) {
    let got: Vec<_> = ROWS
        .iter()
        .map(|r| (r, false))
        .chain(SUB_ROWS.iter().map(|r| (r, true)))
        .map(|(r, sub)| side(&files(r, sub), r.values, r.args))
        .collect();
    let wants = wants();
    let wants: Vec<(&str, Result<&str, &str>)> = wants
        .iter()
        .map(|(n, w)| (*n, w.as_deref().map_err(String::as_str)))
        .collect();
    common::check(&wants, &got);
}

#[test]
fn schema_table_is_what_helm_prints() {
    run(helm_oracle::helm_template);
}

#[test]
fn schema_table_is_what_we_print() {
    run(common::ours);
}
