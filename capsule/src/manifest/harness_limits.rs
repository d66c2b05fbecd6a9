//! Reading `harness.limits`: the bounds one harness attempt runs under — how many processes,
//! how much memory, how much its private tmp may hold (`process::limits` enforces them;
//! docs/containment.md "Limits"). Each has a default; a manifest changes any of them:
//! `limits: { pids: 256, memory: "2GiB", tmp: "512MiB" }`. Sizes are written with a binary
//! unit (KiB, MiB, GiB, TiB), so no one has to count bytes or guess whether `G` means 10^9.

use crate::manifest::error::{ErrorCode, ManifestError};
use crate::manifest::keypath::KeyPath;
use crate::manifest::reader::Reader;
use serde_yaml::Value;

const KEYS: [&str; 3] = ["pids", "memory", "tmp"];

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The units a size may be written in, and their bytes.
const UNITS: [(&str, u64); 4] = [("KiB", KIB), ("MiB", MIB), ("GiB", GIB), ("TiB", GIB << 10)];

/// `harness.limits`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HarnessLimits {
    /// `pids`: processes and threads at once (default 1024; at least 16, the harness's own
    /// keeper, init and shell among them).
    pub pids: u64,
    /// `memory`: bytes the attempt's processes hold together (default 4 GiB; at least 64 MiB).
    pub memory: u64,
    /// `tmp`: bytes the private tmp (`TMPDIR`) may hold (default 1 GiB; at least 1 MiB).
    pub tmp: u64,
}

impl Default for HarnessLimits {
    fn default() -> Self {
        HarnessLimits {
            pids: 1024,
            memory: 4 * GIB,
            tmp: GIB,
        }
    }
}

const FEWEST_PIDS: u64 = 16;
const MOST_PIDS: u64 = 4_194_304;
const LEAST_MEMORY: u64 = 64 * MIB;
const LEAST_TMP: u64 = MIB;

/// The block as written, each key absent taking its default.
pub fn read(
    r: &Reader,
    value: Option<&Value>,
    path: &KeyPath,
) -> Result<HarnessLimits, ManifestError> {
    let mut limits = HarnessLimits::default();
    if value.is_none() {
        return Ok(limits);
    }
    let f = r.mapping(value, path, &KEYS)?;
    if let Some(v) = f.get("pids") {
        limits.pids = r.number(
            v,
            &f.path("pids"),
            (FEWEST_PIDS, MOST_PIDS),
            "write the most processes an attempt may run at once, e.g. pids: 512",
        )?;
    }
    if let Some(v) = f.get("memory") {
        limits.memory = size(r, v, &f.path("memory"), LEAST_MEMORY, "memory: \"2GiB\"")?;
    }
    if let Some(v) = f.get("tmp") {
        limits.tmp = size(r, v, &f.path("tmp"), LEAST_TMP, "tmp: \"512MiB\"")?;
    }
    Ok(limits)
}

/// A size such as `"2GiB"`: a whole number and one of [`UNITS`], at least `least` bytes.
fn size(
    r: &Reader,
    value: &Value,
    at: &KeyPath,
    least: u64,
    example: &str,
) -> Result<u64, ManifestError> {
    let hint = format!(
        "write a whole number and a unit (KiB, MiB, GiB or TiB), e.g. {example}; at least {}",
        shown_size(least)
    );
    let Value::String(raw) = value else {
        return Err(r.bad(at, "a size such as \"2GiB\"", value, hint));
    };
    let text = r.interpolate(raw, at)?;
    let parsed = UNITS.iter().find_map(|(unit, bytes)| {
        let number = text.trim().strip_suffix(unit)?.trim();
        number.parse::<u64>().ok()?.checked_mul(*bytes)
    });
    match parsed {
        Some(bytes) if bytes >= least => Ok(bytes),
        Some(_) => Err(r.error(
            ErrorCode::BadValue,
            at,
            format!(
                "{at} is {text:?}, less than the {} an attempt needs",
                shown_size(least)
            ),
            hint,
        )),
        None => Err(r.bad(at, "a size such as \"2GiB\"", &Value::String(text), hint)),
    }
}

