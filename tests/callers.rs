//! Doors only their callers can drive (docs/choices.md "Door"): each test here climbs one wall
//! as an attacker would, through the real `mur` — a web page in the user's browser (DNS
//! rebinding, a cross-site POST), a peer holding a member credential, a hostile harness — and
//! checks the exact refusal and that nothing ran.

mod support;

use serde_json::{json, Value};
use support::*;

/// The number of tasks the door holds, as the operator (or anyone, on a public door) sees.
fn tasks_held(run: &Launch) -> u64 {
    run.rpc("ListTasks", json!({}))["result"]["totalSize"]
        .as_u64()
        .unwrap_or(u64::MAX)
}

fn send_body() -> String {
    request(
        json!(1),
        "SendMessage",
        message("run my agent with my files", false),
    )
}

#[test]
fn a_rebound_name_reaches_nothing_and_runs_nothing() {
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    let port = run.port;
    let listing = format!("localhost:{port}, 127.0.0.1:{port}, [::1]:{port}");
    // The request a page at attacker.example sends once its name resolves to 127.0.0.1.
    let resp = http(
        port,
        "POST",
        "/",
        &[
            ("Host", &format!("attacker.example:{port}")),
            ("Origin", &format!("http://attacker.example:{port}")),
            ("Content-Type", "application/json"),
            ("A2A-Version", "1.0"),
        ],
        send_body().as_bytes(),
    );
    assert_eq!(resp.status, 421, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    assert_eq!(
        resp.json(),
        json!({"error": "host_not_served",
               "message": format!("this door answers for {listing}, not for \"attacker.example:{port}\"; a name of your own goes in the manifest's network.hosts")})
    );
    // Its card, its control surface and its methods alike.
    for (method, path) in [
        ("GET", "/.well-known/agent-card.json"),
        ("POST", "/control/v1/call-member"),
        ("POST", "/"),
    ] {
        let r = http(port, method, path, &[("Host", "attacker.example")], b"{}");
        assert_eq!(r.status, 421, "{method} {path}");
    }
    assert_eq!(tasks_held(&run), 0, "a task started");
    assert!(
        !home.root.join("fixture-state").exists()
            || std::fs::read_dir(home.root.join("fixture-state"))
                .unwrap()
                .next()
                .is_none(),
        "the harness ran"
    );
}

#[test]
fn a_cross_site_page_is_refused_even_at_the_door_s_own_name() {
    let home = Home::new();
    let run = start_fixture(&home, "murmur.yaml", &Fixture::default(), &[]);
    for origin in ["http://attacker.example", "null", "https://localhost:1"] {
        let resp = run.post(&send_body(), &[("A2A-Version", "1.0"), ("Origin", origin)]);
        assert_eq!(resp.status, 403, "{origin}");
        assert_eq!(
            resp.json(),
            json!({"error": "origin_not_allowed",
                   "message": format!("this door does not answer requests a web page at {origin:?} sends: a capsule's door is for its own clients, not for browsers")}),
            "{origin}"
        );
    }
    assert_eq!(tasks_held(&run), 0, "a task started");
    // The door's own origin (a page it served, were it to serve one) is answered.
    let own = format!("http://127.0.0.1:{}", run.port);
    let resp = run.post(
        &request(json!(1), "ListTasks", json!({})),
        &[("A2A-Version", "1.0"), ("Origin", &own)],
    );
    assert_eq!(resp.status, 200, "{}", resp.text());
}

#[test]
fn names_the_manifest_declares_are_answered() {
    let home = Home::new();
    let fixture = Fixture {
        extra: "network:\n  hosts: [agents.example.com, \"proxy.example:8443\"]\n",
        ..Fixture::default()
    };
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
    for host in [
        format!("agents.example.com:{}", run.port),
        "proxy.example:8443".to_owned(),
        format!("[::1]:{}", run.port),
    ] {
        let resp = http(
            run.port,
            "GET",
            "/.well-known/agent-card.json",
            &[("Host", &host)],
            b"",
        );
        assert_eq!(resp.status, 200, "{host}");
        let card: Value = resp.json();
        assert_eq!(card["name"], "fixture");
    }
    let resp = http(
        run.port,
        "GET",
        "/.well-known/agent-card.json",
        &[("Host", "agents.example.com:1")],
        b"",
    );
    assert_eq!(resp.status, 421);
}

#[test]
fn a_host_list_entry_that_is_no_name_is_refused_at_launch() {
    let home = Home::new();
    let fixture = Fixture {
        extra: "network:\n  hosts: [\"http://agents.example.com/\"]\n",
        ..Fixture::default()
    };
    let path = home.write("murmur.yaml", &fixture.yaml());
    let (code, _, err) = home.run(&["run", "--manifest", path.to_str().unwrap()]);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("network.hosts[0] is \"http://agents.example.com/\", which is not a host name\n  hint: write a name the door is reached by, with a port when it is not the door's own: agents.example.com or agents.example.com:443"),
        "{err}"
    );
}

/// A context whose task runs on `run`, answered (its text).
fn ask(run: &Launch, context: &str, text: &str) -> Value {
    let mut params = message(text, false);
    params["message"]["contextId"] = json!(context);
    let resp = run.rpc("SendMessage", params);
    resp["result"]["task"].clone()
}

