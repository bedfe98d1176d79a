use go_template::FuncMap;
pub(crate) fn register(_m: &mut FuncMap) {}
