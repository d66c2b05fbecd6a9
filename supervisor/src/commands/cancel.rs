//! `mur cancel ADDRESS TASK_ID`: CancelTask, printing the residue. A task that already ended is
//! "nothing to cancel" and exits 0.

use crate::error::CliResult;
use crate::records;
use crate::stopping;

pub async fn run(address: &str, task: &str) -> CliResult<i32> {
    let rec = records::resolve_running(Some(address))?;
    for line in stopping::cancel(&rec, task).await? {
        println!("{line}");
    }
    Ok(0)
}
