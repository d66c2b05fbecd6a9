//! Objects to and from multi-document YAML, through serde: never by pasting strings.

use serde::Deserialize;
use serde_json::Value;

/// The documents of a multi-document YAML text, empty ones skipped.
pub fn documents(text: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(doc).map_err(|e| format!("not readable YAML: {e}"))?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// `objects` as one multi-document YAML text, each document opened by `---`.
pub fn to_documents(objects: &[&Value]) -> Result<String, String> {
    let mut out = String::new();
    for o in objects {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(o).map_err(|e| format!("cannot write YAML: {e}"))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_round_trip() {
        let a = serde_json::json!({"kind": "Secret", "stringData": {"tokens": "operator mur_x\n"}});
        let b = serde_json::json!({"kind": "Service", "spec": {"ports": [{"port": 8080}]}});
        let text = to_documents(&[&a, &b]).unwrap();
        assert_eq!(documents(&text).unwrap(), vec![a, b]);
        assert!(documents("a: [").is_err());
    }
}
