//! "What the door answers": the ordered checks every request passes before its method runs.
//! Steps 2–4 read only headers (the body is not read for a request they refuse); steps 5–13
//! read the body. Each step is one function in the tables below, in the spec's order.

use bytes::Bytes;
use hyper::header::CONTENT_TYPE;
use hyper::HeaderMap;
use serde_json::{Map, Value};

use super::error::{HttpRefusal, Refusal, RpcError};
use super::method::Method;
use super::Door;
use crate::auth::Credential;
use crate::delegation::completion::{acknowledgement, Completion, NotAwaited};
use crate::ids::DelegationId;
use crate::manifest::TaskAcceptance;
use crate::tasks::Viewer;
use crate::trace::TraceEvent;

pub use crate::provenance::{COMPLETION_SESSION_HEADER, DELEGATION_HEADER, ORIGIN_HEADER};

/// A request as the checks see it, filled in as they pass.
pub struct Inbound {
    pub http_method: hyper::Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub json: Value,
    /// The request id to echo: valid from step 7 on.
    pub id: Value,
    pub method_name: String,
    pub method: Option<Method>,
    /// `params`, `{}` when omitted (valid from step 12 on).
    pub params: Map<String, Value>,
    /// Who the token names, on an authenticated door (from step 2 on).
    pub credential: Option<Credential>,
    /// The door's span of this request (`span`), the parent of the task it starts.
    pub parent: Option<crate::telemetry::SpanContext>,
}

impl Inbound {
    /// Which tasks this caller sees: every task on a public door or for the operator.
    pub fn viewer(&self) -> Viewer {
        self.credential
            .as_ref()
            .map(Credential::viewer)
            .unwrap_or(Viewer::Everyone)
    }

    /// Whether a formation member's runtime sent it (its credential says, not its headers).
    pub fn sent_by_member(&self) -> bool {
        self.credential.as_ref().is_some_and(Credential::is_member)
    }
}

/// A step's verdict; boxed because refusals are large and rare.
pub type Checked = Result<(), Box<Refusal>>;

type Step = fn(&Door, &mut Inbound) -> Checked;

/// Steps 2–5 as far as headers tell: the body is read only for a POST / with a JSON type.
pub const BEFORE_BODY: [(u8, Step); 4] = [
    (2, token),
    (3, peer_consent),
    (4, operator_plane),
    (5, route),
];

/// Steps 5–13: once the body is read.
pub const AFTER_BODY: [(u8, Step); 9] = [
    (5, has_body),
    (6, json),
    (7, jsonrpc),
    (8, version),
    (9, completion),
    (10, method),
    (11, scope),
    (12, params_object),
    (13, tenant),
];

pub fn run(door: &Door, steps: &[(u8, Step)], req: &mut Inbound) -> Checked {
    steps.iter().try_for_each(|(_, step)| step(door, req))
}

fn rpc(req: &Inbound, e: RpcError) -> Box<Refusal> {
    Box::new(Refusal::Rpc(req.id.clone(), e))
}

/// Step 2: the token, before anything else is read. A public door ignores Authorization.
/// A sub-capsule holds no door token: its completion presents the completion token of its
/// delegation, which this step takes only on a completion naming that very delegation; any
/// other use of it is refused as the invalid token it is everywhere else.
fn token(door: &Door, req: &mut Inbound) -> Checked {
    if let Some(tokens) = &door.tokens {
        match tokens.authenticate(&req.headers) {
            Ok(credential) => req.credential = Some(credential),
            Err(_) if completion_token(door, &req.headers) => {}
            Err(r) => return Err(Box::new(Refusal::Http(r))),
        }
    }
    Ok(())
}

