"""Span, metric and attribute names: `agentskit.chat.*` for turns, GenAI conventions for models.

The `gen_ai.*` names follow the OpenTelemetry GenAI semantic conventions for a chat
client; no name here carries message content.
"""

from __future__ import annotations

from typing import Final

SCOPE: Final = "agentskit_chat"
"""The instrumentation scope of every span and metric this package records."""

TURN_SPAN: Final = "chat.turn"
"""Turn spans are named `chat.turn {operation}`, such as `chat.turn submit`."""
CHAT: Final = "chat"
"""`gen_ai.operation.name` of a model call; its span is named `chat {model}`."""

DEFINITION_ID: Final = "agentskit.chat.definition.id"
DEFINITION_REVISION: Final = "agentskit.chat.definition.revision"
SESSION_ID: Final = "agentskit.chat.session.id"
TURN_ID: Final = "agentskit.chat.turn.id"
OPERATION: Final = "agentskit.chat.operation"
KIND: Final = "agentskit.chat.kind"
ROUTE_ID: Final = "agentskit.chat.route.id"
ROUTE_TOOL: Final = "agentskit.chat.route.tool"
"""The server tool a route ran (its name only)."""
FROM_STATE: Final = "agentskit.chat.from_state"
TO_STATE: Final = "agentskit.chat.to_state"
REPLAYED: Final = "agentskit.chat.replayed"
OUTCOME: Final = "agentskit.chat.outcome"
ERROR_CODE: Final = "agentskit.chat.error.code"
MODEL_ADAPTER: Final = "agentskit.chat.model.adapter"

GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
EXECUTE_TOOL: Final = "execute_tool"
"""`gen_ai.operation.name` of a server tool's call; its span is named `execute_tool {tool}`."""
EXTENSION: Final = "extension"
"""`gen_ai.tool.type` of a server tool: run by the service, on an MCP server."""
MCP_SERVER: Final = "agentskit.chat.mcp.server"
"""The name (in its definition) of the MCP server a server tool ran on."""
TOOL_CALL_EVENT: Final = "agentskit.chat.tool_call"
"""A turn span's event for each tool call its answer made (tool name and call id only)."""
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"

RPC_SYSTEM_NAME: Final = "rpc.system.name"
RPC_METHOD: Final = "rpc.method"
RPC_RESPONSE_STATUS_CODE: Final = "rpc.response.status_code"
NETWORK_PEER_ADDRESS: Final = "network.peer.address"
NETWORK_PEER_PORT: Final = "network.peer.port"

TURNS: Final = "agentskit.chat.turns"
TOOL_CALLS: Final = "agentskit.chat.tool_calls"
MIGRATIONS: Final = "agentskit.chat.migrations"
MIGRATION_FROM: Final = "agentskit.chat.migration.from_revision"
MIGRATION_TO: Final = "agentskit.chat.migration.to_revision"
MIGRATION_OUTCOME: Final = "agentskit.chat.migration.outcome"
MIGRATION_CODE: Final = "agentskit.chat.migration.code"
OTHER_TOOL: Final = "_other"
"""The tool name of a tool call counted past the bound on distinct names."""
TURN_DURATION: Final = "agentskit.chat.turn.duration"
TOOL_DURATION: Final = "agentskit.chat.tool.duration"
"""Duration of a server tool's call, by `gen_ai.tool.name` and `error.type`."""
TURN_TIME_TO_FIRST_CHUNK: Final = "agentskit.chat.turn.time_to_first_chunk"
GEN_AI_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
GEN_AI_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
RPC_SERVER_CALL_DURATION: Final = "rpc.server.call.duration"

TURN_SECONDS_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    20.0,
    40.0,
    80.0,
)
"""Turn latency: deterministic turns take well under a millisecond, agentic ones seconds."""
GEN_AI_SECONDS_BUCKETS: Final = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
"""The GenAI conventions' advisory boundaries for `gen_ai.client.operation.duration`."""
GEN_AI_TOKEN_BUCKETS: Final = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
"""The GenAI conventions' advisory boundaries for `gen_ai.client.token.usage`."""
