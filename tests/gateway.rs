//! The model gateway and the spend ceilings (docs/keys-and-spend.md), through the real `mur`:
//! a process harness (a Python script speaking Anthropic's Messages API with urllib, as any CLI
//! would) is pointed at its capsule's gateway, and a fake Anthropic reports 1,500 tokens a
//! call. The fake must see the real key on every call, the harness never; a wrong key never
//! reaches the fake; a ceiling lets exactly the calls under it out, then fails the task saying
//! which ceiling, in one capsule, across a formation, and across runs through the machine's
//! daily ledger, which `kill -9` does not lose.

#[path = "support/fake_provider.rs"]
mod fake_provider;
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use fake_provider::{anthropic, Fake, Reply};
use serde_json::{json, Value};
use support::*;

const REAL_KEY: &str = "sk-ant-REAL-never-in-a-harness-5b1e";
const LONG: Duration = Duration::from_secs(60);

/// Calls its gateway as a CLI would: once with a made-up key, then `CALLS` times with its own;
/// writes what it saw (statuses, bodies, whether the real key was anywhere in its reach) to
/// `$FIXTURE_STATE-gateway-<task>.json`.
const HARNESS: &str = r#"
import json, os, sys, urllib.request, urllib.error
base = os.environ["ANTHROPIC_BASE_URL"]
key = os.environ["ANTHROPIC_API_KEY"]
real = sys.argv[1][::-1].encode()  # given reversed: the manifest names no key
def call(k):
    body = {"model": "claude-sonnet-5", "max_tokens": 64, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}
    req = urllib.request.Request(base + "/v1/messages", data=json.dumps(body).encode(),
        headers={"x-api-key": k, "content-type": "application/json", "anthropic-version": "2023-06-01"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode()]
reach = []
if any(real in v.encode() for v in os.environ.values()):
    reach.append("environment")
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            if real in open(f"/proc/{pid}/environ", "rb").read():
                reach.append(f"/proc/{pid}/environ")
        except OSError:
            pass
for top in [os.getcwd()]:
    for root, dirs, files in os.walk(top):
        for f in files:
            try:
                if real in open(os.path.join(root, f), "rb").read():
                    reach.append(os.path.join(root, f))
            except OSError:
                pass
import socket
provider_port = int(sys.argv[2])
try:
    socket.create_connection(("127.0.0.1", provider_port), timeout=5).close()
    direct = "connected"
except OSError as e:
    direct = type(e).__name__
proxy = os.environ.get("HTTPS_PROXY", "")
proxied = "no proxy"
if proxy.startswith("http://"):
    host, port = proxy[len("http://"):].rstrip("/").rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(f"CONNECT 127.0.0.1:{provider_port} HTTP/1.1\r\nHost: 127.0.0.1:{provider_port}\r\n\r\n".encode())
    proxied = s.recv(4096).decode(errors="replace").split("\r\n")[0]
    s.close()
out = {"direct": direct, "proxied": proxied, "base": base, "key": key, "reach": reach, "wrong": call("mur_gw_" + "0" * 64),
       "calls": [call(key) for _ in range(int(os.environ.get("CALLS", "3")))]}
task = os.environ["MURMUR_TASK_ID"]
open(os.environ["FIXTURE_STATE"] + f"-gateway-{task}.json", "w").write(json.dumps(out))
print("done")
"#;

/// A fake Anthropic that answers every call with 1,000 input and 500 output tokens.
fn provider() -> Fake {
    Fake::start_with(|_| Reply::Stream(anthropic::text("", &["hi"], "end_turn", (1000, 500))))
}

/// A capsule manifest whose process driver calls the fake through the gateway; `spend` is
/// its `spend:` block (or nothing).
fn manifest(home: &Home, fake: &Fake, name: &str, spend: &str) -> PathBuf {
    let script = home.write("gateway_harness.py", HARNESS);
    home.write(
        &format!("{name}.yaml"),
        &format!(
            "name: {name}\nversion: \"0.1.0\"\nartifacts:\n  - name: local/caller\n    version: \"0.1.0\"\n    runtime: driver\n    gateway:\n      endpoint: http://127.0.0.1:{port}\n      api_key: ${{REAL_ANTHROPIC_KEY}}\n      api: anthropic\n    process:\n      command: [\"python3\", \"{script}\", \"{reversed}\", \"{port}\"]\ninference:\n  transport: process\nexports: {{ peer_tasks: {{ accept: true }} }}\nlifecycle: {{ task_acceptance: queue, after_task: sleep, queue_depth: 2 }}\n{spend}",
            port = fake.port,
            script = script.display(),
            reversed = REAL_KEY.chars().rev().collect::<String>(),
        ),
    )
}

/// The environment `mur run` gets: the real key under the name the manifest reads, and under
/// Anthropic's own name too, which a run-wide allow list even tries to hand every harness.
fn env(extra: &[(&str, String)]) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("REAL_ANTHROPIC_KEY", REAL_KEY.to_owned()),
        ("ANTHROPIC_API_KEY", REAL_KEY.to_owned()),
        (
            "MURMUR_HARNESS_ENV",
            "FIXTURE_STATE CALLS ANTHROPIC_API_KEY REAL_ANTHROPIC_KEY".to_owned(),
        ),
        ("MURMUR_CONTAINMENT", "namespaces".to_owned()),
    ];
    for (k, v) in extra {
        env.push((leak(k), v.clone()));
    }
    env
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_owned().into_boxed_str())
}