/// True for a completion whose one `Authorization: Bearer` is the completion token of the
/// delegation it names.
fn completion_token(door: &Door, headers: &HeaderMap) -> bool {
    let mut auth = headers.get_all(hyper::header::AUTHORIZATION).iter();
    let (Some(value), None) = (auth.next(), auth.next()) else {
        return false;
    };
    let token = crate::auth::bearer(value);
    let delegation = headers
        .get(DELEGATION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    match (is_completion(headers), token, delegation) {
        (true, Some(token), Some(d)) => door.session.delegations.admits(d, token),
        _ => false,
    }
}

fn is_completion(headers: &HeaderMap) -> bool {
    headers.get(ORIGIN_HEADER).is_some_and(|v| {
        v.as_bytes()
            .eq_ignore_ascii_case(crate::provenance::COMPLETION.as_bytes())
    })
}

/// Step 3: a peer-origin request to a capsule that does not accept peer tasks. A formation
/// member's credential makes a peer's request whether or not it says so (its credential is
/// known from step 2).
fn peer_consent(door: &Door, req: &mut Inbound) -> Checked {
    let peer = crate::provenance::is_peer(&req.headers) || req.sent_by_member();
    if peer && !door.session.manifest.exports.peer_tasks_accept {
        return Err(Box::new(Refusal::Http(HttpRefusal::peer_not_accepted())));
    }
    Ok(())
}

/// Step 4: the operator plane is not declared by any manifest this release serves, so its
/// paths fall through to the 404 of step 5.
fn operator_plane(_door: &Door, _req: &mut Inbound) -> Checked {
    Ok(())
}

/// Step 5: only a POST / with content-type: application/json …
fn route(_door: &Door, req: &mut Inbound) -> Checked {
    let json_type = req
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if req.http_method != hyper::Method::POST || req.path != "/" || !json_type {
        return Err(Box::new(Refusal::Http(HttpRefusal::not_found())));
    }
    Ok(())
}

/// … and a body.
fn has_body(_door: &Door, req: &mut Inbound) -> Checked {
    if req.body.is_empty() {
        return Err(Box::new(Refusal::Http(HttpRefusal::not_found())));
    }
    Ok(())
}

/// Step 6: the body is JSON.
fn json(_door: &Door, req: &mut Inbound) -> Checked {
    req.json = serde_json::from_slice(&req.body)
        .map_err(|_| Box::new(Refusal::Rpc(Value::Null, RpcError::ParseError)))?;
    Ok(())
}

fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// Step 7: one JSON-RPC 2.0 request object with a string or integer id.
fn jsonrpc(_door: &Door, req: &mut Inbound) -> Checked {
    let Value::Object(obj) = &req.json else {
        return Err(Box::new(Refusal::Rpc(
            Value::Null,
            RpcError::InvalidRequest,
        )));
    };
    let id = obj.get("id").filter(|id| valid_id(id)).cloned();
    let echo = id.clone().unwrap_or(Value::Null);
    let method = obj.get("method").and_then(Value::as_str);
    let version_ok = obj.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
    match (id, method, version_ok) {
        (Some(id), Some(method), true) => {
            req.id = id;
            req.method_name = method.to_owned();
            Ok(())
        }
        _ => Err(Box::new(Refusal::Rpc(echo, RpcError::InvalidRequest))),
    }
}

/// Step 8: `A2A-Version: 1.0` or `1.0.<digits>`, on exactly one header line.
fn version(_door: &Door, req: &mut Inbound) -> Checked {
    let mut lines = req.headers.get_all("a2a-version").iter();
    if let (Some(one), None) = (lines.next(), lines.next()) {
        if one.to_str().is_ok_and(version_supported) {
            return Ok(());
        }
    }
    // The refusal names the value as sent: every line, joined with ",".
    let requested: Vec<String> = req
        .headers
        .get_all("a2a-version")
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    Err(rpc(req, RpcError::VersionNotSupported(requested.join(","))))
}

pub fn version_supported(value: &str) -> bool {
    match value.trim().strip_prefix("1.0") {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('.')
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// Step 9: a completion (`x-murmur-task-origin: completion`) is answered here, before its
/// method is looked up: refused -31001 / -32601 / -31002, or, when a task here awaits the
/// delegation it names, handed to that task, traced, and acknowledged — and no later step runs.
fn completion(door: &Door, req: &mut Inbound) -> Checked {
    if !is_completion(&req.headers) {
        return Ok(());
    }
    let header = |name: &str| {
        req.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_owned())
    };
    let addressed = header(COMPLETION_SESSION_HEADER).unwrap_or_default();
    if addressed != door.session.id.as_str() {
        return Err(rpc(req, RpcError::CompletionMisaddressed(addressed)));
    }
    if req.method_name != Method::SendMessage.name() {
        return Err(rpc(req, RpcError::MethodNotFound));
    }
    let Some(d) = header(DELEGATION_HEADER).filter(|d| !d.is_empty()) else {
        return Err(rpc(
            req,
            RpcError::CompletionNotAwaited(
                "this completion names no delegation in x-murmur-delegation-id".into(),
                None,
            ),
        ));
    };
    let not_awaited = |req: &Inbound, why: NotAwaited| {
        let message = match why {
            NotAwaited::Unknown => format!("no task in this session is waiting for delegation {d}"),
            NotAwaited::Ending => format!(
                "delegation {d} is being ended by the task that started it; its completion is no longer awaited"
            ),
        };
        rpc(
            req,
            RpcError::CompletionNotAwaited(message, Some(d.clone())),
        )
    };
    // Checked before the params are read, as the spec orders it. Only the delegation's own
    // child holds its completion token: a completion without it, whatever door token it
    // carries, is answered as one no task awaits, so nobody can learn which delegations are.
    if !completion_token(door, &req.headers) {
        return Err(not_awaited(req, NotAwaited::Unknown));
    }
    if let Err(why) = door.session.delegations.task_of(&d) {
        return Err(not_awaited(req, why));
    }
    let completion = Completion::read(&d, req.json.get("params"));
    let state = completion.state;
    let task = match door.session.delegations.deliver(completion) {
        Ok(task) => task,
        Err(why) => return Err(not_awaited(req, why)),
    };
    door.session.trace.event(TraceEvent::CompletionReceived {
        task_id: task.clone(),
        delegation_id: DelegationId::from_wire(&d),
        state,
    });
    super::span::completion(&req.headers, &d, task.as_str(), &door.session.trace);
    let context_id = door
        .session
        .registry
        .read(task.as_str(), &Viewer::Everyone, |t| t.context_id.clone())
        .unwrap_or_default();
    Err(Box::new(Refusal::Answered(
        req.id.clone(),
        acknowledgement(&d, &context_id),
    )))
}

/// Step 10: the method, with the spec's three exceptions to -32601.
fn method(door: &Door, req: &mut Inbound) -> Checked {
    let parsed = Method::parse(&req.method_name);
    match parsed {
        Some(m) if door.methods.contains(&m) => {
            req.method = Some(m);
            Ok(())
        }
        Some(m) if m.is_push_config() => Err(rpc(req, RpcError::PushNotSupported)),
        Some(Method::GetExtendedAgentCard) => Err(rpc(
            req,
            RpcError::Unsupported(
                "GetExtendedAgentCard is not supported: this door is public and has no extended card".into(),
                vec![],
            ),
        )),
        Some(m @ (Method::SendStreamingMessage | Method::SubscribeToTask))
            if door.session.manifest.lifecycle.task_acceptance == TaskAcceptance::None =>
        {
            Err(rpc(
                req,
                RpcError::Unsupported(
                    format!("{} is not supported: this door starts no task (lifecycle.task_acceptance: none)", m.name()),
                    vec![],
                ),
            ))
        }
        _ => Err(rpc(req, RpcError::MethodNotFound)),
    }
}

/// Step 11: the credential reaches the method's scope (GetExtendedAgentCard needs none).
fn scope(door: &Door, req: &mut Inbound) -> Checked {
    let (Some(tokens), Some(credential), Some(scope)) = (
        &door.tokens,
        &req.credential,
        req.method.and_then(Method::scope),
    ) else {
        return Ok(());
    };
    tokens
        .authorize(credential, scope)
        .map_err(|r| Box::new(Refusal::Http(r)))
}

/// Step 12: params, when present, is an object.
fn params_object(_door: &Door, req: &mut Inbound) -> Checked {
    match req.json.get_mut("params").map(Value::take) {
        None => Ok(()),
        Some(Value::Object(p)) => {
            req.params = p;
            Ok(())
        }
        Some(_) => Err(rpc(
            req,
            RpcError::InvalidParams("Invalid params: params must be an object".into()),
        )),
    }
}

/// Step 13: a tenant other than "".
fn tenant(_door: &Door, req: &mut Inbound) -> Checked {
    match req.params.get("tenant") {
        None => Ok(()),
        Some(Value::String(s)) if s.is_empty() => Ok(()),
        Some(v) => Err(rpc(
            req,
            RpcError::InvalidParams(format!(
                "Invalid params: tenant {v} names a tenant; this agent serves no tenants, so omit tenant"
            )),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::version_supported;

    #[test]
    fn version_header_values() {
        for ok in ["1.0", " 1.0 ", "1.0.1", "1.0.12"] {
            assert!(version_supported(ok), "{ok}");
        }
        for bad in ["", "0.3", "1", "1.1", "2.0", "1.0x", "1.0.", "1.0.1a"] {
            assert!(!version_supported(bad), "{bad}");
        }
    }
}
