// Package chatclient is a thin Go client of the AgentsKit Chat session service
// (agentskit.chat.v1), over the gRPC code generated from the contract in
// agentskit.dev/chat/client/go/agentskit/chat/v1.
//
// Dial opens a connection to a server (or New wraps one the caller owns); the Client's
// methods speak the contract's own messages. Every method takes a context first: its
// deadline bounds the call (a turn stream counts as one call) and cancelling it cancels
// the call on the server. A failed call returns an *Error, which carries the gRPC code
// and the google.rpc.ErrorInfo reason, metadata and RetryInfo delay the server attached:
//
//	var chatErr *chatclient.Error
//	if errors.As(err, &chatErr) && chatErr.Reason() == "ERROR_REASON_SESSION_BUSY" { ... }
//
// A turn is streamed: StreamTurn (or Submit, Retry, Edit, Regenerate, Dispatch,
// ToolResults) returns a TurnStream whose events are *chatv1.TurnStarted,
// *chatv1.TurnDecision, *chatv1.TextDelta and the tool call events
// (*chatv1.ToolCallStarted, *chatv1.ToolCallDelta, *chatv1.ToolCallEnded), then exactly
// one of *chatv1.TurnCompleted or *chatv1.TurnFailed.
//
// A turn declares the tools the model may call with WithTools (and WithToolChoice,
// WithParallelToolCalls). The client runs them: an answer that calls them completes
// waiting for their results (TurnResult.PendingToolCalls), which the next turn sends with
// ToolResults (or, for a client-held history, a Dispatch ending with tool messages),
// together with the approval decisions of calls the definition marks for approval.
//
// A turn started WithContinueOnDisconnect outlives its stream: its TurnStream reattaches
// by itself when the stream breaks (WatchTurn from the last sequence received, see
// ReattachPolicy), so the caller reads each event once. WatchTurn follows a turn by id
// from anywhere, CancelTurn stops it, and WatchSession follows every turn of a session
// live, whoever started it.
package chatclient
