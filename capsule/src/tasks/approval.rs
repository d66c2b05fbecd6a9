//! An approval (`harness.approvals: ask`, docs/agent-clis.md "Approvals"): the question a CLI
//! asks before it runs a tool its permission level does not allow, as the waiting task shows it
//! (a sentence and an `approval` data part), the answer a reply carries, and the verdict the CLI
//! is given. The registry holds the open question; the harness asks and answers the CLI.

use serde::Serialize;
use serde_json::{json, Value};

use crate::ids::ApprovalId;

/// The most of a tool's input the question's sentence shows; the data part holds it whole.
const SENTENCE_INPUT: usize = 400;

/// What was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Deny,
}

impl Decision {
    pub fn word(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Deny => "deny",
        }
    }

    fn from_word(word: &str) -> Option<Decision> {
        [Decision::Approve, Decision::Deny]
            .into_iter()
            .find(|d| word.eq_ignore_ascii_case(d.word()))
    }
}

/// Who decided: a person answering over A2A, a manifest rule, or nobody in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    /// The operator's token (or `mur approve`, `mur deny`, `mur top`).
    Operator,
    /// The task's caller, under `approvals_from: caller`.
    Caller,
    /// `harness.approve` or `harness.deny`.
    Rule,
    /// `harness.approval_timeout_secs` passed.
    Timeout,
    /// The task was canceled, or the CLI withdrew its question.
    Cancel,
}

/// The answer the CLI is given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    pub by: By,
    pub reason: Option<String>,
}

impl Verdict {
    /// The task was canceled while the question was open.
    pub fn canceled() -> Verdict {
        Verdict {
            decision: Decision::Deny,
            by: By::Cancel,
            reason: Some("the task was canceled while this waited for approval".into()),
        }
    }
}

/// An open question.
#[derive(Clone, Debug)]
pub struct Question {
    pub id: ApprovalId,
    /// The CLI asking, as people call it ("Claude Code").
    pub cli: &'static str,
    pub tool: String,
    pub input: Value,
    /// `approvals_from: caller`: the task's caller may answer too.
    pub caller_may_answer: bool,
}

impl Question {
    /// `Claude Code asks to run Bash: rm -rf build`: the tool's main input on one line.
    pub fn sentence(&self) -> String {
        let what = summary(&self.tool, &self.input);
        let what: String = what
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let what = match what.char_indices().nth(SENTENCE_INPUT) {
            Some((cut, _)) => format!("{}…", &what[..cut]),
            None => what,
        };
        if what.is_empty() {
            format!("{} asks to run {}", self.cli, self.tool)
        } else {
            format!("{} asks to run {}: {what}", self.cli, self.tool)
        }
    }

    /// `{"kind": "approval", "approval_id": …, "tool": …, "input": …}`.
    pub fn data(&self) -> Value {
        json!({
            "kind": "approval",
            "approval_id": self.id.as_str(),
            "tool": self.tool,
            "input": self.input,
        })
    }

    /// The heap bytes it holds, roughly.
    pub fn held_bytes(&self) -> usize {
        self.id.as_str().len() + self.tool.capacity() + self.input.to_string().len()
    }

    /// Reads a reply as an answer to this question: a data part
    /// `{"approval_id": …, "decision": "approve" | "deny", "reason": …}`, or text that starts
    /// with `approve` or `deny` (any case), a reason after it. The error says what was wrong.
    pub fn answer_of(
        &self,
        text: &str,
        data: &[Value],
    ) -> Result<(Decision, Option<String>), String> {
        let named = data
            .iter()
            .filter_map(Value::as_object)
            .find(|d| d.contains_key("approval_id") || d.contains_key("decision"));
        if let Some(d) = named {
            let id = d.get("approval_id").and_then(Value::as_str);
            if id != Some(self.id.as_str()) {
                return Err(match id {
                    Some(other) => format!(
                        "the data part names approval {other:?}, and the question open is {}",
                        self.id
                    ),
                    None => format!(
                        "the data part has no approval_id; name the question open, {}",
                        self.id
                    ),
                });
            }
            let decision = d
                .get("decision")
                .and_then(Value::as_str)
                .and_then(Decision::from_word)
                .ok_or_else(|| {
                    "the data part's decision must be \"approve\" or \"deny\"".to_owned()
                })?;
            let reason = match d.get("reason") {
                None | Some(Value::Null) => None,
                Some(Value::String(r)) => Some(r.trim().to_owned()).filter(|r| !r.is_empty()),
                Some(_) => return Err("the data part's reason must be a string".into()),
            };
            return Ok((decision, reason));
        }
        let text = text.trim_start();
        let end = text
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(text.len());
        let decision = Decision::from_word(&text[..end])
            .ok_or_else(|| "the reply is neither approve nor deny".to_owned())?;
        let reason = text[end..]
            .trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ':' | ',' | '-' | '.'))
            .trim_end();
        Ok((decision, (!reason.is_empty()).then(|| reason.to_owned())))
    }

    /// What a refused answer is told: what was wrong and the two ways to answer.
    pub fn how_to_answer(&self, task: &str, wrong: &str) -> String {
        format!(
            "Invalid params: task {task} waits for approval {}; {wrong}. Answer approve or deny as \
             text (a reason may follow), or as a data part {{\"approval_id\": \"{}\", \
             \"decision\": \"approve\" | \"deny\", \"reason\": \"…\"}}",
            self.id, self.id
        )
    }
}

