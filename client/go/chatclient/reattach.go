package chatclient

import (
	"time"

	"google.golang.org/grpc/codes"
)

// ReattachPolicy says how a TurnStream follows its turn again with WatchTurn when the
// stream breaks: a turn started with WithContinueOnDisconnect, or any WatchTurn stream,
// that ends with UNAVAILABLE, INTERNAL or UNKNOWN without an ErrorInfo reason (a reset
// stream), CANCELLED while the caller's context is still live (a stream reset by a
// proxy), or ABORTED with ERROR_REASON_WATCH_BEHIND (the server ended a watcher that fell
// behind) is watched again from the last sequence received, after a wait that starts at
// InitialBackoff and doubles up to MaxBackoff, at most MaxAttempts times in a row without
// a new event. The caller reads one stream and sees each event once.
//
// The zero value is the default policy: 8 attempts, 100 ms doubling to 2 s.
type ReattachPolicy struct {
	// MaxAttempts is the number of WatchTurn calls in a row without a new event before
	// the stream fails with the last error; 0 means 8.
	MaxAttempts int
	// InitialBackoff is the wait before the first attempt after a break; 0 means 100 ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the doubling wait; 0 means 2 s.
	MaxBackoff time.Duration
	// OnReattach, when set, is called before each wait (in the goroutine reading the
	// stream), e.g. to show that the answer is reconnecting.
	OnReattach func(ReattachAttempt)
}

// ReattachAttempt is what ReattachPolicy.OnReattach is told before an attempt.
type ReattachAttempt struct {
	// TurnID is the turn being followed.
	TurnID string
	// Attempt is 1 for the first attempt after a break, then 2, 3...
	Attempt int
	// Delay is the wait before the attempt.
	Delay time.Duration
	// AfterSequence is the sequence of the last event received; the watch goes on after it.
	AfterSequence uint64
	// Err is why the previous stream ended, an *Error.
	Err error
}

const (
	defaultReattachAttempts = 8
	defaultInitialBackoff   = 100 * time.Millisecond
	defaultMaxBackoff       = 2 * time.Second
)

// ReattachOption is the option of WithReattach and WithoutReattach. It applies to turns
// (StreamTurn and its shortcuts) and to WatchTurn, and, given to Dial or New, sets the
// client's default for both.
type ReattachOption struct {
	policy *ReattachPolicy // nil: never reattach
}

// WithReattach sets how a broken stream is followed again (see ReattachPolicy), for one
// call or, given to Dial or New, for every call of the client. Turns reattach only when
// started with WithContinueOnDisconnect; WatchTurn streams always do, with the default
// policy unless this option or WithoutReattach says otherwise.
func WithReattach(policy ReattachPolicy) ReattachOption {
	if policy.MaxAttempts <= 0 {
		policy.MaxAttempts = defaultReattachAttempts
	}
	if policy.InitialBackoff <= 0 {
		policy.InitialBackoff = defaultInitialBackoff
	}
	if policy.MaxBackoff <= 0 {
		policy.MaxBackoff = defaultMaxBackoff
	}
	return ReattachOption{policy: &policy}
}

// WithoutReattach makes a broken stream fail at once with its error, as a stream of a
// turn that cancels on disconnect always does; given to Dial or New, for every call of
// the client that does not say otherwise.
func WithoutReattach() ReattachOption { return ReattachOption{} }

func (o ReattachOption) applyClient(s *clientSettings) {
	s.reattach, s.reattachSet = o.policy, true
}

func (o ReattachOption) applyDial(s *dialSettings) { o.applyClient(&s.client) }

func (o ReattachOption) applyTurn(s *turnSettings) {
	s.reattach, s.reattachSet = o.policy, true
}

func (o ReattachOption) applyWatchTurn(s *watchTurnSettings) {
	s.reattach, s.reattachSet = o.policy, true
}

// defaultReattach is the policy of a stream given no ReattachOption.
func defaultReattach() *ReattachPolicy {
	return WithReattach(ReattachPolicy{}).policy
}

// reattachPolicy is the policy of a call: its own option's when given, else the client's,
// else the default.
func (c *Client) reattachPolicy(policy *ReattachPolicy, set bool) *ReattachPolicy {
	switch {
	case set:
		return policy
	case c.settings.reattachSet:
		return c.settings.reattach
	}
	return defaultReattach()
}

// backoff is the wait before attempt (1, 2...): doubling from the first, capped.
func (p *ReattachPolicy) backoff(attempt int) time.Duration {
	delay := p.InitialBackoff
	for range attempt - 1 {
		if delay >= p.MaxBackoff {
			break
		}
		delay *= 2
	}
	return min(delay, p.MaxBackoff)
}

// broken reports whether an error says the stream broke rather than that the call
// failed: UNAVAILABLE (the server is unreachable or draining, the connection dropped),
// INTERNAL or UNKNOWN without an ErrorInfo reason (a reset stream, a connection cut
// mid-message), CANCELLED (the caller checks first that its own context is live: a
// stream reset by a proxy), or a watch the server ended because it fell behind
// (ERROR_REASON_WATCH_BEHIND).
func broken(err *Error) bool {
	switch err.Code() {
	case codes.Unavailable:
		return true
	case codes.Internal, codes.Unknown:
		return err.Reason() == ""
	case codes.Canceled:
		return true
	}
	return err.Reason() == "ERROR_REASON_WATCH_BEHIND"
}
