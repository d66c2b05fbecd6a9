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
