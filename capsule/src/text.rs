//! How message content reads to the agent: Markdown fences that nothing inside can close.

/// A fence one backtick longer than the longest run of backticks in `body`, at least three.
pub fn fenced(label: &str, body: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("{fence}{label}\n{body}\n{fence}")
}

/// A value for the fence's opening line: whitespace, backticks and `=` become `_`.
pub fn fence_attr(value: &str) -> String {
    value
        .chars()
        .map(|c| {
            if c.is_whitespace() || c == '`' || c == '=' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_outgrows_backticks_inside() {
        assert_eq!(fenced("data", "x"), "```data\nx\n```");
        assert_eq!(fenced("data", "a ``` b"), "````data\na ``` b\n````");
    }

    #[test]
    fn attrs_lose_separators() {
        assert_eq!(fence_attr("a b`c=d\te"), "a_b_c_d_e");
    }
}
