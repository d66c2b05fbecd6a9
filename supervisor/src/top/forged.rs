//! `mur top` shows every word a harness or a peer shaped — a capsule's name in its record, a
//! task id, a status message, an egress host, a delegation's capsule — on the line it belongs
//! to: a board filled with forged values, drawn as the snapshot and as the screen.

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::json;

use super::board::{Board, Scope};
use super::view::{Focus, View};
use super::{screen, snapshot};
use crate::records::RunningCapsule;
use crate::terminal::{assert_forged_shown, FORGED, FORGED_SHOWN};

/// A lone capsule and a formation member whose records, tasks and trace hold [`FORGED`]
/// wherever a harness or a peer can put words.
fn forged_board() -> Board {
    let rec = |session: &str, formation: Option<&str>, member: Option<&str>| -> RunningCapsule {
        serde_json::from_value(json!({
            "pid": std::process::id(), "supervisor_pid": 1, "url": format!("http://localhost:4001{FORGED}"),
            "name": FORGED, "version": FORGED, "session_id": session, "records": "/nonexistent",
            "formation": formation, "member": member, "started_at": "2026-12-01T10:00:00.000Z",
        }))
        .unwrap()
    };
    let mut board = Board::new(Scope::Everything);
    board.set_records(vec![
        rec("ses_b", None, None),
        rec("ses_a", Some(FORGED), Some(FORGED)),
    ]);
    for session in ["ses_a", "ses_b"] {
        board.apply_event(
            session,
            &json!({"statusUpdate": {"taskId": FORGED, "status": {"state": "TASK_STATE_WORKING",
                "timestamp": "2026-12-01T10:00:01.000Z", "message": {"parts": [{"text": FORGED}]}}}}),
        );
        for record in [
            json!({"event_type": "egress_denied", "timestamp": "2026-12-01T10:00:02.000Z", "task_id": FORGED, "host": FORGED, "port": 443}),
            json!({"event_type": "shell_refused", "timestamp": "2026-12-01T10:00:02.000Z", "task_id": FORGED, "command": FORGED, "reason": FORGED}),
            json!({"event_type": "delegation_start", "task_id": FORGED, "delegation_id": FORGED, "capsule": FORGED}),
            json!({"event_type": "a2a_send", "caller_task_id": FORGED, "peer_url": FORGED, "task_id": FORGED}),
        ] {
            board.apply_trace(session, &record);
        }
    }
    board
}

#[test]
fn the_snapshot_shows_every_forged_word_on_its_own_line() {
    let board = forged_board();
    let out = snapshot::text(&board, 1_764_583_210_000);
    assert_forged_shown(&out);
    for section in [
        "── Calls ──",
        "── Delegations ──",
        "── Tasks ──",
        "── Alerts ──",
    ] {
        let after = out.split(section).nth(1).unwrap_or_default();
        let body = after.split("── ").next().unwrap_or_default();
        assert!(
            body.contains(FORGED_SHOWN) || body.contains("x^[]0;PWNED^Gx"),
            "{section}: {out}"
        );
    }
}

#[test]
fn the_screen_draws_no_control_and_no_forged_row() {
    let board = forged_board();
    let mut view = View::new(false);
    view.focus = Focus::Tasks;
    view.say(vec![format!("canceled: {FORGED}")]);
    let mut terminal = Terminal::new(TestBackend::new(200, 50)).unwrap();
    terminal
        .draw(|f| screen::draw(f, &board, &view, 1_764_583_210_000))
        .unwrap();
    let buffer = terminal.backend().buffer();
    let rows: Vec<String> = (0..buffer.area.height)
        .map(|y| {
            (0..buffer.area.width)
                .map(|x| buffer[(x, y)].symbol().to_owned())
                .collect()
        })
        .collect();
    let screen = rows.join("\n");
    assert!(screen.contains("x^[]0;PWNED^Gx^M^J"), "{screen}");
    assert!(
        !screen.contains(['\u{1b}', '\u{7}', '\r']),
        "a control reached the screen: {screen:?}"
    );
    for row in &rows {
        let text = row.trim_start_matches([' ', '│', '─', '├', '└']);
        assert!(!text.starts_with("tsk_forged"), "a forged row: {screen}");
    }
}
