// Command example creates a session of the "support" definition and streams a turn.
//
//	AGENTSKIT_CHAT_TARGET=localhost:50051 AGENTSKIT_CHAT_TOKEN=... go run ./example
//
// The target defaults to localhost:50051 (`make serve`); the token is sent when set.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
	"agentskit.dev/chat/client/go/chatclient"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		var chatErr *chatclient.Error
		if errors.As(err, &chatErr) && chatErr.Reason() != "" {
			fmt.Fprintln(os.Stderr, "reason:", chatErr.Reason(), chatErr.Metadata())
		}
		os.Exit(1)
	}
}

func run() error {
	target := os.Getenv("AGENTSKIT_CHAT_TARGET")
	if target == "" {
		target = "localhost:50051"
	}
	client, err := chatclient.Dial(target,
		chatclient.WithToken(os.Getenv("AGENTSKIT_CHAT_TOKEN")),
		chatclient.WithTimeout(30*time.Second))
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()

	session, err := client.CreateSession(ctx, "support")
	if err != nil {
		return err
	}
	fmt.Printf("session %s in state %s\n", session.GetSessionId(), session.GetSnapshot().GetState())

	stream, err := client.Submit(ctx, session.GetSessionId(), "/start")
	if err != nil {
		return err
	}
	for event, err := range stream.Events() {
		if err != nil {
			return err
		}
		switch e := event.(type) {
		case *chatv1.TurnDecision:
			fmt.Printf("[%s %s] %s -> %s\n", e.GetKind(), e.GetRouteId(), e.GetFromState(), e.GetToState())
		case *chatv1.TextDelta:
			fmt.Print(e.GetText())
		case *chatv1.TurnCompleted:
			snapshot := e.GetSnapshot()
			fmt.Printf("\n[%s] next: %s\n", snapshot.GetState(), strings.Join(snapshot.GetAllowedEvents(), ", "))
		case *chatv1.TurnFailed:
			fmt.Printf("\n[%s] %s\n", e.GetCode(), e.GetMessage())
		}
	}
	return nil
}
