//! Key paths (`artifacts[1].process.command`): how every manifest error names the spot it is
//! about, and how `locate` finds that spot in the text. One type so all messages spell paths the
//! same way.

use std::fmt;

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    /// A mapping key.
    Key(String),
    /// A list index.
    Index(usize),
}

/// A key path such as `artifacts[1].process.command`; the root renders as `""`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPath(Vec<Seg>);

impl KeyPath {
    /// This path, one key deeper.
    pub fn key(&self, key: &str) -> KeyPath {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_string()));
        KeyPath(segs)
    }

    /// This path, one list index deeper.
    pub fn index(&self, index: usize) -> KeyPath {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        KeyPath(segs)
    }

    /// The path without its last step.
    pub fn parent(&self) -> KeyPath {
        KeyPath(self.0[..self.0.len().saturating_sub(1)].to_vec())
    }

    /// The steps.
    pub fn segs(&self) -> &[Seg] {
        &self.0
    }

    /// True for the document root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(key) if i == 0 => f.write_str(key)?,
                Seg::Key(key) => write!(f, ".{key}")?,
                Seg::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// The last key of `path` (skipping indices), for hints such as `write accept: true`.
pub fn last_key(path: &KeyPath) -> String {
    path.segs()
        .iter()
        .rev()
        .find_map(|seg| match seg {
            Seg::Key(key) => Some(key.clone()),
            Seg::Index(_) => None,
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_paths_render_dotted_with_indices() {
        let path = KeyPath::default().key("artifacts").index(1).key("process");
        assert_eq!(
            path.key("command").to_string(),
            "artifacts[1].process.command"
        );
        assert_eq!(path.parent().to_string(), "artifacts[1]");
        assert_eq!(KeyPath::default().to_string(), "");
    }
}
