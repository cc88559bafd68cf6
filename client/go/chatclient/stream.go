package chatclient

import (
	"context"
	"errors"
	"io"
	"iter"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
)

// Event is one event of a turn: *chatv1.TurnStarted, *chatv1.TurnDecision,
// *chatv1.TextDelta, *chatv1.ToolCallStarted, *chatv1.ToolCallDelta,
// *chatv1.ToolCallEnded, *chatv1.ToolCallResult (a server tool the service ran),
// *chatv1.TurnCompleted or *chatv1.TurnFailed. Switch on its type.
type Event interface {
	proto.Message
}

// EventOf returns the event a stream response carries, or nil for an event kind this
// client version does not know.
func EventOf(response *chatv1.StreamTurnResponse) Event {
	switch event := response.GetEvent().(type) {
	case *chatv1.StreamTurnResponse_Started:
		return event.Started
	case *chatv1.StreamTurnResponse_Decision:
		return event.Decision
	case *chatv1.StreamTurnResponse_Delta:
		return event.Delta
	case *chatv1.StreamTurnResponse_Completed:
		return event.Completed
	case *chatv1.StreamTurnResponse_Failed:
		return event.Failed
	case *chatv1.StreamTurnResponse_ToolCallStarted:
		return event.ToolCallStarted
	case *chatv1.StreamTurnResponse_ToolCallDelta:
		return event.ToolCallDelta
	case *chatv1.StreamTurnResponse_ToolCallEnded:
		return event.ToolCallEnded
	case *chatv1.StreamTurnResponse_ToolCallResult:
		return event.ToolCallResult
	}
	return nil
}

// TurnStream is the stream of one turn's events, read with Receive, Msg and Err:
//
//	for stream.Receive() {
//		switch event := stream.Msg().(type) { ... }
//	}
//	if err := stream.Err(); err != nil { ... }
//
// or ranged over with Events. Events arrive in order: started, decision, the answer's
// text deltas and tool call events, then exactly one of completed or failed. A tool call
// is a ToolCallStarted (id and name), ToolCallDelta pieces of its arguments and a
// ToolCallEnded with the whole arguments; the calls of one answer may interleave. A stream of a turn started with
// WithContinueOnDisconnect, and a WatchTurn stream, reattach by themselves when the
// stream breaks (see ReattachPolicy): the caller reads one stream, each event once.
// Close cancels the call if it has not ended. A TurnStream is not safe for concurrent
// use: to stop it from another goroutine, cancel the context it was started with.
type TurnStream struct {
	turnID    string
	sessionID string
	rpc       chatv1.ChatServiceClient
	ctx       context.Context // the call's: every stream of the turn runs in it
	stream    grpc.ServerStreamingClient[chatv1.StreamTurnResponse]
	stop      func()
	response  *chatv1.StreamTurnResponse
	event     Event
	err       error
	ended     bool

	reattach *ReattachPolicy // nil: a broken stream fails at once
	started  bool            // the first stream was StreamTurn's (not WatchTurn's)
	last     uint64          // the sequence of the last event received
	seen     bool            // some stream gave an event
	attempt  int             // reattach attempts since the last event
	broke    *Error          // the first break, once the stream broke
	// A recorded outcome (a repeat: TurnStarted.duplicate) is numbered by the answer that
	// sends it, from its after_sequence + 1, not as the turn numbered its events: after a
	// break in it, it is followed again from 0 (the same repeat, numbered from 1) and that
	// numbering is shifted onto the one already returned.
	repeat *uint64 // the sequence returned before the repeat's first event
	shift  uint64  // what the current stream's sequences are shifted by
}

// TurnID is the turn's id, given with WithTurnID or made by the client.
func (s *TurnStream) TurnID() string { return s.turnID }

// LastSequence is the sequence of the last event received (the after_sequence
// argument of WatchTurn to follow the turn from there), or the afterSequence WatchTurn
// was given while no event has arrived.
func (s *TurnStream) LastSequence() uint64 { return s.last }

// Receive waits for the next event and reports whether there is one; when it returns
// false the stream has ended, and Err tells whether it failed. Events of a kind this
// client version does not know are skipped.
//
// A stream that reattaches (see ReattachPolicy) does so inside Receive: it waits, calls
// WatchTurn from the last sequence received and goes on with the next event, skipping
// any it already returned.
func (s *TurnStream) Receive() bool {
	for !s.ended {
		response, err := s.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || !s.follow(wrapError(err)) {
				s.finish()
				return false
			}
			continue
		}
		sequence := response.GetSequence()
		if sequence != 0 && s.shift != 0 {
			sequence += s.shift
			response.Sequence = sequence
		}
		if s.broke != nil && sequence != 0 && sequence <= s.last {
			continue // returned before the stream broke
		}
		if s.repeat == nil && response.GetStarted().GetDuplicate() && sequence > 0 {
			before := sequence - 1
			s.repeat = &before
		}
		s.last, s.seen, s.attempt = max(s.last, sequence), true, 0
		if event := EventOf(response); event != nil {
			s.response, s.event = response, event
			return true
		}
	}
	return false
}

