//! Behaviours Helm charts rely on, pinned by name. (The conformance tables check the same
//! kinds of rows against real Helm; these pin the API and the subtle cases one by one.)

use std::cell::Cell;
use std::rc::Rc;

use go_template::{
    CallError, ErrorKind, Func, FuncMap, Limits, Map, MissingKey, Object, Signature, Templates, Ty,
    Value,
};

fn values(json: &str) -> Value {
    let v: serde_json::Value = serde_json::from_str(json).expect("test JSON");
    let mut top = Map::new();
    top.insert("Values".into(), Value::from_json(&v));
    Value::map(top)
}

fn helm_like(funcs: FuncMap) -> Templates {
    let mut t = Templates::new(funcs);
    t.set_missing_key(MissingKey::Zero);
    t
}

fn render(text: &str, json: &str) -> Result<String, String> {
    let mut t = helm_like(FuncMap::new());
    t.parse("t.yaml", text).map_err(|e| e.to_string())?;
    t.execute("t.yaml", &values(json))
        .map_err(|e| e.to_string())
}

#[test]
fn range_over_map_is_in_sorted_key_order() {
    let out = render(
        "{{ range $k, $v := .Values }}{{ $k }}={{ $v }};{{ end }}",
        r#"{"b": 2, "B": 3, "a": 1, "aa": 0}"#,
    );
    assert_eq!(out.as_deref(), Ok("B=3;a=1;aa=0;b=2;"));
}

