//! Each member's two Secrets. `<object>` holds the tokens minted for its door (`operator`
//! first, then its manifest's declared credentials, then `member:<caller>` for each member that
//! calls it — the same list `mur run` mints, by the same code); no pod mounts it, and the
//! capsule checks callers against digests. `<object>-wiring` holds its wiring file alone, with
//! the `member:<self>` tokens it presents to its callees: the one Secret its pod mounts, whole,
//! so that no engine — not `podman kube play`, which ignores a volume's `items` — puts the
//! door's own tokens in the pod. Tokens are minted fresh at every render, unless
//! `--secrets-from` names earlier rendered (or `kubectl get secret -o yaml`) Secrets to reuse.
//! These objects are the only ones a token appears in.

use std::collections::BTreeMap;
use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Map, Value};

use capsule::auth::OPERATOR;
use capsule::wiring::Wiring;

use super::names::{Derived, Layout, ENTRY_LABEL, FORMATION_LABEL, MEMBER_LABEL};
use crate::error::{CliError, CliResult, Code};
use crate::formation::{wire, Plan};
use crate::tokens::Minted;

/// The tokens Secret's keys: the operator token alone (what `mur token --kubernetes` reads) and
/// every credential as `credential token` lines (the format of `run/<session>.tokens`); the
/// wiring Secret's one key, the wiring file the capsule is given.
pub const OPERATOR_KEY: &str = "operator";
pub const TOKENS_KEY: &str = "tokens";
pub const WIRING_KEY: &str = "wiring.json";

/// Every member's tokens, in plan order: fresh, or those `secrets_from` holds.
pub fn tokens(
    plan: &Plan,
    layout: &Layout,
    secrets_from: Option<&Path>,
) -> CliResult<Vec<Vec<Minted>>> {
    let mut minted = wire::mint(plan);
    let Some(path) = secrets_from else {
        return Ok(minted);
    };
    let kept = read_kept(path, &layout.formation)?;
    for (placed, tokens) in layout.members.iter().zip(minted.iter_mut()) {
        let Some(old) = kept.get(&placed.label) else {
            return Err(CliError::new(
                Code::BadSecrets,
                format!(
                    "member {}: {} holds no Secret for it (labels {FORMATION_LABEL}={}, {MEMBER_LABEL}={})",
                    placed.name,
                    path.display(),
                    layout.formation,
                    placed.label
                ),
                "pass the output of an earlier `mur render` of this formation, or `kubectl get secret -l murmur.dev/formation=NAME -o yaml`; leave out --secrets-from to mint fresh tokens",
            ));
        };
        for t in tokens.iter_mut() {
            match old.get(&t.credential) {
                Some(token) => t.token = token.clone(),
                None => {
                    return Err(CliError::new(
                        Code::BadSecrets,
                        format!(
                            "member {}: {} has no token for credential {}",
                            placed.name,
                            path.display(),
                            t.credential
                        ),
                        "the formation gained a caller or credential since those Secrets were rendered: leave out --secrets-from to mint fresh tokens",
                    ))
                }
            }
        }
    }
    Ok(minted)
}

/// `credential -> token` of each member (by label) of `formation`, from the Secrets in a file
/// or in a folder's `*.yaml` / `*.yml` files.
fn read_kept(
    path: &Path,
    formation: &str,
) -> CliResult<BTreeMap<String, BTreeMap<String, String>>> {
    let unreadable = |why: String| {
        CliError::new(
            Code::BadSecrets,
            format!("--secrets-from {}: {why}", path.display()),
            "pass a YAML file (or a folder of them) that `mur render` or `kubectl get secret -o yaml` wrote",
        )
    };
    let mut texts = Vec::new();
    if path.is_dir() {
        let entries = std::fs::read_dir(path).map_err(|e| unreadable(e.to_string()))?;
        let mut files: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        for f in files {
            texts.push(
                std::fs::read_to_string(&f)
                    .map_err(|e| unreadable(format!("{}: {e}", f.display())))?,
            );
        }
    } else {
        texts.push(std::fs::read_to_string(path).map_err(|e| unreadable(e.to_string()))?);
    }
    let mut kept = BTreeMap::new();
    for text in &texts {
        for doc in super::yaml::documents(text).map_err(unreadable)? {
            for object in flatten(doc) {
                if let Some((member, tokens)) = kept_tokens(&object, formation) {
                    kept.insert(member, tokens);
                }
            }
        }
    }
    Ok(kept)
}

