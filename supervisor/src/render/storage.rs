//! `mur render --persist SIZE`: the size a member's records claim requests, checked as a
//! Kubernetes storage quantity before anything is rendered, and the PersistentVolumeClaim
//! itself, which keeps the member's records (its trace and task store) across pods.

use serde_json::{json, Value};

use super::names::{Derived, Layout};
use crate::error::{CliError, CliResult, Code};

/// The suffixes a storage size may carry: binary, then decimal. Milli (`m`) and exponents are
/// quantities too, but no size of a disk.
const SUFFIXES: [&str; 12] = [
    "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E",
];

/// A checked `--persist` size, written as the user wrote it (`1Gi`, `500Mi`, `10G`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Size(String);

impl Size {
    /// `written`, if it is digits, an optional decimal part and an optional suffix of
    /// [`SUFFIXES`], and more than zero (a claim of nothing is refused by the API server).
    pub fn parse(written: &str) -> CliResult<Size> {
        let hint = "write digits, an optional decimal part and one of the suffixes Ki Mi Gi Ti Pi Ei k M G T P E, such as 1Gi, 500Mi or 10G";
        let not = || {
            CliError::new(
                Code::BadArgument,
                format!("--persist {written:?} is not a Kubernetes storage quantity"),
                hint,
            )
        };
        // At most one suffix matches: every binary one ends in `i`, no decimal one does.
        let number = SUFFIXES
            .iter()
            .find_map(|s| written.strip_suffix(s))
            .unwrap_or(written);
        let (whole, fraction) = match number.split_once('.') {
            Some((w, f)) => (w, Some(f)),
            None => (number, None),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) || fraction.is_some_and(|f| !digits(f)) {
            return Err(not());
        }
        let zero = |s: &str| s.bytes().all(|b| b == b'0');
        if zero(whole) && fraction.is_none_or(zero) {
            return Err(CliError::new(
                Code::BadArgument,
                format!("--persist {written:?} requests no storage"),
                "claim more than zero, such as 1Gi",
            ));
        }
        Ok(Size(written.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Member `i`'s claim for its records: one node's at a time (ReadWriteOnce), of the cluster's
/// default StorageClass, named and labelled as the member's other objects.
pub fn records_claim(layout: &Layout, i: usize, size: &Size) -> Value {
    let placed = &layout.members[i];
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": Derived::Records.of(&placed.object),
            "namespace": layout.namespace,
            "labels": layout.member_labels(i),
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": { "requests": { "storage": size.as_str() } },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_kubernetes_storage_quantities() {
        for good in [
            "1Gi", "500Mi", "10G", "1", "1.5Gi", "0.5Ti", "2Ei", "100k", "3E", "07M", "0.1",
        ] {
            assert_eq!(
                Size::parse(good).map(|s| s.as_str().to_owned()).ok(),
                Some(good.to_owned()),
                "{good}"
            );
        }
        for bad in [
            "", "1GB", "-1Gi", "+1Gi", "1gi", "1K", "1m", "1Gi ", " 1Gi", "Gi", ".5Gi", "1.Gi",
            "1..5Gi", "1.5.5", "1e3", "1Gii", "1GiGi", "١Gi",
        ] {
            assert!(Size::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn refusals_name_the_value_and_show_a_size() {
        assert_eq!(
            Size::parse("1GB").unwrap_err().to_string(),
            "error[E-CLI-030]: --persist \"1GB\" is not a Kubernetes storage quantity\n  hint: write digits, an optional decimal part and one of the suffixes Ki Mi Gi Ti Pi Ei k M G T P E, such as 1Gi, 500Mi or 10G"
        );
        for zero in ["0", "0Gi", "00.000Mi"] {
            assert_eq!(
                Size::parse(zero).unwrap_err().to_string(),
                format!("error[E-CLI-030]: --persist {zero:?} requests no storage\n  hint: claim more than zero, such as 1Gi")
            );
        }
    }
}
