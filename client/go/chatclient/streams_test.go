package chatclient_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/status"
)

// Below the server's stream limit (100 per connection by default) no call on one
// connection is refused, however fast calls end and start again.
func TestCallsBelowTheStreamLimitOfOneConnectionNeverFail(t *testing.T) {
	target := os.Getenv("AGENTSKIT_CHAT_CONFORMANCE_TARGET")
	if target == "" {
		t.Skip("AGENTSKIT_CHAT_CONFORMANCE_TARGET is not set (see TestConformance)")
	}
	client := dial(t, target, os.Getenv("AGENTSKIT_CHAT_CONFORMANCE_TOKEN"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := client.ListDefinitions(ctx); err != nil { // the connection is open
		t.Fatal(err)
	}
	const calls, concurrency = 2000, 90
	var next atomic.Int64
	var mu sync.Mutex
	failed := map[string]int{}
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for next.Add(1) <= calls {
				if _, err := client.ListDefinitions(ctx); err != nil {
					mu.Lock()
					failed[status.Code(err).String()]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d calls at concurrency %d: failures by code %v", calls, concurrency, failed)
	}
}
