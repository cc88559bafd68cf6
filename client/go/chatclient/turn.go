package chatclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"reflect"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
)

// Operation is what a turn does: Submit, Retry, Edit, Regenerate, Dispatch or
// ToolResults.
type Operation interface {
	setOn(*chatv1.StreamTurnRequest)
}

// Submit appends a user message to a server-held history and resolves it.
type Submit struct {
	// Content is the message text.
	Content string
	// MessageID is the new message's id; the server chooses one when empty.
	MessageID string
}

// Retry sends a user message of a server-held history again; later messages are dropped
// and a recorded route decision is replayed.
type Retry struct {
	// MessageID is the user message to retry; the last user message when empty.
	MessageID string
}

// Edit changes a user message of a server-held history, drops every later message and
// resolves the edited one.
type Edit struct {
	// MessageID is the user message to change.
	MessageID string
	// Content is its new text.
	Content string
}

// Regenerate drops an assistant answer of a server-held history and answers the user
// message before it again.
type Regenerate struct {
	// MessageID is the assistant message to replace; the last one when empty.
	MessageID string
}

// Dispatch resolves the last user message of a client-held history, sent whole. A history
// that ends with tool messages (chatv1.Role_ROLE_TOOL, ToolCallId set) answering the last
// answer's pending calls continues that answer instead: it goes to the model, never
// through the routes (see ToolResults for the refusals of calls left unanswered).
type Dispatch struct {
	// Messages is the full retained history, oldest first; the client chooses the ids.
	// An assistant message keeps the ToolCalls its answer made (TurnCompleted.ToolCalls).
	Messages []*chatv1.Message
	// Approvals are the decisions on the last answer's calls that wait for approval;
	// none by default.
	Approvals []*chatv1.ToolApproval
}

func (o Submit) setOn(r *chatv1.StreamTurnRequest) {
	r.Operation = &chatv1.StreamTurnRequest_Submit{Submit: &chatv1.SubmitOperation{
		Content: o.Content, MessageId: o.MessageID,
	}}
}

func (o Retry) setOn(r *chatv1.StreamTurnRequest) {
	r.Operation = &chatv1.StreamTurnRequest_Retry{Retry: &chatv1.RetryOperation{MessageId: o.MessageID}}
}

func (o Edit) setOn(r *chatv1.StreamTurnRequest) {
	r.Operation = &chatv1.StreamTurnRequest_Edit{Edit: &chatv1.EditOperation{
		MessageId: o.MessageID, Content: o.Content,
	}}
}

func (o Regenerate) setOn(r *chatv1.StreamTurnRequest) {
	r.Operation = &chatv1.StreamTurnRequest_Regenerate{Regenerate: &chatv1.RegenerateOperation{
		MessageId: o.MessageID,
	}}
}

func (o Dispatch) setOn(r *chatv1.StreamTurnRequest) {
	r.Operation = &chatv1.StreamTurnRequest_Dispatch{Dispatch: &chatv1.DispatchOperation{
		Messages: o.Messages, Approvals: o.Approvals,
	}}
}

// TurnOption configures one turn: WithTurnID, WithExpectedCursor,
// WithContinueOnDisconnect (or WithOnDisconnect), WithReattach, WithoutReattach, and the
// turn's tools: WithTools, WithToolChoice, WithParallelToolCalls.
type TurnOption interface {
	applyTurn(*turnSettings)
}

type turnSettings struct {
	turnID         string
	expectedCursor *int64
	onDisconnect   chatv1.DisconnectMode
	reattach       *ReattachPolicy
	reattachSet    bool

	tools             []Tool
	toolChoice        string
	parallelToolCalls *bool
}

type disconnectOption chatv1.DisconnectMode

func (o disconnectOption) applyTurn(s *turnSettings) { s.onDisconnect = chatv1.DisconnectMode(o) }

// WithOnDisconnect says what the server does with the turn when its stream ends before
// the turn does (the context is cancelled, its deadline passes, the connection breaks):
// DISCONNECT_MODE_CANCEL stops it, as when the option is not given (nothing is sent
// then); DISCONNECT_MODE_CONTINUE lets it run to its end (see WithContinueOnDisconnect).
func WithOnDisconnect(mode chatv1.DisconnectMode) TurnOption { return disconnectOption(mode) }

