//! The import graph of a crate's source files, for the layering tests of both crates
//! (`capsule/src/lib.rs`, `supervisor/src/main.rs`, included by path). A file imports another
//! when one of its `use` trees, or a `crate::` / `super::` / `self::` path anywhere in its code,
//! names an item of the other's module: grouped and nested trees (`use crate::{a, b::{c, d}}`),
//! `self` in a group, renames and globs included, and a `use` of a child module by its bare
//! name. What a module file names of its own submodules (a `mod.rs` re-exporting or calling its
//! children) is the module tree the `mod` declarations draw, not an import between floors, and
//! is not counted; everything else is, siblings and cousins alike. Comments, string literals
//! and `#[cfg(test)]` items are not code here, and files named `tests.rs` or under a `tests/`
//! folder are test code, not a floor of the crate.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// File → the files it imports, by path relative to the crate's `src/`.
pub struct Graph {
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

/// The module path of a file: `door/span.rs` → `[door, span]`, `door/mod.rs` → `[door]`.
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn is_test_file(file: &str) -> bool {
    file.ends_with("/tests.rs") || file == "tests.rs" || file.split('/').any(|p| p == "tests")
}

/// Every `.rs` file under `root`, as (path relative to it, source).
pub fn sources(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let rel = path
                    .strip_prefix(root)
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if let Ok(text) = std::fs::read_to_string(&path) {
                    out.push((rel, text));
                }
            }
        }
    }
    out.sort();
    out
}