/// The input a person decides on: a Bash command, a file's path, a URL; else the input as JSON.
pub fn summary(tool: &str, input: &Value) -> String {
    main_input(tool, input)
        .map(str::to_owned)
        .unwrap_or_else(|| match input {
            Value::Object(m) if m.is_empty() => String::new(),
            Value::Null => String::new(),
            other => other.to_string(),
        })
}

/// The one input a tool's rules match: Bash's command, a file tool's path, WebFetch's URL.
pub fn main_input<'v>(tool: &str, input: &'v Value) -> Option<&'v str> {
    let key = match tool {
        "Bash" => "command",
        "Read" | "Edit" | "Write" | "MultiEdit" => "file_path",
        "NotebookEdit" => "notebook_path",
        "WebFetch" => "url",
        "Glob" | "Grep" => "pattern",
        _ => return None,
    };
    input.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question() -> Question {
        Question {
            id: ApprovalId::from_wire("apr_1"),
            cli: "Claude Code",
            tool: "Bash".into(),
            input: json!({"command": "rm -rf build\necho done", "description": "clean"}),
            caller_may_answer: false,
        }
    }

    #[test]
    fn the_sentence_names_the_cli_the_tool_and_its_input_on_one_line() {
        assert_eq!(
            question().sentence(),
            "Claude Code asks to run Bash: rm -rf build echo done"
        );
        let mut q = question();
        q.tool = "mcp__x__y".into();
        q.input = json!({"a": 1});
        assert_eq!(q.sentence(), "Claude Code asks to run mcp__x__y: {\"a\":1}");
        q.input = json!({});
        assert_eq!(q.sentence(), "Claude Code asks to run mcp__x__y");
        q.tool = "Bash".into();
        q.input = json!({"command": "x".repeat(1000)});
        assert_eq!(
            q.sentence().chars().count(),
            "Claude Code asks to run Bash: ".len() + 401
        );
    }

    #[test]
    fn text_answers_take_any_case_and_a_reason() {
        let q = question();
        let read = |t: &str| q.answer_of(t, &[]);
        assert_eq!(read("approve"), Ok((Decision::Approve, None)));
        assert_eq!(read("  APPROVE  "), Ok((Decision::Approve, None)));
        assert_eq!(
            read("Deny: not on main"),
            Ok((Decision::Deny, Some("not on main".into())))
        );
        assert_eq!(
            read("deny it is late"),
            Ok((Decision::Deny, Some("it is late".into())))
        );
        for bad in ["", "yes", "approved", "ok approve", "denying"] {
            assert_eq!(
                read(bad),
                Err("the reply is neither approve nor deny".into()),
                "{bad}"
            );
        }
    }

    #[test]
    fn data_answers_name_the_open_question() {
        let q = question();
        let read = |d: Value| q.answer_of("", &[d]);
        assert_eq!(
            read(json!({"approval_id": "apr_1", "decision": "deny", "reason": " no "})),
            Ok((Decision::Deny, Some("no".into())))
        );
        assert_eq!(
            read(json!({"approval_id": "apr_1", "decision": "approve"})),
            Ok((Decision::Approve, None))
        );
        assert!(read(json!({"approval_id": "apr_2", "decision": "approve"}))
            .unwrap_err()
            .contains("names approval \"apr_2\""));
        assert!(read(json!({"decision": "approve"}))
            .unwrap_err()
            .contains("no approval_id"));
        assert!(read(json!({"approval_id": "apr_1", "decision": "maybe"}))
            .unwrap_err()
            .contains("decision"));
        assert!(
            read(json!({"approval_id": "apr_1", "decision": "deny", "reason": 3}))
                .unwrap_err()
                .contains("reason")
        );
        // A data part about something else leaves the text to answer.
        assert_eq!(
            q.answer_of("approve", &[json!({"other": 1})]),
            Ok((Decision::Approve, None))
        );
    }

    #[test]
    fn the_data_part_carries_the_whole_input() {
        assert_eq!(
            question().data(),
            json!({"kind": "approval", "approval_id": "apr_1", "tool": "Bash",
                   "input": {"command": "rm -rf build\necho done", "description": "clean"}})
        );
    }
}
