//! Evaluation: pipelines, commands, fields, function and method calls, and the conversion of
//! arguments to the Go types functions declare (Go's `evalArg` / `validateType`).

use super::{At, Ctx, EnvImpl, Frame, R, Rv};
use crate::builtins::{self, Builtin};
use crate::error::Error;
use crate::parse::{Arg, Command, Number, Pipe, Variable, go_quote};
use crate::template::MissingKey;
use crate::value::{CallError, Func, Ty, Value};

impl Ctx {
    // ---- evaluation ----

    pub(super) fn eval_pipeline<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        pipe: &'t Pipe,
    ) -> R<Rv> {
        self.check_stack(f)?;
        f.at = At::Pipe(pipe);
        let mut value: Option<Rv> = None;
        for cmd in &pipe.cmds {
            value = Some(self.eval_command(f, dot, cmd, value)?.dig());
        }
        let value = value.unwrap_or(Rv::Invalid);
        for v in &pipe.decl {
            if pipe.is_assign {
                self.set_var(f, &v.ident[0], value.clone())?;
            } else {
                f.vars.push((v.ident[0].clone(), value.clone()));
            }
        }
        Ok(value)
    }

    fn not_a_function(&self, f: &Frame<'_>, args: &[Arg], fin: &Option<Rv>) -> R<()> {
        if args.len() > 1 || fin.is_some() {
            let first = args.first().map(ToString::to_string).unwrap_or_default();
            return Err(self.err(f, format!("can't give argument to non-function {first}")));
        }
        Ok(())
    }

    fn eval_command<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        cmd: &'t Command,
        fin: Option<Rv>,
    ) -> R<Rv> {
        let Some(first) = cmd.args.first() else {
            return Ok(Rv::Invalid);
        };
        match first {
            Arg::Field { ident, .. } => {
                f.at = At::Arg(first);
                return self.eval_field_chain(
                    f,
                    dot,
                    dot.clone(),
                    At::Arg(first),
                    ident,
                    &cmd.args,
                    fin,
                );
            }
            Arg::Chain { .. } => return self.eval_chain(f, dot, first, &cmd.args, fin),
            Arg::Identifier { name, .. } => {
                return self.eval_function(f, dot, first, name, At::Cmd(cmd), &cmd.args, fin);
            }
            Arg::Pipe(p) => {
                self.not_a_function(f, &cmd.args, &fin)?;
                return self.eval_pipeline(f, dot, p);
            }
            Arg::Variable(v) => return self.eval_variable(f, dot, v, &cmd.args, fin),
            _ => {}
        }
        f.at = At::Arg(first);
        self.not_a_function(f, &cmd.args, &fin)?;
        match first {
            Arg::Bool { val, .. } => Ok(Rv::concrete(Value::Bool(*val))),
            Arg::Dot { .. } => Ok(dot.clone()),
            Arg::Nil { .. } => Err(self.err(f, "nil is not a command")),
            Arg::Number(n) => self.ideal_constant(f, first, n).map(Rv::concrete),
            Arg::String { text, .. } => Ok(Rv::concrete(Value::string(text.as_str()))),
            _ => Err(self.err(
                f,
                format!("can't evaluate command {}", go_quote(&first.to_string())),
            )),
        }
    }

    /// A numeric constant where no type is wanted: its spelling decides (Go's ideal constant).
    fn ideal_constant<'t>(&self, f: &mut Frame<'t>, node: &'t Arg, n: &Number) -> R<Value> {
        f.at = At::Arg(node);
        let t = &n.text;
        let hex_int = t.len() > 2
            && t.starts_with('0')
            && matches!(t.as_bytes()[1], b'x' | b'X')
            && !t.contains(['p', 'P']);
        if n.is_complex {
            return Err(self.err(f, format!("complex constant {t} is not supported")));
        }
        if n.is_float && !hex_int && !t.starts_with('\'') && t.contains(['.', 'e', 'E', 'p', 'P']) {
            return Ok(Value::Float(n.float));
        }
        if n.is_int {
            return Ok(Value::Int(n.int));
        }
        if n.is_uint {
            return Err(self.err(f, format!("{t} overflows int")));
        }
        Ok(Value::Nil)
    }

    fn eval_chain<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        chain: &'t Arg,
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        let Arg::Chain { node, field, .. } = chain else {
            return Ok(Rv::Invalid);
        };
        f.at = At::Arg(chain);
        if let Arg::Nil { .. } = **node {
            return Err(self.err(f, format!("indirection through explicit nil in {chain}")));
        }
        let receiver = self.eval_arg_rv(f, dot, node)?;
        self.eval_field_chain(f, dot, receiver, At::Arg(chain), field, args, fin)
    }

    fn eval_variable<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        v: &'t Variable,
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        f.at = At::Var(v);
        let value = self.var_value(f, &v.ident[0])?;
        if v.ident.len() == 1 {
            self.not_a_function(f, args, &fin)?;
            return Ok(value);
        }
        self.eval_field_chain(f, dot, value, At::Var(v), &v.ident[1..], args, fin)
    }

    #[allow(clippy::too_many_arguments)]
    /// `.A.B.C` on `receiver`; `at` is the node errors name (the field chain or variable).
    fn eval_field_chain<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        mut receiver: Rv,
        at: At<'t>,
        ident: &'t [String],
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        let n = ident.len();
        for name in &ident[..n - 1] {
            f.at = at;
            receiver = self.eval_field(f, dot, name, &[], None, receiver)?;
        }
        f.at = at;
        self.eval_field(f, dot, &ident[n - 1], args, fin, receiver)
    }

    /// `.Name` (or `.Name args…`) on `receiver`; `args[0]` is the field's own node.
    fn eval_field<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        name: &str,
        args: &'t [Arg],
        fin: Option<Rv>,
        receiver: Rv,
    ) -> R<Rv> {
        let at = f.at;
        let (value, boxed) = match receiver {
            Rv::Invalid => {
                if self.set.missing_key == MissingKey::Error {
                    return Err(
                        self.err(f, format!("nil data; no entry for key {}", go_quote(name)))
                    );
                }
                return Ok(Rv::Invalid);
            }
            Rv::Val(Value::Nil, _) => {
                return Err(self.err(f, format!("nil pointer evaluating interface {{}}.{name}")));
            }
            Rv::Val(v, boxed) => (v, boxed),
        };
        let has_args = args.len() > 1 || fin.is_some();
        let typ = if boxed {
            "interface {}".to_owned()
        } else {
            value.type_name()
        };
        match &value {
            Value::Object(o) => {
                if o.is_method(name) {
                    return self.call_method(f, dot, o.as_ref(), name, at, args, fin);
                }
                match o.field(name) {
                    Some(v) => {
                        if has_args {
                            return Err(self.err(f, has_args_message(o.kind_name(), name)));
                        }
                        Ok(Rv::concrete(v))
                    }
                    None if o.kind_name() == "map" => {
                        if has_args {
                            return Err(self.err(f, has_args_message("map", name)));
                        }
                        self.missing(f, name)
                    }
                    None => Err(self.err(f, format!("can't evaluate field {name} in type {typ}"))),
                }
            }
            Value::Map(m) => {
                if has_args {
                    return Err(self.err(f, has_args_message("map", name)));
                }
                let found = m.borrow().get(name).cloned();
                match found {
                    Some(v) => Ok(Rv::boxed(v)),
                    None => self.missing(f, name),
                }
            }
            _ => Err(self.err(f, format!("can't evaluate field {name} in type {typ}"))),
        }
    }

    fn missing(&self, f: &Frame<'_>, name: &str) -> R<Rv> {
        match self.set.missing_key {
            MissingKey::Default => Ok(Rv::Invalid),
            MissingKey::Zero => Ok(Rv::boxed(Value::Nil)),
            MissingKey::Error => {
                Err(self.err(f, format!("map has no entry for key {}", go_quote(name))))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn call_method<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        o: &dyn crate::Object,
        name: &str,
        at: At<'t>,
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        let mut argv = Vec::new();
        for a in args.iter().skip(1) {
            argv.push(self.eval_arg(f, dot, Some(Ty::Any), a)?);
        }
        if let Some(v) = fin {
            argv.push(v.into_any());
        }
        match o.method(name, &argv) {
            Ok(v) => Ok(Rv::concrete(v)),
            Err(e) => {
                f.at = at;
                Err(self.call_error(f, name, e))
            }
        }
    }

    fn call_error(&self, f: &Frame<'_>, name: &str, e: CallError) -> Error {
        match e {
            CallError::Call(m) | CallError::Parse(m) => {
                self.err(f, format!("error calling {name}: {m}"))
            }
            CallError::Exec(m) => self.err(f, m),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_function<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        ident: &'t Arg,
        name: &str,
        call_node: At<'t>,
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        f.at = At::Arg(ident);
        if let Some(func) = self.set.funcs.get(name).cloned() {
            return self.call_func(f, dot, &func, name, call_node, args, fin);
        }
        match Builtin::from_name(name) {
            Some(b) => self.call_builtin(f, dot, b, name, call_node, args, fin),
            None => Err(self.err(f, format!("{} is not a defined function", go_quote(name)))),
        }
    }

    /// Go's argument count check; `args` includes the function's own node.
    fn check_arity(
        &self,
        f: &Frame<'_>,
        name: &str,
        fixed: usize,
        variadic: bool,
        args: &[Arg],
        fin: &Option<Rv>,
    ) -> R<()> {
        let given = args.len().saturating_sub(1);
        let num_in = given + usize::from(fin.is_some());
        if variadic {
            if num_in < fixed {
                return Err(self.err(
                    f,
                    format!("wrong number of args for {name}: want at least {fixed} got {given}"),
                ));
            }
        } else if num_in != fixed {
            return Err(self.err(
                f,
                format!("wrong number of args for {name}: want {fixed} got {num_in}"),
            ));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn call_func<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        func: &Func,
        name: &str,
        call_node: At<'t>,
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        let sig = func.signature;
        let fixed = sig.params.len();
        self.check_arity(f, name, fixed, sig.variadic.is_some(), args, &fin)?;
        self.step(f)?;
        let rest = args.get(1..).unwrap_or(&[]);
        let mut argv = Vec::with_capacity(rest.len() + 1);
        for (i, a) in rest.iter().enumerate() {
            let ty = if i < fixed {
                sig.params[i]
            } else {
                sig.variadic.unwrap_or(Ty::Any)
            };
            argv.push(self.eval_arg(f, dot, Some(ty), a)?);
        }
        if let Some(v) = fin {
            let num_in = rest.len() + 1;
            let ty = match sig.variadic {
                Some(vt) if num_in > fixed => vt,
                _ => sig.params.get(num_in - 1).copied().unwrap_or(Ty::Any),
            };
            argv.push(self.validate(f, v, ty)?);
        }
        self.check_stack(f)?;
        let body = func.body.clone();
        let result = {
            let mut env = EnvImpl { ctx: self };
            body(&mut env, &argv)
        };
        match result {
            Ok(v) => Ok(Rv::concrete(v)),
            Err(e) => {
                f.at = call_node;
                Err(self.call_error(f, name, e))
            }
        }
    }

    /// Go's `validateType`: a value for a parameter of type `ty`.
    fn validate(&self, f: &Frame<'_>, v: Rv, ty: Ty) -> R<Value> {
        let can_be_nil = matches!(ty, Ty::Any | Ty::List | Ty::Map | Ty::Bytes | Ty::Object(_));
        match v {
            Rv::Invalid => {
                if can_be_nil {
                    Ok(Value::Nil)
                } else {
                    Err(self.err(f, format!("invalid value; expected {}", ty.go_name())))
                }
            }
            Rv::Val(Value::Nil, _) => {
                if ty == Ty::Any {
                    Ok(Value::Nil)
                } else {
                    Err(self.err(
                        f,
                        format!(
                            "wrong type for value; expected {}; got interface {{}}",
                            ty.go_name()
                        ),
                    ))
                }
            }
            Rv::Val(v, _) => {
                if assignable(&v, ty) {
                    Ok(v)
                } else {
                    Err(self.err(
                        f,
                        format!(
                            "wrong type for value; expected {}; got {}",
                            ty.go_name(),
                            v.type_name()
                        ),
                    ))
                }
            }
        }
    }

    /// Go's `evalArg` for a parameter of type `ty` (`None`: no type, as for a chain's head).
    fn eval_arg<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        ty: Option<Ty>,
        a: &'t Arg,
    ) -> R<Value> {
        f.at = At::Arg(a);
        let ty_or_any = ty.unwrap_or(Ty::Any);
        match a {
            Arg::Dot { .. } => return self.validate(f, dot.clone(), ty_or_any),
            Arg::Nil { .. } => {
                if matches!(
                    ty_or_any,
                    Ty::Any | Ty::List | Ty::Map | Ty::Bytes | Ty::Object(_)
                ) {
                    return Ok(Value::Nil);
                }
                return Err(self.err(f, format!("cannot assign nil to {}", ty_or_any.go_name())));
            }
            Arg::Field { ident, .. } => {
                let v = self.eval_field_chain(
                    f,
                    dot,
                    dot.clone(),
                    At::Arg(a),
                    ident,
                    std::slice::from_ref(a),
                    None,
                )?;
                return self.validate(f, v, ty_or_any);
            }
            Arg::Variable(v) => {
                let r = self.eval_variable(f, dot, v, &[], None)?;
                return self.validate(f, r, ty_or_any);
            }
            Arg::Pipe(p) => {
                let r = self.eval_pipeline(f, dot, p)?;
                return self.validate(f, r, ty_or_any);
            }
            Arg::Identifier { name, .. } => {
                let r = self.eval_function(f, dot, a, name, At::Arg(a), &[], None)?;
                return self.validate(f, r, ty_or_any);
            }
            Arg::Chain { .. } => {
                let r = self.eval_chain(f, dot, a, &[], None)?;
                return self.validate(f, r, ty_or_any);
            }
            _ => {}
        }
        match ty_or_any {
            Ty::Bool => match a {
                Arg::Bool { val, .. } => Ok(Value::Bool(*val)),
                _ => Err(self.err(f, format!("expected bool; found {a}"))),
            },
            Ty::Float64 => match a {
                Arg::Number(n) if n.is_float && !n.is_complex => Ok(Value::Float(n.float)),
                _ => Err(self.err(f, format!("expected float; found {a}"))),
            },
            Ty::Int | Ty::Int64 => match a {
                Arg::Number(n) if n.is_int && !n.is_complex => Ok(if ty_or_any == Ty::Int {
                    Value::Int(n.int)
                } else {
                    Value::Int64(n.int)
                }),
                _ => Err(self.err(f, format!("expected integer; found {a}"))),
            },
            Ty::String => match a {
                Arg::String { text, .. } => Ok(Value::string(text.as_str())),
                _ => Err(self.err(f, format!("expected string; found {a}"))),
            },
            Ty::Any => self.eval_empty_interface(f, dot, a).map(Rv::into_any),
            other => Err(self.err(
                f,
                format!("can't handle {a} for arg of type {}", other.go_name()),
            )),
        }
    }

    /// Go's `evalEmptyInterface` for constants.
    fn eval_empty_interface<'t>(&mut self, f: &mut Frame<'t>, dot: &Rv, a: &'t Arg) -> R<Rv> {
        f.at = At::Arg(a);
        match a {
            Arg::Bool { val, .. } => Ok(Rv::concrete(Value::Bool(*val))),
            Arg::Dot { .. } => Ok(dot.clone()),
            Arg::Number(n) => self.ideal_constant(f, a, n).map(Rv::concrete),
            Arg::String { text, .. } => Ok(Rv::concrete(Value::string(text.as_str()))),
            Arg::Nil { .. } => Err(self.err(f, "evalEmptyInterface: nil (can't happen)")),
            _ => Err(self.err(
                f,
                format!("can't handle assignment of {a} to empty interface argument"),
            )),
        }
    }

    /// An argument for a `reflect.Value` parameter (the builtins): whatever it evaluates to,
    /// no value and nil interfaces included.
    fn eval_arg_rv<'t>(&mut self, f: &mut Frame<'t>, dot: &Rv, a: &'t Arg) -> R<Rv> {
        f.at = At::Arg(a);
        match a {
            Arg::Dot { .. } => Ok(dot.clone()),
            Arg::Nil { .. } => Ok(Rv::Invalid),
            Arg::Field { ident, .. } => self.eval_field_chain(
                f,
                dot,
                dot.clone(),
                At::Arg(a),
                ident,
                std::slice::from_ref(a),
                None,
            ),
            Arg::Variable(v) => self.eval_variable(f, dot, v, &[], None),
            Arg::Pipe(p) => self.eval_pipeline(f, dot, p),
            Arg::Identifier { name, .. } => {
                self.eval_function(f, dot, a, name, At::Arg(a), &[], None)
            }
            Arg::Chain { .. } => self.eval_chain(f, dot, a, &[], None),
            _ => self.eval_empty_interface(f, dot, a),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn call_builtin<'t>(
        &mut self,
        f: &mut Frame<'t>,
        dot: &Rv,
        b: Builtin,
        name: &str,
        call_node: At<'t>,
        args: &'t [Arg],
        fin: Option<Rv>,
    ) -> R<Rv> {
        let (fixed, variadic) = b.arity();
        self.check_arity(f, name, fixed, variadic, args, &fin)?;
        self.step(f)?;
        let rest = args.get(1..).unwrap_or(&[]);
        if matches!(b, Builtin::And | Builtin::Or) {
            let want = b == Builtin::Or;
            let mut v = Rv::Invalid;
            for a in rest {
                v = self.eval_arg_rv(f, dot, a)?;
                if v.truth() == want {
                    return Ok(v);
                }
            }
            if let Some(x) = fin {
                v = x;
            }
            return Ok(v);
        }
        let mut argv: Vec<Rv> = Vec::with_capacity(rest.len() + 1);
        for (i, a) in rest.iter().enumerate() {
            let v = match b.param(i) {
                builtins::Param::Rv => self.eval_arg_rv(f, dot, a)?,
                builtins::Param::Any => Rv::concrete(self.eval_arg(f, dot, Some(Ty::Any), a)?),
                builtins::Param::Str => Rv::concrete(self.eval_arg(f, dot, Some(Ty::String), a)?),
            };
            argv.push(v);
        }
        if let Some(v) = fin {
            let v = match b.param(rest.len()) {
                builtins::Param::Rv => v,
                builtins::Param::Any => Rv::concrete(self.validate(f, v, Ty::Any)?),
                builtins::Param::Str => Rv::concrete(self.validate(f, v, Ty::String)?),
            };
            argv.push(v);
        }
        let callee = if b == Builtin::Call {
            rest.first().map(ToString::to_string)
        } else {
            None
        };
        match builtins::call(b, &argv, callee.as_deref()) {
            Ok(v) => Ok(v),
            Err(e) => {
                f.at = call_node;
                Err(self.err(f, format!("error calling {name}: {e}")))
            }
        }
    }
}

fn has_args_message(kind: &str, name: &str) -> String {
    if kind == "map" {
        format!("{name} is not a method but has arguments")
    } else {
        format!("{name} has arguments but cannot be invoked as function")
    }
}

/// Whether a value of this kind may be passed where Go declares `ty`.
fn assignable(v: &Value, ty: Ty) -> bool {
    match ty {
        Ty::Any => true,
        Ty::String => matches!(v, Value::String(_)),
        Ty::Int => matches!(v, Value::Int(_)),
        Ty::Int64 => matches!(v, Value::Int64(_)),
        Ty::Float64 => matches!(v, Value::Float(_)),
        Ty::Bool => matches!(v, Value::Bool(_)),
        Ty::Bytes => matches!(v, Value::Bytes(_)),
        Ty::List => matches!(v, Value::List(_)),
        Ty::Map => matches!(v, Value::Map(_)),
        Ty::Object(name) => matches!(v, Value::Object(o) if o.type_name() == name),
    }
}
