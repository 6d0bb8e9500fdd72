//! The top-level modules of kubelet-core form no import cycle: the contracts sit at the
//! bottom, the components (volumes, env, images, hooks, status, prober) above them, the sync
//! step above those, then the pod workers and the sync loop. A `crate::x` path in code (not
//! in comments or docs) from module `a` is an edge `a → x`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn collect(dir: &Path, root: &Path, graph: &mut BTreeMap<String, BTreeSet<String>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, root, graph);
            continue;
        }
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap_or(&path);
        let top = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or_default()
            .trim_end_matches(".rs")
            .to_string();
        // Test modules and the test fakes may reach anywhere.
        let name = rel.to_string_lossy();
        if top == "lib" || top == "testing" || name.ends_with("_tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(i) => &text[..i],
            None => &text[..],
        };
        let deps = graph.entry(top.clone()).or_default();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or_default();
            for (i, _) in code.match_indices("crate::") {
                let rest = &code[i + "crate::".len()..];
                let module: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !module.is_empty() && module != top {
                    deps.insert(module);
                }
            }
        }
    }
}

/// A cycle through `start`, if there is one (depth-first search).
fn cycle_from(
    graph: &BTreeMap<String, BTreeSet<String>>,
    start: &str,
    node: &str,
    path: &mut Vec<String>,
    seen: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    for next in graph.get(node).into_iter().flatten() {
        if next == start {
            let mut cycle = path.clone();
            cycle.push(start.to_string());
            return Some(cycle);
        }
        if graph.contains_key(next) && seen.insert(next.clone()) {
            path.push(next.clone());
            if let Some(c) = cycle_from(graph, start, next, path, seen) {
                return Some(c);
            }
            path.pop();
        }
    }
    None
}

/// Module re-exports at the crate root (`pub use contracts::{cm, runtime};` makes
/// `crate::runtime` a path into `contracts`).
fn aliases(root: &Path) -> BTreeMap<String, String> {
    let lib = std::fs::read_to_string(root.join("lib.rs")).unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in lib.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, names)) = rest.split_once("::") else {
            continue;
        };
        let names = names
            .trim_end_matches(';')
            .trim_matches(|c| c == '{' || c == '}');
        for name in names.split(',').map(str::trim) {
            // `pub use kubelet::{Kubelet, KubeletHandle};` and `pub use volume::mount;`
            let name = name.rsplit("::").next().unwrap_or(name);
            if !name.is_empty() {
                out.insert(name.to_string(), module.to_string());
            }
        }
    }
    out
}

#[test]
fn kubelet_core_modules_have_no_import_cycle() {
    // Cargo's run-time CARGO_MANIFEST_DIR, the checkout being tested: `env!` would bake in the
    // path of whichever checkout sharing the build cache compiled this binary.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default();
    let root = Path::new(&manifest_dir).join("src");
    let mut graph = BTreeMap::new();
    collect(&root, &root, &mut graph);
    let aliases = aliases(&root);
    for (module, deps) in graph.iter_mut() {
        let resolved: BTreeSet<String> = deps
            .iter()
            .map(|d| aliases.get(d).cloned().unwrap_or_else(|| d.clone()))
            .filter(|d| d != module && d.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
            .collect();
        *deps = resolved;
    }
    assert!(graph.len() > 20, "read {} modules", graph.len());
    for start in graph.keys() {
        let mut path = vec![start.clone()];
        if let Some(cycle) = cycle_from(&graph, start, start, &mut path, &mut BTreeSet::new()) {
            panic!("import cycle: {}", cycle.join(" → "));
        }
    }
}
