package chatclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
	"agentskit.dev/chat/client/go/chatclient"
)

// scripted is a ChatService on loopback running one turn from a scripted list of events:
// the first StreamTurn starts it, and from then on it publishes one event per pause,
// whatever happens to the streams (as a continued turn does). StreamTurn streams the
// turn's events from the first, WatchTurn those after its after_sequence, both live up to
// the last. The client reaches it through a proxy whose connections a test cuts.
type scripted struct {
	chatv1.UnimplementedChatServiceServer
	script []*chatv1.StreamTurnResponse // sequences 1..n
	pause  time.Duration
	turns  chan *chatv1.StreamTurnRequest
	watch  chan *chatv1.WatchTurnRequest
	// watchFails, when set, answers WatchTurn call n (1, 2...) with its error instead.
	watchFails func(n int) error
	// overlap makes WatchTurn repeat that many events before after_sequence as well.
	overlap uint64
	// outcome, when set, makes WatchTurn answer with a recorded outcome instead, as a
	// server that no longer keeps the events does: numbered from after_sequence + 1. Watch
	// call n is cut (UNAVAILABLE) after outcomeCuts[n] of its events.
	outcome     []*chatv1.StreamTurnResponse
	outcomeCuts map[int]int

	mu        sync.Mutex
	published int
	changed   chan struct{} // closed when an event is published
	watches   int
}

func newScripted(deltas int, pause time.Duration) *scripted {
	s := &scripted{
		pause: pause, changed: make(chan struct{}),
		turns: make(chan *chatv1.StreamTurnRequest, 16), watch: make(chan *chatv1.WatchTurnRequest, 64),
	}
	events := []*chatv1.StreamTurnResponse{
		{Event: &chatv1.StreamTurnResponse_Started{Started: &chatv1.TurnStarted{Operation: chatv1.Operation_OPERATION_SUBMIT}}},
		{Event: &chatv1.StreamTurnResponse_Decision{Decision: &chatv1.TurnDecision{Kind: chatv1.TurnKind_TURN_KIND_AGENTIC}}},
	}
	var text strings.Builder
	for i := range deltas {
		piece := fmt.Sprintf("d%d ", i+1)
		text.WriteString(piece)
		events = append(events, &chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_Delta{Delta: &chatv1.TextDelta{Text: piece}}})
	}
	events = append(events, &chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_Completed{Completed: &chatv1.TurnCompleted{Content: text.String(), Cursor: 1}}})
	for i, event := range events {
		event.SessionId, event.TurnId, event.Sequence = "s-1", "t-1", uint64(i+1)
	}
	s.script = events
	return s
}

// text is the answer the script streams.
func (s *scripted) text() string {
	return s.script[len(s.script)-1].GetCompleted().GetContent()
}

func (s *scripted) run() {
	for range s.script {
		s.mu.Lock()
		s.published++
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
		time.Sleep(s.pause)
	}
}

// follow sends the published events after `after`, waiting for each, up to the last.
func (s *scripted) follow(ctx context.Context, after uint64, send func(*chatv1.StreamTurnResponse) error) error {
	next := int(after)
	for next < len(s.script) {
		s.mu.Lock()
		published, changed := s.published, s.changed
		s.mu.Unlock()
		if next >= published {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-changed:
			}
			continue
		}
		if err := send(s.script[next]); err != nil {
			return err
		}
		next++
	}
	return nil
}

func (s *scripted) StreamTurn(req *chatv1.StreamTurnRequest, stream grpc.ServerStreamingServer[chatv1.StreamTurnResponse]) error {
	s.turns <- req
	go s.run()
	return s.follow(stream.Context(), 0, stream.Send)
}

