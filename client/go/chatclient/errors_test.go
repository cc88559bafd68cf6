package chatclient_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"agentskit.dev/chat/client/go/chatclient"
)

// busyStatus is a status as the server encodes a busy session.
func busyStatus(t *testing.T) *status.Status {
	t.Helper()
	st, err := status.New(codes.Aborted, "the session is busy").WithDetails(
		&errdetails.ErrorInfo{
			Reason:   "ERROR_REASON_SESSION_BUSY",
			Domain:   "chat.agentskit.dev",
			Metadata: map[string]string{"retry_after_ms": "250"},
		},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(300 * time.Millisecond)},
	)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestErrorOfDecodesErrorInfoAndRetryInfo(t *testing.T) {
	chatErr := chatclient.ErrorOf(busyStatus(t).Err())

	if chatErr.Code() != codes.Aborted || chatErr.Message() != "the session is busy" {
		t.Errorf("code, message = %v, %q", chatErr.Code(), chatErr.Message())
	}
	if chatErr.Reason() != "ERROR_REASON_SESSION_BUSY" || chatErr.Domain() != "chat.agentskit.dev" {
		t.Errorf("reason, domain = %q, %q", chatErr.Reason(), chatErr.Domain())
	}
	if want := map[string]string{"retry_after_ms": "250"}; !maps.Equal(chatErr.Metadata(), want) {
		t.Errorf("metadata = %v, want %v", chatErr.Metadata(), want)
	}
	if delay, ok := chatErr.RetryDelay(); !ok || delay != 300*time.Millisecond {
		t.Errorf("RetryDelay() = %v, %v", delay, ok)
	}
	// The metadata hint comes first, as in the other clients.
	if after, ok := chatErr.RetryAfter(); !ok || after != 250*time.Millisecond {
		t.Errorf("RetryAfter() = %v, %v", after, ok)
	}
	want := "chat: ABORTED ERROR_REASON_SESSION_BUSY: the session is busy"
	if chatErr.Error() != want {
		t.Errorf("Error() = %q, want %q", chatErr.Error(), want)
	}
}

func TestErrorWorksWithErrorsAsAndStatusFromError(t *testing.T) {
	wrapped := fmt.Errorf("loading the transcript: %w", chatclient.ErrorOf(busyStatus(t).Err()))

	var chatErr *chatclient.Error
	if !errors.As(wrapped, &chatErr) || chatErr.Reason() != "ERROR_REASON_SESSION_BUSY" {
		t.Fatalf("errors.As found %v", chatErr)
	}
	if chatclient.ErrorOf(wrapped) != chatErr {
		t.Error("ErrorOf decoded again instead of returning the wrapped *Error")
	}
	st, ok := status.FromError(chatErr)
	if !ok || st.Code() != codes.Aborted || len(st.Details()) != 2 {
		t.Errorf("status.FromError = %v, %v", st, ok)
	}
	if status.Code(wrapped) != codes.Aborted {
		t.Errorf("status.Code = %v", status.Code(wrapped))
	}
}

func TestErrorWithoutDetails(t *testing.T) {
	chatErr := chatclient.ErrorOf(status.Error(codes.Unavailable, "connection refused"))

	if chatErr.Reason() != "" || chatErr.Domain() != "" || len(chatErr.Metadata()) != 0 {
		t.Errorf("details from nowhere: %q %q %v", chatErr.Reason(), chatErr.Domain(), chatErr.Metadata())
	}
	if _, ok := chatErr.RetryDelay(); ok {
		t.Error("RetryDelay reported without RetryInfo")
	}
	if _, ok := chatErr.RetryAfter(); ok {
		t.Error("RetryAfter reported without a hint")
	}
	if chatErr.Error() != "chat: UNAVAILABLE: connection refused" {
		t.Errorf("Error() = %q", chatErr.Error())
	}
}

func TestRetryAfterFallsBackToRetryInfoAndRefusesMalformedMetadata(t *testing.T) {
	st, _ := status.New(codes.Aborted, "turn running").WithDetails(
		&errdetails.ErrorInfo{Reason: "ERROR_REASON_TURN_IN_PROGRESS"},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(2 * time.Second)},
	)
	if after, ok := chatclient.NewError(st).RetryAfter(); !ok || after != 2*time.Second {
		t.Errorf("RetryAfter() = %v, %v; want the RetryInfo delay", after, ok)
	}
	st, _ = status.New(codes.Aborted, "busy").WithDetails(
		&errdetails.ErrorInfo{Metadata: map[string]string{"retry_after_ms": "soon"}},
	)
	if after, ok := chatclient.NewError(st).RetryAfter(); ok {
		t.Errorf("RetryAfter() = %v for malformed metadata", after)
	}
}

func TestErrorOfContextAndForeignErrors(t *testing.T) {
	if chatclient.ErrorOf(nil) != nil {
		t.Error("ErrorOf(nil) is not nil")
	}
	cases := map[error]codes.Code{
		context.Canceled:         codes.Canceled,
		context.DeadlineExceeded: codes.DeadlineExceeded,
		errors.New("disk full"):  codes.Unknown,
	}
	for err, code := range cases {
		chatErr := chatclient.ErrorOf(err)
		if chatErr.Code() != code || !errors.Is(chatErr, err) {
			t.Errorf("ErrorOf(%v): code %v, errors.Is %v", err, chatErr.Code(), errors.Is(chatErr, err))
		}
	}
	// A deadline the server enforced is a context.DeadlineExceeded too.
	server := chatclient.ErrorOf(status.Error(codes.DeadlineExceeded, "turn deadline"))
	if !errors.Is(server, context.DeadlineExceeded) || errors.Is(server, context.Canceled) {
		t.Error("a DEADLINE_EXCEEDED status is not context.DeadlineExceeded")
	}
}

func TestCodeName(t *testing.T) {
	for code, name := range map[codes.Code]string{
		codes.Canceled:          "CANCELLED",
		codes.NotFound:          "NOT_FOUND",
		codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
		codes.Code(99):          "CODE(99)",
	} {
		if got := chatclient.CodeName(code); got != name {
			t.Errorf("CodeName(%v) = %q, want %q", code, got, name)
		}
	}
}