/// What the harness of `task` wrote.
fn seen_by_harness(home: &Home, task: &str) -> Value {
    let path = PathBuf::from(format!(
        "{}-gateway-{task}.json",
        home.root.join("fixture-state").display()
    ));
    assert!(
        wait_until(LONG, || path.exists()),
        "the harness wrote nothing at {}",
        path.display()
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn spend_error(sentence: &str) -> Value {
    json!({"type": "error", "error": {"type": "invalid_request_error", "message": sentence}})
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if std::fs::read(&path)
            .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            found.push(path);
        }
    }
    found
}

const TASK_SENTENCE: &str = "a spend ceiling stopped it: the task used 3000 tokens, and its \
                             ceiling is 2000 (spend.max_tokens_per_task)";

#[test]
fn the_harness_calls_through_the_gateway_which_alone_holds_the_key_and_stops_at_the_task_ceiling() {
    let home = Home::new();
    let fake = provider();
    let path = manifest(
        &home,
        &fake,
        "caller",
        "spend: { max_tokens_per_task: 2000 }\n",
    );
    let run = Launch::start_env(&home, &path, &[], &env(&[]));
    let id = run.start_task("call your model");
    let task = run.wait_task(&id, LONG, |s| s == "TASK_STATE_FAILED");
    assert_eq!(status_text(&task), TASK_SENTENCE, "{task}");
    let harness = seen_by_harness(&home, &id);

    // Exactly two calls reached the provider, each with the real key.
    let calls = fake.seen();
    assert_eq!(calls.len(), 2, "{calls:?}");
    for c in &calls {
        assert_eq!(c.path, "/v1/messages");
        assert_eq!(c.header("x-api-key"), Some(REAL_KEY));
    }
    // The harness holds a placeholder, and the real key is nowhere in its reach.
    let placeholder = harness["key"].as_str().unwrap();
    assert!(
        placeholder.starts_with("mur_gw_") && placeholder.len() == 71,
        "{placeholder}"
    );
    assert_eq!(harness["reach"], json!([]), "the real key was in reach");
    assert!(harness["base"]
        .as_str()
        .unwrap()
        .starts_with("http://127.0.0.1:"));
    // The provider is reachable only through the gateway: not directly, not by the proxy.
    assert_eq!(harness["direct"], "ConnectionRefusedError");
    assert_eq!(harness["proxied"], "HTTP/1.1 403 Forbidden");
    // A made-up key is refused by the gateway and never reaches the provider.
    assert_eq!(harness["wrong"][0], 401);
    assert_eq!(
        serde_json::from_str::<Value>(harness["wrong"][1].as_str().unwrap()).unwrap(),
        json!({"type": "error", "error": {"type": "authentication_error",
               "message": "murmur's model gateway does not know this key: it accepts only the placeholder of a running attempt"}})
    );
    // Two answers passed through as the provider sent them, then the ceiling's refusal.
    let answers = harness["calls"].as_array().unwrap();
    assert_eq!(answers.len(), 3);
    for a in &answers[..2] {
        assert_eq!(a[0], 200);
        assert_eq!(
            a[1].as_str().unwrap(),
            anthropic::text("", &["hi"], "end_turn", (1000, 500)).concat()
        );
    }
    assert_eq!(answers[2][0], 400);
    assert_eq!(
        serde_json::from_str::<Value>(answers[2][1].as_str().unwrap()).unwrap(),
        spend_error(TASK_SENTENCE)
    );

    // The trace: an inference record per call, metered, and the ceiling's record.
    let trace = home.trace(&run.session);
    let inference: Vec<&Value> = trace
        .iter()
        .filter(|e| e["event_type"] == "inference")
        .collect();
    assert_eq!(inference.len(), 2, "{inference:?}");
    for (i, e) in inference.iter().enumerate() {
        assert_eq!(e["task_id"], id.as_str());
        assert_eq!(
            e["turn"],
            i as u64 + 1,
            "the made-up key's call is no attempt's"
        );
        assert_eq!(e["provider"], "anthropic");
        assert_eq!(e["model"], "claude-test");
        assert_eq!(
            (&e["input_tokens"], &e["output_tokens"]),
            (&json!(1000), &json!(500))
        );
        assert_eq!((&e["status"], &e["metered"]), (&json!(200), &json!(true)));
        assert_eq!(e["counted_tokens"], 1500);
        assert_eq!(e["stop_reason"], "end_turn");
        assert!(
            e["first_byte_ms"].is_u64() && e["latency_ms"].is_u64(),
            "{e}"
        );
    }
    let stop: Vec<&Value> = trace
        .iter()
        .filter(|e| e["event_type"] == "spend_ceiling")
        .collect();
    assert_eq!(stop.len(), 1);
    assert_eq!(
        (
            &stop[0]["scope"],
            &stop[0]["key"],
            &stop[0]["used"],
            &stop[0]["ceiling"]
        ),
        (
            &json!("task"),
            &json!("spend.max_tokens_per_task"),
            &json!("3000 tokens"),
            &json!("2000 tokens")
        )
    );
    // Neither key is written anywhere murmur writes.
    for needle in [REAL_KEY, placeholder] {
        assert_eq!(
            files_holding(&home.home, needle),
            Vec::<PathBuf>::new(),
            "{needle}"
        );
    }
    // The ledger holds both calls; `mur spend` shows them.
    let (code, out, err) = home.run(&["spend", "--json"]);
    assert_eq!(code, 0, "{err}");
    let spend: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(spend["total"]["tokens"], 3000);
    assert_eq!(spend["total"]["calls"], 2);
    assert_eq!(spend["rows"][0]["member"], "caller");
    assert_eq!(spend["rows"][0]["model"], "claude-test");
    assert_eq!(
        (
            &spend["rows"][0]["input_tokens"],
            &spend["rows"][0]["output_tokens"]
        ),
        (&json!(2000), &json!(1000))
    );
    let (_, text, _) = home.run(&["spend"]);
    assert!(
        text.contains(" (UTC): 3000 tokens, unpriced in 2 calls\ncapsules launched alone\n  caller  claude-test  3000 tokens (2000 in, 1000 out, 0 cache read, 0 cache write)  unpriced  2 calls\n"),
        "{text}"
    );
    // `mur trace show` sums the session's spend and names the refusal.
    let (code, shown, err) = home.run(&["trace", "show", &run.session]);
    assert_eq!(code, 0, "{err}");
    assert!(
        shown.contains(
            "calls: 2  tokens: 3000  in: 2000  out: 1000  cache read: 0  cache write: 0  cost: unpriced\n"
        ) && shown.contains(&format!(
            "{}  refused by spend.max_tokens_per_task (task): used 3000 tokens, ceiling 2000 tokens\n",
            &id[..12]
        )),
        "{shown}"
    );
    drop(run);
    assert_nothing_left(&home, LONG);
}

