//! What survives the capsule: the running totals several processes add to, and the machine's
//! daily spend ledger, under `$MURMUR_HOME/spend/` (0700, files 0600, hidden from every
//! harness).
//!
//! - A [`Counter`] is a 16-byte file (tokens, then billionths of a dollar, little-endian) that
//!   every capsule of one scope adds to under `flock`: a formation's members and sub-capsules
//!   (`formations/<launch>.total`), or every capsule of the machine on one UTC day
//!   (`<day>.total`). A write is one `pwrite` under the lock, so a `kill -9` at any point leaves
//!   the last whole figure.
//! - The ledger (`<day>.jsonl`) has one line per model call, appended with one `write`:
//!   formation, member, capsule, session, task, model, tokens, cost. `mur spend` reads it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::manifest::Usd;

/// Tokens and dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub tokens: u64,
    pub usd: Usd,
}

impl Totals {
    pub fn add(&mut self, more: Totals) {
        self.tokens = self.tokens.saturating_add(more.tokens);
        self.usd = self.usd.saturating_add(more.usd);
    }
}

/// A running total shared by processes through a file.
pub struct Counter {
    path: PathBuf,
    file: File,
    /// `flock` excludes other processes, not this one's threads.
    here: Mutex<()>,
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Counter({})", self.path.display())
    }
}

