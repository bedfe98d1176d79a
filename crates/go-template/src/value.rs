//! The values a template works on, modelled on the Go values Helm hands to `text/template`.
//!
//! Go distinguishes `int`, `int64` and `float64`, and Helm's values are `float64` whenever they
//! came from YAML or JSON (`sigs.k8s.io/yaml` decodes through `encoding/json`): `{{ 3 }}` is an
//! `int`, `{{ .Values.replicas }}` is a `float64`, `add` returns an `int64`. Printing,
//! comparison (`eq 1 1.0` is an error in Go) and `typeOf` depend on it, so the kinds are kept
//! apart here.
//!
//! Maps are shared and mutable, as Go maps are: `set $d "k" 1` changes the map every reference
//! sees (charts rely on `$_ := set .Values …`). Lists are shared and immutable: sprig's list
//! functions return new lists.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

/// A Go `map[string]interface{}`: keys kept sorted, since Go prints, ranges over and encodes
/// maps in key order.
pub type Map = BTreeMap<String, Value>;

/// A template value.
#[derive(Clone, Default)]
pub enum Value {
    /// Go's untyped `nil` (an invalid `reflect.Value`, or a nil `interface{}`). Prints as
    /// `<no value>` when a pipeline yields it, `<nil>` inside `print`.
    #[default]
    Nil,
    /// `bool`.
    Bool(bool),
    /// `int`: template integer constants, `len`, `atoi`, `int`, `until`, sprig's `randInt`.
    Int(i64),
    /// `int64`: sprig's integer math (`add`, `sub`, `mul`, `max`…), `int64`.
    Int64(i64),
    /// `float64`: every number that came from YAML or JSON values, float constants, `float64`.
    Float(f64),
    /// `string`. (Go strings are bytes; here they are UTF-8, and bytes that are not become
    /// U+FFFD where a Go string would hold them raw.)
    String(Rc<str>),
    /// `[]byte` (`.Files.GetBytes`).
    Bytes(Rc<[u8]>),
    /// `[]interface{}`.
    List(Rc<Vec<Value>>),
    /// `map[string]interface{}`, shared by reference.
    Map(Rc<RefCell<Map>>),
    /// A Go struct or a value with methods: `.Chart`, `.Capabilities`, `.Files`, a
    /// `*semver.Version`, sprig's certificates.
    Object(Rc<dyn Object>),
}

impl Value {
    /// A string value.
    pub fn string(s: impl Into<Rc<str>>) -> Value {
        Value::String(s.into())
    }

    /// A list value.
    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Rc::new(items))
    }

    /// A new map value (not shared with any other).
    pub fn map(entries: Map) -> Value {
        Value::Map(Rc::new(RefCell::new(entries)))
    }

    /// An object value.
    pub fn object(o: impl Object + 'static) -> Value {
        Value::Object(Rc::new(o))
    }

    /// Go's truth, as `if`, `with`, `and`, `or`, `not` see it: false, 0, nil, and empty
    /// strings, lists and maps are false; structs are always true.
    pub fn truth(&self) -> bool {
        match self {
            Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) | Value::Int64(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::String(s) => !s.is_empty(),
            Value::Bytes(b) => !b.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Map(m) => !m.borrow().is_empty(),
            Value::Object(o) => o.truth(),
        }
    }

    /// The Go type name, as `%T` and sprig's `typeOf` print it.
    pub fn type_name(&self) -> String {
        match self {
            Value::Nil => "<nil>".into(),
            Value::Bool(_) => "bool".into(),
            Value::Int(_) => "int".into(),
            Value::Int64(_) => "int64".into(),
            Value::Float(_) => "float64".into(),
            Value::String(_) => "string".into(),
            Value::Bytes(_) => "[]uint8".into(),
            Value::List(_) => "[]interface {}".into(),
            Value::Map(_) => "map[string]interface {}".into(),
            Value::Object(o) => o.type_name(),
        }
    }

    /// The Go `reflect.Kind` name, as sprig's `kindOf` prints it (`invalid` for nil).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Nil => "invalid",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Int64(_) => "int64",
            Value::Float(_) => "float64",
            Value::String(_) => "string",
            Value::Bytes(_) | Value::List(_) => "slice",
            Value::Map(_) => "map",
            Value::Object(o) => o.kind_name(),
        }
    }

    /// The string inside a `String`, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// Converts decoded JSON (or YAML decoded the way `sigs.k8s.io/yaml` decodes it) into a
    /// value: every number becomes a `float64`, as it does in Helm.
    pub fn from_json(json: &serde_json::Value) -> Value {
        match json {
            serde_json::Value::Null => Value::Nil,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(s) => Value::string(s.as_str()),
            serde_json::Value::Array(a) => Value::list(a.iter().map(Value::from_json).collect()),
            serde_json::Value::Object(o) => Value::map(
                o.iter()
                    .map(|(k, v)| (k.clone(), Value::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// Converts a value back into JSON, the way `encoding/json` would see it: integers stay
    /// integers, floats that are whole stay floats with no fraction digits kept apart (JSON
    /// has one number type), bytes become base64, objects give their JSON form (or null).
    /// Gives `None` for a float that JSON cannot carry (NaN, ±Inf), as Go's encoder refuses
    /// them. Cyclic maps are cut at depth 10 000 with `None`.
    pub fn to_json(&self) -> Option<serde_json::Value> {
        self.to_json_depth(0)
    }

    fn to_json_depth(&self, depth: usize) -> Option<serde_json::Value> {
        use base64::Engine as _;
        if depth > MAX_DEPTH {
            return None;
        }
        Some(match self {
            Value::Nil => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) | Value::Int64(i) => serde_json::Value::from(*i),
            Value::Float(f) => serde_json::Value::Number(serde_json::Number::from_f64(*f)?),
            Value::String(s) => serde_json::Value::String(s.to_string()),
            Value::Bytes(b) => {
                serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(b))
            }
            Value::List(l) => serde_json::Value::Array(
                l.iter()
                    .map(|v| v.to_json_depth(depth + 1))
                    .collect::<Option<_>>()?,
            ),
            Value::Map(m) => serde_json::Value::Object(
                m.borrow()
                    .iter()
                    .map(|(k, v)| Some((k.clone(), v.to_json_depth(depth + 1)?)))
                    .collect::<Option<_>>()?,
            ),
            Value::Object(o) => o.to_json().unwrap_or(serde_json::Value::Null),
        })
    }
}

/// How deep nested lists and maps may go before a walk over them (printing, encoding,
/// copying) gives up: deeper than any real chart, shallow enough that a cyclic map (`set $d
/// "self" $d`) ends in an error instead of a stack overflow.
pub const MAX_DEPTH: usize = 10_000;

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Nil => f.write_str("Nil"),
            Value::Bool(b) => write!(f, "Bool({b})"),
            Value::Int(i) => write!(f, "Int({i})"),
            Value::Int64(i) => write!(f, "Int64({i})"),
            Value::Float(x) => write!(f, "Float({x:?})"),
            Value::String(s) => write!(f, "String({s:?})"),
            Value::Bytes(b) => write!(f, "Bytes({b:?})"),
            Value::List(l) => f.debug_tuple("List").field(&**l).finish(),
            Value::Map(m) => match m.try_borrow() {
                Ok(m) => f.debug_tuple("Map").field(&*m).finish(),
                Err(_) => f.write_str("Map(<borrowed>)"),
            },
            Value::Object(o) => write!(f, "Object({})", o.type_name()),
        }
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::string(s)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::string(s)
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Value {
        Value::Float(x)
    }
}

