//! The Spend section of `mur trace show`: what a session's model calls used, summed over its
//! `inference` records (an http capsule's loop and a harness's gateway write the same), and each
//! call a spend ceiling refused (`spend_ceiling`). Empty when the session made no call.

use serde_json::Value;

use super::{rule, s, short};

pub fn section(events: &[Value]) -> String {
    let calls: Vec<&Value> = events
        .iter()
        .filter(|e| s(e, "event_type") == "inference")
        .collect();
    let stops: Vec<&Value> = events
        .iter()
        .filter(|e| s(e, "event_type") == "spend_ceiling")
        .collect();
    if calls.is_empty() && stops.is_empty() {
        return String::new();
    }
    let sum = |key: &str| -> u64 { calls.iter().filter_map(|e| e[key].as_u64()).sum() };
    // An http capsule's record counts input and output; the gateway's says what it counted.
    let counted: u64 = calls
        .iter()
        .map(|e| {
            e["counted_tokens"].as_u64().unwrap_or_else(|| {
                e["input_tokens"].as_u64().unwrap_or(0) + e["output_tokens"].as_u64().unwrap_or(0)
            })
        })
        .sum();
    let priced: Vec<f64> = calls.iter().filter_map(|e| e["usd"].as_f64()).collect();
    let usd = match priced.len() {
        0 => "unpriced".to_owned(),
        n if n == calls.len() => format!("${:.4}", priced.iter().sum::<f64>()),
        n => format!(
            "${:.4} ({} of {} calls priced)",
            priced.iter().sum::<f64>(),
            n,
            calls.len()
        ),
    };
    let unmetered = calls.iter().filter(|e| e["metered"] == false).count();
    let mut out = rule("Spend");
    out.push('\n');
    out.push_str(&format!(
        "calls: {}  tokens: {counted}  in: {}  out: {}  cache read: {}  cache write: {}  cost: {usd}\n",
        calls.len(),
        sum("input_tokens"),
        sum("output_tokens"),
        sum("cache_read_tokens"),
        sum("cache_write_tokens"),
    ));
    if unmetered > 0 {
        out.push_str(&format!(
            "unmetered: {unmetered} (counted as the max_tokens they asked for)\n"
        ));
    }
    for e in stops {
        out.push_str(&format!(
            "{}  refused by {} ({}): used {}, ceiling {}\n",
            short(s(e, "task_id")),
            s(e, "key"),
            s(e, "scope"),
            s(e, "used"),
            s(e, "ceiling"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_are_summed_and_refusals_named() {
        let events = vec![
            json!({"event_type": "inference", "task_id": "tsk_0123456789ab", "input_tokens": 1000,
                   "output_tokens": 500, "cache_read_tokens": 0, "cache_write_tokens": 0,
                   "counted_tokens": 1500, "usd": 0.01, "metered": true}),
            json!({"event_type": "inference", "task_id": "tsk_0123456789ab", "input_tokens": 0,
                   "output_tokens": 0, "counted_tokens": 64, "usd": null, "metered": false}),
            json!({"event_type": "spend_ceiling", "task_id": "tsk_0123456789ab", "scope": "task",
                   "key": "spend.max_tokens_per_task", "used": "1564 tokens",
                   "ceiling": "1000 tokens"}),
        ];
        assert_eq!(
            section(&events),
            format!(
                "{}\ncalls: 2  tokens: 1564  in: 1000  out: 500  cache read: 0  cache write: 0  \
                 cost: $0.0100 (1 of 2 calls priced)\nunmetered: 1 (counted as the max_tokens \
                 they asked for)\ntsk_01234567  refused by spend.max_tokens_per_task (task): \
                 used 1564 tokens, ceiling 1000 tokens\n",
                rule("Spend")
            )
        );
        assert_eq!(section(&[json!({"event_type": "task_start"})]), "");
    }
}
