//! `mur top` in a pseudo-terminal for the tests that watch it (tests/top.rs,
//! tests/approvals.rs): a tmux server of its own per screen, keys sent as a person types them,
//! the screen read back, every wait bounded.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::clients;
use crate::support::*;

/// How long a screen is waited on to show something.
const SHOWN_WITHIN: Duration = Duration::from_secs(60);

/// `mur top` in a tmux pane of its own server, killed with the test.
pub struct Screen {
    socket: PathBuf,
}

impl Screen {
    /// Starts `mur top ARGS` in a `cols`×`rows` terminal with `env`; None when tmux is missing
    /// (and not under CI, where that fails the test).
    pub fn start(
        home: &Home,
        args: &[&str],
        size: (u16, u16),
        env: &[(&str, &str)],
    ) -> Option<Screen> {
        let mut cmd: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        cmd.push(home.bin.display().to_string());
        cmd.push("top".to_owned());
        cmd.extend(args.iter().map(|a| a.to_string()));
        let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
        Screen::start_command(home, &cmd, size)
    }

    /// A tmux pane of its own server running `command` (after `env`) with this home; None
    /// when tmux is missing (and not under CI, where that fails the test).
    pub fn start_command(home: &Home, command: &[&str], size: (u16, u16)) -> Option<Screen> {
        let present = Command::new("tmux")
            .arg("-V")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !clients::usable("tmux", present) {
            return None;
        }
        // A server per screen: a test that opens a second screen must not reach the first
        // one's server while it is still going down ("server exited unexpectedly").
        static SCREENS: AtomicUsize = AtomicUsize::new(0);
        let n = SCREENS.fetch_add(1, Ordering::Relaxed);
        let screen = Screen {
            socket: home.root.join(format!("tmux-{n}.sock")),
        };
        let mut cmd = vec![
            "env".to_owned(),
            format!("MURMUR_HOME={}", home.home.display()),
            format!("PATH={}", search_path()),
            "TERM=xterm-256color".to_owned(),
        ];
        cmd.extend(command.iter().map(|a| a.to_string()));
        let (cols, rows) = (size.0.to_string(), size.1.to_string());
        let started = screen
            .tmux(&[
                "new-session",
                "-d",
                "-s",
                "top",
                "-x",
                &cols,
                "-y",
                &rows,
                "--",
            ])
            .args(&cmd)
            .current_dir(&home.work)
            .output()
            .unwrap();
        assert!(
            started.status.success(),
            "tmux did not start: {}",
            String::from_utf8_lossy(&started.stderr)
        );
        Some(screen)
    }

    pub fn tmux(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket).args(args);
        c
    }

    /// The screen as text; with `-e`, with its colour escapes.
    pub fn read(&self, escapes: bool) -> String {
        let mut args = vec!["capture-pane", "-p", "-t", "top"];
        if escapes {
            args.push("-e");
        }
        let out = self.tmux(&args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn keys(&self, keys: &[&str]) {
        for k in keys {
            let sent = self.tmux(&["send-keys", "-t", "top", k]).status().unwrap();
            assert!(sent.success(), "tmux send-keys {k}");
            // Each key is read before the next is sent, as a person types.
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    /// Waits (bounded) for the screen to satisfy `f`; fails showing the last screen.
    pub fn until(&self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        let held = wait_until(SHOWN_WITHIN, || {
            last = self.read(false);
            f(&last)
        });
        assert!(held, "the screen never showed {what}:\n{last}");
        last
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]).stderr(Stdio::null()).status();
    }
}
