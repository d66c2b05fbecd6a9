//! A command line the model wrote, read against `capabilities.shell.allow` before anything
//! runs. Two ways to run one, chosen by the list alone:
//! - `bash` on the list grants a shell: the line runs as `bash -c LINE`, pipes and all, and its
//!   binary is bash;
//! - otherwise the line is one program and its arguments, split as a shell would split words
//!   (quotes, escapes) but never interpreted: a line that needs a shell (a pipe, `;`, `$`, a
//!   redirection…) is refused, and the program must be one the list names, with the arguments
//!   an entry of several words requires.
//!
//! The program is found on the command's own `PATH` here, so what runs is the path the trace,
//! the residue and `runningCommands` name.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The shell a list grants by naming it.
const SHELL: &str = "bash";
/// Characters that make a line a shell's to read, outside quotes (`$` and backquotes inside
/// double quotes too).
const OPERATORS: &[char] = &[';', '|', '&', '<', '>', '(', ')', '$', '`', '\n'];

/// A line that may run: the program's path, its arguments, and how the spec names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The program, as a path (residue `binary`, `runningCommands[].binary`).
    pub binary: String,
}

/// Why a line was not run. The code and the sentence go to the model as the tool's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    Empty,
    Unparsable,
    /// The line's program is not on the list (the list as written).
    NotAllowed {
        program: String,
        list: String,
    },
    /// The line needs a shell and the list grants none.
    NeedsShell {
        operator: char,
        list: String,
    },
    /// The list allows the program, and it is not on the `PATH`.
    NotFound {
        program: String,
    },
}

impl Refused {
    pub fn code(&self) -> &'static str {
        match self {
            Refused::Empty | Refused::Unparsable => "bad_command",
            Refused::NotAllowed { .. } | Refused::NeedsShell { .. } => "command_not_allowed",
            Refused::NotFound { .. } => "command_not_found",
        }
    }

    pub fn message(&self) -> String {
        match self {
            Refused::Empty => "bash takes a non-empty command".into(),
            Refused::Unparsable => {
                "the command does not parse: a quote is not closed, or it ends in a lone \\".into()
            }
            Refused::NotAllowed { program, list } => format!(
                "{program} is not a command this capsule may run; capabilities.shell.allow lists: {list}"
            ),
            Refused::NeedsShell { operator, list } => format!(
                "the command holds {operator:?}, which takes a shell, and bash is not on \
                 capabilities.shell.allow ({list}): write one command and its arguments"
            ),
            Refused::NotFound { program } => format!(
                "{program} is on capabilities.shell.allow but is not on this capsule's PATH"
            ),
        }
    }
}

/// Reads `text` against `allow` (entries as written), finding programs on `path`, and relative
/// program paths from `cwd`.
pub fn read(text: &str, allow: &[String], path: &OsStr, cwd: &Path) -> Result<Line, Refused> {
    if text.trim().is_empty() {
        return Err(Refused::Empty);
    }
    let list = allow.join(", ");
    // An entry of no words would allow every line: the manifest refuses one, and it is skipped
    // here all the same.
    let entries: Vec<Vec<&str>> = allow
        .iter()
        .map(|e| e.split_whitespace().collect::<Vec<_>>())
        .filter(|e| !e.is_empty())
        .collect();
    if entries.iter().any(|e| e.as_slice() == [SHELL]) {
        let program = find(SHELL, path, cwd).ok_or_else(|| Refused::NotFound {
            program: SHELL.into(),
        })?;
        return Ok(Line {
            binary: program.to_string_lossy().into_owned(),
            program,
            args: vec!["-c".into(), text.to_owned()],
        });
    }
    if let Some(operator) = operator_outside_quotes(text) {
        return Err(Refused::NeedsShell { operator, list });
    }
    let words = shlex::split(text).ok_or(Refused::Unparsable)?;
    let Some((first, rest)) = words.split_first() else {
        return Err(Refused::Empty);
    };
    let allowed = entries
        .iter()
        .any(|entry| entry.len() <= words.len() && entry.iter().zip(&words).all(|(e, w)| e == w));
    if !allowed {
        return Err(Refused::NotAllowed {
            program: first.clone(),
            list,
        });
    }
    let program = find(first, path, cwd).ok_or_else(|| Refused::NotFound {
        program: first.clone(),
    })?;
    Ok(Line {
        binary: program.to_string_lossy().into_owned(),
        program,
        args: rest.to_vec(),
    })
}