func (s *scripted) WatchTurn(req *chatv1.WatchTurnRequest, stream grpc.ServerStreamingServer[chatv1.StreamTurnResponse]) error {
	s.watch <- req
	s.mu.Lock()
	s.watches++
	n := s.watches
	s.mu.Unlock()
	if s.watchFails != nil {
		if err := s.watchFails(n); err != nil {
			return err
		}
	}
	after := req.GetAfterSequence()
	if s.outcome != nil {
		cut, cuts := s.outcomeCuts[n]
		for i, recorded := range s.outcome {
			if cuts && i == cut {
				return status.Error(codes.Unavailable, "connection cut")
			}
			response := proto.Clone(recorded).(*chatv1.StreamTurnResponse)
			response.Sequence = after + uint64(i) + 1
			if err := stream.Send(response); err != nil {
				return err
			}
		}
		return nil
	}
	after -= min(after, s.overlap)
	return s.follow(stream.Context(), after, stream.Send)
}

// cutter is a TCP proxy in front of a server whose connections a test closes, as a
// network change or a proxy restart does.
type cutter struct {
	listener net.Listener
	backend  string
	mu       sync.Mutex
	conns    []net.Conn
	cuts     int
}

func (p *cutter) serve() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.backend)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		pipe := func(to, from net.Conn) {
			_, _ = io.Copy(to, from)
			_ = to.Close()
			_ = from.Close()
		}
		go pipe(server, client)
		go pipe(client, server)
	}
}

// cut closes every connection through the proxy; new ones may be made afterwards.
func (p *cutter) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, conn := range p.conns {
		_ = conn.Close()
	}
	p.conns = nil
	p.cuts++
}

// serveScripted starts the scripted server and a proxy in front of it, and returns a
// client dialed through the proxy.
func serveScripted(t *testing.T, s *scripted, opts ...chatclient.DialOption) (*chatclient.Client, *cutter) {
	t.Helper()
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	chatv1.RegisterChatServiceServer(server, s)
	go func() { _ = server.Serve(backend) }()
	t.Cleanup(server.Stop)

	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy := &cutter{listener: front, backend: backend.Addr().String()}
	go proxy.serve()
	t.Cleanup(func() { _ = front.Close(); proxy.cut() })
	return dialed(t, front.Addr().String(), opts...), proxy
}

// read reads a stream to its end, calling at(sequence) after each event, and returns the
// sequences and text it saw.
func read(stream *chatclient.TurnStream, at func(uint64)) (sequences []uint64, text string) {
	var b strings.Builder
	for stream.Receive() {
		sequences = append(sequences, stream.Response().GetSequence())
		if delta, ok := stream.Msg().(*chatv1.TextDelta); ok {
			b.WriteString(delta.GetText())
		}
		if at != nil {
			at(stream.Response().GetSequence())
		}
	}
	return sequences, b.String()
}

func upTo(n int) []uint64 {
	var all []uint64
	for i := range n {
		all = append(all, uint64(i+1))
	}
	return all
}

// bounded is a context that ends with the test, or after 20 s, so that a stream that
// never ends fails its test instead of hanging the run.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fastReattach is the default policy with waits of a few milliseconds.
func fastReattach() chatclient.ReattachOption {
	return chatclient.WithReattach(chatclient.ReattachPolicy{
		InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
	})
}

