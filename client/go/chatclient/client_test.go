package chatclient_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
	"agentskit.dev/chat/client/go/chatclient"
)

// recorder is a ChatService on loopback that records what calls carry (metadata and
// deadlines, which the real server does not report) and streams turns of three deltas,
// slowly enough for a client to leave in the middle. The corpus (conformance_test.go)
// tests the client against the real server.
type recorder struct {
	chatv1.UnimplementedChatServiceServer
	pause time.Duration // before each delta
	calls chan call
	ended chan error
}

type call struct {
	authorization []string
	deadline      time.Duration // 0: none
	turn          *chatv1.StreamTurnRequest
}

func (r *recorder) record(ctx context.Context, turn *chatv1.StreamTurnRequest) {
	md, _ := metadata.FromIncomingContext(ctx)
	c := call{authorization: md.Get("authorization"), turn: turn}
	if deadline, ok := ctx.Deadline(); ok {
		c.deadline = time.Until(deadline)
	}
	r.calls <- c
}

func (r *recorder) GetSession(ctx context.Context, req *chatv1.GetSessionRequest) (*chatv1.GetSessionResponse, error) {
	r.record(ctx, nil)
	return &chatv1.GetSessionResponse{Session: &chatv1.Session{SessionId: req.GetSessionId(), Cursor: 4}}, nil
}

func (r *recorder) StreamTurn(req *chatv1.StreamTurnRequest, stream grpc.ServerStreamingServer[chatv1.StreamTurnResponse]) error {
	r.record(stream.Context(), req)
	send := func(response *chatv1.StreamTurnResponse) error {
		response.TurnId = req.GetTurnId()
		return stream.Send(response)
	}
	err := send(&chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_Started{Started: &chatv1.TurnStarted{Operation: chatv1.Operation_OPERATION_SUBMIT}}})
	for _, piece := range []string{"one ", "two ", "three"} {
		if err == nil {
			select {
			case <-stream.Context().Done():
				err = stream.Context().Err() // sends nothing more, as a real server
				continue
			case <-time.After(r.pause):
			}
			err = send(&chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_Delta{Delta: &chatv1.TextDelta{Text: piece}}})
		}
	}
	if err == nil {
		err = send(&chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_Completed{Completed: &chatv1.TurnCompleted{Content: "one two three", Cursor: 2}}})
	}
	r.ended <- stream.Context().Err()
	if err := stream.Context().Err(); err != nil {
		// As a real server does: a call whose deadline passed (or that was cancelled)
		// never ends with OK, even when the handler's status reaches the client before
		// the client's own deadline does.
		return status.FromContextError(err).Err()
	}
	return nil
}

func serve(t *testing.T) (string, *recorder) {
	t.Helper()
	return serveWithPause(t, 50*time.Millisecond)
}

func serveWithPause(t *testing.T, pause time.Duration) (string, *recorder) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	rec := &recorder{pause: pause, calls: make(chan call, 16), ended: make(chan error, 16)}
	chatv1.RegisterChatServiceServer(server, rec)
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(server.Stop)
	return listener.Addr().String(), rec
}

func dialed(t *testing.T, target string, opts ...chatclient.DialOption) *chatclient.Client {
	t.Helper()
	client, err := chatclient.Dial(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

func TestTokenAndDefaultDeadlineReachTheServer(t *testing.T) {
	target, rec := serve(t)
	client := dialed(t, target, chatclient.WithToken("s3cret"), chatclient.WithTimeout(20*time.Second))

	session, err := client.GetSession(context.Background(), "s-1")
	if err != nil || session.GetSession().GetCursor() != 4 {
		t.Fatalf("GetSession = %v, %v", session, err)
	}
	got := <-rec.calls
	if len(got.authorization) != 1 || got.authorization[0] != "Bearer s3cret" {
		t.Errorf("authorization = %q", got.authorization)
	}
	if got.deadline <= 15*time.Second || got.deadline > 20*time.Second {
		t.Errorf("deadline = %v, want the 20s default", got.deadline)
	}

	// A deadline of the caller's own wins over the default.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client.GetSession(ctx, "s-1"); err != nil {
		t.Fatal(err)
	}
	if got := <-rec.calls; got.deadline > 5*time.Second {
		t.Errorf("deadline = %v, want the caller's 5s", got.deadline)
	}
}

func TestNewOverACallersConnection(t *testing.T) {
	target, rec := serve(t)
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := chatclient.New(conn, chatclient.WithToken("t"))
	if err := client.Close(); err != nil { // leaves the caller's connection open
		t.Fatal(err)
	}
	if _, err := client.GetSession(context.Background(), "s-1"); err != nil {
		t.Fatal(err)
	}
	if got := <-rec.calls; len(got.authorization) != 1 || got.authorization[0] != "Bearer t" || got.deadline != 0 {
		t.Errorf("authorization %q, deadline %v", got.authorization, got.deadline)
	}
}

func TestTurnStreamCollectsEventsAndMakesATurnID(t *testing.T) {
	target, rec := serve(t)
	client := dialed(t, target)

	result, err := client.RunTurn(context.Background(), "s-1", chatclient.Submit{Content: "hi", MessageID: "m-1"},
		chatclient.WithExpectedCursor(1))
	if err != nil {
		t.Fatal(err)
	}
	request := (<-rec.calls).turn
	if len(result.TurnID) != 32 || request.GetTurnId() != result.TurnID {
		t.Errorf("turn id %q, sent %q", result.TurnID, request.GetTurnId())
	}
	if request.GetSubmit().GetMessageId() != "m-1" || request.GetExpectedCursor() != 1 {
		t.Errorf("request = %v", request)
	}
	if result.Text != "one two three" || result.Started == nil || result.Completed.GetCursor() != 2 || len(result.Events) != 5 {
		t.Errorf("result = %+v", result)
	}

	stream, err := client.Retry(context.Background(), "s-1", "", chatclient.WithTurnID("t-7"))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if stream.TurnID() != "t-7" || (<-rec.calls).turn.GetRetry() == nil {
		t.Errorf("turn id %q", stream.TurnID())
	}
	var kinds []string
	for stream.Receive() {
		kinds = append(kinds, strings.TrimPrefix(string(stream.Msg().ProtoReflect().Descriptor().Name()), "Turn"))
		if stream.Response().GetTurnId() != "t-7" {
			t.Errorf("response turn id %q", stream.Response().GetTurnId())
		}
	}
	if stream.Err() != nil || strings.Join(kinds, ",") != "Started,TextDelta,TextDelta,TextDelta,Completed" {
		t.Errorf("kinds %v, err %v", kinds, stream.Err())
	}
}

func TestLeavingTheLoopCancelsTheCall(t *testing.T) {
	target, rec := serve(t)
	client := dialed(t, target)

	stream, err := client.Submit(context.Background(), "s-1", "hi")
	if err != nil {
		t.Fatal(err)
	}
	for event, err := range stream.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := event.(*chatv1.TextDelta); ok {
			break
		}
	}
	select {
	case err := <-rec.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the server saw %v, want a cancelled call", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call was not cancelled on the server")
	}
	if stream.Receive() || stream.Err() != nil {
		t.Error("a closed stream still yields")
	}
}

