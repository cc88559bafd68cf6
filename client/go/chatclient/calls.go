package chatclient

import (
	"context"
	"iter"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
)

// SessionOption configures CreateSession: WithSessionID, WithHistoryMode, WithRevision.
type SessionOption interface {
	applySession(*chatv1.CreateSessionRequest)
}

type sessionOption func(*chatv1.CreateSessionRequest)

func (o sessionOption) applySession(r *chatv1.CreateSessionRequest) { o(r) }

// WithSessionID asks for a session id chosen by the client; the server chooses one
// otherwise. An id in use fails with ALREADY_EXISTS, ERROR_REASON_SESSION_EXISTS.
func WithSessionID(id string) SessionOption {
	return sessionOption(func(r *chatv1.CreateSessionRequest) { r.SessionId = id })
}

// WithHistoryMode says who keeps the session's messages; server-held by default.
// HISTORY_MODE_CLIENT sessions run turns with Dispatch only.
func WithHistoryMode(mode chatv1.HistoryMode) SessionOption {
	return sessionOption(func(r *chatv1.CreateSessionRequest) { r.HistoryMode = mode })
}

// DefinitionOption configures GetDefinition: WithRevision.
type DefinitionOption interface {
	applyDefinition(*chatv1.GetDefinitionRequest)
}

// RevisionOption is WithRevision's option; it applies to CreateSession and GetDefinition
// alike.
type RevisionOption struct {
	revision int64
}

// WithRevision names a served revision of the definition. On CreateSession it pins the
// session to it; without it the server's rollout picks one by the session id (see
// Definition.ServedRevisions). On GetDefinition it asks for that revision's description;
// without it the newest served one. A revision the server does not serve fails with
// FAILED_PRECONDITION, ERROR_REASON_REVISION_MISMATCH, the revision in the metadata
// "definition_revision".
func WithRevision(revision int64) RevisionOption { return RevisionOption{revision: revision} }

func (o RevisionOption) applySession(r *chatv1.CreateSessionRequest) {
	r.DefinitionRevision = &o.revision
}

func (o RevisionOption) applyDefinition(r *chatv1.GetDefinitionRequest) {
	r.Revision = &o.revision
}

// WriteOption configures DeleteSession and TruncateHistory: WithExpectedCursor.
type WriteOption interface {
	applyWrite(*writeSettings)
}

type writeSettings struct {
	expectedCursor *int64
}

// CursorOption is WithExpectedCursor's option; it applies to turns and writes alike.
type CursorOption struct {
	cursor int64
}

// WithExpectedCursor runs the call only while the session cursor still equals cursor;
// otherwise it fails with ABORTED, ERROR_REASON_CONFLICT, the current cursor in the
// metadata "cursor", and nothing changes. A finished turn id repeats its recorded
// outcome whatever the cursor.
func WithExpectedCursor(cursor int64) CursorOption { return CursorOption{cursor: cursor} }

func (o CursorOption) applyWrite(s *writeSettings) { s.expectedCursor = &o.cursor }
func (o CursorOption) applyTurn(s *turnSettings)   { s.expectedCursor = &o.cursor }

func writeOptions(opts []WriteOption) writeSettings {
	var s writeSettings
	for _, opt := range opts {
		opt.applyWrite(&s)
	}
	return s
}

// ListDefinitions returns every chat definition the server hosts, ordered by id.
func (c *Client) ListDefinitions(ctx context.Context) ([]*chatv1.Definition, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	response, err := c.rpc.ListDefinitions(ctx, &chatv1.ListDefinitionsRequest{})
	return response.GetDefinitions(), wrapError(err)
}