// errorWithReason is a status with a google.rpc.ErrorInfo reason, as the server sends.
func errorWithReason(code codes.Code, reason string) error {
	st, err := status.New(code, reason).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "agentskit.chat.v1"})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func TestContinuedTurnReattachesAfterACut(t *testing.T) {
	s := newScripted(6, 20*time.Millisecond)
	client, proxy := serveScripted(t, s)
	var attempts []chatclient.ReattachAttempt
	stream, err := client.Submit(bounded(t), "s-1", "hi", chatclient.WithTurnID("t-1"),
		chatclient.WithContinueOnDisconnect(),
		chatclient.WithReattach(chatclient.ReattachPolicy{OnReattach: func(a chatclient.ReattachAttempt) {
			attempts = append(attempts, a)
		}}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	sequences, text := read(stream, func(sequence uint64) {
		if sequence == 3 {
			proxy.cut()
		}
	})
	if err := stream.Err(); err != nil {
		t.Fatalf("the stream failed: %v", err)
	}
	if request := <-s.turns; request.GetOnDisconnect() != chatv1.DisconnectMode_DISCONNECT_MODE_CONTINUE {
		t.Errorf("on_disconnect = %v", request.GetOnDisconnect())
	}
	if !slices.Equal(sequences, upTo(len(s.script))) || text != s.text() {
		t.Errorf("sequences %v, text %q", sequences, text)
	}
	if len(attempts) != 1 || attempts[0].Attempt != 1 || attempts[0].Delay != 100*time.Millisecond || attempts[0].TurnID != "t-1" {
		t.Fatalf("attempts %+v", attempts)
	}
	if code := chatclient.ErrorOf(attempts[0].Err).Code(); code != codes.Unavailable && code != codes.Internal {
		t.Errorf("the break was %v", attempts[0].Err)
	}
	watch := <-s.watch
	if watch.GetSessionId() != "s-1" || watch.GetTurnId() != "t-1" || watch.GetAfterSequence() != attempts[0].AfterSequence || watch.GetAfterSequence() < 3 {
		t.Errorf("watch %v after the break at %d", watch, attempts[0].AfterSequence)
	}
	if stream.LastSequence() != uint64(len(s.script)) {
		t.Errorf("LastSequence() = %d", stream.LastSequence())
	}
}

func TestARecordedOutcomeThatBreaksIsFollowedAgainFromTheStart(t *testing.T) {
	s := newScripted(6, 20*time.Millisecond)
	recorded := func(r *chatv1.StreamTurnResponse) *chatv1.StreamTurnResponse {
		r.SessionId, r.TurnId = "s-1", "t-1"
		return r
	}
	s.outcome = []*chatv1.StreamTurnResponse{ // the server no longer keeps the events
		recorded(&chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_Started{Started: &chatv1.TurnStarted{Duplicate: true}}}),
		recorded(&chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_Delta{Delta: &chatv1.TextDelta{Text: "whole answer"}}}),
		recorded(&chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_Completed{Completed: &chatv1.TurnCompleted{Content: "whole answer"}}}),
	}
	s.outcomeCuts = map[int]int{1: 2} // the first outcome breaks after two of its events
	client, proxy := serveScripted(t, s, fastReattach())
	stream, err := client.Submit(bounded(t), "s-1", "hi", chatclient.WithTurnID("t-1"),
		chatclient.WithContinueOnDisconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var kinds []string
	var duplicates int
	var sequences []uint64
	for stream.Receive() {
		sequences = append(sequences, stream.Response().GetSequence())
		kinds = append(kinds, fmt.Sprintf("%T", stream.Msg()))
		if started, ok := stream.Msg().(*chatv1.TurnStarted); ok && started.GetDuplicate() {
			duplicates++
		}
		if stream.Response().GetSequence() == 3 {
			proxy.cut()
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("the stream failed: %v", err)
	}
	if !slices.Equal(sequences, upTo(len(sequences))) {
		t.Errorf("sequences %v: each once, in order, never mixed", sequences)
	}
	if duplicates != 1 || len(kinds) < 3 || kinds[len(kinds)-1] != "*chatv1.TurnCompleted" {
		t.Errorf("events %v, %d repeats started", kinds, duplicates)
	}
	first, second := <-s.watch, <-s.watch
	if first.GetAfterSequence() < 3 || second.GetAfterSequence() != 0 {
		t.Errorf("watches after %d then %d: the repeat is followed again from its start",
			first.GetAfterSequence(), second.GetAfterSequence())
	}
}

func TestEveryEventOnceAcrossSeveralCuts(t *testing.T) {
	s := newScripted(12, 15*time.Millisecond)
	s.overlap = 2 // a server repeating events the client has: they are skipped
	client, proxy := serveScripted(t, s)
	stream, err := client.Submit(bounded(t), "s-1", "hi", chatclient.WithTurnID("t-1"),
		chatclient.WithContinueOnDisconnect(), fastReattach())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	cutAt := []uint64{2, 5, 6, 10}
	sequences, text := read(stream, func(sequence uint64) {
		if slices.Contains(cutAt, sequence) {
			proxy.cut()
		}
	})
	if err := stream.Err(); err != nil {
		t.Fatalf("the stream failed: %v", err)
	}
	if !slices.Equal(sequences, upTo(len(s.script))) || text != s.text() {
		t.Errorf("sequences %v, text %q", sequences, text)
	}
	close(s.watch)
	var after []uint64
	for watch := range s.watch {
		after = append(after, watch.GetAfterSequence())
	}
	if len(after) < len(cutAt) || !slices.IsSorted(after) {
		t.Errorf("%d cuts, watched after %v", len(cutAt), after)
	}
}

func TestTurnThatCancelsOnDisconnectIsNotReattached(t *testing.T) {
	for name, opts := range map[string][]chatclient.TurnOption{
		"default":                   nil,
		"cancel":                    {chatclient.WithOnDisconnect(chatv1.DisconnectMode_DISCONNECT_MODE_CANCEL)},
		"continue without reattach": {chatclient.WithContinueOnDisconnect(), chatclient.WithoutReattach()},
	} {
		t.Run(name, func(t *testing.T) {
			s := newScripted(6, 20*time.Millisecond)
			client, proxy := serveScripted(t, s)
			stream, err := client.Submit(bounded(t), "s-1", "hi", opts...)
			if err != nil {
				t.Fatal(err)
			}
			sequences, _ := read(stream, func(sequence uint64) {
				if sequence == 2 {
					proxy.cut()
				}
			})
			code := chatclient.ErrorOf(stream.Err()).Code()
			if code != codes.Unavailable && code != codes.Internal {
				t.Errorf("err = %v", stream.Err())
			}
			if len(sequences) >= len(s.script) || len(s.watch) != 0 {
				t.Errorf("sequences %v, %d WatchTurn calls", sequences, len(s.watch))
			}
		})
	}
}

func TestReattachGivesUpAfterItsAttemptsWithTheLastError(t *testing.T) {
	s := newScripted(6, 20*time.Millisecond)
	s.watchFails = func(n int) error { return status.Errorf(codes.Unavailable, "watch %d refused", n) }
	client, proxy := serveScripted(t, s)
	var delays []time.Duration
	stream, err := client.Submit(bounded(t), "s-1", "hi", chatclient.WithTurnID("t-1"),
		chatclient.WithContinueOnDisconnect(),
		chatclient.WithReattach(chatclient.ReattachPolicy{
			MaxAttempts: 6, InitialBackoff: time.Millisecond, MaxBackoff: 8 * time.Millisecond,
			OnReattach: func(a chatclient.ReattachAttempt) {
				if a.Attempt != len(delays)+1 || a.AfterSequence != 2 {
					t.Errorf("attempt %+v", a)
				}
				delays = append(delays, a.Delay)
			},
		}))
	if err != nil {
		t.Fatal(err)
	}
	sequences, _ := read(stream, func(sequence uint64) {
		if sequence == 2 {
			proxy.cut()
		}
	})
	var chatErr *chatclient.Error
	if !errors.As(stream.Err(), &chatErr) || chatErr.Code() != codes.Unavailable || chatErr.Message() != "watch 6 refused" {
		t.Errorf("err = %v, want the sixth attempt's", stream.Err())
	}
	ms := time.Millisecond
	if !slices.Equal(delays, []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 8 * ms, 8 * ms}) {
		t.Errorf("delays %v", delays)
	}
	if !slices.Equal(sequences, []uint64{1, 2}) || len(s.watch) != 6 {
		t.Errorf("sequences %v, %d WatchTurn calls", sequences, len(s.watch))
	}
}

