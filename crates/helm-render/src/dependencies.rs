//! Helm's `ProcessDependenciesWithMerge`: which subcharts are enabled (`condition`, `tags`),
//! which are renamed (`alias`), and the values a parent imports from its children
//! (`import-values`, both the `{child, parent}` form and the `exports` shorthand).

use go_template::{Map, Value};

use crate::chart::{Chart, Dependency};
use crate::values::{self, coalesce_values, merge_values, path_to_map, path_value, table};
use sprig::semver;

/// Applies aliases, conditions and tags to `chart`'s subcharts (recursively) given the user's
/// values, then imports values from children into parents.
pub fn process_dependencies(chart: &mut Chart, vals: &Map) -> Result<(), String> {
    process_enabled(chart, vals, "")?;
    process_import_values_rec(chart)
}

fn alias_dependency(charts: &[Chart], dep: &Dependency) -> Option<Chart> {
    for c in charts {
        if c.name() != dep.name || !semver::compatible(&dep.version, &c.metadata.version) {
            continue;
        }
        let mut out = c.clone();
        if !dep.alias.is_empty() {
            out.metadata.name = dep.alias.clone();
        }
        return Some(out);
    }
    None
}

fn process_enabled(c: &mut Chart, v: &Map, path: &str) -> Result<(), String> {
    let Some(mut reqs) = c.metadata.dependencies.take() else {
        return Ok(());
    };
    let mut chart_deps = Vec::new();
    'existing: for existing in &c.dependencies {
        for req in reqs.iter().flatten() {
            if existing.name() == req.name
                && semver::compatible(&req.version, &existing.metadata.version)
            {
                continue 'existing;
            }
        }
        chart_deps.push(existing.clone());
    }
    for req in reqs.iter_mut().flatten() {
        if let Some(dep) = alias_dependency(&c.dependencies, req) {
            chart_deps.push(dep);
        }
        if !req.alias.is_empty() {
            req.name = req.alias.clone();
        }
    }
    c.dependencies = chart_deps;
    for req in reqs.iter_mut().flatten() {
        req.enabled = true;
    }
    c.metadata.dependencies = Some(reqs);
    let cvals = coalesce_values(c, v)?;
    let mut reqs = c.metadata.dependencies.take().unwrap_or_default();
    process_tags(&mut reqs, &cvals);
    process_conditions(&mut reqs, &cvals, path);
    let removed: Vec<String> = reqs
        .iter()
        .flatten()
        .filter(|r| !r.enabled)
        .map(|r| r.name.clone())
        .collect();
    c.dependencies
        .retain(|d| !removed.iter().any(|r| r == d.name()));
    reqs.retain(|r| r.as_ref().is_none_or(|r| !removed.contains(&r.name)));
    for t in &mut c.dependencies {
        let sub = format!("{path}{}.", t.name());
        process_enabled(t, &cvals, &sub)?;
    }
    c.metadata.dependencies = Some(reqs);
    Ok(())
}

fn process_tags(reqs: &mut [Option<Dependency>], cvals: &Map) {
    let Some(tags) = table(cvals, "tags") else {
        return;
    };
    for r in reqs.iter_mut().flatten() {
        let (mut has_true, mut has_false) = (false, false);
        for k in &r.tags {
            // Non-bool tags only warn in Helm.
            if let Some(Value::Bool(b)) = tags.get(k) {
                if *b {
                    has_true = true;
                } else {
                    has_false = true;
                }
            }
        }
        if !has_true && has_false {
            r.enabled = false;
        } else if has_true || !has_false {
            r.enabled = true;
        }
    }
}

fn process_conditions(reqs: &mut [Option<Dependency>], cvals: &Map, path: &str) {
    for r in reqs.iter_mut().flatten() {
        let cond = r.condition.trim().to_owned();
        for c in cond.split(',') {
            if c.is_empty() {
                continue;
            }
            // A non-bool value only warns in Helm ("returned non-bool value").
            if let Some(Value::Bool(b)) = path_value(cvals, &format!("{path}{c}")) {
                r.enabled = b;
                break;
            }
        }
    }
}

fn process_import_values_rec(c: &mut Chart) -> Result<(), String> {
    for d in &mut c.dependencies {
        process_import_values_rec(d)?;
    }
    process_import_values(c)
}

fn process_import_values(c: &mut Chart) -> Result<(), String> {
    if c.metadata.dependencies.is_none() {
        return Ok(());
    }
    let cvals = merge_values(c, &Map::new())?;
    let mut b = Map::new();
    let mut reqs = c.metadata.dependencies.take().unwrap_or_default();
    for r in reqs.iter_mut().flatten() {
        let mut out = Vec::new();
        for riv in &r.import_values {
            match riv {
                Value::Map(m) => {
                    let m = m.borrow();
                    let get = |k: &str| match m.get(k) {
                        Some(Value::String(s)) => Ok(s.to_string()),
                        other => Err(format!(
                            "interface conversion: interface {{}} is {}, not string",
                            other.map_or("nil".into(), Value::type_name)
                        )),
                    };
                    let child = get("child")?;
                    let parent = get("parent")?;
                    out.push(import_pair(&child, &parent));
                    // Helm warns "ImportValues missing table from chart …" and goes on.
                    let Some(vv) = table(&cvals, &format!("{}.{child}", r.name)) else {
                        continue;
                    };
                    b = values::coalesce_tables_maps(b, path_to_map(&parent, vv), true);
                }
                Value::String(s) => {
                    let child = format!("exports.{s}");
                    out.push(import_pair(&child, "."));
                    let Some(vm) = table(&cvals, &format!("{}.{child}", r.name)) else {
                        continue;
                    };
                    b = values::coalesce_tables_maps(b, vm, true);
                }
                _ => {}
            }
        }
        r.import_values = out;
    }
    c.metadata.dependencies = Some(reqs);
    let cvals = values::deep_copy_map(&cvals);
    c.values = values::coalesce_tables_maps(cvals, b, true);
    Ok(())
}

fn import_pair(child: &str, parent: &str) -> Value {
    let mut m = Map::new();
    m.insert("child".into(), Value::string(child));
    m.insert("parent".into(), Value::string(parent));
    Value::map(m)
}