// GetDefinition returns one chat definition: its newest served revision, or the one
// WithRevision names, with every served revision in ServedRevisions. An unknown id fails
// with NOT_FOUND, ERROR_REASON_DEFINITION_NOT_FOUND; a revision not served with
// FAILED_PRECONDITION, ERROR_REASON_REVISION_MISMATCH.
func (c *Client) GetDefinition(ctx context.Context, definitionID string, opts ...DefinitionOption) (*chatv1.Definition, error) {
	request := &chatv1.GetDefinitionRequest{DefinitionId: definitionID}
	for _, opt := range opts {
		opt.applyDefinition(request)
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	response, err := c.rpc.GetDefinition(ctx, request)
	return response.GetDefinition(), wrapError(err)
}

// CreateSession starts a session of a definition at its initial state. It fails with
// NOT_FOUND (ERROR_REASON_DEFINITION_NOT_FOUND) for an unknown definition,
// ALREADY_EXISTS (ERROR_REASON_SESSION_EXISTS) for a WithSessionID id in use and
// FAILED_PRECONDITION (ERROR_REASON_REVISION_MISMATCH, metadata "definition_revision")
// for a WithRevision revision the server does not serve. The session's
// DefinitionRevision changes when it migrates to a newer revision at a turn;
// MigrationBlocked says why it stayed when it could not.
func (c *Client) CreateSession(ctx context.Context, definitionID string, opts ...SessionOption) (*chatv1.Session, error) {
	request := &chatv1.CreateSessionRequest{DefinitionId: definitionID}
	for _, opt := range opts {
		opt.applySession(request)
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	response, err := c.rpc.CreateSession(ctx, request)
	return response.GetSession(), wrapError(err)
}

// GetSession returns a session and, for server-held history, its retained messages
// (assistant messages with their AnswerOrigin). An unknown id fails with NOT_FOUND,
// ERROR_REASON_SESSION_NOT_FOUND.
func (c *Client) GetSession(ctx context.Context, sessionID string) (*chatv1.GetSessionResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	response, err := c.rpc.GetSession(ctx, &chatv1.GetSessionRequest{SessionId: sessionID})
	if err != nil {
		return nil, wrapError(err)
	}
	return response, nil
}

// DeleteSession removes a session and its stored history (see WithExpectedCursor).
func (c *Client) DeleteSession(ctx context.Context, sessionID string, opts ...WriteOption) error {
	s := writeOptions(opts)
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	_, err := c.rpc.DeleteSession(ctx, &chatv1.DeleteSessionRequest{
		SessionId: sessionID, ExpectedCursor: s.expectedCursor,
	})
	return wrapError(err)
}

// TruncateHistory drops every message of a server-held history after lastKeptMessageID
// (every message when it is empty) without running a turn; the state is reconciled on
// the next turn. It fails with FAILED_PRECONDITION, ERROR_REASON_HISTORY_MISMATCH, for a
// client-held history or an unknown message id (see also WithExpectedCursor).
func (c *Client) TruncateHistory(ctx context.Context, sessionID, lastKeptMessageID string, opts ...WriteOption) (*chatv1.TruncateHistoryResponse, error) {
	s := writeOptions(opts)
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	response, err := c.rpc.TruncateHistory(ctx, &chatv1.TruncateHistoryRequest{
		SessionId: sessionID, LastKeptMessageId: lastKeptMessageID, ExpectedCursor: s.expectedCursor,
	})
	if err != nil {
		return nil, wrapError(err)
	}
	return response, nil
}

// Truncate is TruncateHistory.
func (c *Client) Truncate(ctx context.Context, sessionID, lastKeptMessageID string, opts ...WriteOption) (*chatv1.TruncateHistoryResponse, error) {
	return c.TruncateHistory(ctx, sessionID, lastKeptMessageID, opts...)
}

// GetTurn returns the record of a turn id the session retains: running, completed or
// failed. It runs nothing. A turn id the session does not retain (never started,
// cancelled, or too old) fails with NOT_FOUND, ERROR_REASON_TURN_NOT_FOUND: such a turn
// did not finish and may run again under the same id.
func (c *Client) GetTurn(ctx context.Context, sessionID, turnID string) (*chatv1.TurnRecord, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	response, err := c.rpc.GetTurn(ctx, &chatv1.GetTurnRequest{SessionId: sessionID, TurnId: turnID})
	return response.GetTurn(), wrapError(err)
}

// ListTurns returns one page of the session's retained turns, newest first. pageSize 0
// means the server's default (20), at most 100; pageToken is the NextPageToken of the
// previous page of the same session, empty for the first. A negative pageSize or a
// foreign token fails with INVALID_ARGUMENT.
func (c *Client) ListTurns(ctx context.Context, sessionID string, pageSize int32, pageToken string) (*chatv1.ListTurnsResponse, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	response, err := c.rpc.ListTurns(ctx, &chatv1.ListTurnsRequest{
		SessionId: sessionID, PageSize: pageSize, PageToken: pageToken,
	})
	if err != nil {
		return nil, wrapError(err)
	}
	return response, nil
}

// AllTurns yields every retained turn of the session, newest first, fetching pages of 100
// as it goes. A failed page is yielded as an error, after which the iteration ends.
func (c *Client) AllTurns(ctx context.Context, sessionID string) iter.Seq2[*chatv1.TurnRecord, error] {
	return func(yield func(*chatv1.TurnRecord, error) bool) {
		token := ""
		for {
			page, err := c.ListTurns(ctx, sessionID, 100, token)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, turn := range page.GetTurns() {
				if !yield(turn, nil) {
					return
				}
			}
			token = page.GetNextPageToken()
			if token == "" {
				return
			}
		}
	}
}
