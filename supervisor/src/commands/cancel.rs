//! `mur cancel ADDRESS TASK_ID`: CancelTask, printing the residue. A task that already ended is
//! "nothing to cancel" and exits 0.

use serde_json::{json, Value};

use super::{refused, residue_lines};
use crate::client;
use crate::error::CliResult;
use crate::records;

pub async fn run(address: &str, task: &str) -> CliResult<i32> {
    let rec = records::resolve_running(Some(address))?;
    let door = client::DoorRef::of(&rec);
    match client::rpc(&door, "CancelTask", json!({"id": task})).await? {
        Ok(t) => {
            println!(
                "canceled: {}",
                t.get("id").and_then(Value::as_str).unwrap_or(task)
            );
            let items: Vec<Value> = t
                .get("artifacts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|a| a.get("artifactId").and_then(Value::as_str) == Some("residue"))
                .flat_map(|a| {
                    a.get("parts")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                })
                .filter_map(|p| p.get("data").cloned())
                .collect();
            for line in residue_lines(&items) {
                println!("{line}");
            }
            Ok(0)
        }
        Err(e) if e.get("code").and_then(Value::as_i64) == Some(-32002) => {
            let state = e
                .pointer("/data/0/metadata/state")
                .and_then(Value::as_str)
                .unwrap_or("ended");
            println!("nothing to cancel: task {task} is already {state}");
            Ok(0)
        }
        Err(e) => Err(refused(&rec.url, &e)),
    }
}
