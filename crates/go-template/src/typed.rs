//! Go slices and maps whose element type is not `interface{}`: sprig's `splitList`, `keys`,
//! `regexFindAll`, `toStrings`, `sortAlpha` return `[]string`, `until` and `untilStep`
//! `[]int`, `split` and `splitn` `map[string]string`. They hold the same elements as a
//! [`Value::List`] or [`Value::Map`] (which `range`, `len`, `index`, `slice` and sprig's
//! reflection see through [`Object::as_value`]), and differ where Go shows the type: `%T`,
//! `typeOf`, `%#v`, `deepEqual` against an `[]interface{}`, a parameter declared
//! `[]interface{}` or `map[string]interface{}` (which refuses them), and a missing key of a
//! `map[string]string` (the empty string, not nil).

use std::cell::RefCell;
use std::rc::Rc;

use crate::value::{Map, Object, Value};

/// The element types sprig's typed results have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// `string`.
    String,
    /// `int`.
    Int,
    /// `[]interface {}` (sprig's `chunk` returns `[][]interface{}`).
    List,
}

impl Elem {
    fn go_name(self) -> &'static str {
        match self {
            Elem::String => "string",
            Elem::Int => "int",
            Elem::List => "[]interface {}",
        }
    }

    fn zero(self) -> Value {
        match self {
            Elem::String => Value::string(""),
            Elem::Int => Value::Int(0),
            Elem::List => Value::Nil,
        }
    }
}

/// A `[]string` or `[]int`.
#[derive(Debug)]
pub struct TypedList {
    elem: Elem,
    items: Rc<Vec<Value>>,
}

/// A `map[string]string`.
#[derive(Debug)]
pub struct StringMap {
    items: Rc<RefCell<Map>>,
}

/// A `[]string` value.
pub fn string_list(items: impl IntoIterator<Item = String>) -> Value {
    Value::object(TypedList {
        elem: Elem::String,
        items: Rc::new(items.into_iter().map(Value::from).collect()),
    })
}

/// An `[]int` value.
pub fn int_list(items: impl IntoIterator<Item = i64>) -> Value {
    Value::object(TypedList {
        elem: Elem::Int,
        items: Rc::new(items.into_iter().map(Value::Int).collect()),
    })
}

/// A `[][]interface{}` value (`items` are lists).
pub fn list_of_lists(items: Vec<Value>) -> Value {
    Value::object(TypedList {
        elem: Elem::List,
        items: Rc::new(items),
    })
}

/// A `map[string]string` value.
pub fn string_map(items: impl IntoIterator<Item = (String, String)>) -> Value {
    Value::object(StringMap {
        items: Rc::new(RefCell::new(
            items
                .into_iter()
                .map(|(k, v)| (k, Value::from(v)))
                .collect(),
        )),
    })
}

/// A list of the same element type as `like` (a [`TypedList`]) holding `items`; a plain list
/// when `like` is not one. For `slice`, which keeps the slice's type.
pub fn same_type_list(like: &Value, items: Vec<Value>) -> Value {
    if let Value::Object(o) = like
        && let Some(t) = o.as_any().and_then(|a| a.downcast_ref::<TypedList>())
    {
        return Value::object(TypedList {
            elem: t.elem,
            items: Rc::new(items),
        });
    }
    Value::list(items)
}

fn same_items(a: &Value, b: &Value) -> bool {
    a.to_json() == b.to_json()
}

impl Object for TypedList {
    fn type_name(&self) -> String {
        format!("[]{}", self.elem.go_name())
    }

    fn kind_name(&self) -> &'static str {
        "slice"
    }

    fn field(&self, _name: &str) -> Option<Value> {
        None
    }

    fn truth(&self) -> bool {
        !self.items.is_empty()
    }

    fn format(&self) -> String {
        crate::fmt::format_v(&Value::List(self.items.clone()))
    }

    fn to_json(&self) -> Option<serde_json::Value> {
        Value::List(self.items.clone()).to_json()
    }

    fn as_value(&self) -> Option<Value> {
        Some(Value::List(self.items.clone()))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn equals(&self, other: &dyn Object) -> Option<bool> {
        let other = other.as_any()?.downcast_ref::<TypedList>()?;
        Some(
            self.elem == other.elem
                && same_items(
                    &Value::List(self.items.clone()),
                    &Value::List(other.items.clone()),
                ),
        )
    }

    fn elem_zero(&self) -> Value {
        self.elem.zero()
    }
}

impl Object for StringMap {
    fn type_name(&self) -> String {
        "map[string]string".into()
    }

    fn kind_name(&self) -> &'static str {
        "map"
    }

    /// Go's field syntax on a map: the element, or the element type's zero value.
    fn field(&self, name: &str) -> Option<Value> {
        Some(
            self.items
                .borrow()
                .get(name)
                .cloned()
                .unwrap_or_else(|| Elem::String.zero()),
        )
    }

    fn truth(&self) -> bool {
        !self.items.borrow().is_empty()
    }

    fn format(&self) -> String {
        crate::fmt::format_v(&Value::Map(self.items.clone()))
    }

    fn to_json(&self) -> Option<serde_json::Value> {
        Value::Map(self.items.clone()).to_json()
    }

    fn as_value(&self) -> Option<Value> {
        Some(Value::Map(self.items.clone()))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn equals(&self, other: &dyn Object) -> Option<bool> {
        let other = other.as_any()?.downcast_ref::<StringMap>()?;
        Some(same_items(
            &Value::Map(self.items.clone()),
            &Value::Map(other.items.clone()),
        ))
    }

    fn elem_zero(&self) -> Value {
        Elem::String.zero()
    }
}
