//! An authenticated door (network.authentication), through the real `mur`: minted tokens and
//! `mur token`, the step-2 and step-11 refusals with their exact status, challenge and body, the
//! public card it serves, and the operator's reach (mur stop and cancel use its token).

mod support;

use serde_json::{json, Value};
use support::*;

const AUTH: &str = "network:
  authentication:
    scheme: bearer
    credentials:
      watcher: { scopes: [GetTask, ListTasks, murmur.WatchSession] }
      sender: { scopes: [SendMessage, GetTask, ListTasks] }
";

struct Door {
    run: Launch,
    tokens: Vec<(String, String)>,
}

impl Door {
    fn start(home: &Home) -> Door {
        let f = Fixture {
            name: "guarded",
            extra: AUTH,
            ..Fixture::default()
        };
        let manifest = home.write("capsule/murmur.yaml", &f.yaml());
        let run = Launch::start(home, &manifest, &[]);
        let (code, out, err) = home.run(&["token", "@1"]);
        assert_eq!(code, 0, "{err}");
        let tokens = out
            .lines()
            .map(|l| {
                let (c, t) = l.split_once(' ').unwrap();
                (c.to_owned(), t.to_owned())
            })
            .collect();
        Door { run, tokens }
    }

    fn token(&self, credential: &str) -> &str {
        &self.tokens.iter().find(|(c, _)| c == credential).unwrap().1
    }

    /// `Bearer <token>` of a credential, as an Authorization value.
    fn bearer(&self, credential: &str) -> String {
        format!("Bearer {}", self.token(credential))
    }

    fn call(&self, auth: &[&str], method: &str, params: Value) -> Resp {
        let mut headers = vec![("A2A-Version", "1.0")];
        headers.extend(auth.iter().map(|a| ("Authorization", *a)));
        self.run.post(&request(json!(1), method, params), &headers)
    }
}

#[test]
fn tokens_are_minted_per_credential_operator_first_and_kept_private() {
    let home = Home::new();
    let door = Door::start(&home);
    let names: Vec<&str> = door.tokens.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(names, ["operator", "watcher", "sender"]);
    let mut seen: Vec<&str> = door.tokens.iter().map(|(_, t)| t.as_str()).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 3, "every credential has its own token");
    for (_, t) in &door.tokens {
        assert!(t.starts_with("mur_") && t.len() == 4 + 43, "{t}");
    }
    let file = home
        .home
        .join("run")
        .join(format!("{}.tokens", door.run.session));
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let record = std::fs::read_to_string(
        home.home
            .join("run")
            .join(format!("{}.json", door.run.session)),
    )
    .unwrap();
    let trace =
        std::fs::read_to_string(home.records(&door.run.session).join("trace.jsonl")).unwrap();
    for (_, t) in &door.tokens {
        assert!(
            !record.contains(t.as_str()) && !trace.contains(t.as_str()),
            "a token leaked"
        );
    }
}

#[test]
fn the_token_is_checked_before_anything_else() {
    let home = Home::new();
    let door = Door::start(&home);
    let realm = "Bearer realm=\"guarded\"";
    let invalid = "Bearer realm=\"guarded\", error=\"invalid_token\"";
    let operator = door.bearer("operator");
    let rows: Vec<(Vec<String>, &str, &str)> = vec![
        (vec![], realm, "unauthenticated"),
        (vec!["Basic abc".into()], invalid, "invalid_token"),
        (
            vec!["Bearer mur_not-minted".into()],
            invalid,
            "invalid_token",
        ),
        (
            vec![operator.clone(), operator.clone()],
            invalid,
            "invalid_token",
        ),
    ];
    for (auth, challenge, error) in rows {
        let auth: Vec<&str> = auth.iter().map(String::as_str).collect();
        // Even a request that would be 404 or -32700 is refused for its token first.
        let resp = door.call(&auth, "GetTask", json!({"id": "x"}));
        assert_eq!(resp.status, 401, "{auth:?}");
        assert_eq!(resp.header("www-authenticate"), Some(challenge));
        assert_eq!(resp.json()["error"], error);
        assert!(resp.json()["message"].is_string());
        let mut headers = vec![("Content-Type", "text/plain")];
        headers.extend(auth.iter().map(|a| ("Authorization", *a)));
        let nowhere = http(door.run.port, "GET", "/nowhere", &headers, b"");
        assert_eq!(nowhere.status, 401);
    }
    // The scheme name matches in any case; the token exactly.
    let lower = format!("bearer {}", door.token("operator"));
    assert_eq!(door.call(&[&lower], "ListTasks", json!({})).status, 200);
    let upper = format!("Bearer {}", door.token("operator").to_uppercase());
    assert_eq!(door.call(&[&upper], "ListTasks", json!({})).status, 401);
    // The card needs no token.
    assert_eq!(
        http(
            door.run.port,
            "GET",
            "/.well-known/agent-card.json",
            &[],
            b""
        )
        .status,
        200
    );
}

