//! The spend ceilings (docs/keys-and-spend.md): what a task, the session, the formation and the
//! machine today have used, checked before each model call is forwarded and added to after it.
//! A scope whose ceiling is reached refuses every call after, so it overshoots by at most the
//! calls already in flight when it crossed. The table of scopes is [`Scope`]; the order they
//! are checked in is [`Spend::check`]'s.
//!
//! Over 600 lines with its unit tests (the ceilings' table and checks alone are under 500).

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;

use super::ledger::{Counter, Daily, Entry, Totals};
use super::meter::Usage;
use crate::manifest::{Price, SpendPolicy, Usd};

/// What a ceiling covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Task,
    Session,
    Formation,
    /// Every capsule of this machine (this `$MURMUR_HOME`) on one UTC day.
    Machine,
}

impl Scope {
    /// The trace's word.
    pub fn word(self) -> &'static str {
        match self {
            Scope::Task => "task",
            Scope::Session => "session",
            Scope::Formation => "formation",
            Scope::Machine => "machine",
        }
    }

    fn named(self, formation: Option<&str>) -> String {
        match (self, formation) {
            (Scope::Task, _) => "the task".into(),
            (Scope::Session, _) => "the session".into(),
            (Scope::Formation, Some(name)) => format!("the formation {name}"),
            (Scope::Formation, None) => "the formation".into(),
            (Scope::Machine, _) => "this machine today".into(),
        }
    }
}

/// A refused call: which ceiling, and the figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stop {
    pub scope: Scope,
    /// Where the ceiling is set: `spend.max_tokens_per_task`, `MURMUR_SPEND_DAILY_USD`, …
    pub key: String,
    /// What was used, as said (`3000 tokens`, `$2.0000`).
    pub used: String,
    /// The ceiling, as said.
    pub ceiling: String,
    /// The task's status (and the refusal's message).
    pub sentence: String,
}

impl Stop {
    /// Fails a refused call's `chat` span with this ceiling (docs/telemetry.md).
    pub fn fail_span(&self, span: &mut crate::telemetry::Span) {
        use crate::telemetry::{keys, KeyValue};
        span.event(
            keys::EV_SPEND_CEILING,
            vec![
                KeyValue::new("murmur.spend.scope", self.scope.word()),
                KeyValue::new("murmur.spend.key", self.key.clone()),
            ],
        );
        span.fail("spend_ceiling", self.sentence.clone());
    }
}

/// The machine's daily ceilings, from `MURMUR_SPEND_DAILY_TOKENS` and `MURMUR_SPEND_DAILY_USD`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DailyCeiling {
    pub tokens: Option<u64>,
    pub usd: Option<Usd>,
}

impl DailyCeiling {
    pub const TOKENS: &'static str = "MURMUR_SPEND_DAILY_TOKENS";
    pub const USD: &'static str = "MURMUR_SPEND_DAILY_USD";

    /// Read from the environment; a value that does not read is an error naming it.
    pub fn from_env() -> Result<DailyCeiling, String> {
        let read = |name: &str| std::env::var(name).ok();
        DailyCeiling::parse(read(Self::TOKENS).as_deref(), read(Self::USD).as_deref())
    }

    /// The two variables' values (unset or blank: no ceiling).
    pub fn parse(tokens: Option<&str>, usd: Option<&str>) -> Result<DailyCeiling, String> {
        let set = |v: Option<&str>| {
            v.map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let tokens = set(tokens)
            .map(|v| match v.parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!(
                    "{} is {v:?}: write a whole number of tokens above 0, e.g. 5000000",
                    Self::TOKENS
                )),
            })
            .transpose()?;
        let usd = set(usd)
            .map(|v| match v.parse::<f64>() {
                Ok(d) if d.is_finite() && d > 0.0 && d < 1e9 => Ok(Usd::from_dollars(d)),
                _ => Err(format!(
                    "{} is {v:?}: write a number of US dollars above 0, e.g. 20",
                    Self::USD
                )),
            })
            .transpose()?;
        Ok(DailyCeiling { tokens, usd })
    }
}

/// A formation's scope, shared by its members and sub-capsules through a [`Counter`].
#[derive(Debug)]
pub struct Shared {
    pub name: String,
    pub policy: SpendPolicy,
    pub counter: Counter,
}