// follow decides what a failed stream does next: it reattaches (and reports true) when
// the policy allows it, or sets the error the stream ends with.
func (s *TurnStream) follow(failure error) bool {
	for {
		chatErr := ErrorOf(failure)
		if s.started && s.broke != nil && !s.seen && chatErr.Reason() == "ERROR_REASON_TURN_NOT_FOUND" {
			s.err = s.broke // the turn never started: the same turn id may be sent again
			return false
		}
		policy := s.reattach
		if policy == nil || s.ctx.Err() != nil || !broken(chatErr) || s.attempt >= policy.MaxAttempts {
			s.err = failure
			return false
		}
		if s.broke == nil {
			s.broke = chatErr
		}
		s.attempt++
		delay := policy.backoff(s.attempt)
		if policy.OnReattach != nil {
			policy.OnReattach(ReattachAttempt{
				TurnID: s.turnID, Attempt: s.attempt, Delay: delay, AfterSequence: s.last, Err: failure,
			})
		}
		timer := time.NewTimer(delay)
		select {
		case <-s.ctx.Done():
			timer.Stop()
			s.err = ErrorOf(s.ctx.Err())
			return false
		case <-timer.C:
		}
		after, shift := s.last, uint64(0)
		if s.repeat != nil {
			after, shift = 0, *s.repeat
		}
		stream, err := s.rpc.WatchTurn(s.ctx, &chatv1.WatchTurnRequest{
			SessionId: s.sessionID, TurnId: s.turnID, AfterSequence: after,
		})
		if err != nil {
			failure = wrapError(err)
			continue
		}
		s.stream, s.shift = stream, shift
		return true
	}
}

// Msg is the event of the last successful Receive.
func (s *TurnStream) Msg() Event { return s.event }

// Response is the whole response of the last successful Receive, with its sequence
// number and time.
func (s *TurnStream) Response() *chatv1.StreamTurnResponse { return s.response }

// Err is the error the stream failed with, an *Error; nil while it runs and after a
// normal end. A turn that ran and failed ends normally, with a *chatv1.TurnFailed event.
func (s *TurnStream) Err() error { return s.err }

// Close cancels the call if it is still running; closing an ended stream does nothing.
// The server then abandons a turn that cancels on disconnect (it commits nothing); a turn
// started with WithContinueOnDisconnect runs on (CancelTurn stops it).
func (s *TurnStream) Close() {
	if !s.ended {
		s.finish()
	}
}

func (s *TurnStream) finish() {
	s.ended = true
	s.event = nil
	s.stop()
}

// Events ranges over the remaining events; a failed stream yields its error last. Leaving
// the loop early closes the stream, cancelling the call:
//
//	for event, err := range stream.Events() { ... }
func (s *TurnStream) Events() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		defer s.Close()
		for s.Receive() {
			if !yield(s.Msg(), nil) {
				return
			}
		}
		if s.err != nil {
			yield(nil, s.err)
		}
	}
}

// TurnResult is a whole turn, collected by Collect or Client.RunTurn.
type TurnResult struct {
	// TurnID is the turn's id.
	TurnID string
	// Started, Decision, Completed and Failed are the turn's events of those kinds, nil
	// when the stream had none. Exactly one of Completed and Failed is set after a
	// stream that ended normally.
	Started   *chatv1.TurnStarted
	Decision  *chatv1.TurnDecision
	Completed *chatv1.TurnCompleted
	Failed    *chatv1.TurnFailed
	// Text is the deltas joined: the answer, uncommitted when Failed is set.
	Text string
	// ToolCalls are the tools the answer called, in order: Completed's ToolCalls when the
	// turn completed, else the calls its tool call events made (uncommitted, as Text is,
	// when Failed is set); empty when it called none.
	ToolCalls []*chatv1.ToolCall
	// PendingToolCalls are the calls the completed answer waits on (Completed's): run
	// each TOOL_WAIT_RESULT call and ask for a decision on each TOOL_WAIT_APPROVAL one,
	// then continue with ToolResults (server-held history) or a Dispatch whose history
	// ends with the results (client-held). Empty when the answer waits on nothing or the
	// turn did not complete.
	PendingToolCalls []*chatv1.PendingToolCall
	// Events are all events in order.
	Events []Event
}

// Collect reads the remaining events into a TurnResult. A failed stream returns the
// events read so far together with its *Error.
func (s *TurnStream) Collect() (*TurnResult, error) {
	result := &TurnResult{TurnID: s.turnID}
	var text strings.Builder
	var calls collectedToolCalls
	for event, err := range s.Events() {
		if err != nil {
			result.Text, result.ToolCalls = text.String(), calls.calls
			return result, err
		}
		result.Events = append(result.Events, event)
		if calls.add(event) {
			continue
		}
		switch e := event.(type) {
		case *chatv1.TurnStarted:
			result.Started = e
		case *chatv1.TurnDecision:
			result.Decision = e
		case *chatv1.TextDelta:
			text.WriteString(e.GetText())
		case *chatv1.TurnCompleted:
			result.Completed = e
		case *chatv1.TurnFailed:
			result.Failed = e
		}
	}
	result.Text, result.ToolCalls = text.String(), calls.calls
	if result.Completed != nil {
		result.ToolCalls = result.Completed.GetToolCalls()
		result.PendingToolCalls = result.Completed.GetPendingToolCalls()
	}
	return result, nil
}