#[test]
fn eq_int_and_float_is_an_error_in_helm() {
    // Values are float64, template constants int.
    let err = render("{{ eq .Values.replicas 1 }}", r#"{"replicas": 1}"#).unwrap_err();
    assert!(
        err.ends_with("error calling eq: incompatible types for comparison"),
        "{err}"
    );
    assert_eq!(
        render("{{ eq .Values.replicas 1.0 }}", r#"{"replicas": 1}"#).as_deref(),
        Ok("true")
    );
}

#[test]
fn trim_marker_around_end_eats_newline() {
    let text = "items:\n{{- range .Values.l }}\n- {{ . }}\n{{- end }}\n";
    assert_eq!(
        render(text, r#"{"l": ["a", "b"]}"#).as_deref(),
        Ok("items:\n- a\n- b\n")
    );
}

#[test]
fn trim_marker_needs_a_space_so_minus_one_is_a_number() {
    assert_eq!(render("x {{-1}}", "{}").as_deref(), Ok("x -1"));
    assert_eq!(render("x {{- 1}}", "{}").as_deref(), Ok("x1"));
}

#[test]
fn missing_key_prints_no_value_which_helm_later_removes() {
    assert_eq!(
        render("[{{ .Values.nope }}]", "{}").as_deref(),
        Ok("[<no value>]")
    );
}

#[test]
fn missing_key_as_a_direct_argument_is_a_nil_interface_but_piped_is_no_value() {
    let mut funcs = FuncMap::new();
    funcs.insert(
        "upper".into(),
        Func::new(Signature::fixed(&[Ty::String]), |a| {
            Ok(Value::string(
                a[0].as_str().unwrap_or_default().to_uppercase(),
            ))
        }),
    );
    let mut t = helm_like(funcs);
    t.parse("a", "{{ upper .Values.nope }}").unwrap();
    t.parse("b", "{{ .Values.nope | upper }}").unwrap();
    let a = t.execute("a", &values("{}")).unwrap_err().to_string();
    let b = t.execute("b", &values("{}")).unwrap_err().to_string();
    assert!(
        a.ends_with("wrong type for value; expected string; got interface {}"),
        "{a}"
    );
    assert!(b.ends_with("invalid value; expected string"), "{b}");
}

#[test]
fn field_of_a_missing_value_is_a_nil_pointer_error_with_helm_but_not_by_default() {
    let err = render("{{ .Values.a.b }}", "{}").unwrap_err();
    assert_eq!(
        err,
        "template: t.yaml:1:10: executing \"t.yaml\" at <.Values.a.b>: nil pointer evaluating interface {}.b"
    );
    let mut t = Templates::new(FuncMap::new());
    t.parse("t", "{{ .Values.a.b }}").unwrap();
    assert_eq!(t.execute("t", &values("{}")).as_deref(), Ok("<no value>"));
}

#[test]
fn missingkey_error_names_the_key() {
    let mut t = Templates::new(FuncMap::new());
    t.set_missing_key(MissingKey::Error);
    t.parse("t", "{{ .Values.nope }}").unwrap();
    let err = t.execute("t", &values("{}")).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Exec);
    assert!(
        err.message.ends_with("map has no entry for key \"nope\""),
        "{err}"
    );
}

#[test]
fn and_or_return_the_deciding_value_and_stop_evaluating() {
    assert_eq!(
        render(
            "{{ or .Values.a .Values.b \"c\" }}|{{ and 1 \"x\" }}",
            r#"{"b": [1]}"#
        )
        .as_deref(),
        Ok("[1]|x")
    );
    // The failing index is never evaluated.
    assert_eq!(
        render("{{ or 1 (index .Values.l 5) }}", r#"{"l": []}"#).as_deref(),
        Ok("1")
    );
}

#[test]
fn variables_declared_in_a_block_end_with_it_but_assignment_reaches_out() {
    let out = render(
        "{{ $x := 1 }}{{ range .Values.l }}{{ $x = . }}{{ $y := 0 }}{{ end }}{{ $x }}",
        r#"{"l": ["a", "b"]}"#,
    );
    assert_eq!(out.as_deref(), Ok("b"));
}

#[test]
fn break_and_continue_leave_the_innermost_range() {
    let text = "{{ range .Values.l }}{{ range $.Values.l }}{{ if eq . \"b\" }}{{ break }}{{ end }}{{ . }}{{ end }};{{ end }}";
    assert_eq!(
        render(text, r#"{"l": ["a", "b", "c"]}"#).as_deref(),
        Ok("a;a;a;")
    );
}

#[test]
fn a_later_parse_replaces_a_definition_but_an_empty_one_does_not() {
    let mut t = helm_like(FuncMap::new());
    t.parse("a", "{{ define \"x\" }}one{{ end }}").unwrap();
    t.parse("b", "{{ define \"x\" }}two{{ end }}").unwrap();
    t.parse("c", "{{ define \"x\" }} {{ end }}").unwrap();
    t.parse("main", "{{ template \"x\" }}").unwrap();
    assert_eq!(t.execute("main", &Value::Nil).as_deref(), Ok("two"));
    assert_eq!(t.names(), ["a", "b", "c", "main", "x"]);
    assert!(t.has("x") && !t.has("y"));
}

#[test]
fn the_same_name_defined_twice_in_one_text_is_a_parse_error() {
    let mut t = helm_like(FuncMap::new());
    let err = t
        .parse(
            "a",
            "{{ define \"x\" }}1{{ end }}\n{{ define \"x\" }}2{{ end }}",
        )
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Parse);
    assert_eq!(
        err.message,
        "template: a:2: template: multiple definition of template \"x\""
    );
}

#[test]
fn unknown_template_names_the_set() {
    let t = helm_like(FuncMap::new());
    let err = t.execute("nope", &Value::Nil).unwrap_err();
    assert_eq!(
        err.message,
        "template: no template \"nope\" associated with template \"gotpl\""
    );
}

fn env_funcs() -> FuncMap {
    let mut f = FuncMap::new();
    f.insert(
        "include".into(),
        Func::with_env(Signature::fixed(&[Ty::String, Ty::Any]), |env, a| {
            env.execute_template(a[0].as_str().unwrap_or_default(), &a[1])
                .map(Value::string)
        }),
    );
    f.insert(
        "tpl".into(),
        Func::with_env(Signature::fixed(&[Ty::String, Ty::Any]), |env, a| {
            env.execute_text("gotpl", a[0].as_str().unwrap_or_default(), &a[1])
                .map(Value::string)
        }),
    );
    f
}

#[test]
fn tpl_sees_every_definition_and_its_own_defines_stay_in_the_copy() {
    let mut t = helm_like(env_funcs());
    t.parse("h", "{{ define \"greet\" }}hi {{ . }}{{ end }}")
        .unwrap();
    t.parse(
        "main",
        "{{ tpl \"{{ define \\\"own\\\" }}own{{ end }}{{ include \\\"greet\\\" .Values.n }} {{ include \\\"own\\\" . }}\" . }}",
    )
    .unwrap();
    assert_eq!(
        t.execute("main", &values(r#"{"n": "bob"}"#)).as_deref(),
        Ok("hi bob own")
    );
    assert!(!t.has("own"));
}

#[test]
fn include_errors_carry_the_inner_template_error() {
    let mut t = helm_like(env_funcs());
    t.parse("h", "{{ define \"bad\" }}{{ .x.y }}{{ end }}")
        .unwrap();
    t.parse("main", "{{ include \"bad\" .Values }}").unwrap();
    let err = t.execute("main", &values("{}")).unwrap_err().to_string();
    assert_eq!(
        err,
        "template: main:1:3: executing \"main\" at <include \"bad\" .Values>: error calling include: \
         template: h:1:23: executing \"bad\" at <.x.y>: nil pointer evaluating interface {}.y"
    );
}

#[test]
fn runaway_recursion_stops_with_an_error_not_a_crash() {
    for text in [
        "{{ define \"r\" }}{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}",
        "{{ define \"r\" }}{{ include \"r\" . }}{{ end }}{{ include \"r\" . }}",
        "{{ define \"r\" }}{{ tpl \"{{ include \\\"r\\\" . }}\" . }}{{ end }}{{ include \"r\" . }}",
    ] {
        let mut t = helm_like(env_funcs());
        t.parse("main", text).unwrap();
        let err = t.execute("main", &Value::Nil).unwrap_err().to_string();
        assert!(
            err.contains("exceeded maximum template depth")
                || err.contains("exceeded the stack limit"),
            "{err}"
        );
    }
}

#[test]
fn depth_limit_uses_gos_message() {
    let mut t = helm_like(env_funcs());
    t.set_limits(Limits {
        max_depth: 10,
        ..Limits::default()
    });
    t.parse(
        "main",
        "{{ define \"r\" }}{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}",
    )
    .unwrap();
    let err = t.execute("main", &Value::Nil).unwrap_err().to_string();
    assert_eq!(
        err,
        "template: main:1:28: executing \"r\" at <{{template \"r\" .}}>: exceeded maximum template depth (10)"
    );
}

#[test]
fn output_is_bounded() {
    let mut t = helm_like(env_funcs());
    t.set_limits(Limits {
        max_output: 1000,
        ..Limits::default()
    });
    t.parse(
        "main",
        "{{ range .Values.l }}{{ range $.Values.l }}0123456789{{ end }}{{ end }}",
    )
    .unwrap();
    let l: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    let err = t
        .execute("main", &values(&serde_json::json!({ "l": l }).to_string()))
        .unwrap_err();
    assert!(
        err.message
            .ends_with("template output exceeds the limit of 1000 bytes"),
        "{err}"
    );
}

#[derive(Debug)]
struct Chart;

impl Object for Chart {
    fn type_name(&self) -> String {
        "*chart.Metadata".into()
    }
    fn field(&self, name: &str) -> Option<Value> {
        (name == "Name").then(|| Value::string("mychart"))
    }
    fn is_method(&self, name: &str) -> bool {
        name == "Get"
    }
    fn method(&self, name: &str, args: &[Value]) -> Result<Value, CallError> {
        match args {
            [Value::String(s)] => Ok(Value::string(format!("{name}:{s}"))),
            _ => Err(CallError::Exec(format!(
                "wrong number of args for {name}: want 1 got {}",
                args.len()
            ))),
        }
    }
    fn format(&self) -> String {
        "{mychart}".into()
    }
}

#[test]
fn objects_have_fields_and_methods_with_arguments() {
    let mut top = Map::new();
    top.insert("Chart".into(), Value::object(Chart));
    let data = Value::map(top);
    let run = |text: &str| {
        let mut t = helm_like(FuncMap::new());
        t.parse("t", text).unwrap();
        t.execute("t", &data).map_err(|e| e.to_string())
    };
    assert_eq!(
        run("{{ .Chart.Name }} {{ .Chart.Get \"x\" }} {{ \"y\" | .Chart.Get }}").as_deref(),
        Ok("mychart Get:x Get:y")
    );
    assert_eq!(
        run("{{ .Chart.Name 1 }}").unwrap_err(),
        "template: t:1:9: executing \"t\" at <.Chart.Name>: Name has arguments but cannot be invoked as function"
    );
    assert_eq!(
        run("{{ .Chart.Nope }}").unwrap_err(),
        "template: t:1:9: executing \"t\" at <.Chart.Nope>: can't evaluate field Nope in type interface {}"
    );
    assert!(
        run("{{ .Chart.Get }}")
            .unwrap_err()
            .ends_with("wrong number of args for Get: want 1 got 0")
    );
}

#[test]
fn a_function_named_break_makes_break_an_identifier() {
    let mut f = FuncMap::new();
    f.insert(
        "break".into(),
        Func::new(Signature::fixed(&[]), |_| Ok(Value::string("b"))),
    );
    let mut t = helm_like(f);
    t.parse("t", "{{ break }}").unwrap();
    assert_eq!(t.execute("t", &Value::Nil).as_deref(), Ok("b"));
}

#[test]
fn add_funcs_overrides_a_builtin() {
    let mut t = helm_like(FuncMap::new());
    let mut f = FuncMap::new();
    f.insert(
        "len".into(),
        Func::new(Signature::fixed(&[Ty::Any]), |_| Ok(Value::Int(42))),
    );
    t.add_funcs(f);
    t.parse("t", "{{ len \"abc\" }}").unwrap();
    assert_eq!(t.execute("t", &Value::Nil).as_deref(), Ok("42"));
}

/// How much stack one level of `include` recursion costs: run it on a big thread with a
/// known stack budget and count the levels reached. Printed, for the crate docs.
#[test]
fn stack_per_include_level_is_measured() {
    let budget = 16 << 20;
    let levels = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let count = Rc::new(Cell::new(0usize));
            let mut f = env_funcs();
            let c = count.clone();
            f.insert(
                "count".into(),
                Func::new(Signature::fixed(&[]), move |_| {
                    c.set(c.get() + 1);
                    Ok(Value::string(""))
                }),
            );
            let mut t = helm_like(f);
            t.set_limits(Limits {
                max_depth: usize::MAX,
                max_stack: budget,
                ..Limits::default()
            });
            t.parse("main", "{{ define \"r\" }}{{ count }}{{ if true }}{{ with 1 }}{{ include \"r\" . }}{{ end }}{{ end }}{{ end }}{{ include \"r\" . }}")
                .unwrap();
            let err = t.execute("main", &Value::Nil).unwrap_err().to_string();
            assert!(err.contains("exceeded the stack limit"), "{err}");
            count.get()
        })
        .unwrap()
        .join()
        .unwrap();
    eprintln!(
        "include level (with an if and a with): {} bytes",
        budget / levels
    );
    assert!(levels > 100, "{levels}");
}

#[test]
fn exponential_template_calls_stop_at_the_step_limit() {
    // Never deeper than 40 levels, prints nothing, doubles its work per level: Go would run it
    // for ages. The step budget stops it (the default budget within seconds).
    let mut t = helm_like(env_funcs());
    t.set_limits(Limits {
        max_steps: 1_000_000,
        ..Limits::default()
    });
    t.parse(
        "main",
        "{{define \"x\"}}{{if lt (len $) 40}}{{template \"x\" (print $ \".\")}}{{template \"x\" (print $ \".\")}}{{end}}{{end}}{{template \"x\" \"\"}}",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let err = t.execute("main", &Value::Nil).unwrap_err().to_string();
    assert!(
        err.ends_with(
            "exceeded the limit of 1000000 evaluation steps (the template does too much work)"
        ),
        "{err}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    const { assert!(go_template::DEFAULT_MAX_STEPS >= 10_000_000) };
}

#[test]
fn step_limit_counts_nodes_range_iterations_and_calls() {
    let run = |max_steps: u64, text: &str| {
        let mut t = helm_like(env_funcs());
        t.set_limits(Limits {
            max_steps,
            ..Limits::default()
        });
        t.parse("main", text).unwrap();
        t.execute("main", &values(r#"{"l":[1,2,3]}"#))
            .map_err(|e| e.to_string())
    };
    // One action node, one call of `print`.
    assert_eq!(run(2, "{{ print 1 }}"), Ok("1".into()));
    assert_eq!(
        run(1, "{{ print 1 }}"),
        Err("template: main:1:3: executing \"main\" at <print>: exceeded the limit of 1 evaluation steps (the template does too much work)".into())
    );
    // The range node, three iterations, three action nodes inside.
    assert_eq!(
        run(7, "{{ range .Values.l }}{{ . }}{{ end }}"),
        Ok("123".into())
    );
    assert!(run(6, "{{ range .Values.l }}{{ . }}{{ end }}").is_err());
}