/// A Go struct (or pointer to one) or any value with methods, seen through the template's
/// field and method syntax: `.Chart.Name`, `.Files.Get "x"`, `$v.Major`.
pub trait Object: fmt::Debug {
    /// The Go type name for `%T` and `typeOf`, e.g. `*chart.Metadata`, `*semver.Version`.
    fn type_name(&self) -> String;

    /// The `reflect.Kind` name for `kindOf`: `struct` or `ptr` for most.
    fn kind_name(&self) -> &'static str {
        "ptr"
    }

    /// An exported field (or a method without arguments, which Go calls the same way) named
    /// `name`; `None` when there is none. A method that needs arguments answers through
    /// [`Object::method`] and returns `None` here.
    fn field(&self, name: &str) -> Option<Value>;

    /// Whether `name` is a method (so `.Files.Get "x"` passes arguments to it). Fields are not
    /// methods: Go refuses arguments to a field ("Name is not a method but has arguments").
    fn is_method(&self, name: &str) -> bool {
        let _ = name;
        false
    }

    /// Calls method `name` with `args`; the error is what Go's `error calling Name: …` would
    /// carry (or, for a wrong argument count, the text after `executing … at <…>: `).
    fn method(&self, name: &str, args: &[Value]) -> Result<Value, CallError> {
        let _ = args;
        Err(CallError::Exec(format!(
            "can't evaluate field {name} in type {}",
            self.type_name()
        )))
    }

    /// Truth in `if`: structs are always true; a pointer is true unless nil.
    fn truth(&self) -> bool {
        true
    }

    /// How `%v` / `print` show it (Go prints a struct as `{field1 field2}`, a `Stringer` by its
    /// `String()`).
    fn format(&self) -> String;

    /// The JSON `encoding/json` would produce (for `toYaml .Chart`, `toJson`), if any.
    fn to_json(&self) -> Option<serde_json::Value> {
        None
    }

    /// For a Go map or slice type that has methods (Helm's `.Files` is a `map[string][]byte`
    /// with `Get`/`Glob`…, `.Capabilities.APIVersions` a `[]string` with `Has`): the plain map
    /// or list it is, which `range` iterates. `None` for structs.
    fn as_value(&self) -> Option<Value> {
        None
    }

    /// The concrete value, for functions that take this object type as an argument (sprig's
    /// `dateModify` reads the `time.Time` it is given). `None` unless the type opts in.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// For a map or slice type ([`Object::as_value`]): the zero value of its element type,
    /// which `index` gives for a missing map key (`""` for a `map[string]string`). Nil for
    /// `interface{}` elements.
    fn elem_zero(&self) -> Value {
        Value::Nil
    }

    /// Equality for `eq` between two objects of the same type (Go compares comparable structs
    /// field by field). `None`: not comparable.
    fn equals(&self, other: &dyn Object) -> Option<bool> {
        let _ = other;
        None
    }
}

