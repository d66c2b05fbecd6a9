//! What reading a manifest may cost: at most 1 MiB of text (E-MAN-010), at most 64 levels of
//! lists and mappings inside each other (E-MAN-011), and no YAML anchors or aliases (E-MAN-002):
//! one anchor referenced many times is expanded each time by the parser, so a few kilobytes of
//! aliases can stand for gigabytes of manifest, past both other bounds. Both are checked before serde_yaml sees the
//! text — the size before the file is read whole, the depth by one linear pre-scan — because the
//! YAML parser's time grows with nesting (100 000 nested `[` took 45 s to refuse) and a huge file
//! would otherwise be held in memory and copied into the records. A manifest is a few kilobytes of
//! settings nested 6 levels at most, so these bounds cost no real manifest anything.
//!
//! The pre-scan is not a YAML parser. It follows just enough of YAML (indentation, `- ` items,
//! `key:` entries, flow `[ ]` and `{ }`, quoted scalars, comments, block and multi-line scalars)
//! to count how deep collections go; text it misreads is text serde_yaml refuses anyway, and
//! serde_yaml's own recursion limit still stands behind it.

use crate::manifest::error::{ErrorCode, ManifestError};
use std::io::Read;
use std::path::Path;

/// The largest manifest (and `.env` beside it) murmur reads: 1 MiB.
pub const MAX_BYTES: u64 = 1 << 20;

/// The deepest a manifest may nest lists and mappings (block or flow, counted together).
pub const MAX_DEPTH: usize = 64;

/// Why a bounded read gave no text.
#[derive(Debug)]
pub enum ReadError {
    /// The file could not be read (or is not UTF-8).
    Io(std::io::Error),
    /// The file holds more than `MAX_BYTES`: its size when the file system says, else `None`.
    TooLarge(Option<u64>),
}

