package chatclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
	"agentskit.dev/chat/client/go/chatclient"
)

// toolModel is a ChatService on loopback that records each turn request and answers it
// with a scripted list of events, numbered from 1.
type toolModel struct {
	chatv1.UnimplementedChatServiceServer
	script   []*chatv1.StreamTurnResponse
	requests chan *chatv1.StreamTurnRequest
}

func (m *toolModel) StreamTurn(req *chatv1.StreamTurnRequest, stream grpc.ServerStreamingServer[chatv1.StreamTurnResponse]) error {
	m.requests <- req
	for i, scripted := range m.script {
		response := proto.Clone(scripted).(*chatv1.StreamTurnResponse)
		response.SessionId, response.TurnId, response.Sequence = req.GetSessionId(), req.GetTurnId(), uint64(i+1)
		if err := stream.Send(response); err != nil {
			return err
		}
	}
	return nil
}

func serveToolModel(t *testing.T, script ...*chatv1.StreamTurnResponse) (*chatclient.Client, <-chan *chatv1.StreamTurnRequest) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	model := &toolModel{script: script, requests: make(chan *chatv1.StreamTurnRequest, 8)}
	chatv1.RegisterChatServiceServer(server, model)
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(server.Stop)
	return dialed(t, listener.Addr().String()), model.requests
}

func started() *chatv1.StreamTurnResponse {
	return &chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_Started{Started: &chatv1.TurnStarted{
		Operation: chatv1.Operation_OPERATION_SUBMIT, UserMessageId: "u-1", AssistantMessageId: "a-1",
	}}}
}

func agentic() *chatv1.StreamTurnResponse {
	return &chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_Decision{Decision: &chatv1.TurnDecision{
		Kind: chatv1.TurnKind_TURN_KIND_AGENTIC, FromState: "idle", ToState: "idle",
	}}}
}

func callStarted(id, name string) *chatv1.StreamTurnResponse {
	return &chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_ToolCallStarted{
		ToolCallStarted: &chatv1.ToolCallStarted{ToolCallId: id, Name: name},
	}}
}

func callDelta(id, piece string) *chatv1.StreamTurnResponse {
	return &chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_ToolCallDelta{
		ToolCallDelta: &chatv1.ToolCallDelta{ToolCallId: id, ArgumentsDelta: piece},
	}}
}

func callEnded(id, arguments string, wait chatv1.ToolWait) *chatv1.StreamTurnResponse {
	return &chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_ToolCallEnded{
		ToolCallEnded: &chatv1.ToolCallEnded{ToolCallId: id, Arguments: arguments, Wait: wait},
	}}
}

var (
	weatherCall = &chatv1.ToolCall{Id: "call-1", Name: "weather", Arguments: `{"city":"Paris"}`}
	refundCall  = &chatv1.ToolCall{Id: "call-2", Name: "refund", Arguments: `{}`}
	pending     = []*chatv1.PendingToolCall{
		{ToolCallId: "call-1", Name: "weather", Wait: chatv1.ToolWait_TOOL_WAIT_RESULT},
		{ToolCallId: "call-2", Name: "refund", Wait: chatv1.ToolWait_TOOL_WAIT_APPROVAL},
	}
)

// An answer calling two tools, their events interleaved, that waits for a result and an
// approval.
func toolRound() []*chatv1.StreamTurnResponse {
	return []*chatv1.StreamTurnResponse{
		started(), agentic(),
		callStarted("call-1", "weather"), callStarted("call-2", "refund"),
		callDelta("call-1", `{"city":`), callDelta("call-2", `{}`), callDelta("call-1", `"Paris"}`),
		callEnded("call-1", `{"city":"Paris"}`, chatv1.ToolWait_TOOL_WAIT_RESULT),
		callEnded("call-2", `{}`, chatv1.ToolWait_TOOL_WAIT_APPROVAL),
		{Event: &chatv1.StreamTurnResponse_Completed{Completed: &chatv1.TurnCompleted{
			AssistantMessageId: "a-1", Cursor: 2, FinishReason: "tool_approval",
			ToolCalls: []*chatv1.ToolCall{weatherCall, refundCall}, PendingToolCalls: pending,
		}}},
	}
}