/// Source without comments, string and char literals (their text blanked), so that neither can
/// pass for code.
fn code_of(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) {
            // A raw string: r"…", r#"…"#, …
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c as char);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&b'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' && b.get(i + 2) == Some(&b'\'') {
            out.push_str("' '");
            i += 3;
        } else if c == b'\'' && b.get(i + 1) == Some(&b'\\') {
            let end = src[i + 1..].find('\'').map_or(b.len(), |e| i + 1 + e + 1);
            out.push_str("' '");
            i = end;
        } else {
            // Multi-byte characters are copied whole.
            let ch = src[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// `code` without its `#[cfg(test)]` items (a test module, a test function).
fn without_tests(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // The item ends at its `;` or at the brace that closes its body, whichever comes first.
        let semi = after.find(';');
        let brace = after.find('{');
        match (semi, brace) {
            (Some(s), Some(b)) if s < b => rest = &after[s + 1..],
            (_, Some(b)) => {
                let mut depth = 0;
                let mut end = after.len();
                for (i, ch) in after[b..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &after[end..];
            }
            (Some(s), None) => rest = &after[s + 1..],
            (None, None) => rest = "",
        }
    }
    out.push_str(rest);
    out
}

/// The paths a `use` tree names, each as segments: `a::{b, c::{d, self}}` → `a::b`, `a::c::d`,
/// `a::c`.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let prefix: Vec<String> = split_path(tree[..open].trim_end_matches("::"));
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut out = Vec::new();
        let (mut depth, mut start) = (0, 0);
        let mut items = Vec::new();
        for (i, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&inner[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        items.push(&inner[start..]);
        for item in items.into_iter().filter(|i| !i.trim().is_empty()) {
            for path in expand(item) {
                let mut full = prefix.clone();
                if path != ["self"] {
                    full.extend(path);
                }
                out.push(full);
            }
        }
        return out;
    }
    vec![split_path(tree.split(" as ").next().unwrap_or(tree))]
}

fn split_path(path: &str) -> Vec<String> {
    path.split("::")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty() && *s != "*")
        .map(str::to_owned)
        .collect()
}

impl Graph {
    /// The graph of `files` (path relative to `src/`, source).
    pub fn of(files: &[(String, String)]) -> Graph {
        let product: Vec<&(String, String)> =
            files.iter().filter(|(f, _)| !is_test_file(f)).collect();
        let modules: BTreeMap<Vec<String>, String> = product
            .iter()
            .map(|(f, _)| (module_of(f), f.clone()))
            .collect();
        let file_of = |path: &[String]| -> Option<String> {
            (1..=path.len())
                .rev()
                .find_map(|n| modules.get(&path[..n]).cloned())
        };
        let mut edges = BTreeMap::new();
        for (file, src) in &product {
            let me = module_of(file);
            let parent: Vec<String> = me[..me.len().saturating_sub(1)].to_vec();
            let code = without_tests(&code_of(src));
            let resolve = |segs: &[String]| -> Option<Vec<String>> {
                let (first, rest) = segs.split_first()?;
                let mut base = match first.as_str() {
                    "crate" => Vec::new(),
                    "super" => parent.clone(),
                    "self" => me.clone(),
                    // A bare name: a child module of this one, or an outside crate.
                    name => {
                        let mut child = me.clone();
                        child.push(name.to_owned());
                        if modules.contains_key(&child) {
                            let mut full = child;
                            full.extend(rest.iter().cloned());
                            return Some(full);
                        }
                        return None;
                    }
                };
                let mut rest = rest;
                while let Some((s, more)) = rest.split_first() {
                    if s != "super" {
                        break;
                    }
                    base.pop();
                    rest = more;
                }
                base.extend(rest.iter().cloned());
                Some(base)
            };
            let mut deps = BTreeSet::new();
            let mut add = |segs: Vec<String>| {
                if let Some(path) = resolve(&segs) {
                    if let Some(target) = file_of(&path) {
                        let own_child = module_of(&target).starts_with(&me);
                        if &target != file && !own_child {
                            deps.insert(target);
                        }
                    }
                }
            };
            // `use` trees (the keyword at a word's start, ending at its `;`).
            let mut at = 0;
            while let Some(found) = code[at..].find("use ") {
                let start = at + found;
                at = start + 4;
                let word_start = start == 0
                    || !code[..start]
                        .chars()
                        .last()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_');
                if !word_start {
                    continue;
                }
                let Some(end) = code[at..].find(';') else {
                    break;
                };
                for path in expand(&code[at..at + end]) {
                    add(path);
                }
                at += end;
            }
            // Paths in code: crate::…, super::…, self::… (outside `use`, counted again
            // harmlessly inside it).
            for anchor in ["crate::", "super::", "self::"] {
                let mut from = 0;
                while let Some(found) = code[from..].find(anchor) {
                    let start = from + found;
                    from = start + anchor.len();
                    let before = code[..start].chars().last();
                    if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                        continue;
                    }
                    let tail: String = code[start..]
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                        .collect();
                    add(split_path(&tail));
                }
            }
            edges.insert(file.clone(), deps);
        }
        Graph { edges }
    }

    /// The same imports between top-level modules (`formation/start.rs` → `formation`): a
    /// circle here is two modules importing each other through any of their files.
    pub fn modules(&self) -> Graph {
        let top = |f: &str| {
            f.split('/')
                .next()
                .unwrap_or(f)
                .trim_end_matches(".rs")
                .to_owned()
        };
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (file, targets) in &self.edges {
            let into = edges.entry(top(file)).or_default();
            into.extend(targets.iter().map(|t| top(t)).filter(|t| *t != top(file)));
        }
        Graph { edges }
    }

    /// Every import circle: the strongly connected groups of two files or more, each sorted.
    pub fn cycles(&self) -> Vec<Vec<String>> {
        struct Walk<'g> {
            g: &'g Graph,
            index: BTreeMap<&'g str, usize>,
            low: BTreeMap<&'g str, usize>,
            stack: Vec<&'g str>,
            on: BTreeSet<&'g str>,
            next: usize,
            found: Vec<Vec<String>>,
        }
        impl<'g> Walk<'g> {
            fn visit(&mut self, v: &'g str) {
                self.index.insert(v, self.next);
                self.low.insert(v, self.next);
                self.next += 1;
                self.stack.push(v);
                self.on.insert(v);
                for w in self.g.edges.get(v).into_iter().flatten() {
                    let w = w.as_str();
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let lw = self.low[w];
                        let lv = self.low[v];
                        self.low.insert(v, lv.min(lw));
                    } else if self.on.contains(w) {
                        let iw = self.index[w];
                        let lv = self.low[v];
                        self.low.insert(v, lv.min(iw));
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut group = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on.remove(w);
                        group.push(w.to_owned());
                        if w == v {
                            break;
                        }
                    }
                    if group.len() > 1 {
                        group.sort();
                        self.found.push(group);
                    }
                }
            }
        }
        let mut walk = Walk {
            g: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on: BTreeSet::new(),
            next: 0,
            found: Vec::new(),
        };
        for v in self.edges.keys() {
            if !walk.index.contains_key(v.as_str()) {
                walk.visit(v);
            }
        }
        walk.found.sort();
        walk.found
    }

    /// One path of imports around the circle `group`, for the failure's message.
    pub fn describe(&self, group: &[String]) -> String {
        let members: BTreeSet<&str> = group.iter().map(String::as_str).collect();
        group
            .iter()
            .map(|f| {
                let into: Vec<&str> = self.edges[f]
                    .iter()
                    .map(String::as_str)
                    .filter(|t| members.contains(t))
                    .collect();
                format!("{f} → {}", into.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The fixture the layering tests check themselves on: a grouped import and a circle between
/// two files of one floor, which must be seen.
pub fn fixture() -> Vec<(String, String)> {
    vec![
        (
            "lib.rs".into(),
            "pub mod door;\npub mod tasks;\n".into(),
        ),
        (
            "door/mod.rs".into(),
            "mod check;\nmod span;\nuse crate::{tasks::{self, Registry}, door::check::Inbound};\npub struct Door;\n".into(),
        ),
        (
            "door/check.rs".into(),
            "// use crate::door::span; (a comment is no import)\nuse super::{span::open, Door};\npub struct Inbound;\n".into(),
        ),
        (
            "door/span.rs".into(),
            "pub fn open() { let s = \"crate::door::check\"; let _ = super::check::Inbound; }\n".into(),
        ),
        (
            "tasks/mod.rs".into(),
            "pub struct Registry;\n#[cfg(test)]\nmod tests { use crate::door::Door; }\n".into(),
        ),
    ]
}

/// Asserts `graph` has no import circle, naming each it has.
pub fn assert_no_cycles(graph: &Graph) {
    let cycles = graph.cycles();
    let shown: Vec<String> = cycles.iter().map(|c| graph.describe(c)).collect();
    assert!(
        cycles.is_empty(),
        "import circles between files (move what both need to a module below both):\n{}",
        shown.join("\n")
    );
}
