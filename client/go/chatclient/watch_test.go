package chatclient_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
	"agentskit.dev/chat/client/go/chatclient"
)

// watcher is a ChatService on loopback answering WatchSession with a fixed list of items
// (then the error end, when set) and CancelTurn as a running turn would, recording the
// requests.
type watcher struct {
	chatv1.UnimplementedChatServiceServer
	items    []*chatv1.WatchSessionResponse
	end      error
	watches  chan *chatv1.WatchSessionRequest
	cancels  chan *chatv1.CancelTurnRequest
	released chan struct{} // closed when a watch's context ends
}

func (w *watcher) WatchSession(req *chatv1.WatchSessionRequest, stream grpc.ServerStreamingServer[chatv1.WatchSessionResponse]) error {
	w.watches <- req
	for _, item := range w.items {
		if err := stream.Send(item); err != nil {
			return err
		}
	}
	if w.end != nil {
		return w.end
	}
	<-stream.Context().Done() // a watch stays open
	close(w.released)
	return nil
}

func (w *watcher) CancelTurn(_ context.Context, req *chatv1.CancelTurnRequest) (*chatv1.CancelTurnResponse, error) {
	w.cancels <- req
	if req.GetSessionId() != "s-1" {
		return nil, errorWithReason(codes.NotFound, "ERROR_REASON_SESSION_NOT_FOUND")
	}
	return &chatv1.CancelTurnResponse{Cancelled: true}, nil
}

func serveWatcher(t *testing.T, w *watcher) *chatclient.Client {
	t.Helper()
	w.watches = make(chan *chatv1.WatchSessionRequest, 4)
	w.cancels = make(chan *chatv1.CancelTurnRequest, 4)
	w.released = make(chan struct{})
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	chatv1.RegisterChatServiceServer(server, w)
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(server.Stop)
	return dialed(t, listener.Addr().String())
}

func sessionItem(cursor int64) *chatv1.WatchSessionResponse {
	return &chatv1.WatchSessionResponse{Item: &chatv1.WatchSessionResponse_Session{Session: &chatv1.Session{SessionId: "s-1", Cursor: cursor}}}
}

func eventItem(sequence uint64, text string) *chatv1.WatchSessionResponse {
	return &chatv1.WatchSessionResponse{Item: &chatv1.WatchSessionResponse_Event{Event: &chatv1.StreamTurnResponse{
		SessionId: "s-1", TurnId: "t-1", Sequence: sequence,
		Event: &chatv1.StreamTurnResponse_Delta{Delta: &chatv1.TextDelta{Text: text}},
	}}}
}

func TestWatchSessionYieldsItemsInOrderAndKeepsTheCursor(t *testing.T) {
	w := &watcher{items: []*chatv1.WatchSessionResponse{
		sessionItem(2),
		eventItem(3, "a"),
		{Item: &chatv1.WatchSessionResponse_Heartbeat{Heartbeat: &chatv1.WatchHeartbeat{}}},
		{}, // an item of a kind this client does not know: skipped
		eventItem(4, "b"),
		sessionItem(4),
	}}
	client := serveWatcher(t, w)
	watch, err := client.WatchSession(bounded(t), "s-1", chatclient.WithAfterCursor(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := watch.Cursor(); ok {
		t.Error("a cursor before the first session")
	}
	var got []*chatv1.WatchSessionResponse
	for item, err := range watch.Items() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, item)
		if len(got) == 5 {
			break // leaving the loop closes the watch
		}
	}
	want := []*chatv1.WatchSessionResponse{w.items[0], w.items[1], w.items[2], w.items[4], w.items[5]}
	for i := range want {
		if i >= len(got) || !proto.Equal(got[i], want[i]) {
			t.Fatalf("items %v, want %v", got, want)
		}
	}
	if cursor, ok := watch.Cursor(); !ok || cursor != 4 {
		t.Errorf("Cursor() = %d, %v", cursor, ok)
	}
	if request := <-w.watches; request.GetSessionId() != "s-1" || request.AfterCursor == nil || request.GetAfterCursor() != 2 {
		t.Errorf("request %v", request)
	}
	<-w.released // the server saw the watch end
	if watch.Receive() || watch.Err() != nil {
		t.Error("a closed watch still yields")
	}
}

func TestWatchSessionEndsWithTheServersError(t *testing.T) {
	w := &watcher{items: []*chatv1.WatchSessionResponse{sessionItem(7)}, end: errorWithReason(codes.Aborted, "ERROR_REASON_WATCH_BEHIND")}
	client := serveWatcher(t, w)
	watch, err := client.WatchSession(bounded(t), "s-1")
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	if !watch.Receive() || watch.Msg().GetSession().GetCursor() != 7 {
		t.Fatalf("first item %v, %v", watch.Msg(), watch.Err())
	}
	if watch.Receive() {
		t.Fatalf("an item after the session: %v", watch.Msg())
	}
	var chatErr *chatclient.Error
	if !errors.As(watch.Err(), &chatErr) || chatErr.Code() != codes.Aborted || chatErr.Reason() != "ERROR_REASON_WATCH_BEHIND" {
		t.Errorf("err = %v", watch.Err())
	}
	if request := <-w.watches; request.AfterCursor != nil {
		t.Errorf("after_cursor sent without WithAfterCursor: %v", request)
	}
}

func TestCancelTurn(t *testing.T) {
	w := &watcher{}
	client := serveWatcher(t, w)
	response, err := client.CancelTurn(bounded(t), "s-1", "t-1")
	if err != nil || !response.GetCancelled() {
		t.Fatalf("CancelTurn = %v, %v", response, err)
	}
	if request := <-w.cancels; request.GetSessionId() != "s-1" || request.GetTurnId() != "t-1" {
		t.Errorf("request %v", request)
	}
	response, err = client.CancelTurn(bounded(t), "s-2", "t-1")
	if response != nil || chatclient.ErrorOf(err).Reason() != "ERROR_REASON_SESSION_NOT_FOUND" {
		t.Errorf("CancelTurn of an unknown session = %v, %v", response, err)
	}
}