impl Counter {
    /// Opens (creating, 0600) the counter at `path`, its folder made 0700.
    pub fn open(path: &Path) -> std::io::Result<Counter> {
        if let Some(dir) = path.parent() {
            crate::private::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode_private()
            .open(path)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(Counter {
            path: path.to_owned(),
            file,
            here: Mutex::new(()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The totals now.
    pub fn read(&self) -> std::io::Result<Totals> {
        let _here = self.here.lock().unwrap_or_else(|p| p.into_inner());
        let _lock = Flock::take(&self.file, libc::LOCK_SH)?;
        self.read_locked()
    }

    /// Adds `more`; answers the totals after.
    pub fn add(&self, more: Totals) -> std::io::Result<Totals> {
        let _here = self.here.lock().unwrap_or_else(|p| p.into_inner());
        let _lock = Flock::take(&self.file, libc::LOCK_EX)?;
        let mut now = self.read_locked()?;
        now.add(more);
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&now.tokens.to_le_bytes());
        bytes[8..].copy_from_slice(&now.usd.0.to_le_bytes());
        self.file.write_all_at(&bytes, 0)?;
        Ok(now)
    }

    fn read_locked(&self) -> std::io::Result<Totals> {
        let mut bytes = [0u8; 16];
        let mut got = 0;
        while got < bytes.len() {
            match self.file.read_at(&mut bytes[got..], got as u64)? {
                0 => break,
                n => got += n,
            }
        }
        if got < bytes.len() {
            // A new counter (or one cut short by a full disk) counts from what it holds whole.
            return Ok(Totals::default());
        }
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(w)
        };
        Ok(Totals {
            tokens: word(0),
            usd: Usd(word(8)),
        })
    }
}

trait PrivateMode {
    fn mode_private(&mut self) -> &mut Self;
}

impl PrivateMode for std::fs::OpenOptions {
    fn mode_private(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(crate::private::FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
    }
}

/// An `flock` held until dropped.
struct Flock<'f>(&'f File);

impl<'f> Flock<'f> {
    fn take(file: &'f File, how: libc::c_int) -> std::io::Result<Flock<'f>> {
        use std::os::fd::AsRawFd;
        loop {
            // SAFETY: flock on a descriptor this File owns; it touches no memory.
            if unsafe { libc::flock(file.as_raw_fd(), how) } == 0 {
                return Ok(Flock(file));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: as in `take`.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// One line of the ledger: one model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub timestamp: String,
    /// The formation's name; `None` for a capsule launched alone.
    pub formation: Option<String>,
    /// The member's name in its formation.
    pub member: Option<String>,
    pub capsule: String,
    pub session_id: String,
    pub task_id: String,
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// What the ceilings counted: every token, or the request's `max_tokens` when unmetered.
    pub tokens: u64,
    /// Dollars, when the model has a price.
    pub usd: Option<f64>,
    /// Whether the provider reported the usage.
    pub metered: bool,
}

/// The ledger folder of a murmur home.
pub fn folder(home: &Path) -> PathBuf {
    home.join("spend")
}

/// The UTC day of now, `2026-12-03`.
pub fn today() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}",
        now.year(),
        u8::from(now.month()),
        now.day()
    )
}

/// A day, its counter and its ledger file.
type Today = (String, std::sync::Arc<Counter>, std::sync::Arc<File>);

/// The machine's ledger and its daily total, for the day it is.
pub struct Daily {
    folder: PathBuf,
    day: Mutex<Option<Today>>,
}

impl Daily {
    pub fn new(folder: PathBuf) -> Daily {
        Daily {
            folder,
            day: Mutex::new(None),
        }
    }

    /// The counter and ledger of today, opened once a day.
    fn today(&self) -> std::io::Result<(std::sync::Arc<Counter>, std::sync::Arc<File>)> {
        let day = today();
        let mut held = self.day.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((d, c, f)) = held.as_ref() {
            if *d == day {
                return Ok((c.clone(), f.clone()));
            }
        }
        let counter =
            std::sync::Arc::new(Counter::open(&self.folder.join(format!("{day}.total")))?);
        let ledger = std::sync::Arc::new(crate::private::open(
            &self.folder.join(format!("{day}.jsonl")),
            true,
        )?);
        *held = Some((day, counter.clone(), ledger.clone()));
        Ok((counter, ledger))
    }

    /// Today's totals.
    pub fn totals(&self) -> std::io::Result<Totals> {
        self.today()?.0.read()
    }

    /// Adds one call to today's total and ledger.
    pub fn record(&self, entry: &Entry, counted: Totals) -> std::io::Result<()> {
        let (counter, ledger) = self.today()?;
        counter.add(counted)?;
        let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        line.push(b'\n');
        use std::io::Write;
        (&*ledger).write_all(&line)
    }
}

/// Every entry of the ledger of `day` under `home`, in order; lines that do not read are
/// skipped (a line cut by a full disk).
pub fn entries(home: &Path, day: &str) -> std::io::Result<Vec<Entry>> {
    let path = folder(home).join(format!("{day}.jsonl"));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("murmur-ledger-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn counters_add_across_handles_and_survive_reopening() {
        let dir = temp("counter");
        let path = dir.join("formations").join("x.total");
        let a = Counter::open(&path).unwrap();
        let b = Counter::open(&path).unwrap();
        assert_eq!(a.read().unwrap(), Totals::default());
        a.add(Totals {
            tokens: 1500,
            usd: Usd(7),
        })
        .unwrap();
        let after = b
            .add(Totals {
                tokens: 1500,
                usd: Usd(3),
            })
            .unwrap();
        assert_eq!(
            after,
            Totals {
                tokens: 3000,
                usd: Usd(10)
            }
        );
        drop((a, b));
        assert_eq!(Counter::open(&path).unwrap().read().unwrap().tokens, 3000);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_daily_ledger_holds_one_line_per_call() {
        let home = temp("daily");
        let daily = Daily::new(folder(&home));
        let entry = Entry {
            timestamp: "2026-12-03T10:00:00.000Z".into(),
            formation: Some("f".into()),
            member: Some("lead".into()),
            capsule: "lead".into(),
            session_id: "ses_1".into(),
            task_id: "tsk_1".into(),
            model: "m".into(),
            input_tokens: 1000,
            output_tokens: 500,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            tokens: 1500,
            usd: None,
            metered: true,
        };
        for _ in 0..2 {
            daily
                .record(
                    &entry,
                    Totals {
                        tokens: 1500,
                        usd: Usd(0),
                    },
                )
                .unwrap();
        }
        assert_eq!(daily.totals().unwrap().tokens, 3000);
        assert_eq!(
            entries(&home, &today()).unwrap(),
            vec![entry.clone(), entry]
        );
        std::fs::remove_dir_all(&home).unwrap();
    }
}
