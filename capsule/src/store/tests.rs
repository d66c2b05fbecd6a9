//! The store on its own: what it is handed comes back when it is opened again, what the
//! registry forgets leaves it, an answer waits for its commit, and each refusal says what to do.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Map};

use super::*;
use crate::clock::Millis;
use crate::ids::TaskId;
use crate::manifest::Usd;
use crate::tasks::{Owner, TaskState};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "murmur-store-{name}-{}-{}",
        std::process::id(),
        Millis::now().0
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn task(id: &str, seq: u64, state: TaskState) -> Task {
    let mut metadata = Map::new();
    metadata.insert("noAnswerBelow".into(), json!([{"member": "coder"}]));
    Task {
        id: TaskId::from_wire(id),
        context_id: "ctx_1".into(),
        owner: Owner::Credential("member:lead".into()),
        state,
        status_text: Some("task completed".into()),
        changed_at: Millis(1_700_000_000_123),
        seq,
        response: Some("the answer ✓".into()),
        prompt: None,
        approval: None,
        residue: vec![json!({"kind": "shell", "pid": 7})],
        murmur_metadata: metadata,
        input: None,
        held: 0,
    }
}

fn open(dir: &Path) -> Result<(Store, Restored), StoreError> {
    Store::open(dir, Arc::new(EventLog::default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_it_is_handed_comes_back_when_it_is_opened_again() {
    let dir = scratch("back");
    let (store, restored) = open(&dir).unwrap();
    assert!(restored.tasks.is_empty() && restored.newest == 0);
    let key = restored.page_key;
    let journal = store.journal();
    journal.changed(&task("tsk_a", 1, TaskState::Working));
    journal.changed(&task("tsk_a", 3, TaskState::Completed));
    journal.changed(&task("tsk_b", 2, TaskState::Submitted));
    store.harness_session("ctx_1", Some("s-1"));
    store.harness_session("member:lead\u{0}ctx_2", Some("s-2"));
    store.harness_session("ctx_1", None);
    store.spent(
        Spent {
            tokens: 1000,
            usd: Usd(2_000_000),
        },
        r#"{"task_id":"tsk_a","tokens":1000}"#.into(),
    );
    store.spent(
        Spent {
            tokens: 1200,
            usd: Usd(3_000_000),
        },
        r#"{"task_id":"tsk_a","tokens":200}"#.into(),
    );
    store.kept(3).await;
    store.close();

    let (again, restored) = open(&dir).unwrap();
    assert_eq!(restored.page_key, key, "page tokens read after a restart");
    assert_eq!(restored.newest, 3);
    let ids: Vec<(&str, u64, TaskState)> = restored
        .tasks
        .iter()
        .map(|t| (t.id.as_str(), t.seq, t.state))
        .collect();
    assert_eq!(
        ids,
        [
            ("tsk_b", 2, TaskState::Submitted),
            ("tsk_a", 3, TaskState::Completed)
        ]
    );
    let a = &restored.tasks[1];
    let was = task("tsk_a", 3, TaskState::Completed);
    assert_eq!(a.to_bytes(), was.to_bytes(), "GetTask's very bytes");
    assert_eq!(a.owner, was.owner);
    assert_eq!(
        restored.harness_sessions,
        [("member:lead\u{0}ctx_2".to_owned(), "s-2".to_owned())]
    );
    assert_eq!(
        restored.spent,
        Spent {
            tokens: 1200,
            usd: Usd(3_000_000)
        }
    );
    again.close();
    // The session's ledger lines, in the order of the calls.
    let conn = rusqlite::Connection::open(dir.join(DIR).join(FILE)).unwrap();
    let lines: Vec<String> = conn
        .prepare("SELECT entry FROM ledger ORDER BY n")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        lines,
        [
            r#"{"task_id":"tsk_a","tokens":1000}"#,
            r#"{"task_id":"tsk_a","tokens":200}"#
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_task_leaves_the_store_and_the_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("forget");
    let (store, _) = open(&dir).unwrap();
    let journal = store.journal();
    journal.changed(&task("tsk_a", 1, TaskState::Completed));
    journal.changed(&task("tsk_b", 2, TaskState::Completed));
    journal.forgotten(&TaskId::from_wire("tsk_a"));
    journal.changed(&task("tsk_c", 3, TaskState::Completed));
    store.kept(3).await;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir.join(DIR)), 0o700);
    for name in [FILE, "store.sqlite-wal"] {
        assert_eq!(mode(&dir.join(DIR).join(name)), 0o600, "{name}");
    }
    store.close();
    let (again, restored) = open(&dir).unwrap();
    let ids: Vec<&str> = restored.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["tsk_b", "tsk_c"]);
    again.close();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_waits_for_the_commit_of_what_it_shows() {
    let dir = scratch("wait");
    let (store, _) = open(&dir).unwrap();
    let store = Arc::new(store);
    // Nothing past position 0 is kept yet: a wait for 1 returns only once 1 is committed.
    let waiting = {
        let store = store.clone();
        tokio::spawn(async move { store.kept(1).await })
    };
    tokio::task::yield_now().await;
    store
        .journal()
        .changed(&task("tsk_a", 1, TaskState::Completed));
    tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
        .await
        .expect("the commit ends the wait")
        .unwrap();
    assert!(
        store
            .shared
            .durable
            .reached
            .load(std::sync::atomic::Ordering::Acquire)
            >= 1,
        "it returned because the change is kept, not because it gave up"
    );
    store.close();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_store_that_cannot_be_trusted_is_refused_saying_what_to_do() {
    let dir = scratch("refuse");
    let file = dir.join(DIR).join(FILE);
    std::fs::create_dir_all(dir.join(DIR)).unwrap();
    std::fs::write(&file, b"not a database, not at all; no sqlite header here").unwrap();
    let e = open(&dir).err().expect("refused");
    assert_eq!(
        e.to_string(),
        format!(
            "error[E-RUN-060]: the task store {} is corrupt (file is not a database)\n  hint: {}",
            file.display(),
            open::MOVE_ASIDE
        )
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"not a database, not at all; no sqlite header here",
        "left as it was"
    );

    std::fs::remove_file(&file).unwrap();
    let conn = rusqlite::Connection::open(&file).unwrap();
    conn.pragma_update(None, "user_version", VERSION + 1)
        .unwrap();
    drop(conn);
    let e = open(&dir).err().expect("refused");
    assert_eq!(
        e.what,
        format!(
            "was written by a newer murmur (store version {}; this one reads {VERSION})",
            VERSION + 1
        )
    );

    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", &file).unwrap();
    let e = open(&dir).err().expect("refused");
    assert_eq!(e.what, "is not a regular file");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sqlite_refusals_each_say_what_to_do() {
    use rusqlite::ffi;
    let path = Path::new("/r/store/store.sqlite");
    let said = |code| {
        let e = rusqlite::Error::SqliteFailure(ffi::Error::new(code), None);
        let refused = open::said(path, &e);
        (refused.what, refused.hint)
    };
    let (what, hint) = said(ffi::SQLITE_FULL);
    assert!(
        what.starts_with("cannot be written: the disk is full ("),
        "{what}"
    );
    assert!(hint.contains("mur gc"), "{hint}");
    let (what, _) = said(ffi::SQLITE_BUSY);
    assert!(what.starts_with("is in use by another process ("), "{what}");
    let (what, hint) = said(ffi::SQLITE_READONLY);
    assert!(what.starts_with("cannot be written ("), "{what}");
    assert!(hint.contains("chmod u+w"), "{hint}");
    let (what, hint) = said(ffi::SQLITE_CORRUPT);
    assert!(what.starts_with("is corrupt ("), "{what}");
    assert_eq!(hint, open::MOVE_ASIDE);
}

#[test]
fn the_page_key_is_written_as_hex_and_read_back() {
    let key: [u8; 32] = rand::random();
    assert_eq!(rows::unhex(&rows::hex(&key)), Some(key));
    assert_eq!(rows::unhex("zz"), None);
    assert_eq!(rows::unhex(&"g".repeat(64)), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_another_capsule_holds_open_is_refused() {
    let dir = scratch("busy");
    let (first, _) = open(&dir).unwrap();
    first
        .journal()
        .changed(&task("tsk_a", 1, TaskState::Completed));
    first.kept(1).await;
    // The first holds the file in exclusive locking mode from its opening on: a second
    // opener waits SQLite's busy timeout, then is refused saying what to do.
    let refused = open(&dir).err().expect("refused while the first holds it");
    assert!(
        refused.what.starts_with("is in use by another process ("),
        "{refused}"
    );
    assert_eq!(
        refused.hint,
        "stop the capsule that has this session open (`mur ps`), then start it again"
    );
    first.close();
    let again = open(&dir).map(|(s, _)| s).expect("free once closed");
    again.close();
    let _ = std::fs::remove_dir_all(&dir);
}

fn said(role: crate::inference::Role, text: &str) -> crate::inference::Msg {
    crate::inference::Msg {
        role,
        blocks: vec![crate::inference::Block::Text(text.into())],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_capsules_conversations_come_back_newest_kept_dropped_gone() {
    use crate::inference::{Block, Role};
    let dir = scratch("conversations");
    let (store, _) = open(&dir).unwrap();
    let first = vec![
        said(Role::User, "look"),
        crate::inference::Msg {
            role: Role::Assistant,
            blocks: vec![Block::ToolUse {
                id: "call_1".into(),
                name: "send-message".into(),
                input: json!({"to": "coder", "text": "hi"}),
            }],
        },
        crate::inference::Msg {
            role: Role::User,
            blocks: vec![
                Block::ToolResult {
                    id: "call_1".into(),
                    content: "ok".into(),
                    is_error: false,
                },
                Block::Image {
                    media_type: "image/png".into(),
                    base64: "iVBORw0K".into(),
                },
            ],
        },
        said(Role::Assistant, "the answer ✓"),
    ];
    store.conversation("ctx_1", 4, Some(Arc::new(first.clone())));
    // Told late of an older use: the newer it was told of first stands.
    store.conversation("ctx_1", 2, Some(Arc::new(first[..1].to_vec())));
    store.conversation(
        "member:lead\u{0}ctx_2",
        3,
        Some(Arc::new(first[..1].to_vec())),
    );
    store.conversation("ctx_3", 5, Some(Arc::new(first[..2].to_vec())));
    store.conversation("ctx_3", 6, None);
    store
        .journal()
        .changed(&task("tsk_a", 1, TaskState::Completed));
    store.kept(1).await;
    store.close();

    let (again, restored) = open(&dir).unwrap();
    assert_eq!(
        restored.conversations,
        [
            ("member:lead\u{0}ctx_2".to_owned(), 3, first[..1].to_vec()),
            ("ctx_1".to_owned(), 4, first.clone()),
        ],
        "least recently used first; the dropped one gone"
    );
    again.close();

    // A row no murmur wrote is a refusal, not a conversation quietly lost.
    let conn = rusqlite::Connection::open(dir.join(DIR).join(FILE)).unwrap();
    conn.execute(
        "UPDATE conversations SET messages = '[{\"role\":\"robot\"}]' WHERE key = 'ctx_1'",
        [],
    )
    .unwrap();
    drop(conn);
    let e = open(&dir).err().expect("refused");
    assert!(
        e.what
            .starts_with("is corrupt (conversation \"ctx_1\"'s messages do not read: "),
        "{}",
        e.what
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_keeps_the_newest_lines_within_its_bound() {
    let dir = scratch("ledger");
    let (store, _) = open(&dir).unwrap();
    let calls = LEDGER_KEPT + 3;
    for n in 1..=calls {
        let spent = Spent {
            tokens: n as u64,
            usd: Usd(0),
        };
        store.spent(spent, format!("{{\"call\":{n}}}"));
    }
    store.close();
    let conn = rusqlite::Connection::open(dir.join(DIR).join(FILE)).unwrap();
    let (count, first, last): (i64, String, String) = conn
        .query_row(
            "SELECT COUNT(*), (SELECT entry FROM ledger ORDER BY n LIMIT 1), \
             (SELECT entry FROM ledger ORDER BY n DESC LIMIT 1) FROM ledger",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(count, LEDGER_KEPT);
    assert_eq!(first, "{\"call\":4}", "the oldest went");
    assert_eq!(last, format!("{{\"call\":{calls}}}"));
    assert_eq!(rows::spent(&conn).unwrap().tokens, calls as u64);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_quoting_a_tampered_row_cannot_steer_the_terminal() {
    let dir = scratch("inert");
    let (store, _) = open(&dir).unwrap();
    store
        .journal()
        .changed(&task("tsk_a", 1, TaskState::Completed));
    store.kept(1).await;
    store.close();
    let conn = rusqlite::Connection::open(dir.join(DIR).join(FILE)).unwrap();
    conn.execute(
        "UPDATE tasks SET id = 'tsk_' || char(27) || ']0;owned' || char(7) || char(10) || 'x', \
         state = 'TASK_STATE_' || char(8238)",
        [],
    )
    .unwrap();
    drop(conn);
    let said = open(&dir).err().expect("refused").to_string();
    assert!(
        said.contains("(task tsk_\\u{1b}]0;owned\\u{7}\\u{a}x has the state "),
        "{said}"
    );
    assert!(
        !said
            .chars()
            .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
        "{said:?}"
    );
    assert_eq!(said.lines().count(), 2, "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}
