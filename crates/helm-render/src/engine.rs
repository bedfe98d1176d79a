//! Helm's `pkg/engine`: every template of every chart parsed into one set (deepest paths
//! first, so a parent's `define` wins over a subchart's), each non-partial template executed
//! with its chart's scope (`.Values` scoped to the subchart, `.Chart`, `.Files`, `.Release`,
//! `.Capabilities`, `.Template`, `.Subcharts`), `<no value>` removed from the output, and
//! errors cleaned up into Helm's `parse error at (…)` / `execution error at (…)` forms.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use go_template::{
    CallError, ErrorKind, Func, FuncMap, Limits, Map, MissingKey, Signature, Templates, Ty, Value,
};

use crate::chart::Chart;
use crate::objects::{ChartObject, FilesObject};

/// A template to parse, with the scope it executes in.
#[derive(Debug, Clone)]
pub struct Renderable {
    /// `t/templates/x.yaml`, `t/charts/sub/templates/y.yaml`.
    pub name: String,
    /// The template text.
    pub text: String,
    /// The chart's top-level object (shared by the chart's templates).
    pub scope: Value,
    /// `t/templates`.
    pub base_path: String,
}

/// Helm's `recAllTpls`: the templates of `chart` and its subcharts with their scopes. `top`
/// holds `Values`, `Release` and `Capabilities`.
pub fn all_templates(chart: &Chart, top: &Map) -> Vec<Renderable> {
    let mut out = Vec::new();
    rec_all(chart, top, chart.name(), true, &mut out);
    sort_templates(&mut out);
    out
}

