//! The Go template parser and executor (builtins only): never panics, never overflows the
//! stack, and stays within its limits on any input — chart templates come from registries.
#![no_main]

use go_template::{FuncMap, Limits, MissingKey, Templates, Value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut set = Templates::new(FuncMap::new());
    set.set_missing_key(MissingKey::Zero);
    set.set_limits(Limits {
        max_depth: 100,
        max_output: 1 << 20,
        // Bounded time per input: exponential `template` calls stop here.
        max_steps: 1_000_000,
        ..Limits::default()
    });
    if set.parse("fuzz", text).is_err() {
        return;
    }
    let values = Value::from_json(&serde_json::json!({
        "a": 1, "s": "text", "l": [1, "x", null, {"k": "v"}], "m": {"b": true, "n": 2.5}
    }));
    let dot = Value::map([("Values".to_owned(), values)].into_iter().collect());
    if let Ok(out) = set.execute("fuzz", &dot) {
        assert!(out.len() <= 1 << 20, "output beyond the limit: {} bytes", out.len());
    }
});