#[test]
fn a_credential_reaches_only_its_scopes() {
    let home = Home::new();
    let door = Door::start(&home);
    let watcher = door.bearer("watcher");
    let resp = door.call(&[&watcher], "SendMessage", message("hi", true));
    assert_eq!(resp.status, 403);
    assert_eq!(
        resp.header("www-authenticate"),
        Some("Bearer realm=\"guarded\", error=\"insufficient_scope\", scope=\"SendMessage\"")
    );
    assert_eq!(
        resp.json(),
        json!({"error": "insufficient_scope", "message": "credential 'watcher' does not reach SendMessage"})
    );
    let stop = door.call(&[&watcher], "murmur.StopSession", json!({}));
    assert_eq!(stop.status, 403);
    assert_eq!(
        stop.json()["message"],
        "credential 'watcher' does not reach murmur.StopSession"
    );
    assert_eq!(door.call(&[&watcher], "ListTasks", json!({})).status, 200);
    // Push config methods answer -32003 before any scope check.
    let push = door.call(&[&watcher], "GetTaskPushNotificationConfig", json!({}));
    assert_eq!(
        (push.status, push.json()["error"]["code"].as_i64()),
        (200, Some(-32003))
    );
    assert_eq!(
        door.run.rpc("ListTasks", json!({}))["result"],
        Value::Null,
        "no token, no answer"
    );
}

#[test]
fn the_public_card_of_an_authenticated_door() {
    let home = Home::new();
    let door = Door::start(&home);
    let card = http(
        door.run.port,
        "GET",
        "/.well-known/agent-card.json",
        &[],
        b"",
    )
    .json();
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    let uris: Vec<&str> = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [DOOR_URI, STREAM_URI],
        "the capsule extension moves to the extended card"
    );
    assert_eq!(
        card["capabilities"]["extensions"][0]["params"]["methods"],
        json!([
            "SendMessage",
            "SendStreamingMessage",
            "murmur.WatchSession",
            "GetTask",
            "ListTasks",
            "CancelTask",
            "SubscribeToTask",
            "murmur.StopSession",
            "GetExtendedAgentCard"
        ])
    );
    assert_eq!(
        card["securitySchemes"],
        json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer",
            "description": "A token this capsule's runtime mints at launch and accepts until the session ends."}}})
    );
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"bearer": {"list": []}}}])
    );
    assert_eq!(
        card["skills"][0]["securityRequirements"],
        json!([{"schemes": {"bearer": {"list": ["SendMessage"]}}}, {"schemes": {"bearer": {"list": ["SendStreamingMessage"]}}}])
    );
}