/// A `kind: List` (what `kubectl get -o yaml` prints) as its items.
fn flatten(doc: Value) -> Vec<Value> {
    match doc.get("kind").and_then(Value::as_str) {
        Some("List") => doc
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        _ => vec![doc],
    }
}

/// A Secret of `formation`'s: its member label and its `tokens` lines.
fn kept_tokens(object: &Value, formation: &str) -> Option<(String, BTreeMap<String, String>)> {
    if object.get("kind").and_then(Value::as_str) != Some("Secret") {
        return None;
    }
    let labels = object.pointer("/metadata/labels")?;
    if labels.get(FORMATION_LABEL).and_then(Value::as_str) != Some(formation) {
        return None;
    }
    let member = labels.get(MEMBER_LABEL).and_then(Value::as_str)?.to_owned();
    let text = match object.pointer(&format!("/stringData/{TOKENS_KEY}")) {
        Some(Value::String(s)) => s.clone(),
        _ => {
            let encoded = object.pointer(&format!("/data/{TOKENS_KEY}"))?.as_str()?;
            String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?
        }
    };
    Some((
        member,
        crate::tokens::from_lines(&text).into_iter().collect(),
    ))
}

/// Member `i`'s wiring: its callees at their Service URLs, with the `member:<i>` tokens.
pub fn wiring(plan: &Plan, layout: &Layout, i: usize, minted: &[Vec<Minted>]) -> Option<Wiring> {
    let urls: Vec<String> = layout.members.iter().map(|m| m.url.clone()).collect();
    wire::wiring(plan, i, &urls, minted)
}

/// Member `i`'s tokens Secret, `<object>`: the door's own tokens. The entry's carries
/// [`ENTRY_LABEL`].
pub fn tokens_secret(layout: &Layout, i: usize, minted: &[Minted]) -> Value {
    let mut labels = layout.member_labels(i);
    if i == layout.entry {
        labels[ENTRY_LABEL] = json!("true");
    }
    let mut data = Map::new();
    if let Some(op) = minted.iter().find(|m| m.credential == OPERATOR) {
        data.insert(OPERATOR_KEY.into(), encoded(&op.token));
    }
    data.insert(TOKENS_KEY.into(), encoded(&crate::tokens::to_lines(minted)));
    opaque(layout.members[i].object.clone(), layout, labels, data)
}

/// Member `i`'s wiring Secret, `<object>-wiring`: its wiring file and nothing else.
pub fn wiring_secret(layout: &Layout, i: usize, wiring: &Wiring) -> CliResult<Value> {
    let placed = &layout.members[i];
    let wiring = serde_json::to_string(wiring).map_err(|e| {
        CliError::new(
            Code::RenderOutput,
            format!("cannot encode the wiring of member {}: {e}", placed.name),
            "report this bug",
        )
    })?;
    let mut data = Map::new();
    data.insert(WIRING_KEY.into(), encoded(&wiring));
    let name = Derived::Wiring.of(&placed.object);
    Ok(opaque(name, layout, layout.member_labels(i), data))
}

/// An Opaque Secret of the formation's namespace.
fn opaque(name: String, layout: &Layout, labels: Value, data: Map<String, Value>) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": layout.namespace,
            "labels": labels,
        },
        "type": "Opaque",
        // `data`, base64, and not `stringData`: a cluster takes both, but `podman kube play`
        // reads only `data` (docs/kubernetes.md, "Playing it with podman").
        "data": data,
    })
}

/// A Secret's `data` value: the text in base64.
fn encoded(text: &str) -> Value {
    json!(STANDARD.encode(text))
}
