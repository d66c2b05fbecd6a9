//! ListTasks over the registry: the tasks a viewer sees that match a query, most recently changed
//! first, a page at a time, with page tokens that name a position in that order.

use serde_json::Value;

use super::{page_token, Registry, StateFilter, Viewer};

pub struct ListQuery {
    pub context_id: Option<String>,
    pub state: StateFilter,
    pub page_size: usize,
    /// The position after which the page starts (decoded with [`Registry::decode_page_token`]).
    pub after_seq: Option<u64>,
    pub since_nanos: Option<i128>,
    pub include_artifacts: bool,
}

pub struct ListPage {
    pub tasks: Vec<Value>,
    pub next_page_token: String,
    pub page_size: usize,
    pub total_size: usize,
}

impl Registry {
    /// Decodes a ListTasks pageToken into a position, when this door could have answered it.
    pub fn decode_page_token(&self, token: &str) -> Option<u64> {
        let newest = self.lock().seq;
        page_token::decode(token, newest)
    }

    /// One page of the tasks the viewer sees that match, most recently changed first.
    pub fn list(&self, q: &ListQuery, viewer: &Viewer) -> ListPage {
        let inner = self.lock();
        let matching = inner.order.values().rev().filter_map(|id| {
            let t = inner.tasks.get(id)?;
            let keep = viewer.sees(&t.owner)
                && q.context_id.as_ref().is_none_or(|c| *c == t.context_id)
                && q.state.matches(t.state)
                && q.since_nanos
                    .is_none_or(|n| i128::from(t.changed_at.0) * 1_000_000 >= n);
            keep.then_some(t)
        });
        let mut tasks = Vec::new();
        let mut total = 0;
        let mut last_seq = None;
        let mut more = false;
        for t in matching {
            total += 1;
            let in_page = q.after_seq.is_none_or(|after| t.seq < after);
            if !in_page {
                continue;
            }
            if tasks.len() < q.page_size {
                tasks.push(t.to_json(Some(q.include_artifacts)));
                last_seq = Some((t.seq, t.id.clone()));
            } else {
                more = true;
            }
        }
        let next_page_token = match (more, last_seq) {
            (true, Some((seq, id))) => page_token::encode(seq, id.as_str()),
            _ => String::new(),
        };
        ListPage {
            tasks,
            next_page_token,
            page_size: q.page_size,
            total_size: total,
        }
    }
}
