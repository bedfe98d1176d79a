use go_template::{FuncMap, Templates, Value};

fn run(text: &str) -> Result<String, String> {
    let mut t = Templates::new(FuncMap::new());
    t.parse("t", text).map_err(|e| e.to_string())?;
    t.execute("t", &Value::Nil).map_err(|e| e.to_string())
}

#[test]
fn plain_text_and_a_string_constant() {
    assert_eq!(run("hello {{ \"x\" }}!").as_deref(), Ok("hello x!"));
    assert_eq!(run("{{ 1 }} {{ 1.5 }} {{ true }} {{ 'a' }}").as_deref(), Ok("1 1.5 true 97"));
    assert_eq!(run("{{ if 1 }}y{{ else }}n{{ end }}").as_deref(), Ok("y"));
    assert_eq!(run("{{ nope }}").unwrap_err(), "template: t:1: function \"nope\" not defined");
}