/// The Go type a function parameter declares. The executor converts and checks arguments
/// against it exactly as `text/template` does with reflection: a constant `1` passed to a
/// `float64` parameter becomes `1.0`, an `int64` passed to an `int` parameter is refused
/// ("wrong type for value; expected int; got int64"), and a missing value passed to a
/// `string` parameter is refused ("invalid value; expected string").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `interface{}`: anything, nil included.
    Any,
    /// `string`.
    String,
    /// `int`.
    Int,
    /// `int64`.
    Int64,
    /// `float64`.
    Float64,
    /// `bool`.
    Bool,
    /// `[]byte`.
    Bytes,
    /// `[]interface{}` (nil is a nil slice, passed as [`Value::Nil`]).
    List,
    /// `map[string]interface{}` (nil is a nil map, passed as [`Value::Nil`]).
    Map,
    /// A struct or pointer type of an [`Object`], by its [`Object::type_name`].
    Object(&'static str),
}

impl Ty {
    /// The Go spelling of the type, as error messages print it.
    pub fn go_name(self) -> &'static str {
        match self {
            Ty::Any => "interface {}",
            Ty::String => "string",
            Ty::Int => "int",
            Ty::Int64 => "int64",
            Ty::Float64 => "float64",
            Ty::Bool => "bool",
            Ty::Bytes => "[]uint8",
            Ty::List => "[]interface {}",
            Ty::Map => "map[string]interface {}",
            Ty::Object(name) => name,
        }
    }
}

/// A function's Go signature: fixed parameters, then an optional variadic one
/// (`func(sep string, v ...interface{})` is `params: [String], variadic: Some(Any)`).
#[derive(Clone, Copy, Debug)]
pub struct Signature {
    /// Parameters before the variadic one.
    pub params: &'static [Ty],
    /// The element type of a final `...T` parameter.
    pub variadic: Option<Ty>,
}

impl Signature {
    /// `func(params...)`.
    pub const fn fixed(params: &'static [Ty]) -> Signature {
        Signature {
            params,
            variadic: None,
        }
    }

    /// `func(params..., rest ...T)`.
    pub const fn variadic(params: &'static [Ty], rest: Ty) -> Signature {
        Signature {
            params,
            variadic: Some(rest),
        }
    }
}

/// Why a function call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The function returned an error (or panicked, in Go): the template error reads
    /// `error calling NAME: <this>`.
    Call(String),
    /// An error Go's executor raises itself, printed without the `error calling` prefix
    /// (`wrong number of args for Get: want 1 got 0`, `fail`'s and `required`'s own messages
    /// come through `Call`).
    Exec(String),
    /// The text given to [`Env::execute_text`] did not parse (Go's `Parse` error, before
    /// anything ran): Helm's `tpl` words this apart from an execution error. Printed as
    /// [`CallError::Call`] is.
    Parse(String),
}

/// What a function body sees besides its arguments: the way back into the engine, for
/// Helm's `include` and `tpl`.
pub trait Env {
    /// Executes the named template with `data` as dot and returns its output
    /// (`include`); the engine counts the depth and refuses runaway recursion.
    fn execute_template(&mut self, name: &str, data: &Value) -> Result<String, CallError>;

    /// Parses `text` as a template named `name` in a copy of the current set (it sees every
    /// definition parsed so far; its own `define`s stay in the copy), executes it with `data`
    /// and returns its output (`tpl`). A parse failure is [`CallError::Parse`], anything
    /// later [`CallError::Call`].
    fn execute_text(&mut self, name: &str, text: &str, data: &Value) -> Result<String, CallError>;
}

/// A function body: arguments already converted to the signature's types.
pub type FuncBody = Rc<dyn Fn(&mut dyn Env, &[Value]) -> Result<Value, CallError>>;

/// A template function: its Go signature and its body.
#[derive(Clone)]
pub struct Func {
    /// How arguments are checked and converted before the body sees them.
    pub signature: Signature,
    /// The function itself.
    pub body: FuncBody,
}

impl Func {
    /// A function that does not need the engine.
    pub fn new(
        signature: Signature,
        body: impl Fn(&[Value]) -> Result<Value, CallError> + 'static,
    ) -> Func {
        Func {
            signature,
            body: Rc::new(move |_env: &mut dyn Env, args: &[Value]| body(args)),
        }
    }

    /// A function that calls back into the engine (`include`, `tpl`).
    pub fn with_env(
        signature: Signature,
        body: impl Fn(&mut dyn Env, &[Value]) -> Result<Value, CallError> + 'static,
    ) -> Func {
        Func {
            signature,
            body: Rc::new(body),
        }
    }
}

impl fmt::Debug for Func {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Func")
            .field("signature", &self.signature)
            .finish_non_exhaustive()
    }
}

/// Functions by name, as Go's `template.FuncMap`.
pub type FuncMap = BTreeMap<String, Func>;
