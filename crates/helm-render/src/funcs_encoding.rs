//! Helm's encoding functions (`pkg/engine/funcs.go`): `toYaml`, `toYamlPretty`, `fromYaml`,
//! `fromYamlArray`, `toJson`, `fromJson`, `fromJsonArray`, `toToml`. Like Helm, the `to`
//! functions swallow errors (an empty string; `toToml` writes the error text) and the `from`
//! functions return the error inside the result (`Error` key, or the list's only item).

use go_template::{CallError, Func, FuncMap, Signature, Ty, Value};

use crate::{toml, yaml};

/// Helm's encoding functions, to be registered over sprig's (Helm's `toJson` replaces
/// sprig's).
pub fn encoding_funcs() -> FuncMap {
    let mut m = FuncMap::new();
    let any = Signature::fixed(&[Ty::Any]);
    let string = Signature::fixed(&[Ty::String]);
    m.insert(
        "toYaml".into(),
        Func::new(any, |a| {
            let s = yaml::to_yaml(&a[0]).unwrap_or_default();
            Ok(Value::string(s.strip_suffix('\n').unwrap_or(&s)))
        }),
    );
    m.insert(
        "toYamlPretty".into(),
        Func::new(any, |a| {
            let s = yaml::to_yaml_pretty(&a[0]).unwrap_or_default();
            Ok(Value::string(s.strip_suffix('\n').unwrap_or(&s)))
        }),
    );
    m.insert(
        "toJson".into(),
        Func::new(any, |a| {
            Ok(Value::string(
                sprig::json::marshal(&a[0], true).unwrap_or_default(),
            ))
        }),
    );
    m.insert(
        "fromYaml".into(),
        Func::new(string, |a| {
            let text = a[0].as_str().unwrap_or_default();
            Ok(Value::map(match yaml::parse_values(text) {
                Ok(m) => m,
                Err(e) => error_map(e.message()),
            }))
        }),
    );
    m.insert(
        "fromYamlArray".into(),
        Func::new(string, |a| {
            let text = a[0].as_str().unwrap_or_default();
            Ok(Value::list(match yaml::parse_list(text) {
                Ok(l) => l,
                Err(e) => vec![Value::string(e.message())],
            }))
        }),
    );
    m.insert(
        "fromJson".into(),
        Func::new(string, |a| {
            let (mut map, err) = sprig::json::unmarshal_map(a[0].as_str().unwrap_or_default());
            if let Some(e) = err {
                map.insert("Error".into(), Value::string(e));
            }
            Ok(Value::map(map))
        }),
    );
    m.insert(
        "fromJsonArray".into(),
        Func::new(string, |a| {
            let (list, err) = sprig::json::unmarshal_list(a[0].as_str().unwrap_or_default());
            Ok(Value::list(match err {
                Some(e) => vec![Value::string(e)],
                None => list,
            }))
        }),
    );
    m.insert(
        "toToml".into(),
        Func::new(any, |a| {
            if matches!(a[0], Value::Nil) {
                // Go's encoder panics on a nil interface; text/template reports the panic.
                return Err(CallError::Call(
                    "reflect: call of reflect.Value.Type on zero Value".into(),
                ));
            }
            Ok(Value::string(toml::encode(&a[0]).unwrap_or_else(|e| e)))
        }),
    );
    m
}

fn error_map(message: &str) -> go_template::Map {
    let mut m = go_template::Map::new();
    m.insert("Error".into(), Value::string(message));
    m
}

#[cfg(test)]
mod tests;
