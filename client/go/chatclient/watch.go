package chatclient

import (
	"context"
	"errors"
	"io"
	"iter"

	"google.golang.org/grpc"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
)

// WatchSessionOption configures WatchSession: WithAfterCursor.
type WatchSessionOption interface {
	applyWatchSession(*chatv1.WatchSessionRequest)
}

type afterCursorOption int64

func (o afterCursorOption) applyWatchSession(r *chatv1.WatchSessionRequest) {
	cursor := int64(o)
	r.AfterCursor = &cursor
}

// WithAfterCursor resumes a watch after the cursor of the last session it received
// (SessionWatch.Cursor). The watch still begins with the session as it is now; when its
// cursor is past this one, stored changes were missed: reload the history (GetSession).
func WithAfterCursor(cursor int64) WatchSessionOption { return afterCursorOption(cursor) }

// WatchSession follows a session live, whoever runs its turns: the session first, then
// the events of each turn as it runs (each a *chatv1.StreamTurnResponse carrying its turn
// id and sequence, in order and once per turn), the session again after every stored
// change, and a heartbeat after 15 seconds of silence. The stream stays open for the next
// turn until ctx is done or the watch is closed.
//
// Errors come from the watch as an *Error: an unknown session is NOT_FOUND
// (ERROR_REASON_SESSION_NOT_FOUND); a watcher that fell further behind than the server
// keeps is ended with ABORTED, ERROR_REASON_WATCH_BEHIND (watch again WithAfterCursor);
// too many watchers of the session or the tenant is RESOURCE_EXHAUSTED,
// ERROR_REASON_LIMIT_EXCEEDED. A broken watch is not resumed by itself: watch again
// WithAfterCursor(watch.Cursor()), skipping the events of a turn already shown (by turn id
// and sequence), or follow that turn with WatchTurn.
func (c *Client) WatchSession(ctx context.Context, sessionID string, opts ...WatchSessionOption) (*SessionWatch, error) {
	request := &chatv1.WatchSessionRequest{SessionId: sessionID}
	for _, opt := range opts {
		opt.applyWatchSession(request)
	}
	ctx, cancelDeadline := c.callContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	stop := func() { cancel(); cancelDeadline() }
	stream, err := c.rpc.WatchSession(ctx, request)
	if err != nil {
		stop()
		return nil, wrapError(err)
	}
	return &SessionWatch{stream: stream, stop: stop}, nil
}

// SessionWatch is the stream of WatchSession, read with Receive, Msg and Err:
//
//	for watch.Receive() {
//		switch item := watch.Msg().GetItem().(type) {
//		case *chatv1.WatchSessionResponse_Session: // item.Session
//		case *chatv1.WatchSessionResponse_Event: // item.Event.GetTurnId(), chatclient.EventOf(item.Event)
//		case *chatv1.WatchSessionResponse_Heartbeat:
//		}
//	}
//	if err := watch.Err(); err != nil { ... }
//
// or ranged over with Items. Close ends the watch. A SessionWatch is not safe for
// concurrent use: to stop it from another goroutine, cancel its context.
type SessionWatch struct {
	stream    grpc.ServerStreamingClient[chatv1.WatchSessionResponse]
	stop      func()
	item      *chatv1.WatchSessionResponse
	err       error
	ended     bool
	cursor    int64
	hasCursor bool
}

// Receive waits for the next item and reports whether there is one; when it returns
// false the watch has ended, and Err tells whether it failed. Items of a kind this
// client version does not know are skipped.
func (w *SessionWatch) Receive() bool {
	for !w.ended {
		item, err := w.stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				w.err = wrapError(err)
			}
			w.finish()
			return false
		}
		switch item.GetItem().(type) {
		case *chatv1.WatchSessionResponse_Session:
			w.cursor, w.hasCursor = item.GetSession().GetCursor(), true
		case *chatv1.WatchSessionResponse_Event, *chatv1.WatchSessionResponse_Heartbeat:
		default:
			continue
		}
		w.item = item
		return true
	}
	return false
}

// Msg is the item of the last successful Receive: GetSession, GetEvent or GetHeartbeat
// is set.
func (w *SessionWatch) Msg() *chatv1.WatchSessionResponse { return w.item }

// Err is the error the watch failed with, an *Error; nil while it runs and after a
// normal end.
func (w *SessionWatch) Err() error { return w.err }

// Cursor is the cursor of the last session received, for WithAfterCursor; ok is false
// before the first.
func (w *SessionWatch) Cursor() (cursor int64, ok bool) { return w.cursor, w.hasCursor }

// Close ends the watch; closing an ended watch does nothing.
func (w *SessionWatch) Close() {
	if !w.ended {
		w.finish()
	}
}

func (w *SessionWatch) finish() {
	w.ended = true
	w.item = nil
	w.stop()
}

// Items ranges over the remaining items; a failed watch yields its error last. Leaving
// the loop early closes the watch.
func (w *SessionWatch) Items() iter.Seq2[*chatv1.WatchSessionResponse, error] {
	return func(yield func(*chatv1.WatchSessionResponse, error) bool) {
		defer w.Close()
		for w.Receive() {
			if !yield(w.Msg(), nil) {
				return
			}
		}
		if w.err != nil {
			yield(nil, w.err)
		}
	}
}