/// The first shell operator of `text` that is not quoted away.
fn operator_outside_quotes(text: &str) -> Option<char> {
    let (mut single, mut double, mut escaped) = (false, false, false);
    for c in text.chars() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '$' | '`' if !single => return Some(c),
            c if !single && !double && OPERATORS.contains(&c) => return Some(c),
            _ => {}
        }
    }
    None
}

/// `program` as a shell finds it: a name through `path`, a path (anything with `/`) as written,
/// relative to `cwd`. Only an executable file answers.
fn find(program: &str, path: &OsStr, cwd: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runs = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = cwd.join(program);
        return runs(&p).then_some(p);
    }
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|p| runs(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn path() -> std::ffi::OsString {
        "/usr/local/bin:/usr/bin:/bin".into()
    }

    fn read_with(text: &str, list: &[&str]) -> Result<Line, Refused> {
        read(text, &allow(list), &path(), Path::new("/"))
    }

    #[test]
    fn bash_on_the_list_runs_the_whole_line_under_bash() {
        let line = read_with("sleep 30 | cat && echo $HOME", &["bash"]).unwrap();
        assert!(line.binary.ends_with("/bash"), "{line:?}");
        assert_eq!(line.args, ["-c", "sleep 30 | cat && echo $HOME"]);
    }

    #[test]
    fn without_bash_a_line_is_one_program_the_list_names() {
        let line = read_with("sleep '3 0'", &["sleep", "git"]).unwrap();
        assert!(line.binary.ends_with("/sleep"));
        assert_eq!(line.args, ["3 0"]);
        assert_eq!(
            read_with("rm -rf /", &["sleep", "git"]),
            Err(Refused::NotAllowed {
                program: "rm".into(),
                list: "sleep, git".into()
            })
        );
    }

    #[test]
    fn an_entry_of_several_words_allows_only_lines_that_start_with_them() {
        assert!(read_with("git status --short", &["git status"]).is_ok());
        assert!(matches!(
            read_with("git push", &["git status"]),
            Err(Refused::NotAllowed { .. })
        ));
        assert!(matches!(
            read_with("git", &["git status"]),
            Err(Refused::NotAllowed { .. })
        ));
    }

    #[test]
    fn a_line_that_needs_a_shell_is_refused_unless_quoted_away() {
        for (text, op) in [
            ("sleep 1; rm -rf /", ';'),
            ("sleep 1 | cat", '|'),
            ("sleep $(id)", '$'),
            ("sleep \"$HOME\"", '$'),
            ("sleep `id`", '`'),
            ("sleep 1 > /etc/x", '>'),
            ("sleep 1 &", '&'),
            ("sleep 1\nrm x", '\n'),
        ] {
            assert_eq!(
                read_with(text, &["sleep"]),
                Err(Refused::NeedsShell {
                    operator: op,
                    list: "sleep".into()
                }),
                "{text}"
            );
        }
        let line = read_with("sleep 'a;b|c$d' \"x|y\" \\;", &["sleep"]).unwrap();
        assert_eq!(line.args, ["a;b|c$d", "x|y", ";"]);
    }

    #[test]
    fn a_program_given_by_path_is_not_the_name_the_list_allows() {
        assert!(matches!(
            read_with("./sleep 1", &["sleep"]),
            Err(Refused::NotAllowed { .. })
        ));
        assert!(matches!(
            read_with("/usr/bin/sleep 1", &["sleep"]),
            Err(Refused::NotAllowed { .. })
        ));
    }

    #[test]
    fn empty_unparsable_and_missing_programs_say_so() {
        assert_eq!(read_with("  ", &["sleep"]), Err(Refused::Empty));
        assert_eq!(read_with("sleep 'x", &["sleep"]), Err(Refused::Unparsable));
        assert_eq!(
            read_with("no-such-program-here x", &["no-such-program-here"]),
            Err(Refused::NotFound {
                program: "no-such-program-here".into()
            })
        );
    }
}
