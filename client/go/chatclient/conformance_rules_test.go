package chatclient_test

// The conformance runner's own rules, without a server: the shared matching cases
// (tests/conformance/matching-cases.yaml), $name substitution, argument checks, and what
// the tool arguments send and the tool call events yield (on the in-test server of
// tools_test.go).

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
	"agentskit.dev/chat/client/go/chatclient"
)

func TestMatchingCases(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(corpusDir(), "matching-cases.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name     string         `yaml:"name"`
		Expected map[string]any `yaml:"expected"`
		Actual   map[string]any `yaml:"actual"`
		Matches  *bool          `yaml:"matches"`
	}
	if err := yaml.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("matching-cases.yaml has no cases")
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.Matches == nil || c.Expected == nil || c.Actual == nil {
				t.Fatalf("a case has expected, actual and matches: %+v", c)
			}
			problems := match(c.Expected, c.Actual, "")
			if (len(problems) == 0) != *c.Matches {
				t.Errorf("expected %s, actual %s: matches %v, want %v (%v)",
					show(c.Expected), show(c.Actual), len(problems) == 0, *c.Matches, problems)
			}
		})
	}
}

func TestSubstituteReplacesOnlyWholeCaptureNames(t *testing.T) {
	r := &runner{values: map[string]string{"s": "session-1", "c_2": "3"}}
	got, err := r.substitute(map[string]any{
		"session": "$s",
		"list":    []any{"$c_2", "$5", "$", "$s.x", "price $s", "$s ", "s", 7},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"session": "session-1",
		"list":    []any{"3", "$5", "$", "$s.x", "price $s", "$s ", "s", 7},
	}
	if show(got) != show(want) {
		t.Errorf("substitute = %s, want %s", show(got), show(want))
	}
	if _, err := r.substitute([]any{"$unknown"}); err == nil {
		t.Error("a name never captured was substituted")
	}
}

func TestIntegerArgumentsTakeIntegersAndDecimalStrings(t *testing.T) {
	for _, value := range []any{3, int64(3), uint64(3), "3"} {
		if n, given, err := integerOf(value); n != 3 || !given || err != nil {
			t.Errorf("integerOf(%#v) = %d, %v, %v", value, n, given, err)
		}
	}
	if n, given, err := integerOf("-2"); n != -2 || !given || err != nil {
		t.Errorf("integerOf(\"-2\") = %d, %v, %v", n, given, err)
	}
	if _, given, err := integerOf(nil); given || err != nil {
		t.Errorf("integerOf(nil): given %v, err %v", given, err)
	}
	for _, value := range []any{3.0, 2.5, "2.5", "", "3 ", "+3", "x", "99999999999999999999", true, []any{}, map[string]any{}} {
		if _, _, err := integerOf(value); err == nil {
			t.Errorf("integerOf(%#v) was accepted", value)
		}
	}
}

func TestTextArgumentsTakeStrings(t *testing.T) {
	if s, err := textOf("m-1"); s != "m-1" || err != nil {
		t.Errorf("textOf = %q, %v", s, err)
	}
	if s, err := textOf(nil); s != "" || err != nil {
		t.Errorf("textOf(nil) = %q, %v", s, err)
	}
	for _, value := range []any{3, 2.5, true, []any{"a"}, map[string]any{}} {
		if _, err := textOf(value); err == nil {
			t.Errorf("textOf(%#v) was accepted", value)
		}
	}
}

func TestCheckArgumentsRefusesMistypedArgumentsAtAnyDepth(t *testing.T) {
	valid := map[string]any{
		"session": "s", "expected_cursor": "2", "turn_id": nil, "definition_revision": 1, "revision": "0",
		"dispatch": map[string]any{"messages": []any{map[string]any{"id": "u1", "role": "user", "content": "hi"}}},
	}
	if err := checkArguments(valid); err != nil {
		t.Errorf("valid arguments refused: %v", err)
	}
	for _, args := range []map[string]any{
		{"expected_cursor": 1.5},
		{"page_size": "ten"},
		{"definition_revision": "two"},
		{"revision": 1.5},
		{"session": 12},
		{"submit": map[string]any{"content": 42}},
		{"dispatch": map[string]any{"messages": []any{map[string]any{"role": "user", "content": true}}}},
	} {
		if err := checkArguments(args); err == nil {
			t.Errorf("checkArguments(%s) accepted it", show(args))
		}
	}
}

func TestCheckArgumentsOfTools(t *testing.T) {
	valid := map[string]any{
		"session": "s", "tool_choice": "auto", "parallel_tool_calls": false,
		"tools": []any{map[string]any{"name": "lookup", "description": "Look up", "parameters": map[string]any{
			"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}, "name": map[string]any{}},
		}}},
		"tool_results": map[string]any{
			"results":   []any{map[string]any{"tool_call_id": "c1", "content": "found"}},
			"approvals": []any{map[string]any{"tool_call_id": "c2", "approved": true, "reason": "ok"}},
		},
	}
	if err := checkArguments(valid); err != nil {
		t.Errorf("valid arguments refused: %v", err)
	}
	for _, args := range []map[string]any{
		{"parallel_tool_calls": "true"},
		{"tool_choice": 1},
		{"tools": []any{map[string]any{"name": "lookup", "parameters": "{}"}}},
		{"tool_results": map[string]any{"approvals": []any{map[string]any{"tool_call_id": "c2", "approved": "yes"}}}},
		{"dispatch": map[string]any{"messages": []any{map[string]any{"role": "tool", "tool_call_id": 3}}}},
		{"dispatch": map[string]any{"messages": []any{map[string]any{"role": "assistant", "tool_calls": []any{
			map[string]any{"id": "c1", "name": "lookup", "arguments": map[string]any{"q": "x"}},
		}}}}},
	} {
		if err := checkArguments(args); err == nil {
			t.Errorf("checkArguments(%s) accepted it", show(args))
		}
	}
}

// The runner sends a stream_turn's tool arguments through the client's helpers: what
// reaches the server is the request the arguments describe.
func TestStreamTurnToolArgumentsReachTheServer(t *testing.T) {
	client, requests := serveToolModel(t, started())
	r := &runner{values: map[string]string{}}
	run := func(arguments string) *chatv1.StreamTurnRequest {
		t.Helper()
		var args map[string]any
		if err := yaml.Unmarshal([]byte(arguments), &args); err != nil {
			t.Fatal(err)
		}
		if err := checkArguments(args); err != nil {
			t.Fatal(err)
		}
		stream, err := r.startTurn(context.Background(), client, args)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Collect(); err != nil {
			t.Fatal(err)
		}
		return <-requests
	}

	request := run(`{session: s-1, submit: {content: hi}, tool_choice: required, parallel_tool_calls: true,
		tools: [{name: weather, description: The weather, parameters: {type: object, properties: {city: {type: string}}}}, {name: clock}]}`)
	want := []*chatv1.ToolDeclaration{
		{Name: "weather", Description: "The weather", ParametersJson: `{"properties":{"city":{"type":"string"}},"type":"object"}`},
		{Name: "clock"},
	}
	if !equalSlices(want, request.GetTools()) || request.GetToolChoice() != "required" || !request.GetParallelToolCalls() {
		t.Errorf("request %v", request)
	}
	if request = run(`{session: s-1, submit: {content: hi}}`); len(request.GetTools()) != 0 || request.ParallelToolCalls != nil {
		t.Errorf("tools sent without tool arguments: %v", request)
	}

	request = run(`{session: s-1, tool_results: {results: [{tool_call_id: c1, content: found, message_id: t1}],
		approvals: [{tool_call_id: c2, approved: false, reason: not now}]}}`)
	wantResults := &chatv1.ToolResultsOperation{
		Results:   []*chatv1.ToolResult{{ToolCallId: "c1", Content: "found", MessageId: "t1"}},
		Approvals: []*chatv1.ToolApproval{{ToolCallId: "c2", Reason: "not now"}},
	}
	if !proto.Equal(wantResults, request.GetToolResults()) {
		t.Errorf("tool_results %v", request.GetToolResults())
	}

	request = run(`{session: s-1, dispatch: {messages: [{id: m1, role: user, content: hi},
		{id: a1, role: assistant, content: "", tool_calls: [{id: c1, name: lookup, arguments: '{"q":"x"}'}]},
		{id: m3, role: tool, content: "42", tool_call_id: c1}], approvals: [{tool_call_id: c2, approved: true}]}}`)
	wantDispatch := &chatv1.DispatchOperation{
		Messages: []*chatv1.Message{
			{Id: "m1", Role: chatv1.Role_ROLE_USER, Content: "hi"},
			{Id: "a1", Role: chatv1.Role_ROLE_ASSISTANT, ToolCalls: []*chatv1.ToolCall{{Id: "c1", Name: "lookup", Arguments: `{"q":"x"}`}}},
			{Id: "m3", Role: chatv1.Role_ROLE_TOOL, Content: "42", ToolCallId: "c1"},
		},
		Approvals: []*chatv1.ToolApproval{{ToolCallId: "c2", Approved: true}},
	}
	if !proto.Equal(wantDispatch, request.GetDispatch()) {
		t.Errorf("dispatch %v", request.GetDispatch())
	}
}

func TestToolCallEventsAreObserved(t *testing.T) {
	observed := turnObservation()
	for i, response := range toolRound() {
		record(observed, uint64(i+1), chatclient.EventOf(response))
	}
	want := map[string]any{
		"events": []any{"started", "decision", "tool_call_started", "tool_call_started", "tool_call_delta+",
			"tool_call_ended", "tool_call_ended", "completed"},
		"text": "",
		"toolCalls": []any{
			map[string]any{"toolCallId": "call-1", "name": "weather", "arguments": `{"city":"Paris"}`,
				"ended": map[string]any{"toolCallId": "call-1", "arguments": `{"city":"Paris"}`, "wait": "TOOL_WAIT_RESULT"}},
			map[string]any{"toolCallId": "call-2", "name": "refund", "arguments": `{}`,
				"ended": map[string]any{"toolCallId": "call-2", "arguments": `{}`, "wait": "TOOL_WAIT_APPROVAL"}},
		},
		"completed": map[string]any{"finishReason": "tool_approval", "pendingToolCalls": []any{
			map[string]any{"toolCallId": "call-1", "name": "weather", "wait": "TOOL_WAIT_RESULT"},
			map[string]any{"toolCallId": "call-2", "name": "refund", "wait": "TOOL_WAIT_APPROVAL"},
		}},
		"tool_call_started": "absent",
	}
	if problems := check(want, observed); len(problems) > 0 {
		t.Errorf("%v\nobserved %s", problems, show(observed))
	}

	// Without tool events there is no toolCalls.
	plain := turnObservation()
	record(plain, 1, started().GetStarted())
	if problems := check(map[string]any{"toolCalls": "absent"}, plain); len(problems) > 0 {
		t.Error(problems)
	}

	// A watch after a sequence in the middle of a call sees the call's last events only:
	// they are events, but no toolCalls item; a call started in the watch is one.
	watched := turnObservation()
	for i, response := range toolRound()[5:] {
		record(watched, uint64(i+6), chatclient.EventOf(response))
	}
	want = map[string]any{
		"events":    []any{"tool_call_delta+", "tool_call_ended", "tool_call_ended", "completed"},
		"toolCalls": "absent",
	}
	if problems := check(want, watched); len(problems) > 0 {
		t.Errorf("%v\nobserved %s", problems, show(watched))
	}
	record(watched, 11, callStarted("call-3", "clock").GetToolCallStarted())
	record(watched, 12, callDelta("call-1", "ignored").GetToolCallDelta())
	record(watched, 13, callDelta("call-3", "{}").GetToolCallDelta())
	want = map[string]any{"toolCalls": []any{map[string]any{"toolCallId": "call-3", "name": "clock", "arguments": "{}", "ended": "absent"}}}
	if problems := check(want, watched); len(problems) > 0 {
		t.Errorf("%v\nobserved %s", problems, show(watched))
	}
}
