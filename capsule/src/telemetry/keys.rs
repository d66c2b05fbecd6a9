//! Span names and attribute keys, spelled here and nowhere else: the OpenTelemetry GenAI and
//! A2A semantic conventions (v1.38.0, development status), then murmur's own `murmur.*`.

// Span names (the conventions' `{operation} {target}` pattern).
pub const INVOKE_AGENT: &str = "invoke_agent";
pub const CHAT: &str = "chat";
pub const EXECUTE_TOOL: &str = "execute_tool";

// GenAI.
pub const OPERATION: &str = "gen_ai.operation.name";
pub const AGENT_NAME: &str = "gen_ai.agent.name";
pub const CONVERSATION: &str = "gen_ai.conversation.id";
pub const PROVIDER: &str = "gen_ai.provider.name";
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
pub const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
pub const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
pub const FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
pub const TOOL_NAME: &str = "gen_ai.tool.name";
pub const TOOL_TYPE: &str = "gen_ai.tool.type";
pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";

// A2A.
pub const A2A_METHOD: &str = "a2a.method.name";
pub const A2A_TASK: &str = "a2a.task.id";
pub const A2A_STATE: &str = "a2a.task.state";
pub const A2A_VERSION: &str = "a2a.protocol.version";

// General.
pub const ERROR_TYPE: &str = "error.type";
pub const SERVER_ADDRESS: &str = "server.address";

// murmur's own.
pub const SESSION_ID: &str = "murmur.session.id";
pub const CAPSULE: &str = "murmur.capsule";
pub const FORMATION: &str = "murmur.formation";
pub const MEMBER: &str = "murmur.member";
pub const PRESET: &str = "murmur.preset";
pub const SESSION_MODE: &str = "murmur.harness.session_mode";
pub const OUTCOME: &str = "murmur.task.outcome";
pub const ORIGIN: &str = "murmur.task.origin";
pub const TIME_TO_FIRST_TOKEN: &str = "murmur.gen_ai.time_to_first_token_ms";
pub const CALLED_MEMBER: &str = "murmur.call.member";
pub const CALL_STATUS: &str = "murmur.call.status";
pub const DELEGATION: &str = "murmur.delegation.id";
pub const EXIT_CODE: &str = "murmur.exit_code";

// Span events.
pub const EV_CANCELED: &str = "murmur.task.canceled";
pub const EV_EGRESS_DENIED: &str = "murmur.egress.denied";
pub const EV_SPEND_CEILING: &str = "murmur.spend.ceiling";
pub const EV_APPROVAL_ASKED: &str = "murmur.approval.asked";
pub const EV_APPROVAL_ANSWERED: &str = "murmur.approval.answered";
pub const EV_RESTARTED: &str = "murmur.member.restarted";