/// Who a ledger line is about.
#[derive(Debug, Clone, Default)]
pub struct Who {
    pub formation: Option<String>,
    pub member: Option<String>,
    pub capsule: String,
    pub session_id: String,
}

/// What one call counted for, once it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    pub tokens: u64,
    pub usd: Option<Usd>,
}

/// One capsule's view of every scope it is in.
pub struct Spend {
    own: SpendPolicy,
    formation: Option<Shared>,
    daily: Option<Daily>,
    daily_ceiling: DailyCeiling,
    who: Who,
    tasks: Mutex<HashMap<String, Totals>>,
    session: Mutex<Totals>,
    /// The refusal that stopped each task, for its ending.
    stopped: Mutex<HashMap<String, Stop>>,
    /// Told the session's totals after each call, and the call's ledger line: the session's
    /// store keeps them, so a restarted capsule's session ceiling counts what it spent before.
    journal: Option<SpendJournal>,
}

/// What the session's store is told of each call: the session's totals after it, and its
/// ledger line.
pub type SpendJournal = std::sync::Arc<dyn Fn(Totals, &Entry) + Send + Sync>;

impl Spend {
    pub fn new(
        own: SpendPolicy,
        formation: Option<Shared>,
        daily: Option<Daily>,
        daily_ceiling: DailyCeiling,
        who: Who,
    ) -> Spend {
        Spend {
            own,
            formation,
            daily,
            daily_ceiling,
            who,
            tasks: Mutex::new(HashMap::new()),
            session: Mutex::new(Totals::default()),
            stopped: Mutex::new(HashMap::new()),
            journal: None,
        }
    }

    /// Starts from what the session spent before its restart, and tells `journal` of every
    /// total from now on.
    pub fn restored(mut self, spent: Totals, journal: SpendJournal) -> Spend {
        self.session
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .add(spent);
        self.journal = Some(journal);
        self
    }

    /// No ceiling, no ledger: what a capsule started without a home has.
    pub fn none() -> Spend {
        Spend::new(
            SpendPolicy::default(),
            None,
            None,
            DailyCeiling::default(),
            Who::default(),
        )
    }

    /// The price of `model`: the capsule's own, else its formation's.
    pub fn price(&self, model: &str) -> Option<Price> {
        self.own.prices.get(model).copied().or_else(|| {
            self.formation
                .as_ref()
                .and_then(|f| f.policy.prices.get(model).copied())
        })
    }