#[test]
fn mur_cancel_and_stop_use_the_operator_token() {
    let home = Home::new();
    let door = Door::start(&home);
    let operator = door.bearer("operator");
    let task = door
        .call(&[&operator], "SendMessage", message("@sleep 30", true))
        .json();
    let id = task["result"]["task"]["id"].as_str().unwrap().to_owned();
    let (code, out, err) = home.run(&["cancel", "@1", &id]);
    assert_eq!((code, out), (0, format!("canceled: {id}\n")), "{err}");
    let (code, out, err) = home.run(&["stop", "@1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.ends_with(&format!("stopped: {}\n", door.run.session)),
        "{out}"
    );
    assert!(
        !home
            .home
            .join("run")
            .join(format!("{}.tokens", door.run.session))
            .exists(),
        "tokens die with the session"
    );
}

#[test]
fn a_declared_credential_sees_only_the_tasks_it_started() {
    let home = Home::new();
    let door = Door::start(&home);
    let operator = door.bearer("operator");
    let sender = door.bearer("sender");
    let watcher = door.bearer("watcher");
    let mine = door
        .call(&[&sender], "SendMessage", message("mine", false))
        .json()["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let theirs = door
        .call(&[&operator], "SendMessage", message("theirs", false))
        .json()["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The sender sees its own task and not the operator's; the operator sees both.
    assert_eq!(
        door.call(&[&sender], "GetTask", json!({"id": mine})).json()["result"]["id"],
        mine.as_str()
    );
    let hidden = door
        .call(&[&sender], "GetTask", json!({"id": theirs}))
        .json();
    assert_eq!(hidden["error"]["code"], -32001);
    assert_eq!(
        hidden["error"]["data"][0]["metadata"],
        json!({"taskId": theirs})
    );
    let listed = door.call(&[&sender], "ListTasks", json!({})).json();
    assert_eq!(listed["result"]["totalSize"], 1);
    assert_eq!(
        door.call(&[&operator], "ListTasks", json!({})).json()["result"]["totalSize"],
        2
    );
    assert_eq!(
        door.call(&[&watcher], "ListTasks", json!({})).json()["result"]["totalSize"],
        0
    );
    // A reference to a task the sender does not see reads as one the capsule does not hold.
    let mut p = message("@echo", false);
    p["message"]["referenceTaskIds"] = json!([mine, theirs]);
    let echoed = door.call(&[&sender], "SendMessage", p).json();
    let text = echoed["result"]["task"]["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains(&format!("- {mine}: completed")), "{text}");
    assert!(
        text.contains(&format!("- {theirs}: not a task this capsule holds")),
        "{text}"
    );
}

#[test]
fn get_extended_agent_card_answers_any_valid_token() {
    let home = Home::new();
    let door = Door::start(&home);
    let watcher = door.bearer("watcher");
    let resp = door.call(&[&watcher], "GetExtendedAgentCard", json!({}));
    assert_eq!(resp.status, 200);
    let card = &resp.json()["result"];
    let uris: Vec<&str> = card["capabilities"]["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, [DOOR_URI, CAPSULE_URI, STREAM_URI]);
    assert_eq!(
        card["capabilities"]["extensions"][1]["params"]["sessionId"],
        door.run.session.as_str()
    );
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    let public = http(
        door.run.port,
        "GET",
        "/.well-known/agent-card.json",
        &[],
        b"",
    )
    .json();
    for key in [
        "securitySchemes",
        "securityRequirements",
        "supportedInterfaces",
        "skills",
    ] {
        assert_eq!(card[key], public[key], "{key}");
    }
    assert_eq!(
        door.call(&[], "GetExtendedAgentCard", json!({})).status,
        401
    );
}

#[test]
fn mur_ps_prunes_the_record_and_tokens_of_a_launch_that_was_killed_outright() {
    let home = Home::new();
    let mut door = Door::start(&home);
    let run_dir = home.home.join("run");
    let record = run_dir.join(format!("{}.json", door.run.session));
    let tokens = run_dir.join(format!("{}.tokens", door.run.session));
    assert!(record.exists() && tokens.exists());
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let capsule = rec["pid"].as_u64().unwrap() as u32;
    // SIGKILL leaves the supervisor no chance to clean up; the capsule follows (parent death).
    let supervisor = door.run.pid();
    signal(supervisor, 9);
    let _ = door.run.child.wait();
    assert!(wait_until(std::time::Duration::from_secs(30), || !alive(
        capsule
    )));
    assert!(tokens.exists(), "nothing removed it yet");
    let (code, out, _) = home.run(&["ps"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("no capsule is running\ncut short, can be resumed"),
        "{out}"
    );
    assert!(!record.exists() && !tokens.exists(), "mur ps pruned both");
}

/// One response read off a kept connection: its status line and headers, and its body by its
/// content-length.
fn read_one(conn: &mut std::io::BufReader<std::net::TcpStream>) -> (String, Vec<u8>) {
    use std::io::{BufRead, Read};
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = conn.read_line(&mut line).expect("the door answers");
        assert!(
            n > 0,
            "the door closed the connection instead of answering: {head}"
        );
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_owned())
        })
        .and_then(|v| v.parse::<usize>().ok())
        .expect("a content-length");
    let mut body = vec![0u8; length];
    conn.read_exact(&mut body).unwrap();
    (head, body)
}

/// A 401 is decided from the headers alone (step 2), before the body is read; the body is still
/// taken off the connection, so a client that sends its body late, or reuses the connection with
/// its token (as an HTTP client's auth flow does), is answered, not reset. A body declared too
/// large to wait for is answered `connection: close`.
#[test]
fn a_request_refused_for_its_token_leaves_its_connection_usable() {
    use std::io::Write;
    let home = Home::new();
    let door = Door::start(&home);
    let port = door.run.port;
    let body = request(
        json!(7),
        "GetTask",
        json!({"id": "tsk_0000000000007000800000000000000a"}),
    )
    .to_string();
    let head = |auth: &str, length: usize| {
        format!(
            "POST / HTTP/1.1\r\nHost: localhost:{port}\r\nContent-Type: application/json\r\n\
             A2A-Version: 1.0\r\n{auth}Content-Length: {length}\r\n\r\n"
        )
    };
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut conn = std::io::BufReader::new(stream);

    // The headers alone, and the answer read before a byte of the body is sent.
    writer.write_all(head("", body.len()).as_bytes()).unwrap();
    let (refused, text) = read_one(&mut conn);
    assert!(refused.starts_with("HTTP/1.1 401 "), "{refused}");
    assert!(
        !refused.to_ascii_lowercase().contains("connection: close"),
        "{refused}"
    );
    let text: Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(text["error"], "unauthenticated");
    writer.write_all(body.as_bytes()).unwrap();

    // The same connection, now with the token: answered by the method.
    let auth = format!("Authorization: {}\r\n", door.bearer("operator"));
    writer
        .write_all(format!("{}{body}", head(&auth, body.len())).as_bytes())
        .unwrap();
    let (answered, rpc) = read_one(&mut conn);
    assert!(answered.starts_with("HTTP/1.1 200 "), "{answered}");
    let rpc: Value = serde_json::from_slice(&rpc).unwrap();
    assert_eq!(rpc["id"], 7);
    assert_eq!(rpc["error"]["code"], -32001, "{rpc}");

    // A body declared past what is waited for: the answer says the connection ends, and it does.
    writer.write_all(head("", 1 << 20).as_bytes()).unwrap();
    let (large, _) = read_one(&mut conn);
    assert!(large.starts_with("HTTP/1.1 401 "), "{large}");
    assert!(
        large.to_ascii_lowercase().contains("connection: close"),
        "{large}"
    );
    assert_closed(conn);

    // A body of no declared length is taken off up to 64 KiB; past that, the connection ends.
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut conn = std::io::BufReader::new(stream);
    let chunked = head("", 0).replace("Content-Length: 0", "Transfer-Encoding: chunked");
    writer.write_all(chunked.as_bytes()).unwrap();
    let (refused, _) = read_one(&mut conn);
    assert!(refused.starts_with("HTTP/1.1 401 "), "{refused}");
    let chunk = format!("4000\r\n{}\r\n", "x".repeat(0x4000));
    // A write may fail once the door has closed: that is the point.
    for _ in 0..8 {
        if writer.write_all(chunk.as_bytes()).is_err() {
            break;
        }
    }
    assert_closed(conn);
}

/// The connection ended by the door: EOF, or a reset for body bytes it never read; never a
/// read that waits (the read timeout) or another answer.
fn assert_closed(mut conn: std::io::BufReader<std::net::TcpStream>) {
    use std::io::Read;
    let mut rest = Vec::new();
    match conn.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the connection was not closed: {e}"),
    }
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}
