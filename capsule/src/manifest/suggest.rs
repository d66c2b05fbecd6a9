//! "Did you mean …?": the nearest known spelling to a mistyped key, value, scope, member or
//! artifact name, by case-insensitive edit distance. Shared so every hint suggests the same way.

/// The candidate nearest to `word` (case-insensitive edit distance), if near enough to be a typo.
pub fn nearest<'c>(word: &str, candidates: &[&'c str]) -> Option<&'c str> {
    let word = word.to_lowercase();
    candidates
        .iter()
        .map(|c| (distance(&word, &c.to_lowercase()), *c))
        .filter(|(d, c)| *d <= (c.chars().count() / 3).clamp(1, 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance over chars.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            let next = (row[j] + 1).min(row[j + 1] + 1).min(prev + cost);
            prev = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_finds_typos_only() {
        let keys = ["task_acceptance", "after_task", "queue_depth"];
        assert_eq!(nearest("task_acceptence", &keys), Some("task_acceptance"));
        assert_eq!(nearest("QUEUE_DEPTH", &keys), Some("queue_depth"));
        assert_eq!(nearest("colour", &keys), None);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
