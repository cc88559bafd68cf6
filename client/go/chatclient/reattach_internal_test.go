package chatclient

import (
	"slices"
	"testing"
	"time"
)

func TestTheDefaultReattachPolicy(t *testing.T) {
	policy := defaultReattach()
	var delays []time.Duration
	for attempt := 1; attempt <= policy.MaxAttempts; attempt++ {
		delays = append(delays, policy.backoff(attempt))
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms, 2000 * ms}
	if !slices.Equal(delays, want) {
		t.Errorf("delays %v, want %v", delays, want)
	}
	if WithoutReattach().policy != nil {
		t.Error("WithoutReattach has a policy")
	}
}