func TestStreamTurnRefusesANilOperationWithoutACall(t *testing.T) {
	target, rec := serve(t)
	client := dialed(t, target)

	var missing *chatclient.Submit
	for _, operation := range []chatclient.Operation{nil, missing} {
		stream, err := client.StreamTurn(context.Background(), "s-1", operation)
		var chatErr *chatclient.Error
		if stream != nil || !errors.As(err, &chatErr) || chatErr.Code() != codes.InvalidArgument || chatErr.Reason() != "" {
			t.Errorf("StreamTurn(%#v) = %v, %v", operation, stream, err)
		}
	}
	if _, err := client.RunTurn(context.Background(), "s-1", nil); chatclient.ErrorOf(err).Code() != codes.InvalidArgument {
		t.Errorf("RunTurn(nil) = %v", err)
	}
	if _, err := client.GetSession(context.Background(), "s-1"); err != nil {
		t.Fatal(err)
	}
	if first := <-rec.calls; first.turn != nil {
		t.Errorf("a turn was sent: %v", first.turn)
	}
}

func TestDeadlineEndsAStreamWithDeadlineExceeded(t *testing.T) {
	target, _ := serveWithPause(t, 10*time.Second)
	client := dialed(t, target, chatclient.WithTimeout(500*time.Millisecond))
	if _, err := client.GetSession(context.Background(), "s-1"); err != nil { // connected
		t.Fatal(err)
	}

	result, err := client.RunTurn(context.Background(), "s-1", chatclient.Submit{Content: "hi"})
	var chatErr *chatclient.Error
	if !errors.As(err, &chatErr) || chatErr.Code() != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if result == nil || result.Started == nil || result.Completed != nil {
		t.Errorf("events before the deadline: %+v", result)
	}
}

func TestDialRefusesATokenInPlaintextToAnotherHost(t *testing.T) {
	for _, target := range []string{"chat.example.com:50051", "10.0.0.7:50051", "dns:///chat.example.com:443"} {
		if _, err := chatclient.Dial(target, chatclient.WithToken("t")); err == nil {
			t.Errorf("Dial(%q) sent a token in plaintext", target)
		}
		for _, allowed := range []chatclient.DialOption{chatclient.AllowPlaintextToken(), chatclient.WithTLS(nil)} {
			client, err := chatclient.Dial(target, chatclient.WithToken("t"), allowed)
			if err != nil {
				t.Errorf("Dial(%q): %v", target, err)
				continue
			}
			_ = client.Close()
		}
	}
	for _, target := range []string{"localhost:50051", "127.0.0.1:1", "[::1]:50051", "dns:///localhost:50051", "unix:///run/chat.sock", "passthrough:///127.0.0.2:9"} {
		client, err := chatclient.Dial(target, chatclient.WithToken("t"))
		if err != nil {
			t.Errorf("Dial(%q): %v", target, err)
			continue
		}
		_ = client.Close()
	}
	if _, err := chatclient.Dial("localhost:1", chatclient.WithToken("two words")); err == nil {
		t.Error("a token with whitespace was accepted")
	}
}

func TestTLSConfigFromPEM(t *testing.T) {
	if _, err := chatclient.TLSConfigFromPEM([]byte("not a certificate"), nil, nil); err == nil {
		t.Error("a root CA PEM without certificates was accepted")
	}
	if _, err := chatclient.TLSConfigFromPEM(nil, []byte("cert"), nil); err == nil {
		t.Error("a client certificate without its key was accepted")
	}
	config, err := chatclient.TLSConfigFromPEM(nil, nil, nil)
	if err != nil || config.RootCAs != nil || len(config.Certificates) != 0 {
		t.Errorf("TLSConfigFromPEM(nil, nil, nil) = %v, %v", config, err)
	}
}

func TestNewTurnID(t *testing.T) {
	a, b := chatclient.NewTurnID(), chatclient.NewTurnID()
	if len(a) != 32 || a == b || a[12] != '4' {
		t.Errorf("NewTurnID() = %q, %q", a, b)
	}
}
