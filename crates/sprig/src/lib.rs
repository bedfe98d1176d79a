//! Sprig's functions (`github.com/Masterminds/sprig/v3`, `TxtFuncMap`) as Helm 3 registers
//! them: every function but `env` and `expandenv`, with sprig's signatures, results and error
//! messages.
//!
//! Depends only on `go-template`'s value model. Functions that read the clock (`now`, `ago`)
//! or randomness (`randAlphaNum`, `uuidv4`, key generation) do so directly, as sprig does.
//!
//! Each module registers its functions with `register`; `funcs` calls them all.

mod cast;
mod conversion;
mod defaults;
mod dicts;
mod lists;
mod math;
mod regex;
mod strings;
mod support;
mod unicode;

use go_template::FuncMap;

// yaml
pub mod json;
// sprig2
mod crypto;
mod date;
mod der;
mod encoding;
mod fargs;
mod hash;
pub mod network;
mod path;
mod random;
pub mod semver;
mod url;
// end sprig2

/// Every sprig function Helm's template engine has.
pub fn funcs() -> FuncMap {
    let mut m = FuncMap::new();
    strings::register(&mut m);
    conversion::register(&mut m);
    math::register(&mut m);
    defaults::register(&mut m);
    lists::register(&mut m);
    dicts::register(&mut m);
    regex::register(&mut m);
    // yaml
    json::register(&mut m);
    // sprig2
    crypto::register(&mut m);
    date::register(&mut m);
    encoding::register(&mut m);
    hash::register(&mut m);
    network::register(&mut m);
    path::register(&mut m);
    random::register(&mut m);
    semver::register(&mut m);
    url::register(&mut m);
    // end sprig2
    m
}
