//! What `mur` writes to a user's terminal from others: a harness's answer, a model's text, a
//! peer's status message, a trace's fields. They are shown, never obeyed: a control character
//! (an escape sequence could retitle the window, rewrite the screen or, on some terminals, answer
//! back) or a bidirectional override (which reorders what is read) becomes visible instead.

use std::borrow::Cow;

/// `text` with every control character but newline and tab in caret notation (`^[` for ESC),
/// other C1 controls and bidirectional overrides as U+FFFD.
pub fn shown(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_showing) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !needs_showing(c) => out.push(c),
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
}
