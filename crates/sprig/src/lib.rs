//! Sprig's functions (`github.com/Masterminds/sprig/v3`, `TxtFuncMap`) as Helm 3 registers
//! them: every function but `env` and `expandenv`, with sprig's signatures, results and error
//! messages.
//!
//! Depends only on `go-template`'s value model. Functions that read the clock (`now`, `ago`)
//! or randomness (`randAlphaNum`, `uuidv4`, key generation) do so directly, as sprig does.

use go_template::FuncMap;

// yaml
pub mod json;

/// Every sprig function Helm's template engine has.
pub fn funcs() -> FuncMap {
    let mut m = FuncMap::new();
    // yaml
    json::register(&mut m);
    m
}
