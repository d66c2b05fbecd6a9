//! What `mur` writes to a user's terminal from others: a harness's answer, a model's text, a
//! peer's status message, a trace's fields. They are shown, never obeyed: a control character
//! (an escape sequence could retitle the window, rewrite the screen or, on some terminals, answer
//! back) or a bidirectional override (which reorders what is read) becomes visible instead.
//!
//! Two forms. [`field`] is for one value inside a line (an egress host, a tool name, an id, a
//! command, an answer): every control character becomes visible, newline and carriage return
//! included, so a value can never end the line it sits in and forge one of its own (a host of
//! `x\ntsk_forged completed` would otherwise print a trace line murmur never wrote). [`shown`]
//! is for whole text murmur laid out itself in lines: it keeps newline and tab, and is what every
//! command's output passes through last. Every field a harness or a peer can shape goes through
//! [`field`] where the line is built.

use std::borrow::Cow;

/// `text` as one value inside a line: every C0 control (newline, carriage return and tab
/// included) and DEL in caret notation (`^J`, `^M`, `^I`, `^[` for ESC, `^?`), C1 controls,
/// bidirectional overrides and isolates, and the Unicode line and paragraph separators as
/// U+FFFD. What it answers never holds a line break.
pub fn field(text: &str) -> Cow<'_, str> {
    visible(text, |c| {
        needs_showing(c) || matches!(c, '\n' | '\t' | '\u{2028}' | '\u{2029}')
    })
}

/// `text` with every control character but newline and tab in caret notation (`^[` for ESC),
/// other C1 controls and bidirectional overrides as U+FFFD: text laid out in lines by murmur.
pub fn shown(text: &str) -> Cow<'_, str> {
    visible(text, needs_showing)
}

fn visible(text: &str, hidden: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !hidden(c) => out.push(c),
            '\u{0}'..='\u{1f}' => {
                out.push('^');
                out.push(char::from(c as u8 + 0x40));
            }
            '\u{7f}' => out.push_str("^?"),
            _ => out.push('\u{fffd}'),
        }
    }
    Cow::Owned(out)
}

fn needs_showing(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// What the tests of every renderer feed a field a harness or peer shapes: an OSC that retitles
/// the window, BEL, a carriage return, a newline, then a forged line.
#[cfg(test)]
pub const FORGED: &str = "x\u{1b}]0;PWNED\u{7}x\r\ntsk_forged completed";

/// [`FORGED`] as [`field`] shows it.
#[cfg(test)]
pub const FORGED_SHOWN: &str = "x^[]0;PWNED^Gx^M^Jtsk_forged completed";

/// Asserts `out` shows [`FORGED`] as [`FORGED_SHOWN`], never obeys a control of it, and has no
/// line of its own starting with the forged text.
#[cfg(test)]
pub fn assert_forged_shown(out: &str) {
    assert!(
        out.contains(FORGED_SHOWN),
        "not shown as one field: {out:?}"
    );
    assert!(
        !out.contains(['\u{1b}', '\u{7}', '\r']),
        "a control reached the output: {out:?}"
    );
    assert!(
        !out.lines()
            .any(|l| l.trim_start().starts_with("tsk_forged")),
        "a forged line: {out:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown_not_obeyed() {
        assert_eq!(shown("plain\ttext\n"), "plain\ttext\n");
        assert!(matches!(shown("plain"), Cow::Borrowed(_)));
        assert_eq!(
            shown("\x1b]0;owned\x07red\x1b[31m"),
            "^[]0;owned^Gred^[[31m"
        );
        assert_eq!(shown("a\rb\x7f\u{9b}c"), "a^Mb^?\u{fffd}c");
        assert_eq!(shown("abc\u{202e}fed"), "abc\u{fffd}fed");
    }

    #[test]
    fn a_field_never_breaks_its_line() {
        assert_eq!(field(FORGED), FORGED_SHOWN);
        assert_eq!(
            field("a\tb\u{85}c\u{2028}d\u{2029}e\u{2067}f"),
            "a^Ib\u{fffd}c\u{fffd}d\u{fffd}e\u{fffd}f"
        );
        assert!(matches!(field("tsk_0123 ├─ coder ↳"), Cow::Borrowed(_)));
        let every: String = (0u32..0x250).filter_map(char::from_u32).collect();
        assert_eq!(field(&every).lines().count(), 1);
        assert!(!field(&every).chars().any(char::is_control));
    }
}
