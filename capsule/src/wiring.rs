//! A formation member's wiring (DESIGN §7): what the supervisor hands one member in a 0600 file
//! beside its token file (`$MURMUR_HOME/run/<session>.wiring`, hidden from harnesses like every
//! token file) — which formation and member it is, and for each member it may call, that door's
//! URL and the token of credential `member:<self>` on it. The capsule reads it once at start.
//! A member that calls nobody holds no token, and gets its wiring in its config instead of a
//! file ([`Source`]): one file fewer a member when a formation starts.
//! The outbound allow list a member runs with is its manifest's `capabilities.network.allow`
//! plus `localhost:<port>` of each callee, and nothing else ([`Wiring::allow`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What every formation credential's name starts with.
pub const MEMBER_PREFIX: &str = "member:";

/// The credential a caller holds on a callee's door: `member:<caller>`.
pub fn member_credential(caller: &str) -> String {
    format!("{MEMBER_PREFIX}{caller}")
}

/// The scopes of a `member:<caller>` credential: a peer's task methods. Not the session's own
/// methods (murmur.StopSession, murmur.WatchSession), which reach every task.
pub const MEMBER_SCOPES: [&str; 6] = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
];

/// One member this capsule may call.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Callee {
    /// `http://localhost:PORT`.
    pub url: String,
    /// The token of `member:<self>` on the callee's door. A secret: never traced or logged.
    pub token: String,
}

/// A member's wiring, as the supervisor writes it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Wiring {
    /// `formation.name`.
    pub formation: String,
    /// This member's name in the roster.
    pub member: String,
    /// The members this one may call, by roster name.
    pub callees: BTreeMap<String, Callee>,
}

/// Where a capsule's config says its wiring is.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(untagged)]
pub enum Source {
    /// The wiring file (`run/<session>.wiring`; on Kubernetes, the wiring Secret's file).
    File(PathBuf),
    /// A member that calls nobody: which formation and member it is. It holds no token, so
    /// it may travel in the config, which is passed in the environment.
    Uncalling { formation: String, member: String },
}

impl Source {
    /// The wiring of a member with no callees in the config, any other in a file written by
    /// `save` (which answers the file's path).
    pub fn of<E>(
        wiring: Wiring,
        save: impl FnOnce(&Wiring) -> Result<PathBuf, E>,
    ) -> Result<Source, E> {
        match wiring.callees.is_empty() {
            true => Ok(Source::Uncalling {
                formation: wiring.formation,
                member: wiring.member,
            }),
            false => save(&wiring).map(Source::File),
        }
    }

    pub fn load(&self) -> Result<Wiring, String> {
        match self {
            Source::File(path) => Wiring::load(path),
            Source::Uncalling { formation, member } => Ok(Wiring {
                formation: formation.clone(),
                member: member.clone(),
                callees: BTreeMap::new(),
            }),
        }
    }
}

impl Wiring {
    /// Reads a wiring file: its JSON, or that JSON in base64. `podman kube play` 4.3 mounts a
    /// Secret's `data` as it is written, still in base64, where a cluster decodes it
    /// (docs/kubernetes.md, "Playing it with podman"). The forms cannot be confused: JSON
    /// opens with `{`, which base64 never holds.
    pub fn load(path: &Path) -> Result<Wiring, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the wiring {}: {e}", path.display()))?;
        let json = match text.trim_start().starts_with('{') {
            true => text,
            false => decoded(&text).ok_or_else(|| {
                format!(
                    "the wiring {} is unreadable: neither JSON nor base64 of JSON",
                    path.display()
                )
            })?,
        };
        serde_json::from_str(&json)
            .map_err(|e| format!("the wiring {} is unreadable: {e}", path.display()))
    }

    /// The effective outbound allow list: the manifest's own entries, then `localhost:PORT` of
    /// each callee.
    pub fn allow(&self, manifest_allow: &[String]) -> Vec<String> {
        let mut allow = manifest_allow.to_vec();
        for callee in self.callees.values() {
            let host_port = callee
                .url
                .strip_prefix("http://")
                .unwrap_or(&callee.url)
                .trim_end_matches('/')
                .to_owned();
            if !allow.contains(&host_port) {
                allow.push(host_port);
            }
        }
        allow
    }
}

/// `text` as base64 of UTF-8 text.
fn decoded(text: &str) -> Option<String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()?;
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wiring() -> Wiring {
        let mut callees = BTreeMap::new();
        callees.insert(
            "coder".to_owned(),
            Callee {
                url: "http://localhost:52222".into(),
                token: "mur_x".into(),
            },
        );
        Wiring {
            formation: "review".into(),
            member: "lead".into(),
            callees,
        }
    }

    #[test]
    fn the_allow_list_is_the_manifests_plus_each_callee() {
        let w = wiring();
        assert_eq!(w.allow(&[]), vec!["localhost:52222".to_owned()]);
        assert_eq!(
            w.allow(&["api.example.com".into(), "localhost:52222".into()]),
            vec!["api.example.com".to_owned(), "localhost:52222".to_owned()]
        );
    }

    /// Each test its own folder: tests run in parallel in one process.
    fn folder(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("murmur-wiring-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn round_trips_through_its_file() {
        let dir = folder("round-trip");
        let path = dir.join("w.json");
        std::fs::write(&path, serde_json::to_string(&wiring()).unwrap()).unwrap();
        assert_eq!(Wiring::load(&path).unwrap(), wiring());
        assert!(Wiring::load(&dir.join("missing")).is_err());
        // As podman 4.3 mounts a Secret's data: base64, as the render wrote it.
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD
            .encode(serde_json::to_string(&wiring()).unwrap());
        std::fs::write(&path, encoded).unwrap();
        assert_eq!(Wiring::load(&path).unwrap(), wiring());
        std::fs::write(&path, "not json").unwrap();
        assert_eq!(
            Wiring::load(&path).unwrap_err(),
            format!(
                "the wiring {} is unreadable: neither JSON nor base64 of JSON",
                path.display()
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_member_credential_is_spelled_as_the_spec_says() {
        assert_eq!(member_credential("lead"), "member:lead");
    }

    #[test]
    fn only_a_wiring_with_callees_is_written_and_each_reads_back_whole() {
        let dir = folder("sources");
        let file = dir.join("w.wiring");
        let save = |w: &Wiring| -> std::io::Result<PathBuf> {
            std::fs::write(&file, serde_json::to_vec(w).unwrap())?;
            Ok(file.clone())
        };
        let caller = Source::of(wiring(), save).unwrap();
        assert_eq!(caller, Source::File(file.clone()));
        assert_eq!(caller.load().unwrap(), wiring());

        let alone = Wiring {
            callees: BTreeMap::new(),
            ..wiring()
        };
        let never = |_: &Wiring| -> std::io::Result<PathBuf> { panic!("nothing to write") };
        let uncalling = Source::of(alone.clone(), never).unwrap();
        assert_eq!(uncalling.load().unwrap(), alone);
        // In the config: a path as before, or the member without a token in sight.
        let json = serde_json::to_value(&uncalling).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"formation": "review", "member": "lead"})
        );
        let back: Source = serde_json::from_value(json).unwrap();
        assert_eq!(back, uncalling);
        let path: Source = serde_json::from_value(serde_json::json!("/run/x.wiring")).unwrap();
        assert_eq!(path, Source::File("/run/x.wiring".into()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
