//! `mur spend [--day YYYY-MM-DD] [--json]`: the machine's spend ledger for one UTC day (today
//! by default), summed per formation, member and model, against the daily ceilings
//! (docs/keys-and-spend.md). The model's name is what the provider (or the harness's request)
//! said: every name is printed through `terminal::field`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use capsule::gateway::ledger::{self, Entry};
use capsule::gateway::DailyCeiling;
use capsule::manifest::Usd;

use crate::error::{CliError, CliResult, Code};
use crate::records;
use crate::terminal::field;

/// One row: what one member (or lone capsule) spent on one model.
#[derive(Default)]
struct Row {
    calls: u64,
    unmetered: u64,
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    tokens: u64,
    usd: Option<Usd>,
}

impl Row {
    fn add(&mut self, e: &Entry) {
        self.calls += 1;
        self.unmetered += u64::from(!e.metered);
        self.input += e.input_tokens;
        self.output += e.output_tokens;
        self.cache_read += e.cache_read_tokens;
        self.cache_write += e.cache_write_tokens;
        self.tokens += e.tokens;
        if let Some(d) = e.usd {
            self.usd = Some(
                self.usd
                    .unwrap_or_default()
                    .saturating_add(Usd::from_dollars(d)),
            );
        }
    }
}

/// (formation, member or capsule, model) → what it spent.
type Key = (String, String, String);

pub fn run(day: Option<&str>, as_json: bool) -> CliResult<i32> {
    let day = match day {
        Some(d) if is_day(d) => d.to_owned(),
        Some(d) => {
            return Err(CliError::new(
                Code::BadArgument,
                format!("--day {d:?} is not a day"),
                "write the UTC day as YYYY-MM-DD, e.g. --day 2026-12-03",
            ))
        }
        None => ledger::today(),
    };
    let home = records::home();
    let entries = ledger::entries(&home, &day).map_err(|e| {
        CliError::new(
            Code::Records,
            format!("cannot read the spend ledger of {day}: {e}"),
            "check that $MURMUR_HOME/spend is readable",
        )
    })?;
    let mut rows: BTreeMap<Key, Row> = BTreeMap::new();
    let mut total = Row::default();
    for e in &entries {
        let formation = e.formation.clone().unwrap_or_default();
        let who = e.member.clone().unwrap_or_else(|| e.capsule.clone());
        rows.entry((formation, who, e.model.clone()))
            .or_default()
            .add(e);
        total.add(e);
    }
    let ceiling = DailyCeiling::from_env()
        .map_err(|why| CliError::new(Code::BadArgument, why, "fix the variable, or unset it"))?;
    let text = match as_json {
        true => format!("{:#}\n", as_value(&day, &rows, &total, ceiling)),
        false => as_text(&day, &rows, &total, ceiling),
    };
    super::emit(&text);
    Ok(0)
}

fn is_day(d: &str) -> bool {
    let b = d.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

fn usd_shown(u: Option<Usd>) -> String {
    u.map_or_else(|| "unpriced".to_owned(), |u| u.to_string())
}

fn as_text(day: &str, rows: &BTreeMap<Key, Row>, total: &Row, ceiling: DailyCeiling) -> String {
    let mut out = format!(
        "spend on {day} (UTC): {} tokens, {} in {} calls\n",
        total.tokens,
        usd_shown(total.usd),
        total.calls
    );
    if let Some(t) = ceiling.tokens {
        out.push_str(&format!(
            "  daily ceiling: {t} tokens ({})\n",
            DailyCeiling::TOKENS
        ));
    }
    if let Some(u) = ceiling.usd {
        out.push_str(&format!("  daily ceiling: {u} ({})\n", DailyCeiling::USD));
    }
    let mut formation: Option<&str> = None;
    for ((f, who, model), r) in rows {
        if formation != Some(f.as_str()) {
            formation = Some(f.as_str());
            match f.is_empty() {
                true => out.push_str("capsules launched alone\n"),
                false => out.push_str(&format!("formation {}\n", field(f))),
            }
        }
        let unmetered = match r.unmetered {
            0 => String::new(),
            n => format!(" ({n} unmetered)"),
        };
        out.push_str(&format!(
            "  {}  {}  {} tokens ({} in, {} out, {} cache read, {} cache write)  {}  {} calls{unmetered}\n",
            field(who),
            field(model),
            r.tokens, r.input, r.output, r.cache_read, r.cache_write, usd_shown(r.usd), r.calls
        ));
    }
    out
}

fn row_value(r: &Row) -> Value {
    json!({
        "calls": r.calls,
        "unmetered_calls": r.unmetered,
        "tokens": r.tokens,
        "input_tokens": r.input,
        "output_tokens": r.output,
        "cache_read_tokens": r.cache_read,
        "cache_write_tokens": r.cache_write,
        "usd": r.usd.map(Usd::dollars),
    })
}

fn as_value(day: &str, rows: &BTreeMap<Key, Row>, total: &Row, ceiling: DailyCeiling) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|((f, who, model), r)| {
            let mut v = json!({
                "formation": (!f.is_empty()).then_some(f),
                "member": who,
                "model": model,
            });
            if let (Some(o), Value::Object(more)) = (v.as_object_mut(), row_value(r)) {
                o.extend(more);
            }
            v
        })
        .collect();
    json!({
        "day": day,
        "total": row_value(total),
        "ceiling": {
            "tokens": ceiling.tokens,
            "usd": ceiling.usd.map(Usd::dollars),
        },
        "rows": rows,
    })
}
