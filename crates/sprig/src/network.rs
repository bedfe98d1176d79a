//! `getHostByName`. Sprig resolves the name with the system resolver; Helm 3 replaces it
//! unless `--enable-dns` is given, and then it returns "" for every name. A renderer of
//! untrusted charts must not reach the network either, so the default here is Helm's:
//! [`NoNetwork`] answers "". A caller that wants `--enable-dns` behaviour registers its own
//! [`Resolver`] with [`register_resolver`].

use std::rc::Rc;

use go_template::{Func, FuncMap, Signature, Ty, Value};

use crate::fargs::str_arg;

/// Name resolution for `getHostByName` (`--enable-dns`).
pub trait Resolver {
    /// The addresses `name` resolves to, as text; sprig returns one at random, "" for none.
    fn lookup_host(&self, name: &str) -> Vec<String>;
}

/// Helm's default (DNS disabled): nothing resolves.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoNetwork;

impl Resolver for NoNetwork {
    fn lookup_host(&self, _name: &str) -> Vec<String> {
        Vec::new()
    }
}

pub(crate) fn register(m: &mut FuncMap) {
    register_resolver(m, Rc::new(NoNetwork));
}

/// Replaces `getHostByName` in `m` with one that asks `resolver`.
pub fn register_resolver(m: &mut FuncMap, resolver: Rc<dyn Resolver>) {
    m.insert(
        "getHostByName".into(),
        Func::new(Signature::fixed(&[Ty::String]), move |a: &[Value]| {
            let addrs = resolver.lookup_host(str_arg(a, 0));
            Ok(Value::string(if addrs.is_empty() {
                String::new()
            } else {
                addrs[crate::random::below(addrs.len() as u64) as usize].clone()
            }))
        }),
    );
}