    /// The task ceiling: the capsule's, or the formation's for each member's tasks; the lower
    /// when both are set.
    fn task_ceiling(&self) -> Option<(u64, String)> {
        let own = self
            .own
            .max_tokens_per_task
            .map(|c| (c, "spend.max_tokens_per_task".to_owned()));
        let theirs = self.formation.as_ref().and_then(|f| {
            f.policy.max_tokens_per_task.map(|c| {
                (
                    c,
                    format!("spend.max_tokens_per_task of the formation {}", f.name),
                )
            })
        });
        match (own, theirs) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// Whether a call of `task_id` to `model` may go out now.
    pub fn check(&self, task_id: &str, model: Option<&str>) -> Result<(), Stop> {
        let task = self.task_totals(task_id);
        if let Some((ceiling, key)) = self.task_ceiling() {
            tokens_within(Scope::Task, None, task.tokens, ceiling, &key)?;
        }
        let session = *self.session.lock().unwrap_or_else(|p| p.into_inner());
        self.within(
            Scope::Session,
            None,
            session,
            self.own.max_tokens,
            self.own.max_usd,
            "",
            model,
        )?;
        if let Some(f) = &self.formation {
            if f.policy.has_ceiling() {
                // A counter that cannot be read stops the call: a ceiling fails closed.
                let used = f
                    .counter
                    .read()
                    .map_err(|e| unreadable(Scope::Formation, &e))?;
                let prefix = format!(" of the formation {}", f.name);
                self.within(
                    Scope::Formation,
                    Some(&f.name),
                    used,
                    f.policy.max_tokens,
                    f.policy.max_usd,
                    &prefix,
                    model,
                )?;
            }
        }
        let d = self.daily_ceiling;
        if d.tokens.is_some() || d.usd.is_some() {
            let used = match &self.daily {
                Some(daily) => daily.totals().map_err(|e| unreadable(Scope::Machine, &e))?,
                None => Totals::default(),
            };
            if let Some(c) = d.tokens {
                tokens_within(Scope::Machine, None, used.tokens, c, DailyCeiling::TOKENS)?;
            }
            if let Some(c) = d.usd {
                self.priced(Scope::Machine, None, model, DailyCeiling::USD)?;
                usd_within(Scope::Machine, None, used.usd, c, DailyCeiling::USD)?;
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn within(
        &self,
        scope: Scope,
        formation: Option<&str>,
        used: Totals,
        tokens: Option<u64>,
        usd: Option<Usd>,
        whose_key: &str,
        model: Option<&str>,
    ) -> Result<(), Stop> {
        if let Some(c) = tokens {
            let key = format!("spend.max_tokens{whose_key}");
            tokens_within(scope, formation, used.tokens, c, &key)?;
        }
        if let Some(c) = usd {
            let key = format!("spend.max_usd{whose_key}");
            self.priced(scope, formation, model, &key)?;
            usd_within(scope, formation, used.usd, c, &key)?;
        }
        Ok(())
    }

    /// A ceiling in dollars cannot hold a call to a model without a price.
    fn priced(
        &self,
        scope: Scope,
        formation: Option<&str>,
        model: Option<&str>,
        key: &str,
    ) -> Result<(), Stop> {
        let model = model.unwrap_or("a model the request does not name");
        if self.price(model).is_some() {
            return Ok(());
        }
        let whose = scope.named(formation);
        Err(Stop {
            scope,
            key: key.to_owned(),
            used: String::new(),
            ceiling: String::new(),
            sentence: format!(
                "a spend ceiling stopped it: {whose} has a ceiling in dollars ({key}), and \
                 {model} has no price; add it under spend.prices"
            ),
        })
    }

    fn task_totals(&self, task_id: &str) -> Totals {
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(task_id)
            .copied()
            .unwrap_or_default()
    }

    /// Adds a call that ended to every scope, and to the ledger. `usage` is what the provider
    /// reported; without it the call counts as `asked_max` output tokens.
    pub fn record(
        &self,
        task_id: &str,
        model: &str,
        usage: Option<&Usage>,
        asked_max: u64,
    ) -> Counted {
        let tokens = usage.map_or(asked_max, Usage::tokens);
        let price = self.price(model);
        let usd = price.map(|p| match usage {
            Some(u) => Usd::of_tokens(u.input, p.input)
                .saturating_add(Usd::of_tokens(u.output, p.output))
                .saturating_add(Usd::of_tokens(u.cache_read, p.cache_read))
                .saturating_add(Usd::of_tokens(u.cache_write, p.cache_write)),
            None => Usd::of_tokens(asked_max, p.output),
        });
        let counted = Totals {
            tokens,
            usd: usd.unwrap_or_default(),
        };
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(task_id.to_owned())
            .or_default()
            .add(counted);
        let u = usage.cloned().unwrap_or_default();
        let entry = Entry {
            timestamp: crate::clock::Millis::now().rfc3339(),
            formation: self.who.formation.clone(),
            member: self.who.member.clone(),
            capsule: self.who.capsule.clone(),
            session_id: self.who.session_id.clone(),
            task_id: task_id.to_owned(),
            model: model.to_owned(),
            input_tokens: u.input,
            output_tokens: u.output,
            cache_read_tokens: u.cache_read,
            cache_write_tokens: u.cache_write,
            tokens,
            usd: usd.map(Usd::dollars),
            metered: usage.is_some(),
        };
        {
            let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
            session.add(counted);
            // Under the lock: the store is told the totals in the order they grew.
            if let Some(journal) = &self.journal {
                journal(*session, &entry);
            }
        }
        if let Some(f) = &self.formation {
            if let Err(e) = f.counter.add(counted) {
                eprintln!("murmur: the formation's spend could not be counted: {e}");
            }
        }
        if let Some(daily) = &self.daily {
            if let Err(e) = daily.record(&entry, counted) {
                eprintln!("murmur: the spend ledger could not be written: {e}");
            }
        }
        Counted { tokens, usd }
    }

    /// Notes that `stop` refused a call of `task_id`: its ending says so.
    pub fn stopped_task(&self, task_id: &str, stop: Stop) {
        self.stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(task_id.to_owned())
            .or_insert(stop);
    }

    /// The refusal that stopped `task_id`, if one did; forgets the task's figures.
    pub fn end_task(&self, task_id: &str) -> Option<Stop> {
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(task_id);
        self.stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(task_id)
    }

    /// What the session has used.
    pub fn session_totals(&self) -> Totals {
        *self.session.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn tokens_within(
    scope: Scope,
    formation: Option<&str>,
    used: u64,
    ceiling: u64,
    key: &str,
) -> Result<(), Stop> {
    // The sentence names the unit once: "used 3000 tokens, and its ceiling is 2000".
    let said = |n: u64| format!("{n} tokens");
    under(
        scope,
        formation,
        (used, ceiling),
        key,
        (said, |n: u64| n.to_string()),
    )
}

fn usd_within(
    scope: Scope,
    formation: Option<&str>,
    used: Usd,
    ceiling: Usd,
    key: &str,
) -> Result<(), Stop> {
    let said = |u: Usd| u.to_string();
    under(scope, formation, (used, ceiling), key, (said, said))
}

/// `used` against `ceiling`: the [`Stop`] once the ceiling is reached, each figure said by
/// `said`, and the ceiling in the sentence by `in_sentence`.
fn under<T: PartialOrd + Copy>(
    scope: Scope,
    formation: Option<&str>,
    (used, ceiling): (T, T),
    key: &str,
    (said, in_sentence): (impl Fn(T) -> String, impl Fn(T) -> String),
) -> Result<(), Stop> {
    if used < ceiling {
        return Ok(());
    }
    let whose = scope.named(formation);
    let sentence = format!(
        "a spend ceiling stopped it: {whose} used {}, and its ceiling is {} ({key})",
        said(used),
        in_sentence(ceiling)
    );
    Err(Stop {
        scope,
        key: key.to_owned(),
        used: said(used),
        ceiling: said(ceiling),
        sentence,
    })
}

fn unreadable(scope: Scope, e: &std::io::Error) -> Stop {
    Stop {
        scope,
        key: String::new(),
        used: String::new(),
        ceiling: String::new(),
        sentence: format!(
            "a spend ceiling stopped it: what {} used cannot be read ({e}), and a ceiling \
             holds when it cannot be checked",
            scope.named(None)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input,
            output,
            ..Default::default()
        }
    }

    fn policy(per_task: Option<u64>, session: Option<u64>) -> SpendPolicy {
        SpendPolicy {
            max_tokens_per_task: per_task,
            max_tokens: session,
            ..Default::default()
        }
    }

    #[test]
    fn a_task_ceiling_lets_calls_out_until_it_is_reached() {
        let spend = Spend::new(
            policy(Some(2000), None),
            None,
            None,
            DailyCeiling::default(),
            Who::default(),
        );
        let mut out = 0;
        while spend.check("tsk_1", Some("m")).is_ok() {
            spend.record("tsk_1", "m", Some(&usage(1000, 500)), 0);
            out += 1;
        }
        assert_eq!(out, 2, "1500 then 3000 tokens: the third call is refused");
        let stop = spend.check("tsk_1", Some("m")).unwrap_err();
        assert_eq!(
            stop.sentence,
            "a spend ceiling stopped it: the task used 3000 tokens, and its ceiling is 2000 \
             (spend.max_tokens_per_task)"
        );
        assert_eq!(stop.scope, Scope::Task);
        assert!(
            spend.check("tsk_2", Some("m")).is_ok(),
            "another task has its own"
        );
        assert_eq!(spend.end_task("tsk_1"), None);
        assert!(
            spend.check("tsk_1", Some("m")).is_ok(),
            "an ended task's figures go"
        );
    }

    #[test]
    fn a_restarted_session_counts_what_it_spent_before_and_tells_its_store() {
        let told = std::sync::Arc::new(Mutex::new(Vec::new()));
        let keep = told.clone();
        let spend = Spend::new(
            policy(None, Some(2000)),
            None,
            None,
            DailyCeiling::default(),
            Who::default(),
        )
        .restored(
            Totals {
                tokens: 1800,
                usd: Usd(0),
            },
            std::sync::Arc::new(move |t, _| keep.lock().unwrap().push(t.tokens)),
        );
        // The ceiling holds across the restart: 1800 before, one call of 300 after.
        assert!(spend.check("t", Some("m")).is_ok());
        spend.record("t", "m", Some(&usage(200, 100)), 0);
        assert_eq!(spend.session_totals().tokens, 2100);
        assert_eq!(
            *told.lock().unwrap(),
            [2100],
            "the store is told the new total"
        );
        let stop = spend.check("t2", Some("m")).unwrap_err();
        assert_eq!(stop.scope, Scope::Session);
    }

    #[test]
    fn the_session_unmetered_calls_and_dollars() {
        let mut own = policy(None, Some(10_000));
        own.max_usd = Some(Usd::from_dollars(1.0));
        own.prices.insert(
            "m".into(),
            Price {
                input: Usd::from_dollars(100_000.0),
                output: Usd::from_dollars(0.0),
                cache_read: Usd(0),
                cache_write: Usd(0),
            },
        );
        let spend = Spend::new(own, None, None, DailyCeiling::default(), Who::default());
        let stop = spend.check("t", Some("other")).unwrap_err();
        assert_eq!(
            stop.sentence,
            "a spend ceiling stopped it: the session has a ceiling in dollars (spend.max_usd), \
             and other has no price; add it under spend.prices"
        );
        // An unmetered call counts as the max_tokens it asked for.
        assert_eq!(spend.record("t", "m", None, 9_000).tokens, 9_000);
        assert!(spend.check("t", Some("m")).is_ok());
        let counted = spend.record("t", "m", Some(&usage(10, 0)), 0);
        assert_eq!(counted.usd, Some(Usd::from_dollars(1.0)));
        let stop = spend.check("t", Some("m")).unwrap_err();
        assert_eq!(
            stop.sentence,
            "a spend ceiling stopped it: the session used $1.0000, and its ceiling is $1.0000 \
             (spend.max_usd)"
        );
    }

    #[test]
    fn the_daily_variables_are_read_or_refused_saying_what_to_write() {
        assert_eq!(
            DailyCeiling::parse(Some(" 5000 "), Some("2.5")),
            Ok(DailyCeiling {
                tokens: Some(5000),
                usd: Some(Usd::from_dollars(2.5))
            })
        );
        assert_eq!(
            DailyCeiling::parse(None, Some("  ")),
            Ok(DailyCeiling::default())
        );
        assert_eq!(
            DailyCeiling::parse(Some("lots"), None),
            Err(
                "MURMUR_SPEND_DAILY_TOKENS is \"lots\": write a whole number of tokens above 0, \
                 e.g. 5000000"
                    .to_owned()
            )
        );
        assert_eq!(
            DailyCeiling::parse(Some("0"), None).unwrap_err(),
            "MURMUR_SPEND_DAILY_TOKENS is \"0\": write a whole number of tokens above 0, e.g. 5000000"
        );
        for bad in ["-1", "nan", "inf", "$5"] {
            assert_eq!(
                DailyCeiling::parse(None, Some(bad)).unwrap_err(),
                format!(
                    "MURMUR_SPEND_DAILY_USD is {bad:?}: write a number of US dollars above 0, e.g. 20"
                )
            );
        }
    }

    #[test]
    fn a_formation_ceiling_is_shared_through_its_counter() {
        let dir = std::env::temp_dir().join(format!("murmur-spend-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("f.total");
        let member = |name: &str| {
            Spend::new(
                SpendPolicy::default(),
                Some(Shared {
                    name: "review".into(),
                    policy: policy(None, Some(2500)),
                    counter: Counter::open(&path).unwrap(),
                }),
                None,
                DailyCeiling::default(),
                Who {
                    member: Some(name.into()),
                    ..Default::default()
                },
            )
        };
        let (a, b) = (member("a"), member("b"));
        a.record("t1", "m", Some(&usage(1000, 500)), 0);
        assert!(b.check("t2", Some("m")).is_ok());
        b.record("t2", "m", Some(&usage(1000, 500)), 0);
        for m in [&a, &b] {
            let stop = m.check("t3", Some("m")).unwrap_err();
            assert_eq!(
                stop.sentence,
                "a spend ceiling stopped it: the formation review used 3000 tokens, and its \
                 ceiling is 2500 (spend.max_tokens of the formation review)"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