/// The text of `path`, reading at most `MAX_BYTES + 1` bytes, so a huge file (or a device that
/// never ends) is refused without being read whole.
pub fn read(path: &Path) -> Result<String, ReadError> {
    let file = std::fs::File::open(path).map_err(ReadError::Io)?;
    let known = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    if let Some(size) = known.filter(|size| *size > MAX_BYTES) {
        return Err(ReadError::TooLarge(Some(size)));
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > MAX_BYTES {
        // The file grew since its size was read, or is not a regular file.
        return Err(ReadError::TooLarge(None));
    }
    String::from_utf8(bytes).map_err(|_| {
        ReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

/// What a bounded read was reading, for the E-MAN-010 sentence and hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A capsule or formation manifest.
    Manifest,
    /// The `.env` beside a manifest.
    EnvFile,
}

/// E-MAN-010 for `file`; `size` when known.
pub fn too_large(file: &Path, size: Option<u64>, source: Source) -> ManifestError {
    let (what, hint) = match source {
        Source::Manifest => (
            "a manifest",
            "a manifest holds settings and is a few kilobytes; keep long text (prompts, data) in \
             files the harness reads, and check that this is the file you meant",
        ),
        Source::EnvFile => (
            "a .env file",
            "a .env holds KEY=VALUE settings; keep large values in files and name their paths",
        ),
    };
    let limit = format!("the {MAX_BYTES} bytes (1 MiB) {what} may be");
    let message = match size {
        Some(size) => format!("is {size} bytes, more than {limit}"),
        None => format!("is more than {limit}"),
    };
    ManifestError::new(ErrorCode::TooLarge, file, "", message, hint)
}

/// E-MAN-011 unless `text` nests at most `MAX_DEPTH` levels; the error points at the line and
/// column where the first level too many opens.
pub fn check_depth(text: &str, file: &Path) -> Result<(), ManifestError> {
    let Err((line, column)) = depth_ok(text) else {
        return Ok(());
    };
    Err(ManifestError::new(
        ErrorCode::TooDeep,
        file,
        "",
        format!(
            "line {line} column {column}: lists and mappings are nested more than {MAX_DEPTH} \
             levels deep"
        ),
        format!(
            "a manifest nests at most {MAX_DEPTH} levels (its own keys need 6); check for \
             unclosed [ or {{, or flatten the structure"
        ),
    )
    .at(Some((line, column))))
}

/// E-MAN-002 when `text` holds a YAML anchor (`&name`) or alias (`*name`), naming the line of the
/// first. Read with a YAML event parser of its own (yaml-rust2), which reports anchors and
/// aliases as events, where serde_yaml would expand them silently.
///
/// Text that parser cannot read is refused too (E-MAN-002 at the spot it stopped) unless it
/// holds no `&` and no `*` at all, and so can hold no anchor or alias: the two parsers do not
/// agree on everything (serde_yaml reads `key:<TAB>value`, yaml-rust2 does not), and what
/// serde_yaml reads past where this check stopped would otherwise be expanded unchecked. Text
/// with neither character passes, and serde_yaml says what is wrong with it, if anything.
pub fn check_aliases(text: &str, file: &Path) -> Result<(), ManifestError> {
    use yaml_rust2::parser::{Event, Parser};
    let mut parser = Parser::new_from_str(text);
    loop {
        let (event, mark) = match parser.next_token() {
            Ok(next) => next,
            Err(_) if !text.contains(['&', '*']) => return Ok(()),
            Err(e) => return Err(unchecked(&e, file)),
        };
        let found = match event {
            Event::StreamEnd => return Ok(()),
            Event::Alias(_) => "an alias (*name)",
            Event::Scalar(_, _, anchor, _)
            | Event::SequenceStart(anchor, _)
            | Event::MappingStart(anchor, _)
                if anchor > 0 =>
            {
                "an anchor (&name)"
            }
            _ => continue,
        };
        let (line, column) = (mark.line(), mark.col().saturating_add(1));
        return Err(ManifestError::new(
            ErrorCode::Syntax,
            file,
            "",
            format!("line {line}: {found}: a manifest takes no YAML anchors or aliases"),
            "write the value out where it is needed: an alias can make a few lines stand for \
             more manifest than murmur reads",
        )
        .at(Some((line, column))));
    }
}

/// E-MAN-002 for text the alias check could not read to its end.
fn unchecked(e: &yaml_rust2::ScanError, file: &Path) -> ManifestError {
    let (line, column) = (e.marker().line(), e.marker().col().saturating_add(1));
    ManifestError::new(
        ErrorCode::Syntax,
        file,
        "",
        format!(
            "line {line} column {column}: {}: murmur cannot read past here to check the manifest \
             for YAML anchors and aliases",
            e.info()
        ),
        format!(
            "fix the YAML at line {line} (a tab after `:` or `-` counts: write a space there); a \
             manifest murmur cannot check for aliases is refused, since an alias can make a few \
             lines stand for more manifest than murmur reads"
        ),
    )
    .at(Some((line, column)))
}

/// `Err((line, column))`, both 1-based, of the first collection opened past `MAX_DEPTH`.
fn depth_ok(text: &str) -> Result<(), (usize, usize)> {
    let mut scan = Scanner::default();
    for (index, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        scan.line(line.as_bytes()).map_err(|at| {
            let column = String::from_utf8_lossy(&line.as_bytes()[..at])
                .chars()
                .count();
            (index.saturating_add(1), column.saturating_add(1))
        })?;
    }
    Ok(())
}

/// A block collection's kind: a `- ` sequence and a `key:` mapping may open at one column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Seq,
    Map,
}

/// The pre-scan's state between lines. Every method answers `Err(byte offset)` in the current
/// line where a collection opened past the limit.
#[derive(Debug, Default)]
struct Scanner {
    /// Open block collections, outermost first: the column each starts at and its kind.
    blocks: Vec<(usize, Block)>,
    /// Open flow collections (`[`, `{`).
    flow: usize,
    /// The quote of a quoted scalar that continues on the next line.
    quote: Option<u8>,
    /// Blank lines and lines indented more than this column belong to a scalar a previous line
    /// started (block scalar content, plain or quoted continuation): they open nothing.
    leaf_above: Option<usize>,
    /// The column of the block node whose value is the open flow collection or multi-line quoted
    /// scalar; lines below it are its continuation once that value closes.
    parent: Option<usize>,
    /// The last significant byte in flow context: a quote opens a scalar only after one of
    /// `[ { , : ?` (in `[it's]` it is part of a plain scalar).
    prev: u8,
}

type Scan<T> = Result<T, usize>;

impl Scanner {
    fn depth(&self) -> usize {
        self.blocks.len().saturating_add(self.flow)
    }

    fn line(&mut self, b: &[u8]) -> Scan<()> {
        let mut from = 0;
        if let Some(quote) = self.quote {
            let Some(end) = skip_quote(b, 0, quote) else {
                return Ok(());
            };
            self.quote = None;
            if self.flow == 0 {
                // A multi-line quoted value in block context: the rest of its line ends it.
                self.leaf_above = self.parent.take();
                return Ok(());
            }
            from = end;
        } else if self.flow == 0 {
            match self.block_line(b)? {
                Some(start) => from = start,
                None => return Ok(()),
            }
        }
        self.flow_part(b, from)
    }

    /// A line in block context. Answers where a flow collection starts on it, if one does.
    fn block_line(&mut self, b: &[u8]) -> Scan<Option<usize>> {
        let indent = b.iter().take_while(|c| **c == b' ').count();
        if indent == b.len() || b[indent] == b'#' {
            return Ok(None);
        }
        if let Some(above) = self.leaf_above {
            if indent > above {
                return Ok(None);
            }
            self.leaf_above = None;
        }
        if indent == 0 && (b.starts_with(b"---") || b.starts_with(b"...") || b[0] == b'%') {
            return Ok(None);
        }
        let mut pos = indent;
        let mut dash = None;
        while pos < b.len() && b[pos] == b'-' && b.get(pos + 1).is_none_or(|c| is_blank(*c)) {
            self.open_block(pos, Block::Seq)?;
            dash = Some(pos);
            pos = skip_blanks(b, pos + 1);
            if pos == b.len() || b[pos] == b'#' {
                return Ok(None);
            }
        }
        match mapping_value(b, pos) {
            Some(value) => {
                self.open_block(pos, Block::Map)?;
                let value = skip_blanks(b, value);
                if value == b.len() || b[value] == b'#' {
                    return Ok(None);
                }
                Ok(self.node(b, value, Some(pos)))
            }
            None => Ok(self.node(b, pos, dash)),
        }
    }

    /// A value node starting at `at`, whose block parent starts at column `parent`. Answers `at`
    /// when it is a flow collection (scanned next), `None` when it is a scalar.
    fn node(&mut self, b: &[u8], mut at: usize, parent: Option<usize>) -> Option<usize> {
        // Anchors and tags come before the node itself.
        while at < b.len() && matches!(b[at], b'&' | b'!') {
            at = skip_blanks(
                b,
                at + b[at..].iter().take_while(|c| !is_blank(**c)).count(),
            );
        }
        match b.get(at) {
            None | Some(b'#') => None,
            Some(b'[' | b'{') => {
                self.parent = parent;
                Some(at)
            }
            Some(&quote @ (b'"' | b'\'')) => {
                match skip_quote(b, at + 1, quote) {
                    Some(_) => self.leaf_above = parent,
                    None => {
                        self.quote = Some(quote);
                        self.parent = parent;
                    }
                }
                None
            }
            // Plain, block (`|`, `>`) or alias: deeper lines continue it.
            Some(_) => {
                self.leaf_above = parent;
                None
            }
        }
    }

    /// Places a block collection starting at column `col`: the same collection as an open one at
    /// that column, or a new, deeper one.
    fn open_block(&mut self, col: usize, kind: Block) -> Scan<()> {
        while self.blocks.last().is_some_and(|(c, _)| *c > col) {
            self.blocks.pop();
        }
        match self.blocks.last() {
            Some(&(c, k)) if c == col && k == kind => return Ok(()),
            // A key after a sequence written at its parent key's column: back to that mapping.
            Some(&(c, Block::Seq)) if c == col => {
                self.blocks.pop();
                if self.blocks.last() == Some(&(col, Block::Map)) {
                    return Ok(());
                }
            }
            _ => {}
        }
        self.blocks.push((col, kind));
        if self.depth() > MAX_DEPTH {
            return Err(col);
        }
        Ok(())
    }

    /// Flow context from `from` to the end of the line, or until the outermost flow collection
    /// closes (what follows it on the line opens nothing).
    fn flow_part(&mut self, b: &[u8], from: usize) -> Scan<()> {
        let mut i = from;
        while i < b.len() {
            let c = b[i];
            match c {
                b'[' | b'{' => {
                    self.flow = self.flow.saturating_add(1);
                    if self.depth() > MAX_DEPTH {
                        return Err(i);
                    }
                    self.prev = c;
                }
                b']' | b'}' => {
                    self.flow = self.flow.saturating_sub(1);
                    self.prev = c;
                    if self.flow == 0 {
                        self.leaf_above = self.parent.take();
                        return Ok(());
                    }
                }
                b'"' | b'\'' if matches!(self.prev, b'[' | b'{' | b',' | b':' | b'?') => {
                    self.prev = c;
                    match skip_quote(b, i + 1, c) {
                        Some(end) => {
                            i = end;
                            continue;
                        }
                        None => {
                            self.quote = Some(c);
                            return Ok(());
                        }
                    }
                }
                b'#' if i == 0 || is_blank(b[i - 1]) => return Ok(()),
                b' ' | b'\t' => {}
                _ => self.prev = c,
            }
            i += 1;
        }
        Ok(())
    }
}

/// True for the blanks YAML separates tokens with.
fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

fn skip_blanks(b: &[u8], from: usize) -> usize {
    from + b
        .get(from..)
        .map_or(0, |rest| rest.iter().take_while(|c| is_blank(**c)).count())
}

/// The offset just past the closing `quote` of a scalar whose text starts at `from`, or `None`
/// when it does not close on this line.
fn skip_quote(b: &[u8], from: usize, quote: u8) -> Option<usize> {
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'\\' if quote == b'"' => i += 2,
            c if c == quote => {
                if quote == b'\'' && b.get(i + 1) == Some(&b'\'') {
                    i += 2;
                } else {
                    return Some(i + 1);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// When the node at `at` is a `key:` (a block mapping entry), the offset just past its `:`.
fn mapping_value(b: &[u8], at: usize) -> Option<usize> {
    let mut i = at;
    match b.get(at) {
        Some(b'[' | b'{') | None => return None,
        Some(&quote @ (b'"' | b'\'')) => i = skip_quote(b, at + 1, quote)?,
        Some(_) => {}
    }
    while i < b.len() {
        match b[i] {
            b':' if b.get(i + 1).is_none_or(|c| is_blank(*c)) => return Some(i + 1),
            b'#' if i > at && is_blank(b[i - 1]) => return None,
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{depth_ok, MAX_DEPTH};

    fn flow(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    /// `depth` mappings, each indented under the one before.
    fn indented(depth: usize) -> String {
        (0..depth)
            .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
            .collect()
    }

    #[test]
    fn flow_nesting_is_counted_to_the_limit() {
        assert_eq!(depth_ok(&flow(MAX_DEPTH)), Ok(()));
        assert_eq!(depth_ok(&flow(MAX_DEPTH + 1)), Err((1, MAX_DEPTH + 1)));
        assert_eq!(depth_ok(&"{".repeat(100_000)), Err((1, MAX_DEPTH + 1)));
    }

    #[test]
    fn block_nesting_is_counted_to_the_limit() {
        assert_eq!(depth_ok(&indented(MAX_DEPTH)), Ok(()));
        let deep = indented(MAX_DEPTH + 1);
        assert_eq!(depth_ok(&deep), Err((MAX_DEPTH + 1, 2 * MAX_DEPTH + 1)));
        let dashes = format!("{}x\n", "- ".repeat(MAX_DEPTH + 1));
        assert_eq!(depth_ok(&dashes), Err((1, 2 * MAX_DEPTH + 1)));
        assert_eq!(depth_ok(&format!("{}x\n", "- ".repeat(MAX_DEPTH))), Ok(()));
    }

    #[test]
    fn block_and_flow_nesting_add_up() {
        // 1 mapping + 62 sequences + 1 flow list = 64; one more `[` is 65.
        let ok = format!("k:\n{}[1]\n", "- ".repeat(MAX_DEPTH - 2));
        assert_eq!(depth_ok(&ok), Ok(()));
        let over = format!("k:\n{}[[1]]\n", "- ".repeat(MAX_DEPTH - 2));
        assert_eq!(depth_ok(&over), Err((2, 2 * (MAX_DEPTH - 2) + 2)));
    }

    #[test]
    fn a_sequence_at_its_keys_column_is_one_level_deeper() {
        // k0 (map) > seq > map > seq > ... each at the same pairs of columns.
        let mut text = String::new();
        for i in 0..MAX_DEPTH {
            let pad = "  ".repeat(i);
            text.push_str(&format!("{pad}k{i}:\n{pad}- "));
            text.push('\n');
        }
        assert!(depth_ok(&text).is_err(), "2 levels a step must be counted");
    }

    #[test]
    fn brackets_in_text_open_nothing() {
        let bracket_soup = "[".repeat(1000);
        let texts = [
            format!("prompt: \"{bracket_soup}\"\n"),
            format!("prompt: '{bracket_soup}'\n"),
            format!("prompt: see {bracket_soup}\n"),
            format!("prompt: |\n  {bracket_soup}\n  {{{{\nnext: 1\n"),
            format!("prompt: >-\n  {bracket_soup}\n\n  more\nnext: 1\n"),
            format!("prompt: plain\n  {bracket_soup}\nnext: 1\n"),
            format!("prompt: \"multi\n  {bracket_soup}\n  line\"\nnext: [1]\n"),
            format!("command: [\"python3\", \"-c\", \"{bracket_soup}\"]\n"),
            format!("command: [it's, '{bracket_soup}', \"a\\\"{bracket_soup}\"]\n"),
            format!("# {bracket_soup}\nname: x # {bracket_soup}\n"),
            format!("list: [a, # {bracket_soup}\n  b]\n"),
            format!("- &anchor !tag [1, 2]\n- *anchor\n- x{bracket_soup}\n"),
            "key: ${VAR}{x}[y]\n".repeat(1000),
        ];
        for text in texts {
            assert_eq!(depth_ok(&text), Ok(()), "{text}");
        }
    }

    #[test]
    fn a_real_manifest_passes() {
        let text = "name: my-worker\nartifacts:\n  - name: local/driver\n    process:\n      \
                    command: [\"python3\", \"harness.py\"]\n      interrupt: { stdin: \"x\" }\n\
                    lifecycle: { task_acceptance: queue }\n";
        assert_eq!(depth_ok(text), Ok(()));
    }
}