#[test]
fn a_harness_session_id_shaped_like_a_flag_never_reaches_a_command_line() {
    let home = Home::new();
    let fixture = Fixture {
        dialect: "stream-json",
        ..Fixture::default()
    };
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
    let context = "ctx_0193f2a1c4d87e01b2c3d4e5f6a7b8c9";
    // A hostile (or broken) harness reports a session id that would read as a flag.
    let first = ask(&run, context, "@session --dangerously-skip-permissions");
    assert_eq!(first["status"]["state"], "TASK_STATE_COMPLETED", "{first}");
    // The context keeps no session: the next task starts a new one, and no attempt was given
    // the id on its command line.
    let second = ask(&run, context, "hello");
    let answer = second["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(answer.ends_with("resumed=no prompts=1"), "{answer}");
    let starts: Vec<Value> = home
        .trace(&run.session)
        .into_iter()
        .filter(|e| e["event_type"] == "harness_start")
        .collect();
    assert_eq!(starts.len(), 2);
    assert!(
        starts.iter().all(|s| s["session_mode"] == "new"),
        "{starts:?}"
    );
    // A well-formed id is resumed as before.
    let third = ask(&run, context, "again");
    let answer = third["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(answer.ends_with("resumed=yes prompts=2"), "{answer}");
}

#[test]
fn a_task_text_past_what_linux_takes_as_an_argument_fails_saying_so() {
    let home = Home::new();
    let yaml = Fixture::default().yaml().replace(
        "\"--dialect\", \"text\"]",
        "\"--dialect\", \"text\", \"--prompt-arg\"]\n      prompt: arg",
    );
    assert!(yaml.contains("prompt: arg"), "{yaml}");
    let path = home.write("murmur.yaml", &yaml);
    let run = Launch::start(&home, &path, &[]);
    let ok = run.send("@echo", false);
    assert_eq!(
        ok["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{ok}"
    );
    let text = "x".repeat(200_000);
    let big = run.send(&text, false);
    let task = &big["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"],
        "the task's text is 200000 bytes, and this driver passes it as one command-line argument (prompt: arg), which Linux limits to 131071 bytes; use prompt: stdin"
    );
}

/// The token `mur token` prints for `credential` of `session`.
fn token_of(home: &Home, session: &str, credential: &str) -> String {
    let (code, out, err) = home.run(&["token", session]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{credential} ")))
        .unwrap_or_else(|| panic!("no {credential} in {out}"))
        .to_owned()
}

/// `text` to `context` as `token`'s holder; answers the answer's text.
fn ask_as(run: &Launch, token: &str, context: &str, text: &str, forget: bool) -> String {
    let mut params = message(text, false);
    params["message"]["contextId"] = json!(context);
    if forget {
        let uri = "https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1";
        params["message"]["metadata"] = json!({uri: {"forgetSession": true}});
    }
    let resp = bearer_rpc(run.port, token, "SendMessage", params);
    resp["result"]["task"]["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no answer: {resp}"))
        .to_owned()
}

#[test]
fn a_context_s_conversation_is_its_owner_s_alone() {
    let home = Home::new();
    let fixture = Fixture {
        dialect: "stream-json",
        extra: "network:\n  authentication:\n    scheme: bearer\n    credentials:\n      alice: { scopes: [SendMessage] }\n      mallory: { scopes: [SendMessage] }\n",
        ..Fixture::default()
    };
    let run = start_fixture(&home, "murmur.yaml", &fixture, &[]);
    let alice = token_of(&home, &run.session, "alice");
    let mallory = token_of(&home, &run.session, "mallory");
    let context = "ctx_0193f2a1c4d87e01b2c3d4e5f6a7b8c9";
    let first = ask_as(&run, &alice, context, "hello", false);
    assert!(first.ends_with("resumed=no prompts=1"), "{first}");
    // Context ids are in traces: mallory names alice's, and gets a conversation of her own.
    let theirs = ask_as(&run, &mallory, context, "what did alice say?", false);
    assert!(theirs.ends_with("resumed=no prompts=1"), "{theirs}");
    assert!(
        !theirs.contains(first.split_whitespace().next().unwrap()),
        "{theirs} resumed alice's session"
    );
    // Her forgetSession drops her own, not alice's.
    let forgot = ask_as(&run, &mallory, context, "forget it", true);
    assert!(forgot.ends_with("resumed=no prompts=1"), "{forgot}");
    let again = ask_as(&run, &alice, context, "and now?", false);
    assert_eq!(
        again,
        first.replace("resumed=no prompts=1", "resumed=yes prompts=2"),
        "alice's conversation went on"
    );
}

/// Records hold a user's tasks and answers: with no home to put them in, `mur` says so instead
/// of writing them to a shared folder (it used to take `/tmp/.murmur`). Run as a user the
/// password database does not know, with neither `HOME` nor `MURMUR_HOME` set (this needs root,
/// as CI runs; `setpriv` drops to that user).
#[test]
fn with_no_home_mur_refuses_rather_than_writing_records_to_a_shared_folder() {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    assert!(root, "this test drops to an unknown user, which takes root");
    let home = Home::new();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid", "54321", "--regid", "54321", "--clear-groups"])
        .arg(&home.bin)
        .arg("ps")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir("/")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error[E-RUN-040]: murmur has nowhere to keep its records: neither MURMUR_HOME nor HOME is set, and the password database names no home for this user\n  hint: set MURMUR_HOME to a folder of your own, e.g. MURMUR_HOME=$PWD/.murmur\n"
    );
}