// WithContinueOnDisconnect lets the turn run to its end and commit even when its stream
// ends first (within the server's turn timeout). The TurnStream then reattaches by itself
// when the stream breaks (see ReattachPolicy; WithReattach tunes it, WithoutReattach
// turns it off), and WatchTurn follows the turn from any other stream or process. Closing
// the stream or cancelling its context does not stop such a turn: CancelTurn does.
func WithContinueOnDisconnect() TurnOption {
	return disconnectOption(chatv1.DisconnectMode_DISCONNECT_MODE_CONTINUE)
}

type turnIDOption string

func (o turnIDOption) applyTurn(s *turnSettings) { s.turnID = string(o) }

// WithTurnID sets the turn id, the turn's idempotency key: a turn id among the session's
// 64 most recent finished turns is never executed again, its stream repeats the recorded
// outcome (TurnStarted.Duplicate set). Without it a fresh id is made (NewTurnID); pass
// your own to be able to retry the same turn safely.
func WithTurnID(id string) TurnOption { return turnIDOption(id) }

// NewTurnID returns a fresh turn id: 32 hex digits of a random (version 4) UUID.
func NewTurnID() string {
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return hex.EncodeToString(id[:])
}

// StreamTurn runs one turn and returns its stream of events; the call ends with the
// stream, when ctx is done or when the stream is closed. Errors of the call (a busy
// session, a conflict, an unknown session...) come from the stream as an *Error.
//
// A fresh turn id is made unless WithTurnID gives one; TurnStream.TurnID tells which.
// Read the stream to its end or Close it: until then the call holds its resources.
//
// A nil operation (or a nil *Submit, *Retry...) makes no call: StreamTurn returns an
// *Error with code InvalidArgument and no Reason, and so does a Tool whose Parameters are
// not JSON.
func (c *Client) StreamTurn(ctx context.Context, sessionID string, operation Operation, opts ...TurnOption) (*TurnStream, error) {
	if operation == nil || isNilPointer(operation) {
		return nil, NewError(status.New(codes.InvalidArgument, "chatclient: StreamTurn needs an operation (Submit, Retry, Edit, Regenerate, Dispatch or ToolResults)"))
	}
	s := turnSettings{}
	for _, opt := range opts {
		opt.applyTurn(&s)
	}
	if s.turnID == "" {
		s.turnID = NewTurnID()
	}
	request := &chatv1.StreamTurnRequest{
		SessionId: sessionID, TurnId: s.turnID, ExpectedCursor: s.expectedCursor,
		OnDisconnect: s.onDisconnect,
	}
	operation.setOn(request)
	if err := s.setTools(request); err != nil {
		return nil, err
	}
	var reattach *ReattachPolicy
	if s.onDisconnect == chatv1.DisconnectMode_DISCONNECT_MODE_CONTINUE {
		reattach = c.reattachPolicy(s.reattach, s.reattachSet)
	}
	stream, err := c.openTurnStream(ctx, sessionID, s.turnID, 0, reattach,
		func(ctx context.Context) (grpc.ServerStreamingClient[chatv1.StreamTurnResponse], error) {
			return c.rpc.StreamTurn(ctx, request)
		})
	if stream != nil {
		stream.started = true
	}
	return stream, err
}

// openTurnStream makes the TurnStream of a call: open starts its first stream, in the
// context every later stream (a reattach) runs in too.
func (c *Client) openTurnStream(ctx context.Context, sessionID, turnID string, after uint64, reattach *ReattachPolicy,
	open func(context.Context) (grpc.ServerStreamingClient[chatv1.StreamTurnResponse], error),
) (*TurnStream, error) {
	ctx, cancelDeadline := c.callContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	stop := func() { cancel(); cancelDeadline() }
	stream, err := open(ctx)
	if err != nil {
		stop()
		return nil, wrapError(err)
	}
	return &TurnStream{
		turnID: turnID, sessionID: sessionID, rpc: c.rpc, ctx: ctx, stream: stream, stop: stop,
		reattach: reattach, last: after,
	}, nil
}

// WatchTurnOption configures WatchTurn: WithReattach, WithoutReattach.
type WatchTurnOption interface {
	applyWatchTurn(*watchTurnSettings)
}

type watchTurnSettings struct {
	reattach    *ReattachPolicy
	reattachSet bool
}