fn rec_all(
    c: &Chart,
    parent: &Map,
    full_path: &str,
    is_root: bool,
    out: &mut Vec<Renderable>,
) -> Value {
    let values = if is_root {
        parent
            .get("Values")
            .cloned()
            .unwrap_or_else(|| Value::map(Map::new()))
    } else {
        match parent.get("Values") {
            Some(Value::Map(v)) => match v.borrow().get(c.name()) {
                Some(Value::Map(m)) => Value::Map(m.clone()),
                _ => Value::map(Map::new()),
            },
            _ => Value::map(Map::new()),
        }
    };
    let subcharts = Value::map(Map::new());
    // Root objects other than Helm's (the caller's, see `RenderOptions::root`) reach every
    // chart as they are; Helm's own are set below.
    let mut next: Map = parent
        .iter()
        .filter(|(name, _)| !crate::HELM_OBJECTS.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    next.insert(
        "Chart".into(),
        Value::object(ChartObject {
            metadata: c.metadata.clone(),
            is_root,
        }),
    );
    next.insert("Files".into(), Value::object(FilesObject::new(&c.files)));
    next.insert(
        "Release".into(),
        parent.get("Release").cloned().unwrap_or_default(),
    );
    next.insert(
        "Capabilities".into(),
        parent.get("Capabilities").cloned().unwrap_or_default(),
    );
    next.insert("Values".into(), values);
    next.insert("Subcharts".into(), subcharts.clone());
    let next_map = next.clone();
    let scope = Value::map(next);
    for child in &c.dependencies {
        let child_path = format!("{full_path}/charts/{}", child.name());
        let child_scope = rec_all(child, &next_map, &child_path, false, out);
        if let Value::Map(s) = &subcharts {
            s.borrow_mut().insert(child.name().to_owned(), child_scope);
        }
    }
    for t in &c.templates {
        // Library charts contribute only their partials.
        if c.is_library() && !crate::chart::go_base(&t.name).starts_with('_') {
            continue;
        }
        out.push(Renderable {
            name: format!("{full_path}/{}", t.name),
            text: String::from_utf8_lossy(&t.data).into_owned(),
            scope: scope.clone(),
            base_path: format!("{full_path}/templates"),
        });
    }
    scope
}

/// Helm's parse order: more `/` first; equal depth in reverse lexical order.
fn sort_templates(list: &mut [Renderable]) {
    list.sort_by(|a, b| {
        let (ca, cb) = (a.name.matches('/').count(), b.name.matches('/').count());
        cb.cmp(&ca).then_with(|| b.name.cmp(&a.name))
    });
}

/// Helm's `cleanupParseError`.
pub fn cleanup_parse_error(filename: &str, err: &str) -> String {
    let tokens: Vec<&str> = err.split(": ").collect();
    if tokens.len() == 1 {
        return format!("parse error in ({filename}): {err}");
    }
    format!(
        "parse error at ({}): {}",
        tokens[1],
        tokens[tokens.len() - 1]
    )
}

const WARN_START: &str = "HELM_ERR_START";
const WARN_END: &str = "HELM_ERR_END";

/// Wraps a `fail`/`required` message so the cleanup can find it again.
pub fn warn_wrap(msg: &str) -> String {
    format!("{WARN_START}{msg}{WARN_END}")
}

/// Helm's `reformatExecErrorMsg` for an execution error's text.
pub fn cleanup_exec_error(filename: &str, err: &str) -> String {
    let tokens: Vec<&str> = err.splitn(3, ": ").collect();
    if tokens.len() != 3 {
        return format!("execution error in ({filename}): {err}");
    }
    if let Some(start) = tokens[2].find(WARN_START)
        && let Some(end) = tokens[2].rfind(WARN_END)
        && end >= start + WARN_START.len()
    {
        return format!(
            "execution error at ({}): {}",
            tokens[1],
            &tokens[2][start + WARN_START.len()..end]
        );
    }
    err.to_owned()
}

/// Helm's limit on how deeply one template name may be `include`d within itself.
pub const RECURSION_MAX_NUMS: usize = 1000;

/// The stack the engine may use while executing (see `go_template::Limits::max_stack`): the
/// thread running [`render`] needs more than this. 1001 nested `include`s of one template, as
/// Helm allows before its own error, fit.
pub const ENGINE_STACK_LIMIT: usize = 192 << 20;

/// The stack a thread that runs [`render`] should have.
pub const RENDER_THREAD_STACK: usize = 256 << 20;

/// The functions templates get: sprig's (less `env` and `expandenv`), Helm's encoders, and
/// Helm's own (`include`, `tpl`, `required`, `fail`, `lookup`, a DNS-less `getHostByName`).
pub fn funcs() -> FuncMap {
    let mut f = sprig::funcs();
    f.remove("env");
    f.remove("expandenv");
    f.extend(crate::encoding_funcs());
    let included: Rc<RefCell<HashMap<String, usize>>> = Rc::default();
    f.insert(
        "include".into(),
        Func::with_env(Signature::fixed(&[Ty::String, Ty::Any]), move |env, args| {
            let name = args[0].as_str().unwrap_or_default().to_owned();
            {
                let mut inc = included.borrow_mut();
                let n = inc.entry(name.clone()).or_insert(0);
                if *n > RECURSION_MAX_NUMS {
                    return Err(CallError::Call(format!(
                        "rendering template has a nested reference name: {name}: unable to execute template"
                    )));
                }
                *n += 1;
            }
            let r = env.execute_template(&name, &args[1]);
            if let Some(n) = included.borrow_mut().get_mut(&name) {
                *n = n.saturating_sub(1);
            }
            r.map(Value::from)
        }),
    );
    f.insert(
        "tpl".into(),
        Func::with_env(Signature::fixed(&[Ty::String, Ty::Any]), |env, args| {
            let text = args[0].as_str().unwrap_or_default().to_owned();
            let quoted = || go_quote(&text);
            match env.execute_text("gotpl", &text, &args[1]) {
                Ok(out) => Ok(Value::from(out.replace("<no value>", ""))),
                Err(CallError::Parse(m)) => Err(CallError::Call(format!(
                    "cannot parse template {}: {m}",
                    quoted()
                ))),
                Err(CallError::Call(m) | CallError::Exec(m)) => Err(CallError::Call(format!(
                    "error during tpl function execution for {}: {m}",
                    quoted()
                ))),
            }
        }),
    );
    f.insert(
        "required".into(),
        Func::new(Signature::fixed(&[Ty::String, Ty::Any]), |args| {
            let missing = match &args[1] {
                Value::Nil => true,
                Value::String(s) => s.is_empty(),
                _ => false,
            };
            if missing {
                let warn = args[0].as_str().unwrap_or_default();
                return Err(CallError::Call(go_template::fmt::sprintf(
                    &warn_wrap(warn),
                    &[],
                )));
            }
            Ok(args[1].clone())
        }),
    );
    f.insert(
        "fail".into(),
        Func::new(Signature::fixed(&[Ty::String]), |args| {
            Err(CallError::Call(warn_wrap(
                args[0].as_str().unwrap_or_default(),
            )))
        }),
    );
    f.insert(
        "lookup".into(),
        Func::new(
            Signature::fixed(&[Ty::String, Ty::String, Ty::String, Ty::String]),
            |_| Ok(Value::map(Map::new())),
        ),
    );
    f.insert(
        "getHostByName".into(),
        Func::new(Signature::fixed(&[Ty::String]), |_| Ok(Value::from(""))),
    );
    f
}

/// Go's `%q` of a string.
fn go_quote(s: &str) -> String {
    go_template::fmt::sprintf("%q", &[Value::from(s)])
}

/// Renders every template of `chart` (and its subcharts) with `top` (`Values`, `Release`,
/// `Capabilities`): `(template name, output)` for every non-partial template, in Helm's
/// execution order. The error is Helm's text.
pub fn render(chart: &Chart, top: &Map) -> Result<Vec<(String, String)>, String> {
    let tpls = all_templates(chart, top);
    let mut set = Templates::new(funcs());
    set.set_missing_key(MissingKey::Zero);
    set.set_limits(Limits {
        max_stack: ENGINE_STACK_LIMIT,
        ..Limits::default()
    });
    for r in &tpls {
        set.parse(&r.name, &r.text)
            .map_err(|e| cleanup_parse_error(&r.name, &e.message))?;
    }
    let mut out = Vec::new();
    for r in &tpls {
        if crate::chart::go_base(&r.name).starts_with('_') {
            continue;
        }
        if let Value::Map(scope) = &r.scope {
            let mut t = Map::new();
            t.insert("Name".into(), Value::string(r.name.as_str()));
            t.insert("BasePath".into(), Value::string(r.base_path.as_str()));
            scope.borrow_mut().insert("Template".into(), Value::map(t));
        }
        let text = set.execute(&r.name, &r.scope).map_err(|e| match e.kind {
            ErrorKind::Exec => cleanup_exec_error(&r.name, &e.message),
            ErrorKind::Parse => e.message,
        })?;
        out.push((r.name.clone(), text.replace("<no value>", "")));
    }
    Ok(out)
}
