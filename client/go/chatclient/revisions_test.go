package chatclient_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
	"agentskit.dev/chat/client/go/chatclient"
)

// revisions serves revisions 1 and 2 of every definition and keeps the requests that ask
// for one. Revision 1 sessions say they could not move to 2; others are not served.
type revisions struct {
	chatv1.UnimplementedChatServiceServer
	mu        sync.Mutex
	created   []*chatv1.CreateSessionRequest
	described []*chatv1.GetDefinitionRequest
}

func (r *revisions) requests() ([]*chatv1.CreateSessionRequest, []*chatv1.GetDefinitionRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.created, r.described
}

var served = []*chatv1.ServedRevision{
	{Revision: 1, Weight: 0},
	{Revision: 2, Weight: 100, MigratesFrom: []int64{1}},
}

func (r *revisions) GetDefinition(_ context.Context, req *chatv1.GetDefinitionRequest) (*chatv1.GetDefinitionResponse, error) {
	r.mu.Lock()
	r.described = append(r.described, req)
	r.mu.Unlock()
	revision := int64(2)
	if req.Revision != nil {
		revision = req.GetRevision()
	}
	return &chatv1.GetDefinitionResponse{Definition: &chatv1.Definition{
		Id: req.GetDefinitionId(), Revision: revision, ServedRevisions: served,
	}}, nil
}

func (r *revisions) CreateSession(_ context.Context, req *chatv1.CreateSessionRequest) (*chatv1.CreateSessionResponse, error) {
	r.mu.Lock()
	r.created = append(r.created, req)
	r.mu.Unlock()
	revision := int64(2)
	if req.DefinitionRevision != nil {
		revision = req.GetDefinitionRevision()
	}
	session := &chatv1.Session{SessionId: "s1", DefinitionId: req.GetDefinitionId(), DefinitionRevision: revision}
	switch revision {
	case 1:
		session.MigrationBlocked = &chatv1.MigrationBlocked{Revision: 2, Code: "replay"}
	case 2:
	default:
		st, err := status.New(codes.FailedPrecondition, "revision not served").WithDetails(&errdetails.ErrorInfo{
			Reason:   chatv1.ErrorReason_ERROR_REASON_REVISION_MISMATCH.String(),
			Domain:   "chat.agentskit.dev",
			Metadata: map[string]string{"definition_revision": "9"},
		})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	}
	return &chatv1.CreateSessionResponse{Session: session}, nil
}

func serveRevisions(t *testing.T) (*chatclient.Client, *revisions) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	service := &revisions{}
	chatv1.RegisterChatServiceServer(server, service)
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(server.Stop)
	return dialed(t, listener.Addr().String()), service
}

func TestCreateSessionPinsARevisionOnlyWhenAsked(t *testing.T) {
	client, service := serveRevisions(t)
	ctx := context.Background()
	pinned, err := client.CreateSession(ctx, "support", chatclient.WithRevision(1))
	if err != nil {
		t.Fatal(err)
	}
	rolledOut, err := client.CreateSession(ctx, "support", chatclient.WithSessionID("mine"))
	if err != nil {
		t.Fatal(err)
	}
	if pinned.GetDefinitionRevision() != 1 || rolledOut.GetDefinitionRevision() != 2 {
		t.Errorf("revisions %d and %d, want 1 and 2", pinned.GetDefinitionRevision(), rolledOut.GetDefinitionRevision())
	}
	created, _ := service.requests()
	if got := created[0].DefinitionRevision; got == nil || *got != 1 {
		t.Errorf("pinned request carries %v, want 1", got)
	}
	if got := created[1]; got.DefinitionRevision != nil || got.GetSessionId() != "mine" {
		t.Errorf("unpinned request is %v, want a session id and no revision", got)
	}
}

func TestASessionSaysWhyItStayedOnItsRevision(t *testing.T) {
	client, _ := serveRevisions(t)
	stayed, err := client.CreateSession(context.Background(), "support", chatclient.WithRevision(1))
	if err != nil {
		t.Fatal(err)
	}
	want := &chatv1.MigrationBlocked{Revision: 2, Code: "replay"}
	if !proto.Equal(stayed.GetMigrationBlocked(), want) {
		t.Errorf("migration blocked %v, want %v", stayed.GetMigrationBlocked(), want)
	}
}

func TestGetDefinitionAsksForARevisionAndListsTheServedOnes(t *testing.T) {
	client, service := serveRevisions(t)
	ctx := context.Background()
	newest, err := client.GetDefinition(ctx, "support")
	if err != nil {
		t.Fatal(err)
	}
	first, err := client.GetDefinition(ctx, "support", chatclient.WithRevision(1))
	if err != nil {
		t.Fatal(err)
	}
	zero, err := client.GetDefinition(ctx, "support", chatclient.WithRevision(0))
	if err != nil {
		t.Fatal(err)
	}
	if newest.GetRevision() != 2 || first.GetRevision() != 1 || zero.GetRevision() != 0 {
		t.Errorf("revisions %d, %d, %d; want 2, 1, 0", newest.GetRevision(), first.GetRevision(), zero.GetRevision())
	}
	_, described := service.requests()
	if described[0].Revision != nil || described[1].GetRevision() != 1 || described[2].Revision == nil {
		t.Errorf("requests %v: want no revision, then 1, then 0", described)
	}
	got := newest.GetServedRevisions()
	if len(got) != len(served) {
		t.Fatalf("served revisions %v, want %v", got, served)
	}
	for i := range served {
		if !proto.Equal(got[i], served[i]) {
			t.Errorf("served revision %d is %v, want %v", i, got[i], served[i])
		}
	}
}

func TestAnUnservedRevisionIsRevisionMismatch(t *testing.T) {
	client, _ := serveRevisions(t)
	_, err := client.CreateSession(context.Background(), "support", chatclient.WithRevision(9))
	var chatErr *chatclient.Error
	if !errors.As(err, &chatErr) {
		t.Fatalf("error %v, want a *chatclient.Error", err)
	}
	if chatErr.Code() != codes.FailedPrecondition || chatErr.Reason() != "ERROR_REASON_REVISION_MISMATCH" {
		t.Errorf("code %v reason %v", chatErr.Code(), chatErr.Reason())
	}
	if chatErr.Metadata()["definition_revision"] != "9" {
		t.Errorf("metadata %v", chatErr.Metadata())
	}
}