/// `bytes` in the largest unit that divides it (`64MiB`), as a manifest writes it.
pub fn shown_size(bytes: u64) -> String {
    UNITS
        .iter()
        .rev()
        .find(|(_, b)| bytes >= *b && bytes.is_multiple_of(*b))
        .map(|(unit, b)| format!("{}{unit}", bytes / b))
        .unwrap_or_else(|| format!("{bytes} bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::tests::{parse, refused};

    fn with(limits: &str) -> String {
        format!(
            "name: h\nversion: \"1\"\nartifacts: [{{ name: murmur/driver-codex, runtime: driver }}]\n\
             harness:\n  limits: {limits}\n"
        )
    }

    #[test]
    fn absent_keys_keep_their_defaults() {
        let m = parse(&with("{}")).unwrap();
        assert_eq!(m.harness.limits, HarnessLimits::default());
        assert_eq!(
            (
                m.harness.limits.pids,
                m.harness.limits.memory,
                m.harness.limits.tmp
            ),
            (1024, 4 << 30, 1 << 30)
        );
        let m = parse(&with("{ pids: 64, memory: \"512MiB\", tmp: \"2GiB\" }")).unwrap();
        assert_eq!(
            m.harness.limits,
            HarnessLimits {
                pids: 64,
                memory: 512 << 20,
                tmp: 2 << 30
            }
        );
    }

    #[test]
    fn each_refusal_names_the_key_and_the_fix() {
        refused(
            &with("{ pids: 4 }"),
            ErrorCode::BadValue,
            "harness.limits.pids",
            "error[E-MAN-005]: worker/murmur.yaml: harness.limits.pids must be a whole number \
             from 16 to 4194304, not 4\n  hint: write the most processes an attempt may run at \
             once, e.g. pids: 512",
        );
        refused(
            &with("{ memory: 2G }"),
            ErrorCode::BadValue,
            "harness.limits.memory",
            "error[E-MAN-005]: worker/murmur.yaml: harness.limits.memory must be a size such as \
             \"2GiB\", not \"2G\"\n  hint: write a whole number and a unit (KiB, MiB, GiB or \
             TiB), e.g. memory: \"2GiB\"; at least 64MiB",
        );
        refused(
            &with("{ memory: 2147483648 }"),
            ErrorCode::BadValue,
            "harness.limits.memory",
            "error[E-MAN-005]: worker/murmur.yaml: harness.limits.memory must be a size such as \
             \"2GiB\", not 2147483648\n  hint: write a whole number and a unit (KiB, MiB, GiB or \
             TiB), e.g. memory: \"2GiB\"; at least 64MiB",
        );
        refused(
            &with("{ tmp: \"512KiB\" }"),
            ErrorCode::BadValue,
            "harness.limits.tmp",
            "error[E-MAN-005]: worker/murmur.yaml: harness.limits.tmp is \"512KiB\", less than \
             the 1MiB an attempt needs\n  hint: write a whole number and a unit (KiB, MiB, GiB \
             or TiB), e.g. tmp: \"512MiB\"; at least 1MiB",
        );
        refused(
            &with("{ disk: \"1GiB\" }"),
            ErrorCode::UnknownKey,
            "harness.limits.disk",
            "error[E-MAN-003]: worker/murmur.yaml: harness.limits.disk is not a manifest key\n  hint: the keys of harness.limits are pids, memory, tmp",
        );
    }

    #[test]
    fn sizes_are_shown_as_written() {
        assert_eq!(shown_size(64 << 20), "64MiB");
        assert_eq!(shown_size(3 << 30), "3GiB");
        assert_eq!(shown_size(1536 << 10), "1536KiB");
        assert_eq!(shown_size(1000), "1000 bytes");
    }
}