func TestReattachStopsWhenTheContextIsDone(t *testing.T) {
	s := newScripted(6, 20*time.Millisecond)
	client, proxy := serveScripted(t, s)
	ctx, cancel := context.WithCancel(bounded(t))
	defer cancel()
	var delays []time.Duration
	stream, err := client.Submit(ctx, "s-1", "hi", chatclient.WithContinueOnDisconnect(),
		chatclient.WithReattach(chatclient.ReattachPolicy{OnReattach: func(a chatclient.ReattachAttempt) {
			delays = append(delays, a.Delay)
			cancel() // during the wait before the first attempt
		}}))
	if err != nil {
		t.Fatal(err)
	}
	read(stream, func(sequence uint64) {
		if sequence == 2 {
			proxy.cut()
		}
	})
	if !errors.Is(stream.Err(), context.Canceled) || chatclient.ErrorOf(stream.Err()).Code() != codes.Canceled {
		t.Errorf("err = %v", stream.Err())
	}
	if !slices.Equal(delays, []time.Duration{100 * time.Millisecond}) || len(s.watch) != 0 {
		t.Errorf("delays %v, %d WatchTurn calls", delays, len(s.watch))
	}
}

// neverStarted answers StreamTurn with UNAVAILABLE before any event (the turn never ran)
// and WatchTurn with TURN_NOT_FOUND.
type neverStarted struct {
	chatv1.UnimplementedChatServiceServer
	watches chan *chatv1.WatchTurnRequest
}

