//! An HTTP refusal: a status and a plain JSON body (`{"error": …, "message": …}`), never a
//! JSON-RPC envelope. It lives below the door because the door is not the only one to refuse:
//! the token table (`auth`) answers steps 2 and 11 with it. The door adds its own refusals (in
//! `door::error`) and writes every one of them.

use serde_json::json;

#[derive(Debug, Clone, PartialEq)]
pub struct HttpRefusal {
    pub status: u16,
    pub www_authenticate: Option<String>,
    pub error: &'static str,
    pub message: String,
}

impl HttpRefusal {
    pub fn body(&self) -> Vec<u8> {
        json!({"error": self.error, "message": self.message})
            .to_string()
            .into_bytes()
    }
}
