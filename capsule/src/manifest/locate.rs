//! Best-effort line and column of a key path in the manifest's text. `serde_yaml::Value` carries
//! no positions, so this scans the source: each key is searched after the previous one, and a list
//! index walks block-style `- ` items. When a step cannot be found (flow lists, a missing key) the
//! deepest step found is reported; when nothing is found, no position is given.

use crate::manifest::keypath::Seg;

/// 1-based (line, column) of the deepest part of `segs` found in `source`.
pub fn locate(source: &str, segs: &[Seg]) -> Option<(usize, usize)> {
    let mut from = 0;
    let mut limit = source.len();
    let mut found = None;
    for seg in segs {
        let step = match seg {
            Seg::Key(key) => {
                find_key(source, from, limit, key).map(|at| (at, at + key.len(), limit))
            }
            Seg::Index(index) => find_item(source, from, limit, *index),
        };
        let Some((at, next_from, next_limit)) = step else {
            break;
        };
        found = Some(at);
        from = next_from;
        limit = next_limit;
    }
    found.map(|at| line_col(source, at))
}

/// The byte offset of `key` written as a mapping key in `source[from..limit]`.
fn find_key(source: &str, from: usize, limit: usize, key: &str) -> Option<usize> {
    if key.is_empty() || from >= limit {
        return None;
    }
    source
        .get(from..limit)?
        .match_indices(key)
        .map(|(offset, _)| from + offset)
        .find(|at| is_key_at(source, *at, key))
}

/// True when `key` at byte `at` is followed by `:` (after an optional quote) and preceded by
/// line start, whitespace, `{`, `,` or a quote, outside a comment.
fn is_key_at(source: &str, at: usize, key: &str) -> bool {
    let line_start = source[..at].rfind('\n').map_or(0, |i| i + 1);
    let before = &source[line_start..at];
    if before.contains('#') {
        return false;
    }
    let prev = before.chars().last();
    if !matches!(prev, None | Some(' ' | '\t' | '{' | ',' | '"' | '\'')) {
        return false;
    }
    let mut rest = &source[at + key.len()..];
    if let Some(quote @ ('"' | '\'')) = prev {
        match rest.strip_prefix(quote) {
            Some(after) => rest = after,
            None => return false,
        }
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    match rest.strip_prefix(':') {
        Some(after) => after
            .chars()
            .next()
            .is_none_or(|c| c.is_whitespace() || c == ',' || c == '}'),
        None => false,
    }
}

/// The `index`-th block item of the list whose key ends at `from`: (item content offset, where
/// to search next, where the item ends).
fn find_item(
    source: &str,
    from: usize,
    limit: usize,
    index: usize,
) -> Option<(usize, usize, usize)> {
    let line_end = source.get(from..limit)?.find('\n')? + from;
    if source[from..line_end]
        .trim_start_matches([':', ' ', '"', '\''])
        .starts_with('[')
    {
        return None;
    }
    let mut pos = line_end + 1;
    let mut item_indent = None;
    let mut count = 0;
    let mut target = None;
    while pos < limit {
        let end = source[pos..limit].find('\n').map_or(limit, |i| pos + i + 1);
        let line = &source[pos..end];
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        let content = trimmed.trim_end();
        pos = end;
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let is_item = content == "-" || content.starts_with("- ");
        let start = end - line.len();
        match item_indent {
            None if !is_item => return None,
            None => item_indent = Some(indent),
            Some(level) if indent < level || (indent == level && !is_item) => {
                return target.map(|t| (t, t, start));
            }
            Some(level) if indent == level => count += 1,
            Some(_) => continue,
        }
        if let Some(t) = target {
            return Some((t, t, start));
        }
        if count == index {
            let after_dash = start + indent + 1;
            let skip = source[after_dash..end].len() - source[after_dash..end].trim_start().len();
            target = Some(if content == "-" {
                start + indent
            } else {
                after_dash + skip
            });
        }
    }
    target.map(|t| (t, t, limit))
}

/// 1-based line and column (in chars) of byte `at`.
fn line_col(source: &str, at: usize) -> (usize, usize) {
    let before = &source[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, source[line_start..at].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(parts: &[&str]) -> Vec<Seg> {
        parts
            .iter()
            .map(|p| match p.parse::<usize>() {
                Ok(i) => Seg::Index(i),
                Err(_) => Seg::Key((*p).to_string()),
            })
            .collect()
    }

    const TEXT: &str = "name: x  # name: not this\nartifacts:\n  - name: a\n    runtime: driver\n\n  - name: b\n    process:\n      command: [x]\nlifecycle: { task_acceptence: queue }\n";

    #[test]
    fn finds_keys_items_and_flow_keys() {
        assert_eq!(locate(TEXT, &path(&["name"])), Some((1, 1)));
        assert_eq!(
            locate(TEXT, &path(&["artifacts", "1", "name"])),
            Some((6, 5))
        );
        assert_eq!(
            locate(TEXT, &path(&["artifacts", "1", "process", "command"])),
            Some((8, 7))
        );
        assert_eq!(
            locate(TEXT, &path(&["lifecycle", "task_acceptence"])),
            Some((9, 14))
        );
    }

    #[test]
    fn stops_at_the_deepest_step_found() {
        // artifacts[0] has no process: the item is reported, not artifacts[1]'s process.
        assert_eq!(
            locate(TEXT, &path(&["artifacts", "0", "process"])),
            Some((3, 5))
        );
        assert_eq!(locate(TEXT, &path(&["network"])), None);
        assert_eq!(locate("a: [x, y]\n", &path(&["a", "1"])), Some((1, 1)));
    }
}
