//! `mur top [ADDRESS] [--once]`: every running session, or one launch, live (DESIGN §2 `top`).
//! Built on what the doors already serve and the records already hold — each session's
//! murmur.WatchSession and ListTasks, its trace, the running-capsule folder — so watching adds
//! no server and no polling: the streams push, and the kernel says when a file changed.
//!
//! The parts: [`board`] is what is known, [`feed`] where it comes from, [`view`] what the
//! viewer chose and what keys do, [`screen`] the drawing, [`snapshot`] the same board as text
//! (`--once`, or any stdout that is not a terminal), [`cells`] the words both use.

mod board;
mod cells;
mod feed;
#[cfg(test)]
mod forged;
mod live;
mod screen;
mod snapshot;
mod view;

use crate::error::CliResult;
use crate::records;
use board::{Board, Scope};

fn scope(address: Option<&str>) -> CliResult<Scope> {
    Ok(match address {
        Some(a) => Scope::LaunchOf(Box::new(records::resolve_running(Some(a))?)),
        None => Scope::Everything,
    })
}

/// One snapshot as text: the sessions in scope, each door asked once.
pub async fn snapshot(address: Option<&str>) -> CliResult<String> {
    let mut board = Board::new(scope(address)?);
    board.set_records(records::running());
    snapshot::fill(&mut board).await;
    Ok(snapshot::text(&board, capsule::clock::Millis::now().0))
}

/// The full-screen view, until the viewer quits; `color` false draws marks without colour.
pub async fn live(address: Option<&str>, color: bool) -> CliResult<i32> {
    live::run(Board::new(scope(address)?), color).await
}
