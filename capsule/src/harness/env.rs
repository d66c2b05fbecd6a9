//! A harness's environment (DESIGN §8, the jail): not murmur's whole environment but an allow
//! list — the variables every program expects (`PATH`, `HOME`, locale, terminal, time zone,
//! temp folder), what its CLI preset needs (its provider's key and settings), the names the
//! manifest lists under `harness.env`, and the names `MURMUR_HARNESS_ENV` lists for a whole
//! run — then murmur's own variables. So a key exported for an http member, `SSH_AUTH_SOCK` or
//! a cloud credential never reaches a harness, nor the keeper and init it runs under (whose
//! `/proc/1/environ` a harness can read).

use std::ffi::OsString;

/// What every harness receives from murmur's environment (`*` ends a prefix).
pub const BASE: [&str; 10] = [
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_*", "TERM", "TZ", "TMPDIR",
];

/// The variable that names, for a whole run, more variables every harness receives (names
/// separated by spaces or commas).
pub const RUN_WIDE: &str = "MURMUR_HARNESS_ENV";

/// True when `name` is matched by `pattern` (an exact name, or a prefix ending in `*`).
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// The variables of `inherited` a harness may receive: [`BASE`], `preset` and `manifest`
/// patterns, and the names [`RUN_WIDE`] lists.
pub fn allowed(
    inherited: impl Iterator<Item = (OsString, OsString)>,
    preset: &[String],
    manifest: &[String],
) -> Vec<(String, OsString)> {
    let run_wide: Vec<String> = std::env::var(RUN_WIDE)
        .unwrap_or_default()
        .split([' ', ','])
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    let patterns: Vec<&str> = BASE
        .iter()
        .copied()
        .chain(preset.iter().map(String::as_str))
        .chain(manifest.iter().map(String::as_str))
        .chain(run_wide.iter().map(String::as_str))
        .collect();
    inherited
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v)))
        .filter(|(k, _)| patterns.iter().any(|p| matches(p, k)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_allow_list_passes() {
        let inherited = [
            ("PATH", "/bin"),
            ("HOME", "/home/me"),
            ("LC_ALL", "C"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
            ("SSH_AUTH_SOCK", "/tmp/agent"),
            ("OPENAI_API_KEY", "sk-http-member"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("NPM_TOKEN", "npm"),
            ("MURMUR_HOME", "/home/me/.murmur"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let names = |v: Vec<(String, OsString)>| v.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(
            names(allowed(inherited.clone().into_iter(), &[], &[])),
            ["PATH", "HOME", "LC_ALL"]
        );
        assert_eq!(
            names(allowed(
                inherited.into_iter(),
                &["ANTHROPIC_*".to_owned()],
                &["NPM_TOKEN".to_owned()]
            )),
            ["PATH", "HOME", "LC_ALL", "ANTHROPIC_API_KEY", "NPM_TOKEN"]
        );
    }
}