func (n *neverStarted) StreamTurn(*chatv1.StreamTurnRequest, grpc.ServerStreamingServer[chatv1.StreamTurnResponse]) error {
	return status.Error(codes.Unavailable, "draining")
}

func (n *neverStarted) WatchTurn(req *chatv1.WatchTurnRequest, _ grpc.ServerStreamingServer[chatv1.StreamTurnResponse]) error {
	n.watches <- req
	return errorWithReason(codes.NotFound, "ERROR_REASON_TURN_NOT_FOUND")
}

func TestATurnThatNeverStartedEndsWithTheBreak(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	fake := &neverStarted{watches: make(chan *chatv1.WatchTurnRequest, 4)}
	chatv1.RegisterChatServiceServer(server, fake)
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(server.Stop)
	client := dialed(t, listener.Addr().String())

	stream, err := client.Submit(bounded(t), "s-1", "hi", chatclient.WithContinueOnDisconnect(),
		chatclient.WithReattach(chatclient.ReattachPolicy{InitialBackoff: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	if stream.Receive() {
		t.Fatal("an event")
	}
	var chatErr *chatclient.Error
	if !errors.As(stream.Err(), &chatErr) || chatErr.Code() != codes.Unavailable || chatErr.Message() != "draining" {
		t.Errorf("err = %v, want the stream's own UNAVAILABLE (the same turn id may be sent again)", stream.Err())
	}
	if len(fake.watches) != 1 || (<-fake.watches).GetAfterSequence() != 0 {
		t.Error("no WatchTurn from sequence 0")
	}
}

func TestWatchTurnFollowsAfterASequenceAndReattaches(t *testing.T) {
	s := newScripted(6, 20*time.Millisecond)
	client, proxy := serveScripted(t, s)
	starter, err := client.Submit(bounded(t), "s-1", "hi", chatclient.WithTurnID("t-1"),
		chatclient.WithContinueOnDisconnect())
	if err != nil {
		t.Fatal(err)
	}
	if !starter.Receive() { // the turn runs
		t.Fatal(starter.Err())
	}
	starter.Close() // and goes on

	watch, err := client.WatchTurn(bounded(t), "s-1", "t-1", 3, fastReattach())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	if watch.TurnID() != "t-1" || watch.LastSequence() != 3 {
		t.Errorf("TurnID %q, LastSequence %d", watch.TurnID(), watch.LastSequence())
	}
	sequences, text := read(watch, func(sequence uint64) {
		if sequence == 5 {
			proxy.cut()
		}
	})
	if watch.Err() != nil || !slices.Equal(sequences, upTo(len(s.script))[3:]) || !strings.HasSuffix(s.text(), text) {
		t.Errorf("sequences %v, text %q, err %v", sequences, text, watch.Err())
	}
	if first := <-s.watch; first.GetAfterSequence() != 3 || first.GetTurnId() != "t-1" {
		t.Errorf("first watch %v", first)
	}
	if second := <-s.watch; second.GetAfterSequence() < 5 {
		t.Errorf("watch after the cut %v", second)
	}

}

func TestWatchTurnWithoutReattachFailsAtACut(t *testing.T) {
	s := newScripted(6, 20*time.Millisecond)
	client, proxy := serveScripted(t, s)
	starter, err := client.Submit(bounded(t), "s-1", "hi", chatclient.WithTurnID("t-1"),
		chatclient.WithContinueOnDisconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer starter.Close()
	watch, err := client.WatchTurn(bounded(t), "s-1", "t-1", 0, chatclient.WithoutReattach())
	if err != nil {
		t.Fatal(err)
	}
	sequences, _ := read(watch, func(sequence uint64) {
		if sequence == 1 {
			proxy.cut()
		}
	})
	if code := chatclient.ErrorOf(watch.Err()).Code(); code != codes.Unavailable && code != codes.Internal {
		t.Errorf("err = %v", watch.Err())
	}
	if len(sequences) >= len(s.script) || len(s.watch) != 1 {
		t.Errorf("sequences %v, %d WatchTurn calls", sequences, len(s.watch))
	}
}

// The live server of the corpus through the cutting proxy: a continued turn whose
// connection is cut twice still gives every event once and commits once. The model reply
// is the one the corpus's reattach-after-cut scenario has the harness serve (four chunks,
// 400 ms apart).
func TestContinuedTurnOfTheLiveServerSurvivesCuts(t *testing.T) {
	target := os.Getenv("AGENTSKIT_CHAT_CONFORMANCE_TARGET")
	if target == "" {
		t.Skip("AGENTSKIT_CHAT_CONFORMANCE_TARGET is not set (see TestConformance)")
	}
	const content = "conformance: an answer that outlives its stream"
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy := &cutter{listener: front, backend: target}
	go proxy.serve()
	t.Cleanup(func() { _ = front.Close(); proxy.cut() })
	client := dial(t, front.Addr().String(), os.Getenv("AGENTSKIT_CHAT_CONFORMANCE_TOKEN"))
	ctx := bounded(t)

	session, err := client.CreateSession(ctx, "conformance")
	if err != nil {
		t.Fatal(err)
	}
	var attempts []chatclient.ReattachAttempt
	stream, err := client.Submit(ctx, session.GetSessionId(), content, chatclient.WithContinueOnDisconnect(),
		chatclient.WithReattach(chatclient.ReattachPolicy{OnReattach: func(a chatclient.ReattachAttempt) {
			attempts = append(attempts, a)
		}}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	cuts := 0
	var kinds []string
	var sequences []uint64
	var text strings.Builder
	for stream.Receive() {
		sequences = append(sequences, stream.Response().GetSequence())
		switch event := stream.Msg().(type) {
		case *chatv1.TurnStarted:
			kinds = append(kinds, "started")
		case *chatv1.TurnDecision:
			kinds = append(kinds, "decision")
		case *chatv1.TextDelta:
			kinds = append(kinds, "delta")
			text.WriteString(event.GetText())
		case *chatv1.TurnCompleted:
			kinds = append(kinds, "completed")
		case *chatv1.TurnFailed:
			kinds = append(kinds, "failed")
		}
		if kinds[len(kinds)-1] != "completed" && cuts < 2 && (cuts == 0 || kinds[len(kinds)-1] == "delta") {
			proxy.cut() // after the first event, then after the first delta that follows
			cuts++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("the stream failed after %v: %v", kinds, err)
	}
	if text.String() != "Still here after the cut." || kinds[len(kinds)-1] != "completed" || !slices.Equal(sequences, upTo(len(sequences))) {
		t.Errorf("events %v, sequences %v, text %q", kinds, sequences, text.String())
	}
	if len(attempts) < 2 {
		t.Errorf("%d cuts, reattached %d times", cuts, len(attempts))
	}
	history, err := client.GetSession(ctx, session.GetSessionId())
	if err != nil {
		t.Fatal(err)
	}
	if messages := history.GetMessages(); history.GetSession().GetCursor() != 2 || len(messages) != 2 || messages[1].GetContent() != text.String() {
		t.Errorf("history %v", history)
	}
}

func TestAWatchEndedForFallingBehindIsFollowedAgain(t *testing.T) {
	s := newScripted(4, 10*time.Millisecond)
	s.watchFails = func(n int) error {
		if n == 1 {
			return errorWithReason(codes.Aborted, "ERROR_REASON_WATCH_BEHIND")
		}
		return nil
	}
	client, _ := serveScripted(t, s)
	starter, err := client.Submit(bounded(t), "s-1", "hi", chatclient.WithTurnID("t-1"), chatclient.WithContinueOnDisconnect())
	if err != nil {
		t.Fatal(err)
	}
	defer starter.Close()
	watch, err := client.WatchTurn(bounded(t), "s-1", "t-1", 0, fastReattach())
	if err != nil {
		t.Fatal(err)
	}
	sequences, _ := read(watch, nil)
	if watch.Err() != nil || !slices.Equal(sequences, upTo(len(s.script))) || len(s.watch) != 2 {
		t.Errorf("sequences %v, err %v, %d WatchTurn calls", sequences, watch.Err(), len(s.watch))
	}
}

func TestAnAnswerToAReattachEndsTheStream(t *testing.T) {
	s := newScripted(6, 20*time.Millisecond)
	s.watchFails = func(int) error { return errorWithReason(codes.NotFound, "ERROR_REASON_SESSION_NOT_FOUND") }
	client, proxy := serveScripted(t, s)
	stream, err := client.Submit(bounded(t), "s-1", "hi", chatclient.WithContinueOnDisconnect(), fastReattach())
	if err != nil {
		t.Fatal(err)
	}
	read(stream, func(sequence uint64) {
		if sequence == 2 {
			proxy.cut()
		}
	})
	if reason := chatclient.ErrorOf(stream.Err()).Reason(); reason != "ERROR_REASON_SESSION_NOT_FOUND" || len(s.watch) != 1 {
		t.Errorf("err %v after %d WatchTurn calls", stream.Err(), len(s.watch))
	}
}

func TestAClientsReattachPolicyIsTheDefaultOfItsCalls(t *testing.T) {
	for name, opts := range map[string][]chatclient.TurnOption{
		"the client's":   nil,
		"the call's own": {fastReattach()},
	} {
		t.Run(name, func(t *testing.T) {
			s := newScripted(6, 20*time.Millisecond)
			client, proxy := serveScripted(t, s, chatclient.WithoutReattach())
			stream, err := client.Submit(bounded(t), "s-1", "hi", append(opts, chatclient.WithContinueOnDisconnect())...)
			if err != nil {
				t.Fatal(err)
			}
			sequences, _ := read(stream, func(sequence uint64) {
				if sequence == 2 {
					proxy.cut()
				}
			})
			reattached := len(s.watch) > 0
			if reattached != (opts != nil) || (stream.Err() == nil) != reattached {
				t.Errorf("sequences %v, err %v, %d WatchTurn calls", sequences, stream.Err(), len(s.watch))
			}
		})
	}
}
