//! The template set: Go's `*template.Template` namespace, as Helm uses it (one set holding
//! every template file and every `define` of a chart and its subcharts).

use std::collections::BTreeMap;
use std::rc::Rc;

use crate::builtins;
use crate::error::Error;
use crate::exec;
use crate::parse::{self, FuncNames, Tree};
use crate::{FuncMap, Value};

/// What a field lookup on a map does when the key is missing (Go's `missingkey=` option).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MissingKey {
    /// `missingkey=default` / `invalid`: no value (`<no value>` when printed).
    #[default]
    Default,
    /// `missingkey=zero`: the map's zero element, a nil `interface{}` (Helm's choice; it
    /// still prints `<no value>`, which Helm then removes from a file's output).
    Zero,
    /// `missingkey=error`: execution stops with `map has no entry for key "x"` (Helm's
    /// `--strict` lint).
    Error,
}

/// Bounds on what one execution may use, so that a chart from an untrusted registry cannot
/// exhaust the stack or the memory of the process rendering it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How many template executions may be nested (`{{template}}`, and `include`/`tpl`
    /// through [`crate::Env`]): past it execution stops with Go's `exceeded maximum template
    /// depth (N)`. Go allows 100 000 `{{template}}` levels (on goroutine stacks that grow to
    /// 1 GiB); Helm stops `include` recursion at 1 000 levels of one name with its own
    /// message, so the default, 1 500, lets Helm's message appear first.
    pub max_depth: usize,
    /// How many bytes of output one execution may produce, its `include`s and `tpl`s
    /// included. Go has no bound.
    pub max_output: usize,
    /// How many bytes of the thread's stack executing and parsing may use before stopping with
    /// an error (measured from where [`crate::Templates::execute`] was entered). Must be below
    /// the stack of the thread that executes, with margin: see the crate docs for what one
    /// nesting level costs.
    pub max_stack: usize,
    /// How much work one execution may do, its `include`s and `tpl`s included: every node
    /// walked, every `range` iteration and every function call is one step. Go has no bound;
    /// without one, `{{define "x"}}{{template "x"}}{{template "x"}}{{end}}` (exponential,
    /// printing nothing) would run for ever. The default is far above what real charts
    /// take: one file rendering 2 000 Deployments and Services (136 000 lines, `include`,
    /// `toYaml`, `range` over maps) takes 304 000 steps.
    pub max_steps: u64,
}

/// [`Limits::max_steps`]'s default: a few seconds of work for one template file, 30 times
/// what a 136 000-line file takes.
pub const DEFAULT_MAX_STEPS: u64 = 10_000_000;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_depth: 1_500,
            max_output: 256 << 20,
            max_stack: 1 << 20,
            max_steps: DEFAULT_MAX_STEPS,
        }
    }
}

/// A set of templates that can call one another, with the functions they may use.
///
/// Cloning is cheap (the parsed trees are shared), as Helm's `tpl` clones the set for every
/// call.
#[derive(Clone)]
pub struct Templates {
    pub(crate) trees: Rc<BTreeMap<String, Rc<Tree>>>,
    pub(crate) funcs: Rc<FuncMap>,
    pub(crate) missing_key: MissingKey,
    pub(crate) limits: Limits,
    pub(crate) root_name: Rc<str>,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("names", &self.names())
            .field("funcs", &self.funcs.keys().collect::<Vec<_>>())
            .field("missing_key", &self.missing_key)
            .field("limits", &self.limits)
            .finish()
    }
}

struct Names<'a>(&'a FuncMap);

impl FuncNames for Names<'_> {
    fn has(&self, name: &str) -> bool {
        self.0.contains_key(name) || builtins::is_builtin(name)
    }
}

impl Templates {
    /// An empty set with Go's builtin functions and `funcs` (which add to and override the
    /// builtins, as Go's `Funcs`). Its own name, used in "no template … associated with
    /// template …", is Helm's `gotpl`.
    pub fn new(funcs: FuncMap) -> Templates {
        Templates {
            trees: Rc::new(BTreeMap::new()),
            funcs: Rc::new(funcs),
            missing_key: MissingKey::Default,
            limits: Limits::default(),
            root_name: "gotpl".into(),
        }
    }

    /// Go's `Option("missingkey=…")`.
    pub fn set_missing_key(&mut self, m: MissingKey) {
        self.missing_key = m;
    }

    /// The bounds of later executions.
    pub fn set_limits(&mut self, l: Limits) {
        self.limits = l;
    }

    /// The name of the set itself (Go's name of the template `template.New` made).
    pub fn set_root_name(&mut self, name: &str) {
        self.root_name = name.into();
    }

    /// Go's `Funcs`: adds functions, replacing those of the same name.
    pub fn add_funcs(&mut self, funcs: FuncMap) {
        let map = Rc::make_mut(&mut self.funcs);
        map.extend(funcs);
    }

    /// Go's `t.New(name).Parse(text)`: the text becomes template `name`, and every
    /// `{{define}}` and `{{block}}` in it joins the set. A name defined twice in one text is
    /// an error (unless one of the two is empty); a later parse replaces an earlier
    /// definition, except that an empty one never replaces a non-empty one.
    pub fn parse(&mut self, name: &str, text: &str) -> Result<(), Error> {
        let trees = parse::parse(name, text, &Names(&self.funcs)).map_err(Error::parse)?;
        let set = Rc::make_mut(&mut self.trees);
        for tree in trees {
            let keep_old = parse::is_empty_list(&tree.root) && set.contains_key(&tree.name);
            if !keep_old {
                set.insert(tree.name.clone(), Rc::new(tree));
            }
        }
        Ok(())
    }

    /// Go's `ExecuteTemplate(w, name, data)`: the output, or the first error.
    pub fn execute(&self, name: &str, data: &Value) -> Result<String, Error> {
        exec::execute(self, name, data)
    }

    /// Whether a template of that name exists (Go's `Lookup(name) != nil`).
    pub fn has(&self, name: &str) -> bool {
        self.trees.contains_key(name)
    }

    /// The names of every template in the set, sorted.
    pub fn names(&self) -> Vec<String> {
        self.trees.keys().cloned().collect()
    }
}