func TestToolCallEventsArriveTyped(t *testing.T) {
	client, _ := serveToolModel(t, toolRound()...)
	stream, err := client.Submit(context.Background(), "s-1", "weather in Paris and a refund")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	arguments := map[string]string{}
	for stream.Receive() {
		switch event := stream.Msg().(type) {
		case *chatv1.ToolCallStarted:
			seen = append(seen, "started "+event.GetToolCallId()+" "+event.GetName())
		case *chatv1.ToolCallDelta:
			arguments[event.GetToolCallId()] += event.GetArgumentsDelta()
			seen = append(seen, "delta "+event.GetToolCallId())
		case *chatv1.ToolCallEnded:
			seen = append(seen, "ended "+event.GetToolCallId()+" "+event.GetWait().String())
			if event.GetArguments() != arguments[event.GetToolCallId()] {
				t.Errorf("%s: ended with %s after deltas %s", event.GetToolCallId(), event.GetArguments(), arguments[event.GetToolCallId()])
			}
		case *chatv1.TurnCompleted:
			seen = append(seen, "completed "+event.GetFinishReason())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"started call-1 weather", "started call-2 refund", "delta call-1", "delta call-2", "delta call-1",
		"ended call-1 TOOL_WAIT_RESULT", "ended call-2 TOOL_WAIT_APPROVAL", "completed tool_approval",
	}
	if strings.Join(seen, "; ") != strings.Join(want, "; ") {
		t.Errorf("events\n got %q\nwant %q", seen, want)
	}
}

func TestACollectedTurnHasItsToolCallsAndPendingCalls(t *testing.T) {
	client, _ := serveToolModel(t, toolRound()...)
	result, err := client.RunTurn(context.Background(), "s-1", chatclient.Submit{Content: "weather in Paris and a refund"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []*chatv1.ToolCall{weatherCall, refundCall}; !equalSlices(want, result.ToolCalls) {
		t.Errorf("ToolCalls\n got %s\nwant %s", texts(result.ToolCalls), texts(want))
	}
	if !equalSlices(pending, result.PendingToolCalls) {
		t.Errorf("PendingToolCalls\n got %s\nwant %s", texts(result.PendingToolCalls), texts(pending))
	}
	if result.Text != "" || len(result.Events) != 10 || result.Completed.GetFinishReason() != "tool_approval" {
		t.Errorf("result = %+v", result)
	}
}

func TestAFailedTurnCollectsItsUncommittedToolCallsAndNoPendingOnes(t *testing.T) {
	client, _ := serveToolModel(t,
		started(), agentic(), callStarted("call-1", "weather"), callDelta("call-1", `{"ci`),
		&chatv1.StreamTurnResponse{Event: &chatv1.StreamTurnResponse_Failed{Failed: &chatv1.TurnFailed{
			Code: "model_failed", Message: "The model failed.", Retryable: true,
		}}})
	result, err := client.RunTurn(context.Background(), "s-1", chatclient.Submit{Content: "weather"})
	if err != nil {
		t.Fatal(err)
	}
	want := []*chatv1.ToolCall{{Id: "call-1", Name: "weather", Arguments: `{"ci`}}
	if !equalSlices(want, result.ToolCalls) {
		t.Errorf("ToolCalls\n got %s\nwant %s", texts(result.ToolCalls), texts(want))
	}
	if result.Failed == nil || len(result.PendingToolCalls) != 0 {
		t.Errorf("Failed %v, PendingToolCalls %v", result.Failed, result.PendingToolCalls)
	}
}

func TestToolDeclarationsChoiceAndParallelCallsReachTheServer(t *testing.T) {
	client, requests := serveToolModel(t, started())
	weather := chatclient.Tool{
		Name: "weather", Description: "The weather in a city",
		Parameters: json.RawMessage(`{ "type": "object",
			"properties": { "city": { "type": "string" } } }`),
	}
	_, err := client.RunTurn(context.Background(), "s-1", chatclient.Submit{Content: "hi"},
		chatclient.WithTools(weather), chatclient.WithTools(chatclient.Tool{Name: "clock"}),
		chatclient.WithToolChoice("required"), chatclient.WithParallelToolCalls(false))
	if err != nil {
		t.Fatal(err)
	}
	request := <-requests
	wantTools := []*chatv1.ToolDeclaration{
		{Name: "weather", Description: "The weather in a city", ParametersJson: `{"type":"object","properties":{"city":{"type":"string"}}}`},
		{Name: "clock"},
	}
	if !equalSlices(wantTools, request.GetTools()) {
		t.Errorf("tools\n got %s\nwant %s", texts(request.GetTools()), texts(wantTools))
	}
	if request.GetToolChoice() != "required" || request.ParallelToolCalls == nil || request.GetParallelToolCalls() {
		t.Errorf("tool_choice %q, parallel_tool_calls %v", request.GetToolChoice(), request.ParallelToolCalls)
	}

	// Without the options nothing is sent: the model's defaults.
	if _, err := client.RunTurn(context.Background(), "s-1", chatclient.Submit{Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	request = <-requests
	if len(request.GetTools()) != 0 || request.GetToolChoice() != "" || request.ParallelToolCalls != nil {
		t.Errorf("defaults sent: %v", request)
	}
}

func TestToolParametersThatAreNotJSONRefuseTheTurnWithoutACall(t *testing.T) {
	client, requests := serveToolModel(t, started())
	broken := chatclient.Tool{Name: "lookup", Parameters: json.RawMessage(`{"type": "object", "canary-7f3a`)}
	stream, err := client.Submit(context.Background(), "s-1", "hi",
		chatclient.WithTools(chatclient.Tool{Name: "clock"}, broken))
	var chatErr *chatclient.Error
	if stream != nil || !errors.As(err, &chatErr) || chatErr.Code() != codes.InvalidArgument {
		t.Fatalf("Submit = %v, %v", stream, err)
	}
	if !strings.Contains(chatErr.Message(), "tools[1].parameters") || strings.Contains(chatErr.Message(), "canary") {
		t.Errorf("message %q", chatErr.Message())
	}
	// The next turn is the first the server sees.
	if _, err := client.RunTurn(context.Background(), "s-1", chatclient.Submit{Content: "next"}); err != nil {
		t.Fatal(err)
	}
	if first := <-requests; first.GetSubmit().GetContent() != "next" {
		t.Errorf("the refused turn was sent: %v", first)
	}
}

func TestToolResultsAndApprovalsReachTheServer(t *testing.T) {
	client, requests := serveToolModel(t, started())
	results := []*chatv1.ToolResult{{ToolCallId: "call-1", Content: `{"sky":"clear"}`, MessageId: "t-1"}}
	approvals := []*chatv1.ToolApproval{{ToolCallId: "call-2", Approved: false, Reason: "not this one"}}
	stream, err := client.ToolResults(context.Background(), "s-1", results, approvals,
		chatclient.WithTools(chatclient.Tool{Name: "weather"}), chatclient.WithTurnID("t-9"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Collect(); err != nil {
		t.Fatal(err)
	}
	request := <-requests
	want := &chatv1.StreamTurnRequest{
		SessionId: "s-1", TurnId: "t-9",
		Operation: &chatv1.StreamTurnRequest_ToolResults{ToolResults: &chatv1.ToolResultsOperation{
			Results: results, Approvals: approvals,
		}},
		Tools: []*chatv1.ToolDeclaration{{Name: "weather"}},
	}
	if !proto.Equal(want, request) {
		t.Errorf("request\n got %v\nwant %v", request, want)
	}

	// An approval alone is a ToolResults operation too.
	if _, err := client.RunTurn(context.Background(), "s-1", chatclient.ToolResults{Approvals: approvals[:1]}); err != nil {
		t.Fatal(err)
	}
	if got := (<-requests).GetToolResults(); got == nil || len(got.GetResults()) != 0 || len(got.GetApprovals()) != 1 {
		t.Errorf("tool_results = %v", got)
	}
}

func TestDispatchSendsToolMessagesAndApprovals(t *testing.T) {
	client, requests := serveToolModel(t, started())
	messages := []*chatv1.Message{
		{Id: "u-1", Role: chatv1.Role_ROLE_USER, Content: "weather in Paris and a refund"},
		{Id: "a-1", Role: chatv1.Role_ROLE_ASSISTANT, ToolCalls: []*chatv1.ToolCall{weatherCall, refundCall}},
		{Id: "t-1", Role: chatv1.Role_ROLE_TOOL, ToolCallId: "call-1", Content: `{"sky":"clear"}`},
	}
	approvals := []*chatv1.ToolApproval{{ToolCallId: "call-2", Approved: true}}
	if _, err := client.RunTurn(context.Background(), "s-1", chatclient.Dispatch{Messages: messages, Approvals: approvals}); err != nil {
		t.Fatal(err)
	}
	want := &chatv1.DispatchOperation{Messages: messages, Approvals: approvals}
	if got := (<-requests).GetDispatch(); !proto.Equal(want, got) {
		t.Errorf("dispatch\n got %v\nwant %v", got, want)
	}
}

func TestEventOfKnowsTheToolCallEvents(t *testing.T) {
	started, delta, ended := callStarted("call-1", "weather"), callDelta("call-1", "{}"),
		callEnded("call-1", "{}", chatv1.ToolWait_TOOL_WAIT_RESULT)
	for response, want := range map[*chatv1.StreamTurnResponse]proto.Message{
		started: started.GetToolCallStarted(), delta: delta.GetToolCallDelta(), ended: ended.GetToolCallEnded(),
	} {
		if event := chatclient.EventOf(response); event != want {
			t.Errorf("EventOf(%v) = %v", response, event)
		}
	}
}

// equalSlices compares two lists of messages item by item.
func equalSlices[M proto.Message](want, got []M) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if !proto.Equal(want[i], got[i]) {
			return false
		}
	}
	return true
}

func texts[M proto.Message](messages []M) string {
	var out []string
	for _, message := range messages {
		out = append(out, prototext.MarshalOptions{}.Format(message))
	}
	return "[" + strings.Join(out, ", ") + "]"
}