// WatchTurn follows a turn by id: the events after afterSequence (0: all of them),
// numbered as the turn numbered them, first those missed, then live ones, up to the
// terminal event, each once. It returns the TurnStream a turn call returns, so one loop
// renders both. A finished turn whose events the server no longer keeps answers with its
// recorded outcome (TurnStarted.Duplicate set, numbered from afterSequence+1): replace
// what was shown of the turn. Watching never starts, changes or extends the turn; closing
// the stream only ends the watch.
//
// Errors come from the stream as an *Error: an unknown turn is NOT_FOUND
// (ERROR_REASON_TURN_NOT_FOUND), afterSequence past the turn's last event
// INVALID_ARGUMENT. A broken stream is followed again by itself (see ReattachPolicy)
// unless WithoutReattach is given.
func (c *Client) WatchTurn(ctx context.Context, sessionID, turnID string, afterSequence uint64, opts ...WatchTurnOption) (*TurnStream, error) {
	s := watchTurnSettings{}
	for _, opt := range opts {
		opt.applyWatchTurn(&s)
	}
	reattach := c.reattachPolicy(s.reattach, s.reattachSet)
	request := &chatv1.WatchTurnRequest{SessionId: sessionID, TurnId: turnID, AfterSequence: afterSequence}
	return c.openTurnStream(ctx, sessionID, turnID, afterSequence, reattach,
		func(ctx context.Context) (grpc.ServerStreamingClient[chatv1.StreamTurnResponse], error) {
			return c.rpc.WatchTurn(ctx, request)
		})
}

// CancelTurn stops a running turn, as a disconnect of a stream that cancels does: nothing
// is committed, the turn's streams (its starter's and every watcher's) end with a
// *chatv1.TurnFailed of code "cancelled", the session's lease is released at once and the
// turn id may run again. Cancelled is false when no turn with this id was running (it
// finished, was cancelled already, or never ran); Turn is then its record when the session
// retains it. An unknown session fails with NOT_FOUND, ERROR_REASON_SESSION_NOT_FOUND.
func (c *Client) CancelTurn(ctx context.Context, sessionID, turnID string) (*chatv1.CancelTurnResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	response, err := c.rpc.CancelTurn(ctx, &chatv1.CancelTurnRequest{SessionId: sessionID, TurnId: turnID})
	if err != nil {
		return nil, wrapError(err)
	}
	return response, nil
}

func isNilPointer(operation Operation) bool {
	value := reflect.ValueOf(operation)
	return value.Kind() == reflect.Pointer && value.IsNil()
}

// Submit appends a user message to a server-held history and streams the turn. Use
// StreamTurn with a Submit to choose the new message's id.
func (c *Client) Submit(ctx context.Context, sessionID, content string, opts ...TurnOption) (*TurnStream, error) {
	return c.StreamTurn(ctx, sessionID, Submit{Content: content}, opts...)
}

// Retry sends a user message again (the last one when messageID is empty) and streams
// the turn.
func (c *Client) Retry(ctx context.Context, sessionID, messageID string, opts ...TurnOption) (*TurnStream, error) {
	return c.StreamTurn(ctx, sessionID, Retry{MessageID: messageID}, opts...)
}

// Edit changes a user message, drops the later ones and streams the turn.
func (c *Client) Edit(ctx context.Context, sessionID, messageID, content string, opts ...TurnOption) (*TurnStream, error) {
	return c.StreamTurn(ctx, sessionID, Edit{MessageID: messageID, Content: content}, opts...)
}

// Regenerate answers again in place of an assistant message (the last one when
// messageID is empty) and streams the turn.
func (c *Client) Regenerate(ctx context.Context, sessionID, messageID string, opts ...TurnOption) (*TurnStream, error) {
	return c.StreamTurn(ctx, sessionID, Regenerate{MessageID: messageID}, opts...)
}

// Dispatch sends a whole client-held history and streams the turn of its last user
// message (or, when it ends with tool results, of the answer they continue). Use
// StreamTurn with a Dispatch to send approvals.
func (c *Client) Dispatch(ctx context.Context, sessionID string, messages []*chatv1.Message, opts ...TurnOption) (*TurnStream, error) {
	return c.StreamTurn(ctx, sessionID, Dispatch{Messages: messages}, opts...)
}

// RunTurn runs one turn to its end and collects its events. A turn that ends with
// TurnFailed returns normally with Failed set; a failed call returns an *Error (with the
// events received before it).
func (c *Client) RunTurn(ctx context.Context, sessionID string, operation Operation, opts ...TurnOption) (*TurnResult, error) {
	stream, err := c.StreamTurn(ctx, sessionID, operation, opts...)
	if err != nil {
		return nil, err
	}
	return stream.Collect()
}
