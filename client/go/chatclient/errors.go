package chatclient

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is a failed call to the chat service: the gRPC status and what the server said
// about it in the status details (see the ChatService comment in chat.proto).
//
// Every Client method returns an *Error when the call fails; use errors.As to read it,
// or ErrorOf. It implements GRPCStatus, so status.FromError and status.Code read it too.
type Error struct {
	status     *status.Status
	reason     string
	domain     string
	metadata   map[string]string
	retryDelay time.Duration
	hasDelay   bool
	cause      error
}

// ErrorOf returns the *Error describing err: err itself (or the *Error it wraps), or one
// decoded from err's gRPC status. A context error becomes CANCELED or DEADLINE_EXCEEDED,
// and any other error that carries no gRPC status UNKNOWN. It returns nil for a nil err.
func ErrorOf(err error) *Error {
	if err == nil {
		return nil
	}
	var chatErr *Error
	if errors.As(err, &chatErr) {
		return chatErr
	}
	st, ok := status.FromError(err)
	if !ok {
		if ctxStatus := status.FromContextError(err); ctxStatus.Code() != codes.Unknown {
			st = ctxStatus
		}
	}
	return fromStatus(st, err)
}

// NewError builds an *Error from a gRPC status, decoding its details as a client does:
// the first google.rpc.ErrorInfo gives the reason, domain and metadata, and the first
// google.rpc.RetryInfo the retry delay. It is meant for tests and fakes.
func NewError(st *status.Status) *Error {
	return fromStatus(st, st.Err())
}

func fromStatus(st *status.Status, cause error) *Error {
	e := &Error{status: st, cause: cause}
	var gotInfo, gotRetry bool
	for _, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			if !gotInfo {
				gotInfo = true
				e.reason, e.domain = d.GetReason(), d.GetDomain()
				e.metadata = maps.Clone(d.GetMetadata())
			}
		case *errdetails.RetryInfo:
			if !gotRetry && d.GetRetryDelay() != nil {
				gotRetry = true
				e.retryDelay, e.hasDelay = d.GetRetryDelay().AsDuration(), true
			}
		}
	}
	return e
}

// wrapError turns an error of a gRPC call into an *Error; nil stays nil.
func wrapError(err error) error {
	if err == nil {
		return nil
	}
	return ErrorOf(err)
}

// Error returns "chat: CODE REASON: message", leaving out what is empty.
func (e *Error) Error() string {
	head := "chat: " + CodeName(e.Code())
	if e.reason != "" {
		head += " " + e.reason
	}
	if msg := e.Message(); msg != "" {
		return head + ": " + msg
	}
	return head
}

// Code is the gRPC status code.
func (e *Error) Code() codes.Code { return e.status.Code() }

// Message is the status message; the server's never repeat request content.
func (e *Error) Message() string { return e.status.Message() }

// Reason is the ErrorInfo reason, one of the chatv1.ErrorReason names such as
// "ERROR_REASON_SESSION_BUSY"; empty when the error carries no ErrorInfo (a deadline the
// client enforced, an unreachable server).
func (e *Error) Reason() string { return e.reason }

// Domain is the ErrorInfo domain ("chat.agentskit.dev"), or empty.
func (e *Error) Domain() string { return e.domain }

// Metadata is a copy of the ErrorInfo metadata: "field", "limit", "cursor",
// "retry_after_ms"... Never nil.
func (e *Error) Metadata() map[string]string {
	if e.metadata == nil {
		return map[string]string{}
	}
	return maps.Clone(e.metadata)
}

// RetryDelay is the google.rpc.RetryInfo delay after which a retry may succeed; ok is
// false when the error carries none.
func (e *Error) RetryDelay() (delay time.Duration, ok bool) { return e.retryDelay, e.hasDelay }

// RetryAfter is how long to wait before retrying: the "retry_after_ms" metadata, else the
// RetryInfo delay; ok is false when both are absent (or the metadata is malformed).
func (e *Error) RetryAfter() (delay time.Duration, ok bool) {
	if raw, found := e.metadata["retry_after_ms"]; found {
		ms, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || ms < 0 {
			return 0, false
		}
		return time.Duration(ms) * time.Millisecond, true
	}
	return e.RetryDelay()
}

// GRPCStatus is the status the error was decoded from, with its details.
func (e *Error) GRPCStatus() *status.Status { return e.status }

// Unwrap returns the error the call failed with.
func (e *Error) Unwrap() error { return e.cause }

// Is reports context.Canceled and context.DeadlineExceeded for CANCELED and
// DEADLINE_EXCEEDED errors, so errors.Is(err, context.DeadlineExceeded) works whether the
// client or the server enforced the deadline.
func (e *Error) Is(target error) bool {
	switch target {
	case context.Canceled:
		return e.Code() == codes.Canceled
	case context.DeadlineExceeded:
		return e.Code() == codes.DeadlineExceeded
	}
	return false
}

var codeNames = map[codes.Code]string{
	codes.OK:                 "OK",
	codes.Canceled:           "CANCELLED",
	codes.Unknown:            "UNKNOWN",
	codes.InvalidArgument:    "INVALID_ARGUMENT",
	codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
	codes.NotFound:           "NOT_FOUND",
	codes.AlreadyExists:      "ALREADY_EXISTS",
	codes.PermissionDenied:   "PERMISSION_DENIED",
	codes.ResourceExhausted:  "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION",
	codes.Aborted:            "ABORTED",
	codes.OutOfRange:         "OUT_OF_RANGE",
	codes.Unimplemented:      "UNIMPLEMENTED",
	codes.Internal:           "INTERNAL",
	codes.Unavailable:        "UNAVAILABLE",
	codes.DataLoss:           "DATA_LOSS",
	codes.Unauthenticated:    "UNAUTHENTICATED",
}

// CodeName is the canonical name of a gRPC status code, as the other clients and the
// gRPC specification write it: "NOT_FOUND", "CANCELLED", "RESOURCE_EXHAUSTED".
func CodeName(code codes.Code) string {
	if name, ok := codeNames[code]; ok {
		return name
	}
	return fmt.Sprintf("CODE(%d)", uint32(code))
}
