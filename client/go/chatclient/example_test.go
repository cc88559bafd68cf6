package chatclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
	"agentskit.dev/chat/client/go/chatclient"
)

func Example() {
	client, err := chatclient.Dial("localhost:50051", chatclient.WithToken("my-token"),
		chatclient.WithTimeout(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	session, err := client.CreateSession(ctx, "support")
	if err != nil {
		log.Fatal(err)
	}
	stream, err := client.Submit(ctx, session.GetSessionId(), "/start")
	if err != nil {
		log.Fatal(err)
	}
	for event, err := range stream.Events() {
		if err != nil {
			log.Fatal(err)
		}
		switch e := event.(type) {
		case *chatv1.TextDelta:
			fmt.Print(e.GetText())
		case *chatv1.TurnCompleted:
			fmt.Println("\nnow in", e.GetSnapshot().GetState())
		case *chatv1.TurnFailed:
			fmt.Println("\nfailed:", e.GetCode(), e.GetMessage())
		}
	}
}

// A busy session or a running turn says how long to wait; the same turn id makes the
// retry safe.
func ExampleError() {
	client, err := chatclient.Dial("localhost:50051")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	turnID := chatclient.NewTurnID()
	for attempt := 0; ; attempt++ {
		result, err := client.RunTurn(ctx, "s-1", chatclient.Submit{Content: "/start"}, chatclient.WithTurnID(turnID))
		var chatErr *chatclient.Error
		if errors.As(err, &chatErr) && attempt < 3 {
			switch chatErr.Reason() {
			case "ERROR_REASON_SESSION_BUSY", "ERROR_REASON_TURN_IN_PROGRESS":
				wait, ok := chatErr.RetryAfter()
				if !ok {
					wait = 100 * time.Millisecond
				}
				time.Sleep(wait)
				continue
			}
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(result.Text)
		return
	}
}

// A tool round: the turn declares a tool, the answer calls it and completes waiting for
// its result, the client runs it and continues the answer with the result.
func ExampleClient_ToolResults() {
	client, err := chatclient.Dial("localhost:50051")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	weather := chatclient.Tool{
		Name:        "weather",
		Description: "The weather in a city",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}
	result, err := client.RunTurn(ctx, "s-1", chatclient.Submit{Content: "What is the weather in Paris?"},
		chatclient.WithTools(weather))
	if err != nil {
		log.Fatal(err)
	}
	for len(result.PendingToolCalls) > 0 {
		calls := map[string]*chatv1.ToolCall{}
		for _, call := range result.ToolCalls {
			calls[call.GetId()] = call
		}
		var results []*chatv1.ToolResult
		var approvals []*chatv1.ToolApproval
		for _, pending := range result.PendingToolCalls {
			if pending.GetWait() == chatv1.ToolWait_TOOL_WAIT_APPROVAL {
				// Ask a person; approved, the call comes back waiting for its result.
				approvals = append(approvals, &chatv1.ToolApproval{ToolCallId: pending.GetToolCallId(), Approved: true})
				continue
			}
			var arguments struct {
				City string `json:"city"`
			}
			if err := json.Unmarshal([]byte(calls[pending.GetToolCallId()].GetArguments()), &arguments); err != nil {
				log.Fatal(err)
			}
			results = append(results, &chatv1.ToolResult{
				ToolCallId: pending.GetToolCallId(),
				Content:    fmt.Sprintf(`{"city":%q,"sky":"clear"}`, arguments.City),
			})
		}
		stream, err := client.ToolResults(ctx, "s-1", results, approvals, chatclient.WithTools(weather))
		if err != nil {
			log.Fatal(err)
		}
		if result, err = stream.Collect(); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(result.Text)
}

func ExampleCommandHints() {
	routes := []*chatv1.RouteInfo{
		{Event: "start", InputText: "/start"},
		{Event: "finish", States: []string{"collecting"}, InputText: "/name"},
	}
	snapshot := &chatv1.Snapshot{State: "idle", AllowedEvents: []string{"start"}}
	fmt.Println(chatclient.CommandHints(routes, snapshot))
	// Output: [/start]
}

// A canary session pinned to the newest served revision while the rollout still gives new
// sessions the older one.
func ExampleWithRevision() {
	client, err := chatclient.Dial("localhost:50051")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	definition, err := client.GetDefinition(ctx, "support")
	if err != nil {
		log.Fatal(err)
	}
	for _, served := range definition.GetServedRevisions() {
		fmt.Printf("revision %d: %d%% of new sessions\n", served.GetRevision(), served.GetWeight())
	}
	session, err := client.CreateSession(ctx, "support", chatclient.WithRevision(definition.GetRevision()))
	var chatErr *chatclient.Error
	if errors.As(err, &chatErr) && chatErr.Reason() == "ERROR_REASON_REVISION_MISMATCH" {
		log.Fatalf("revision %s is no longer served", chatErr.Metadata()["definition_revision"])
	} else if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pinned to", session.GetDefinitionRevision())
}
