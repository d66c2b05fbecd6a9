//! The running capsules as `mur ps` and `mur top` list them: every record numbered by the `@N`
//! that `records::resolve_running` gives its session (newest first), formations gathered under a
//! heading with their members in roster order, and each sub-capsule under the capsule that
//! delegated to it (`↳`), at every depth. One listing, so both commands draw the same tree.

use crate::records::{self, RunningCapsule};

/// One line of the listing.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A formation launch: `formation NAME VERSION (entry MEMBER)`.
    Heading(String),
    Capsule(Box<Placed>),
}

/// A running capsule in its place: its address number, its record, and its label, which is
/// `NAME VERSION` for a lone capsule, `├─ MEMBER` / `└─ MEMBER` for a formation member, and
/// `↳ NAME VERSION`, indented by depth, for a sub-capsule.
#[derive(Debug, Clone)]
pub struct Placed {
    pub n: usize,
    pub rec: RunningCapsule,
    pub label: String,
}

/// Sub-capsules deeper than this are not followed (a record naming itself as its own ancestor
/// must not loop).
const MAX_DEPTH: usize = 16;

/// `all` as `records::running()` answers it (newest first), as the listing's lines.
pub fn list(all: Vec<RunningCapsule>) -> Vec<Entry> {
    let numbered: Vec<Placed> = all
        .into_iter()
        .enumerate()
        .map(|(i, rec)| Placed {
            n: i + 1,
            rec,
            label: String::new(),
        })
        .collect();
    let (children, top): (Vec<Placed>, Vec<Placed>) =
        numbered.into_iter().partition(|p| p.rec.parent.is_some());
    let mut lines = Vec::new();
    for group in groups(top) {
        for entry in group {
            let session = match &entry {
                Entry::Capsule(p) => p.rec.session_id.clone(),
                Entry::Heading(_) => String::new(),
            };
            lines.push(entry);
            lines.extend(children_of(&children, &session, 1));
        }
    }
    lines
}

/// A lone capsule is one line; a formation launch is its heading, then its members in roster
/// order. A launch is placed where its newest member is.
fn groups(top: Vec<Placed>) -> Vec<Vec<Entry>> {
    let mut launches: Vec<Vec<Placed>> = Vec::new();
    for p in top {
        let joined = launches
            .iter_mut()
            .find(|l| p.rec.formation.is_some() && records::same_launch(&l[0].rec, &p.rec));
        match joined {
            Some(l) => l.push(p),
            None => launches.push(vec![p]),
        }
    }
    launches.into_iter().map(launch_lines).collect()
}

fn launch_lines(mut members: Vec<Placed>) -> Vec<Entry> {
    if members[0].rec.formation.is_none() {
        let mut lone = members.remove(0);
        lone.label = format!("{} {}", lone.rec.name, lone.rec.version);
        return vec![Entry::Capsule(Box::new(lone))];
    }
    let heading = order_members(&mut members);
    let count = members.len();
    let mut lines = vec![Entry::Heading(heading)];
    for (i, mut p) in members.into_iter().enumerate() {
        let branch = if i + 1 == count { "└─" } else { "├─" };
        let member = p.rec.member.clone().unwrap_or_else(|| p.rec.name.clone());
        p.label = format!("{branch} {member}");
        lines.push(Entry::Capsule(Box::new(p)));
    }
    lines
}

/// Puts a formation's members in roster order and answers its heading:
/// `formation NAME VERSION (entry MEMBER)`, or `formation NAME` when its roster is unreadable.
fn order_members(members: &mut [Placed]) -> String {
    let name = members[0].rec.formation.clone().unwrap_or_default();
    let roster = members
        .iter()
        .find_map(|m| records::roster(&m.rec.records).ok().flatten());
    let order = roster.as_ref().map(|r| r.sessions()).unwrap_or_default();
    members.sort_by_key(|m| records::roster_rank(&order, &m.rec.session_id));
    match roster {
        Some(r) => format!("formation {name} {} (entry {})", r.version, r.entry),
        None => format!("formation {name}"),
    }
}

/// The sub-capsules `parent` delegated to, each followed by its own.
fn children_of(children: &[Placed], parent: &str, depth: usize) -> Vec<Entry> {
    let mut lines = Vec::new();
    if parent.is_empty() || depth > MAX_DEPTH {
        return lines;
    }
    for p in children
        .iter()
        .filter(|p| p.rec.parent.as_deref() == Some(parent))
    {
        let mut child = p.clone();
        child.label = format!(
            "{}↳ {} {}",
            "  ".repeat(depth - 1),
            p.rec.name,
            p.rec.version
        );
        let session = child.rec.session_id.clone();
        lines.push(Entry::Capsule(Box::new(child)));
        lines.extend(children_of(children, &session, depth + 1));
    }
    lines
}
