//! A launch run as a user runs it: `mur run` in the background, its announced members read
//! from its output, its stderr gathered; and the tokens and restarts tests read of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::support::*;

pub const LONG: Duration = Duration::from_secs(30);

/// A running formation: `mur run`, each member's port and session, and what it printed.
pub struct Running {
    pub child: Child,
    pub members: Vec<(String, u16, String)>,
    pub out: Arc<Mutex<Vec<String>>>,
    pub err: Arc<Mutex<String>>,
}

impl Running {
    pub fn start(home: &Home, manifest: &Path, args: &[&str], env: &[(&str, &str)]) -> Running {
        Running::spawn(home, manifest, args, env).announced()
    }

    /// `mur run` started, its output being gathered; not yet announced.
    pub fn spawn(home: &Home, manifest: &Path, args: &[&str], env: &[(&str, &str)]) -> Running {
        let mut all = vec!["run", "--manifest", manifest.to_str().unwrap()];
        all.extend_from_slice(args);
        Running::spawn_args(home, &all, env)
    }

    /// `mur ARGS` started (a `run` of some kind), its output being gathered.
    pub fn spawn_args(home: &Home, args: &[&str], env: &[(&str, &str)]) -> Running {
        let mut child = home
            .mur()
            .envs(env.iter().copied())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        let err = Arc::new(Mutex::new(String::new()));
        let (o, e) = (out.clone(), err.clone());
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                o.lock().unwrap().push(line);
            }
        });
        std::thread::spawn(move || {
            let mut text = String::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                text.push_str(&String::from_utf8_lossy(&buf[..n]));
                *e.lock().unwrap() = text.clone();
            }
        });
        Running {
            child,
            members: Vec::new(),
            out,
            err,
        }
    }

    /// Waits (bounded) for the launch's announcement, and reads each member's port and session
    /// from it.
    pub fn announced(mut self) -> Running {
        let run = &mut self;
        assert!(
            wait_until(LONG, || run
                .out
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.starts_with("session: "))),
            "the formation was not announced: {:?} {}",
            run.out.lock().unwrap(),
            run.err.lock().unwrap()
        );
        for line in run.out.lock().unwrap().iter() {
            let Some(rest) = line.strip_prefix("member ") else {
                continue;
            };
            let (name, rest) = rest.split_once(": url localhost:").unwrap();
            let (port, session) = rest.split_once(" session ").unwrap();
            run.members
                .push((name.to_owned(), port.parse().unwrap(), session.to_owned()));
        }
        self
    }

    pub fn member(&self, name: &str) -> (u16, String) {
        let (_, port, session) = self.members.iter().find(|m| m.0 == name).unwrap();
        (*port, session.clone())
    }

    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let mut code = None;
        wait_until(limit, || {
            code = self
                .child
                .try_wait()
                .unwrap()
                .map(|s| s.code().unwrap_or(-1));
            code.is_some()
        });
        code
    }

    pub fn lines(&self) -> Vec<String> {
        self.out.lock().unwrap().clone()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        signal(self.child.id(), 15);
        if self.wait_exit(LONG).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `credential token` lines of a running session.
pub fn tokens(home: &Home, session: &str) -> Vec<(String, String)> {
    let (code, out, err) = home.run(&["token", session]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| {
            let (c, t) = l.split_once(' ').unwrap();
            (c.to_owned(), t.to_owned())
        })
        .collect()
}

pub fn token_of(home: &Home, session: &str, credential: &str) -> String {
    tokens(home, session)
        .into_iter()
        .find(|(c, _)| c == credential)
        .unwrap_or_else(|| panic!("{session} has no {credential}"))
        .1
}

/// The pid the running record of `session` names, once it is not `old`.
pub fn pid_other_than(home: &Home, session: &str, old: u32) -> u32 {
    let path = home.home.join("run").join(format!("{session}.json"));
    let mut pid = old;
    assert!(
        wait_until(LONG, || {
            pid = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|r| r["pid"].as_u64())
                .map_or(old, |p| p as u32);
            pid != old && alive(pid)
        }),
        "{session} was not started again"
    );
    pid
}

/// Sends a member, as `token`'s holder, a task that holds its harness for a minute, and waits
/// (bounded) until that harness runs; answers the task's id. `name` names the pid file.
pub fn hold(home: &Home, port: u16, token: &str, name: &str) -> String {
    let pidfile = home.root.join(format!("{name}.pid"));
    let sent = bearer_rpc(
        port,
        token,
        "SendMessage",
        message(&format!("@pidfile {}\n@sleep 60", pidfile.display()), true),
    );
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    wait_pid(&pidfile);
    id
}
