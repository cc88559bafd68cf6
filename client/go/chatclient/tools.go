package chatclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
)

// Tool declares a tool the model may call in a turn (see WithTools). The client runs it:
// an answer that calls it completes waiting for its result (TurnCompleted's
// PendingToolCalls), and the next turn sends that result (ToolResults, or a Dispatch
// whose history ends with it).
type Tool struct {
	// Name is the tool's name: letters, digits, "_" and "-", at most 64 characters.
	Name string
	// Description says what the tool does, for the model; empty sends none.
	Description string
	// Parameters is the JSON Schema of the tool's arguments (an object schema) as JSON
	// text, e.g. json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`).
	// Nil or empty sends no schema: a tool without arguments. It is sent compacted; text
	// that is not JSON makes the turn fail before any call (InvalidArgument).
	Parameters json.RawMessage
}

// ToolResults continues an answer of a server-held history that waits for tools (see
// TurnCompleted.PendingToolCalls): a result for each call waiting for one
// (TOOL_WAIT_RESULT) and a decision for each call waiting for approval
// (TOOL_WAIT_APPROVAL). The server stores them as tool messages and sends the history to
// the model: such a turn never passes through the routes and is agentic. An approved call
// without a result goes back to the client to run: the turn completes waiting for its
// result. Declare the same tools (WithTools) as the turn that called them.
//
// A request that does not answer exactly the pending calls is refused and nothing is
// stored: INVALID_ARGUMENT ERROR_REASON_TOOL_CALL_UNKNOWN (a call the answer does not
// wait on) or ERROR_REASON_TOOL_CALLS_UNANSWERED, FAILED_PRECONDITION
// ERROR_REASON_NO_PENDING_TOOL_CALLS (the last answer waits on nothing).
type ToolResults struct {
	// Results are the outputs of calls waiting for a result (or approved in this
	// request); each names its call with ToolCallId.
	Results []*chatv1.ToolResult
	// Approvals are the decisions on calls waiting for approval; a denied call's Reason
	// goes to the model with the denial.
	Approvals []*chatv1.ToolApproval
}

func (o ToolResults) setOn(r *chatv1.StreamTurnRequest) {
	r.Operation = &chatv1.StreamTurnRequest_ToolResults{ToolResults: &chatv1.ToolResultsOperation{
		Results: o.Results, Approvals: o.Approvals,
	}}
}

type turnOption func(*turnSettings)

func (o turnOption) applyTurn(s *turnSettings) { o(s) }

// WithTools declares the tools the model may call in this turn; none by default (the
// model calls no tool). Given more than once, the tools add up, in order. Send them with
// every turn that may call them, the ToolResults that continues an answer included. An
// answer that calls them streams *chatv1.ToolCallStarted, *chatv1.ToolCallDelta and
// *chatv1.ToolCallEnded events and completes waiting for them (TurnResult's
// PendingToolCalls). A route's answer never calls a tool.
func WithTools(tools ...Tool) TurnOption {
	return turnOption(func(s *turnSettings) { s.tools = append(s.tools, tools...) })
}

// WithToolChoice says whether and which tool the model must call: "auto" (it decides),
// "none" (it calls none), "required" (it calls at least one) or the name of the one
// declared tool it must call. Without it (or with "") nothing is sent: the model's
// default.
func WithToolChoice(choice string) TurnOption {
	return turnOption(func(s *turnSettings) { s.toolChoice = choice })
}

// WithParallelToolCalls says whether the model may call several tools in one answer.
// Without it nothing is sent: the model's default.
func WithParallelToolCalls(parallel bool) TurnOption {
	return turnOption(func(s *turnSettings) { s.parallelToolCalls = &parallel })
}

// setTools writes a turn's tool settings into its request; tools whose parameters are not
// JSON refuse the turn, naming the tool by position only.
func (s *turnSettings) setTools(r *chatv1.StreamTurnRequest) error {
	for i, tool := range s.tools {
		declaration := &chatv1.ToolDeclaration{Name: tool.Name, Description: tool.Description}
		if len(bytes.TrimSpace(tool.Parameters)) > 0 {
			var compact bytes.Buffer
			if err := json.Compact(&compact, tool.Parameters); err != nil {
				return NewError(status.New(codes.InvalidArgument,
					fmt.Sprintf("chatclient: tools[%d].parameters is not JSON", i)))
			}
			declaration.ParametersJson = compact.String()
		}
		r.Tools = append(r.Tools, declaration)
	}
	r.ToolChoice = s.toolChoice
	r.ParallelToolCalls = s.parallelToolCalls
	return nil
}

// ToolResults continues an answer of a server-held history that waits for tools with
// their results and approval decisions (see the ToolResults operation), and streams the
// turn of the model's continued answer. Pass WithTools with the tools of the turn that
// called them.
func (c *Client) ToolResults(ctx context.Context, sessionID string, results []*chatv1.ToolResult, approvals []*chatv1.ToolApproval, opts ...TurnOption) (*TurnStream, error) {
	return c.StreamTurn(ctx, sessionID, ToolResults{Results: results, Approvals: approvals}, opts...)
}

// collectedToolCalls assembles the calls a stream's tool call events made, in the order
// they first appear: a call's arguments are its deltas joined, or its ended event's
// arguments once it ended.
type collectedToolCalls struct {
	calls []*chatv1.ToolCall
	byID  map[string]*chatv1.ToolCall
}

func (c *collectedToolCalls) call(id string) *chatv1.ToolCall {
	if call, ok := c.byID[id]; ok {
		return call
	}
	if c.byID == nil {
		c.byID = map[string]*chatv1.ToolCall{}
	}
	call := &chatv1.ToolCall{Id: id}
	c.byID[id] = call
	c.calls = append(c.calls, call)
	return call
}

// add takes one event; it reports false for an event that is not a tool call event.
func (c *collectedToolCalls) add(event Event) bool {
	switch e := event.(type) {
	case *chatv1.ToolCallStarted:
		c.call(e.GetToolCallId()).Name = e.GetName()
	case *chatv1.ToolCallDelta:
		call := c.call(e.GetToolCallId())
		call.Arguments += e.GetArgumentsDelta()
	case *chatv1.ToolCallEnded:
		c.call(e.GetToolCallId()).Arguments = e.GetArguments()
	default:
		return false
	}
	return true
}