#[test]
fn a_formation_ceiling_stops_every_member() {
    let home = Home::new();
    let fake = provider();
    let a = manifest(&home, &fake, "member-a", "");
    let b = manifest(&home, &fake, "member-b", "");
    let formation = home.write(
        "team.yaml",
        &format!(
            "formation:\n  name: team\n  version: \"0.1.0\"\n  entry: a\n  members:\n    a: {{ manifest: {}, calls: [b] }}\n    b: {{ manifest: {} }}\nspend:\n  max_tokens: 2500\n",
            a.display(),
            b.display()
        ),
    );
    let (run, members) =
        Launch::start_formation_env(&home, &formation, &[], &env(&[("CALLS", "3".into())]));
    let member = |name: &str| members.iter().find(|m| m.name == name).expect("the member");
    let (a, b) = (member("a"), member("b"));
    let first = start_on(&home, a, "spend it");
    let task = wait_for_state(
        a.port,
        &home.operator_token(&a.session),
        &first,
        "TASK_STATE_FAILED",
    );
    let sentence = "a spend ceiling stopped it: the formation team used 3000 tokens, and its \
                    ceiling is 2500 (spend.max_tokens of the formation team)";
    assert_eq!(status_text(&task), sentence);
    assert_eq!(fake.seen().len(), 2);
    // The other member's very first call is refused: the scope covers it too.
    let second = start_on(&home, b, "spend more");
    let ended = wait_for_state(
        b.port,
        &home.operator_token(&b.session),
        &second,
        "TASK_STATE_FAILED",
    );
    assert_eq!(status_text(&ended), sentence);
    assert_eq!(
        fake.seen().len(),
        2,
        "no call of member b reached the provider"
    );
    let harness = seen_by_harness(&home, &second);
    assert_eq!(harness["calls"][0][0], 400);
    assert_eq!(
        serde_json::from_str::<Value>(harness["calls"][0][1].as_str().unwrap()).unwrap(),
        spend_error(sentence)
    );
    // `mur top` shows each member's spend, and the formation's against its ceiling.
    let (code, top, err) = home.run(&["top", "--once"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        top.contains("── Spend ──\nformation team: 3000 tokens of 2500 tokens (ceiling reached)\n")
            && top.contains(" 3000 tok stopped ")
            && top.contains(" 0 tok stopped ")
            && top.contains(
                "spend ceiling spend.max_tokens of the formation team (formation): used 3000 \
                 tokens, ceiling 2500 tokens"
            ),
        "{top}"
    );
    let (_, out, _) = home.run(&["spend", "--json"]);
    let spend: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(spend["rows"][0]["formation"], "team");
    assert_eq!(spend["rows"][0]["member"], "a");
    assert_eq!(spend["total"]["tokens"], 3000);
    let counters = home.home.join("spend/formations");
    assert_eq!(
        std::fs::read_dir(&counters).unwrap().count(),
        1,
        "the launch's counter"
    );
    drop(run);
    assert_nothing_left(&home, LONG);
    // The launch's own total goes with it; its calls stay in the ledger.
    assert_eq!(std::fs::read_dir(&counters).unwrap().count(), 0);
    let (_, out, _) = home.run(&["spend", "--json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["total"]["tokens"],
        3000
    );
}

/// A task sent to a formation member's door with its operator token; answers its id.
fn start_on(home: &Home, m: &Member, text: &str) -> String {
    let sent = bearer_rpc(
        m.port,
        &home.operator_token(&m.session),
        "SendMessage",
        json!({"message": {"messageId": format!("m-{}", m.name), "role": "ROLE_USER",
                           "parts": [{"text": text}]},
               "configuration": {"returnImmediately": true}}),
    );
    sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task started: {sent}"))
        .to_owned()
}

/// GetTask on a member's door until the task is in `state`.
fn wait_for_state(port: u16, token: &str, id: &str, state: &str) -> Value {
    let mut last = Value::Null;
    let reached = wait_until(LONG, || {
        last = bearer_rpc(port, token, "GetTask", json!({"id": id}))["result"].clone();
        last["status"]["state"] == state
    });
    assert!(reached, "{id} never reached {state}: {last}");
    last
}

#[test]
fn the_daily_ceiling_holds_across_a_kill_9_and_the_next_run() {
    let home = Home::new();
    let fake = provider();
    let path = manifest(&home, &fake, "daily", "");
    let daily = [("MURMUR_SPEND_DAILY_TOKENS", "2000".to_owned())];
    let run = Launch::start_env(&home, &path, &[], &env(&daily));
    let id = run.start_task("spend today");
    let task = run.wait_task(&id, LONG, |s| s == "TASK_STATE_FAILED");
    let sentence = "a spend ceiling stopped it: this machine today used 3000 tokens, and its \
                    ceiling is 2000 (MURMUR_SPEND_DAILY_TOKENS)";
    assert_eq!(status_text(&task), sentence);
    assert_eq!(fake.seen().len(), 2);
    signal(run.pid(), 9);
    assert_nothing_left(&home, LONG);
    drop(run);

    // A formation launch killed the same way leaves its counter: the next launch removes it.
    let stale = home
        .home
        .join("spend/formations/ses_01a2000000007000800000000000dead.total");
    std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
    std::fs::write(&stale, [0u8; 16]).unwrap();
    // The next run counts from what the ledger holds: its first call is refused.
    let run = Launch::start_env(&home, &path, &[], &env(&daily));
    assert!(!stale.exists(), "the dead launch's counter was left");
    let id = run.start_task("spend more");
    let task = run.wait_task(&id, LONG, |s| s == "TASK_STATE_FAILED");
    assert_eq!(status_text(&task), sentence);
    assert_eq!(fake.seen().len(), 2, "nothing more reached the provider");
    let out = home
        .mur()
        .env("MURMUR_SPEND_DAILY_TOKENS", "2000")
        .args(["spend", "--json"])
        .output()
        .unwrap();
    let spend: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(spend["total"]["tokens"], 3000);
    assert_eq!(spend["ceiling"]["tokens"], 2000);
    drop(run);
    assert_nothing_left(&home, LONG);
}

#[test]
fn garbage_errors_and_cut_streams_reach_the_cli_as_sent_and_are_metered_as_far_as_they_go() {
    let home = Home::new();
    let fake = provider();
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let cut: Vec<String> = anthropic::text("", &["half an answ"], "end_turn", (1000, 500))
        .into_iter()
        .take(4)
        .collect();
    fake.script([
        Reply::Raw("this is not the wire format".into()),
        Reply::Status(529, vec![], overloaded.into()),
        Reply::Stream(cut.clone()),
    ]);
    let path = manifest(&home, &fake, "garbage", "");
    let run = Launch::start_env(&home, &path, &[], &env(&[]));
    let id = run.start_task("call through trouble");
    run.wait_task(&id, LONG, |s| s == "TASK_STATE_COMPLETED");
    let harness = seen_by_harness(&home, &id);
    assert_eq!(
        harness["calls"],
        json!([
            [200, "this is not the wire format"],
            [529, overloaded],
            [200, cut.concat()]
        ])
    );
    let calls: Vec<Value> = home
        .trace(&run.session)
        .into_iter()
        .filter(|e| e["event_type"] == "inference")
        .collect();
    let figures: Vec<Value> = calls
        .iter()
        .map(|e| {
            json!([
                e["status"],
                e["metered"],
                e["counted_tokens"],
                e["input_tokens"],
                e["output_tokens"]
            ])
        })
        .collect();
    assert_eq!(
        figures,
        [
            // No usage at all: counted as the max_tokens the request asked for.
            json!([200, false, 64, 0, 0]),
            // An error answer used nothing.
            json!([529, false, 0, 0, 0]),
            // Cut after message_start: what it reported so far.
            json!([200, true, 1001, 1000, 1]),
        ]
    );
    drop(run);
    assert_nothing_left(&home, LONG);
}

/// A CLI logged in with an account sends its own credential: with no key in the gateway block,
/// the gateway passes it on, and the attempt proves itself by the placeholder in
/// `x-murmur-gateway-key` (`ANTHROPIC_CUSTOM_HEADERS`, as Claude Code sends it).
#[test]
fn an_account_login_passes_its_own_credential_through_the_gateway() {
    let home = Home::new();
    let fake = provider();
    let script = home.write(
        "own_credential.py",
        r#"
import json, os, urllib.request
name, value = os.environ["ANTHROPIC_CUSTOM_HEADERS"].split(": ", 1)
body = json.dumps({"model": "claude-sonnet-5", "max_tokens": 64, "stream": True,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()
def call(headers):
    req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=body,
        headers=dict({"content-type": "application/json", "x-api-key": "sk-ant-oat-own-login"}, **headers))
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
out = {"header": name, "key_in_env": "ANTHROPIC_API_KEY" in os.environ,
       "with": call({name: value}), "without": call({})}
open(os.environ["FIXTURE_STATE"] + "-gateway-" + os.environ["MURMUR_TASK_ID"] + ".json", "w").write(json.dumps(out))
print("done")
"#,
    );
    let path = home.write(
        "login.yaml",
        &format!(
            "name: login\nversion: \"0.1.0\"\nartifacts:\n  - name: local/login\n    version: \"0.1.0\"\n    runtime: driver\n    gateway: {{ endpoint: \"http://127.0.0.1:{}\", api: anthropic }}\n    process:\n      command: [\"python3\", \"{}\"]\ninference:\n  transport: process\nlifecycle: {{ task_acceptance: queue, after_task: sleep, queue_depth: 2 }}\n",
            fake.port,
            script.display()
        ),
    );
    let run = Launch::start_env(&home, &path, &[], &env(&[]));
    let id = run.start_task("call with your own login");
    run.wait_task(&id, LONG, |s| s == "TASK_STATE_COMPLETED");
    let seen = seen_by_harness(&home, &id);
    assert_eq!(
        seen,
        json!({"header": "x-murmur-gateway-key", "key_in_env": false, "with": 200, "without": 401})
    );
    let calls = fake.seen();
    assert_eq!(
        calls.len(),
        1,
        "the call without a placeholder never reached the provider"
    );
    assert_eq!(calls[0].header("x-api-key"), Some("sk-ant-oat-own-login"));
    assert_eq!(
        calls[0].header("x-murmur-gateway-key"),
        None,
        "the placeholder stays here"
    );
    drop(run);
    assert_nothing_left(&home, LONG);
}

#[test]
fn bad_spend_arguments_and_variables_are_refused_saying_how_to_fix_them() {
    let home = Home::new();
    let (code, out, err) = home.run(&["spend", "--day", "yesterday"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        "error[E-CLI-030]: --day \"yesterday\" is not a day\n  hint: write the UTC day as \
         YYYY-MM-DD, e.g. --day 2026-12-03\n"
    );
    let said = |var: &str, value: &str, args: &[&str]| {
        let out = home
            .mur()
            .env(var, value)
            .env("REAL_ANTHROPIC_KEY", REAL_KEY)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let usd = "error[E-CLI-030]: MURMUR_SPEND_DAILY_USD is \"ten\": write a number of US dollars \
               above 0, e.g. 20\n  hint: fix the variable, or unset it\n";
    assert_eq!(
        said("MURMUR_SPEND_DAILY_USD", "ten", &["spend"]),
        (Some(1), usd.to_owned())
    );
    // `mur run` refuses it before anything starts: no record, no process.
    let fake = provider();
    let path = manifest(&home, &fake, "never", "");
    let manifest_arg = path.display().to_string();
    assert_eq!(
        said(
            "MURMUR_SPEND_DAILY_TOKENS",
            "0",
            &["run", "--manifest", &manifest_arg]
        ),
        (
            Some(1),
            "error[E-CLI-030]: MURMUR_SPEND_DAILY_TOKENS is \"0\": write a whole number of \
             tokens above 0, e.g. 5000000\n  hint: fix the variable, or unset it\n"
                .to_owned()
        )
    );
    assert!(
        !home.home.join("run").exists()
            || std::fs::read_dir(home.home.join("run")).unwrap().count() == 0
    );
    assert!(fake.seen().is_empty());
    assert_nothing_left(&home, LONG);
}

#[test]
fn a_provider_that_cannot_be_reached_is_a_502_in_the_providers_format_naming_it() {
    let home = Home::new();
    // A port that was bound and let go: nothing listens there.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = gone.local_addr().unwrap().port();
    drop(gone);
    let fake = provider();
    let text = std::fs::read_to_string(manifest(&home, &fake, "unreached", "")).unwrap();
    let path = home.write(
        "unreached.yaml",
        &text.replace(
            &format!("127.0.0.1:{}", fake.port),
            &format!("127.0.0.1:{port}"),
        ),
    );
    let run = Launch::start_env(&home, &path, &[], &env(&[("CALLS", "1".into())]));
    let id = run.start_task("call a provider that is not there");
    run.wait_task(&id, LONG, |s| s == "TASK_STATE_COMPLETED");
    let harness = seen_by_harness(&home, &id);
    assert_eq!(harness["calls"][0][0], 502);
    let body: Value = serde_json::from_str(harness["calls"][0][1].as_str().unwrap()).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "api_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "murmur's model gateway could not reach 127.0.0.1:{port}: 127.0.0.1:{port}: "
        )),
        "{message}"
    );
    assert!(!message.contains(REAL_KEY));
    // No answer, nothing used: no call is counted.
    let (_, out, _) = home.run(&["spend", "--json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["total"]["calls"],
        0
    );
    drop(run);
    assert_nothing_left(&home, LONG);
}
