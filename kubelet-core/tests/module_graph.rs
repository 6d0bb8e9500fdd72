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
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
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

#[test]
fn kubelet_core_modules_have_no_import_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    collect(&root, &root, &mut graph);
    assert!(graph.len() > 20, "read {} modules", graph.len());
    for start in graph.keys() {
        let mut path = vec![start.clone()];
        if let Some(cycle) = cycle_from(&graph, start, start, &mut path, &mut BTreeSet::new()) {
            panic!("import cycle: {}", cycle.join(" → "));
        }
    }
}
