package chatclient_test

// The Go runner of the conformance corpus in tests/conformance (its README.md defines the
// scenario format): every scenario file, in name order, through this package's client
// against the live server the harness starts, one subtest per scenario.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
	"agentskit.dev/chat/client/go/chatclient"
)

const (
	invalidToken      = "conformance-invalid-token"
	eventuallyTimeout = 5 * time.Second
	eventuallyPause   = 100 * time.Millisecond
	// watchTimeout is the deadline of a watch step without deadline_ms, so a turn that
	// never ends fails its scenario instead of hanging the run.
	watchTimeout = 60 * time.Second
)

var stepOptions = []string{"expect", "capture", "token", "deadline_ms", "eventually"}

func TestConformance(t *testing.T) {
	target := os.Getenv("AGENTSKIT_CHAT_CONFORMANCE_TARGET")
	if target == "" {
		t.Skip("AGENTSKIT_CHAT_CONFORMANCE_TARGET is not set: start the live server with " +
			"`.venv/bin/python -m tests.conformance.harness` from the repository root and " +
			"export the environment it prints for go")
	}
	dir := corpusDir()
	files, err := filepath.Glob(filepath.Join(dir, "scenarios", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in %s (%v)", filepath.Join(dir, "scenarios"), err)
	}
	slices.Sort(files)

	clients := map[string]*chatclient.Client{
		"":        dial(t, target, os.Getenv("AGENTSKIT_CHAT_CONFORMANCE_TOKEN")),
		"limited": dial(t, target, os.Getenv("AGENTSKIT_CHAT_CONFORMANCE_LIMITED_TOKEN")),
		"none":    dial(t, target, ""),
		"invalid": dial(t, target, invalidToken),
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			if err := yaml.Unmarshal(raw, &body); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			steps, ok := body["steps"].([]any)
			if !ok {
				t.Fatalf("%s: a scenario is a mapping with a list of steps", file)
			}
			definition, _ := body["definition"].(string)
			r := &runner{
				clients:    clients,
				definition: definition,
				values:     map[string]string{},
				background: map[string]*backgroundTurn{},
			}
			defer r.close()
			for index, step := range steps {
				if err := r.step(step); err != nil {
					t.Fatalf("step %d: %v", index+1, err)
				}
			}
		})
	}
}

// corpusDir is the folder of the corpus: AGENTSKIT_CHAT_CONFORMANCE_DIR, else
// tests/conformance of this checkout.
func corpusDir() string {
	if dir := os.Getenv("AGENTSKIT_CHAT_CONFORMANCE_DIR"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "..", "tests", "conformance")
}

func dial(t *testing.T, target, token string) *chatclient.Client {
	t.Helper()
	client, err := chatclient.Dial(target, chatclient.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// observation is one step's result as generic JSON: objects are map[string]any, numbers
// json.Number.
type observation = map[string]any

type runner struct {
	clients    map[string]*chatclient.Client
	definition string
	values     map[string]string
	background map[string]*backgroundTurn
}

type backgroundTurn struct {
	cancel context.CancelFunc
	done   chan struct{}
	expect any
	result observation
}

func (r *runner) close() {
	for _, turn := range r.background {
		turn.cancel()
		<-turn.done
	}
}

func (r *runner) step(raw any) error {
	step, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("a step is a mapping, got %v", raw)
	}
	var operations []string
	for key := range step {
		if !slices.Contains(stepOptions, key) {
			operations = append(operations, key)
		}
	}
	if len(operations) != 1 {
		return fmt.Errorf("a step has exactly one operation, got %v", operations)
	}
	operation := operations[0]
	args, err := r.substitute(step[operation])
	if err != nil {
		return err
	}
	if err := checkArguments(args); err != nil {
		return fmt.Errorf("%s: %w", operation, err)
	}
	if name, background := mapping(args)["background"]; background {
		if text(name) == "" {
			return fmt.Errorf("%s: background takes a name", operation)
		}
		if step["capture"] != nil {
			return fmt.Errorf("%s: a background step takes no capture", operation)
		}
	}
	eventually, _ := step["eventually"].(bool)
	deadline := time.Now().Add(eventuallyTimeout)
	var observed observation
	var problems []string
	for {
		observed, err = r.observe(operation, args, step)
		if err != nil {
			return err
		}
		if problems, err = r.check(step["expect"], observed); err != nil {
			return err
		}
		if len(problems) == 0 || !eventually || time.Now().After(deadline) {
			break
		}
		time.Sleep(eventuallyPause)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %s\nobserved: %s", operation, strings.Join(problems, "; "), show(observed))
	}
	if observed == nil {
		observed = observation{} // a background stream is captured from when it ends
	}
	if operation == "create_session" {
		if as, ok := mapping(args)["as"].(string); ok {
			if r.values[as], err = lookup(observed, "session.sessionId"); err != nil {
				return err
			}
		}
	}
	captures, _ := step["capture"].(map[string]any)
	for name, path := range captures {
		value, err := lookup(observed, fmt.Sprint(path))
		if err != nil {
			return fmt.Errorf("%s: nothing at %v to capture", operation, path)
		}
		r.values[name] = value
	}
	return nil
}

// check applies an expectation, its $names substituted, to an observation (nil: a
// background stream, checked when it ends). An error observed without an expected one
// fails, and so does the reverse.
func (r *runner) check(expected any, observed observation) ([]string, error) {
	if observed == nil {
		return nil, nil
	}
	substituted, err := r.substitute(expected)
	if err != nil {
		return nil, err
	}
	return check(mapping(substituted), observed), nil
}

func check(expect map[string]any, observed observation) []string {
	_, wantError := expect["error"]
	gotError, hasError := observed["error"]
	switch {
	case hasError && !wantError:
		return []string{fmt.Sprintf("unexpected error %s", show(gotError))}
	case wantError && !hasError:
		return []string{fmt.Sprintf("expected error %s, but the call succeeded", show(expect["error"]))}
	}
	return match(expect, observed, "")
}

// captureName is a string replaced by a captured value: "$" and a name, nothing else.
var captureName = regexp.MustCompile(`^\$[A-Za-z_][A-Za-z0-9_]*$`)

// substitute replaces every string that is exactly $name, in mappings and lists, by the
// value captured as name; a name never captured is a scenario error.
func (r *runner) substitute(value any) (any, error) {
	switch v := value.(type) {
	case string:
		if !captureName.MatchString(v) {
			return v, nil // "$5", "price: $x" and every other string are literal
		}
		found, ok := r.values[v[1:]]
		if !ok {
			return nil, fmt.Errorf("%s was never captured", v)
		}
		return found, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for key, item := range v {
			substituted, err := r.substitute(item)
			if err != nil {
				return nil, err
			}
			out[key] = substituted
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			substituted, err := r.substitute(item)
			if err != nil {
				return nil, err
			}
			out[i] = substituted
		}
		return out, nil
	}
	return value, nil
}

func (r *runner) observe(operation string, args any, step map[string]any) (observation, error) {
	token, err := textOf(step["token"])
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	client, ok := r.clients[token]
	if !ok {
		return nil, fmt.Errorf("unknown token %q", token)
	}
	ms, limited, err := integerOf(step["deadline_ms"])
	if err != nil {
		return nil, fmt.Errorf("deadline_ms: %w", err)
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if limited {
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
	} else if operation == "watch_turn" || operation == "watch_session" {
		ctx, cancel = context.WithTimeout(ctx, watchTimeout)
	}
	switch operation {
	case "ended":
		defer cancel()
		name, err := textOf(args)
		if err != nil || name == "" {
			return nil, fmt.Errorf("ended takes the name of a background stream, got %s", show(args))
		}
		turn, ok := r.background[name]
		if !ok {
			return nil, fmt.Errorf("no background stream %q", name)
		}
		<-turn.done
		return observation{}, nil
	case "await", "cancel":
		defer cancel()
		name, err := textOf(args)
		if err != nil || name == "" {
			return nil, fmt.Errorf("%s takes the name of a background stream, got %s", operation, show(args))
		}
		return r.finish(name, operation == "cancel")
	case "stream_turn":
		return r.turn(ctx, cancel, client, mapping(args), step)
	case "watch_turn":
		return r.watchTurn(ctx, cancel, client, mapping(args), step)
	case "watch_session":
		return r.watchSession(ctx, cancel, client, mapping(args), step)
	}
	defer cancel()
	response, err := r.unary(ctx, client, operation, mapping(args))
	if err != nil {
		var chatErr *chatclient.Error
		if !errors.As(err, &chatErr) {
			return nil, err // a scenario error, not a failed call
		}
		return observation{"error": errorObservation(chatErr)}, nil
	}
	return toJSON(response), nil
}

type scenarioError struct{ error }

func (r *runner) unary(ctx context.Context, client *chatclient.Client, operation string, args map[string]any) (proto.Message, error) {
	session := text(args["session"])
	switch operation {
	case "list_definitions":
		definitions, err := client.ListDefinitions(ctx)
		return &chatv1.ListDefinitionsResponse{Definitions: definitions}, err
	case "get_definition":
		var opts []chatclient.DefinitionOption
		if revision, given := integer(args["revision"]); given {
			opts = append(opts, chatclient.WithRevision(revision))
		}
		definition, err := client.GetDefinition(ctx, text(args["definition_id"]), opts...)
		return &chatv1.GetDefinitionResponse{Definition: definition}, err
	case "create_session":
		definition := r.definition
		if id, ok := args["definition_id"]; ok && id != nil {
			definition = text(id)
		}
		mode := chatv1.HistoryMode_HISTORY_MODE_SERVER
		if text(args["history_mode"]) == "client" {
			mode = chatv1.HistoryMode_HISTORY_MODE_CLIENT
		}
		opts := []chatclient.SessionOption{
			chatclient.WithSessionID(text(args["session_id"])), chatclient.WithHistoryMode(mode),
		}
		if revision, given := integer(args["definition_revision"]); given {
			opts = append(opts, chatclient.WithRevision(revision))
		}
		created, err := client.CreateSession(ctx, definition, opts...)
		return &chatv1.CreateSessionResponse{Session: created}, err
	case "get_session":
		return client.GetSession(ctx, session)
	case "delete_session":
		err := client.DeleteSession(ctx, session, writeOptions(args)...)
		return &chatv1.DeleteSessionResponse{}, err
	case "truncate_history":
		return client.TruncateHistory(ctx, session, text(args["last_kept_message_id"]), writeOptions(args)...)
	case "get_turn":
		turn, err := client.GetTurn(ctx, session, text(args["turn_id"]))
		return &chatv1.GetTurnResponse{Turn: turn}, err
	case "list_turns":
		size, _ := integer(args["page_size"])
		if size < math.MinInt32 || size > math.MaxInt32 {
			return nil, scenarioError{fmt.Errorf("page_size %d is not an int32", size)}
		}
		return client.ListTurns(ctx, session, int32(size), text(args["page_token"]))
	case "cancel_turn":
		return client.CancelTurn(ctx, session, text(args["turn_id"]))
	}
	return nil, scenarioError{fmt.Errorf("unknown operation %q", operation)}
}

func writeOptions(args map[string]any) []chatclient.WriteOption {
	if cursor, given := integer(args["expected_cursor"]); given {
		return []chatclient.WriteOption{chatclient.WithExpectedCursor(cursor)}
	}
	return nil
}

func (r *runner) startTurn(ctx context.Context, client *chatclient.Client, args map[string]any) (*chatclient.TurnStream, error) {
	session := text(args["session"])
	var opts []chatclient.TurnOption
	if id, ok := args["turn_id"]; ok {
		opts = append(opts, chatclient.WithTurnID(text(id)))
	}
	if cursor, given := integer(args["expected_cursor"]); given {
		opts = append(opts, chatclient.WithExpectedCursor(cursor))
	}
	switch mode, given := args["on_disconnect"]; {
	case !given:
	case mode == "continue":
		opts = append(opts, chatclient.WithContinueOnDisconnect())
	case mode == "cancel":
		opts = append(opts, chatclient.WithOnDisconnect(chatv1.DisconnectMode_DISCONNECT_MODE_CANCEL))
	default:
		return nil, scenarioError{fmt.Errorf("on_disconnect is continue or cancel, got %s", show(mode))}
	}
	tools, err := toolOptions(args)
	if err != nil {
		return nil, err
	}
	opts = append(opts, tools...)
	if submit, ok := args["submit"]; ok {
		op := mapping(submit)
		if id := text(op["message_id"]); id != "" {
			return client.StreamTurn(ctx, session, chatclient.Submit{Content: text(op["content"]), MessageID: id}, opts...)
		}
		return client.Submit(ctx, session, text(op["content"]), opts...)
	}
	if retry, ok := args["retry"]; ok {
		return client.Retry(ctx, session, text(mapping(retry)["message_id"]), opts...)
	}
	if edit, ok := args["edit"]; ok {
		op := mapping(edit)
		return client.Edit(ctx, session, text(op["message_id"]), text(op["content"]), opts...)
	}
	if regenerate, ok := args["regenerate"]; ok {
		return client.Regenerate(ctx, session, text(mapping(regenerate)["message_id"]), opts...)
	}
	if dispatch, ok := args["dispatch"]; ok {
		op := mapping(dispatch)
		var messages []*chatv1.Message
		items, _ := op["messages"].([]any)
		for _, item := range items {
			m := mapping(item)
			role, known := chatv1.Role_value["ROLE_"+strings.ToUpper(text(m["role"]))]
			if !known {
				return nil, scenarioError{fmt.Errorf("unknown role %v", m["role"])}
			}
			messages = append(messages, &chatv1.Message{
				Id: text(m["id"]), Role: chatv1.Role(role), Content: text(m["content"]),
				ToolCalls: toolCalls(m["tool_calls"]), ToolCallId: text(m["tool_call_id"]),
			})
		}
		if _, given := op["approvals"]; given {
			decisions, err := approvals(op)
			if err != nil {
				return nil, err
			}
			return client.StreamTurn(ctx, session, chatclient.Dispatch{Messages: messages, Approvals: decisions}, opts...)
		}
		return client.Dispatch(ctx, session, messages, opts...)
	}
	if answers, ok := args["tool_results"]; ok {
		op := mapping(answers)
		var results []*chatv1.ToolResult
		items, _ := op["results"].([]any)
		for _, item := range items {
			m := mapping(item)
			results = append(results, &chatv1.ToolResult{
				ToolCallId: text(m["tool_call_id"]), Content: text(m["content"]), MessageId: text(m["message_id"]),
			})
		}
		decisions, err := approvals(op)
		if err != nil {
			return nil, err
		}
		return client.ToolResults(ctx, session, results, decisions, opts...)
	}
	return nil, scenarioError{errors.New("stream_turn needs submit, retry, edit, regenerate, dispatch or tool_results")}
}

// toolOptions are a stream_turn's tools, tool_choice and parallel_tool_calls as the
// client's turn options; none when none is given.
func toolOptions(args map[string]any) ([]chatclient.TurnOption, error) {
	var opts []chatclient.TurnOption
	if given, ok := args["tools"]; ok && given != nil {
		items, ok := given.([]any)
		if !ok {
			return nil, scenarioError{fmt.Errorf("tools is a list, got %s", show(given))}
		}
		tools := make([]chatclient.Tool, 0, len(items))
		for _, item := range items {
			m := mapping(item)
			tool := chatclient.Tool{Name: text(m["name"]), Description: text(m["description"])}
			if schema := m["parameters"]; schema != nil {
				raw, err := json.Marshal(schema)
				if err != nil {
					return nil, scenarioError{fmt.Errorf("parameters of tool %s: %w", tool.Name, err)}
				}
				tool.Parameters = raw
			}
			tools = append(tools, tool)
		}
		opts = append(opts, chatclient.WithTools(tools...))
	}
	if choice, ok := args["tool_choice"]; ok && choice != nil {
		opts = append(opts, chatclient.WithToolChoice(text(choice)))
	}
	if parallel, ok := args["parallel_tool_calls"]; ok && parallel != nil {
		opts = append(opts, chatclient.WithParallelToolCalls(parallel.(bool))) // checked by checkArguments
	}
	return opts, nil
}

// toolCalls are a dispatch message's tool_calls.
func toolCalls(value any) []*chatv1.ToolCall {
	items, _ := value.([]any)
	var calls []*chatv1.ToolCall
	for _, item := range items {
		m := mapping(item)
		calls = append(calls, &chatv1.ToolCall{Id: text(m["id"]), Name: text(m["name"]), Arguments: text(m["arguments"])})
	}
	return calls
}

// approvals are the approvals of a dispatch or a tool_results operation; each says
// whether it approves with a boolean.
func approvals(op map[string]any) ([]*chatv1.ToolApproval, error) {
	items, _ := op["approvals"].([]any)
	var decisions []*chatv1.ToolApproval
	for i, item := range items {
		m := mapping(item)
		approved, ok := m["approved"].(bool)
		if !ok {
			return nil, scenarioError{fmt.Errorf("approvals.%d.approved is a boolean, got %s", i, show(m["approved"]))}
		}
		decisions = append(decisions, &chatv1.ToolApproval{
			ToolCallId: text(m["tool_call_id"]), Approved: approved, Reason: text(m["reason"]),
		})
	}
	return decisions, nil
}

// turn runs a stream_turn step: to its end, or, with `background`, until its first event,
// leaving the rest to a goroutine that a later await or cancel step waits for.
func (r *runner) turn(ctx context.Context, cancel context.CancelFunc, client *chatclient.Client, args map[string]any, step map[string]any) (observation, error) {
	ctx, stop := context.WithCancel(ctx)
	release := func() { stop(); cancel() }
	stream, err := r.startTurn(ctx, client, args)
	return r.follow(stop, release, args, step, turnObservation(), err,
		func(observed observation, first chan<- struct{}) { drain(stream, observed, first) })
}

// watchTurn runs a watch_turn step, through the client's WatchTurn without its automatic
// reattach, as turn runs a stream_turn step; its observation also says whether it is
// gapless.
func (r *runner) watchTurn(ctx context.Context, cancel context.CancelFunc, client *chatclient.Client, args map[string]any, step map[string]any) (observation, error) {
	ctx, stop := context.WithCancel(ctx)
	release := func() { stop(); cancel() }
	after, _ := integer(args["after_sequence"])
	if after < 0 {
		release()
		return nil, fmt.Errorf("after_sequence %d is negative", after)
	}
	stream, err := client.WatchTurn(ctx, text(args["session"]), text(args["turn_id"]), uint64(after), chatclient.WithoutReattach())
	observed := turnObservation()
	observed["gapless"] = false
	return r.follow(stop, release, args, step, observed, err,
		func(observed observation, first chan<- struct{}) {
			drain(stream, observed, first)
			observed["gapless"] = gapless(observed, after)
		})
}

// watchSession runs a watch_session step: it reads the watch until the terminal event of
// turn until_turn, then closes it; with `background`, it moves on after the first session.
func (r *runner) watchSession(ctx context.Context, cancel context.CancelFunc, client *chatclient.Client, args map[string]any, step map[string]any) (observation, error) {
	until := text(args["until_turn"])
	if until == "" {
		cancel()
		return nil, errors.New("watch_session needs until_turn, a turn id")
	}
	ctx, stop := context.WithCancel(ctx)
	release := func() { stop(); cancel() }
	var opts []chatclient.WatchSessionOption
	if cursor, given := integer(args["after_cursor"]); given {
		opts = append(opts, chatclient.WithAfterCursor(cursor))
	}
	watch, err := client.WatchSession(ctx, text(args["session"]), opts...)
	observed := turnObservation()
	observed["sessions"], observed["turns"] = []any{}, []any{}
	return r.follow(stop, release, args, step, observed, err,
		func(observed observation, first chan<- struct{}) { drainSession(watch, until, observed, first) })
}

func turnObservation() observation {
	return observation{"events": []any{}, "sequences": []any{}, "text": ""}
}

// follow reads a stream that opened with err into observed: to its end, or, with
// `background`, until read signals its first item, leaving the rest to a goroutine that
// a later await or cancel step waits for. stop cancels the stream, release also frees the
// step's deadline.
func (r *runner) follow(stop, release context.CancelFunc, args, step map[string]any, observed observation, err error,
	read func(observation, chan<- struct{}),
) (observation, error) {
	if err != nil {
		release()
		var scenario scenarioError
		if errors.As(err, &scenario) {
			return nil, err
		}
		observed["error"] = errorObservation(chatclient.ErrorOf(err))
		return observed, nil
	}
	name, background := args["background"]
	if !background {
		defer release()
		read(observed, nil)
		return observed, nil
	}
	turn := &backgroundTurn{cancel: stop, done: make(chan struct{}), expect: step["expect"], result: observed}
	first := make(chan struct{})
	go func() {
		defer close(turn.done)
		defer release()
		read(observed, first)
	}()
	select {
	case <-first:
	case <-turn.done:
	}
	r.background[text(name)] = turn
	return nil, nil
}

// drain reads a stream into its observation, signalling first after the first event.
func drain(stream *chatclient.TurnStream, observed observation, first chan<- struct{}) {
	for event, err := range stream.Events() {
		if err != nil {
			observed["error"] = errorObservation(chatclient.ErrorOf(err))
			break
		}
		record(observed, stream.Response().GetSequence(), event)
		if first != nil {
			close(first)
			first = nil
		}
	}
}

// drainSession reads a session watch into its observation until the terminal event of
// turn until, signalling first after the first session.
func drainSession(watch *chatclient.SessionWatch, until string, observed observation, first chan<- struct{}) {
	for item, err := range watch.Items() {
		if err != nil {
			observed["error"] = errorObservation(chatclient.ErrorOf(err))
			return
		}
		if session := item.GetSession(); session != nil {
			observed["sessions"] = append(observed["sessions"].([]any), toJSON(session))
			if first != nil {
				close(first)
				first = nil
			}
			continue
		}
		response := item.GetEvent()
		if response == nil {
			continue // a heartbeat
		}
		if turns := observed["turns"].([]any); !slices.Contains(turns, any(response.GetTurnId())) {
			observed["turns"] = append(turns, response.GetTurnId())
		}
		event := chatclient.EventOf(response)
		if response.GetTurnId() != until || event == nil {
			continue
		}
		record(observed, response.GetSequence(), event)
		if terminal(event) {
			return // leaving the loop closes the watch
		}
	}
}

// record adds one event to a stream's observation.
func record(observed observation, sequence uint64, event chatclient.Event) {
	kind := eventKind(event)
	observed["events"] = append(observed["events"].([]any), kind)
	number := json.Number(strconv.FormatUint(sequence, 10))
	observed["sequences"] = append(observed["sequences"].([]any), number)
	observed["lastSequence"] = number
	switch e := event.(type) {
	case *chatv1.TextDelta:
		observed["text"] = observed["text"].(string) + e.GetText()
	case *chatv1.ToolCallStarted, *chatv1.ToolCallDelta, *chatv1.ToolCallEnded:
		recordToolCall(observed, event)
	default:
		observed[kind] = toJSON(event)
	}
}

// recordToolCall adds a tool call event to the observation's toolCalls: one item per
// tool_call_started event, in order, with its deltas joined and its ended event. The
// events of a call that started before the stream's first event (a watch_turn after a
// sequence in the middle of the call) make no item: they are in `events` only.
func recordToolCall(observed observation, event chatclient.Event) {
	calls, _ := observed["toolCalls"].([]any)
	find := func(id string) map[string]any {
		for _, item := range calls {
			if call := item.(map[string]any); call["toolCallId"] == id {
				return call
			}
		}
		return nil
	}
	switch e := event.(type) {
	case *chatv1.ToolCallStarted:
		observed["toolCalls"] = append(calls, map[string]any{
			"toolCallId": e.GetToolCallId(), "name": e.GetName(), "arguments": "",
		})
	case *chatv1.ToolCallDelta:
		if call := find(e.GetToolCallId()); call != nil {
			call["arguments"] = call["arguments"].(string) + e.GetArgumentsDelta()
		}
	case *chatv1.ToolCallEnded:
		if call := find(e.GetToolCallId()); call != nil {
			call["ended"] = toJSON(e)
		}
	}
}

func terminal(event chatclient.Event) bool {
	switch event.(type) {
	case *chatv1.TurnCompleted, *chatv1.TurnFailed:
		return true
	}
	return false
}

// gapless tells whether a watch's sequences are consecutive from after+1 and its last
// event is terminal.
func gapless(observed observation, after int64) bool {
	sequences := observed["sequences"].([]any)
	kinds := observed["events"].([]any)
	if len(sequences) == 0 || !slices.Contains([]any{"completed", "failed"}, kinds[len(kinds)-1]) {
		return false
	}
	for i, sequence := range sequences {
		if sequence != json.Number(strconv.FormatInt(after+1+int64(i), 10)) {
			return false
		}
	}
	return true
}

func eventKind(event chatclient.Event) string {
	switch event.(type) {
	case *chatv1.TurnStarted:
		return "started"
	case *chatv1.TurnDecision:
		return "decision"
	case *chatv1.TextDelta:
		return "delta"
	case *chatv1.TurnCompleted:
		return "completed"
	case *chatv1.TurnFailed:
		return "failed"
	case *chatv1.ToolCallStarted:
		return "tool_call_started"
	case *chatv1.ToolCallDelta:
		return "tool_call_delta"
	case *chatv1.ToolCallEnded:
		return "tool_call_ended"
	case *chatv1.ToolCallResult:
		return "tool_call_result"
	}
	return "unknown"
}

// finish ends a background stream (cancelling it first for a cancel step) and checks the
// expectation of the step that started it. The CANCELLED error of a stream this runner
// cancelled is not an observation: a cancel ends a stream without an error of its own.
func (r *runner) finish(name string, cancel bool) (observation, error) {
	turn, ok := r.background[name]
	if !ok {
		return nil, fmt.Errorf("no background stream %q", name)
	}
	delete(r.background, name)
	if cancel {
		turn.cancel()
	}
	<-turn.done
	observed := turn.result
	if cancel {
		if failure, ok := observed["error"].(map[string]any); ok && failure["code"] == "CANCELLED" {
			delete(observed, "error")
		}
	}
	problems, err := r.check(turn.expect, observed)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("background %s: %s\nobserved: %s", name, strings.Join(problems, "; "), show(observed))
	}
	return observed, nil
}

func errorObservation(err *chatclient.Error) map[string]any {
	observed := map[string]any{"code": chatclient.CodeName(err.Code())}
	if reason := err.Reason(); reason != "" {
		observed["reason"] = reason
	}
	if metadata := err.Metadata(); len(metadata) > 0 {
		values := map[string]any{}
		for key, value := range metadata {
			values[key] = value
		}
		observed["metadata"] = values
	}
	if delay, ok := err.RetryDelay(); ok {
		observed["retryDelayMs"] = json.Number(strconv.FormatInt(delay.Milliseconds(), 10))
	}
	return observed
}

// toJSON is a message's proto3 JSON mapping (protojson's defaults: lowerCamelCase names,
// enum names, int64 as strings, defaults omitted), parsed into generic JSON.
func toJSON(message proto.Message) observation {
	raw, err := protojson.Marshal(message)
	if err != nil {
		panic(err) // every message of the contract has a JSON form
	}
	decoder := json.NewDecoder(strings.NewReader(string(raw)))
	decoder.UseNumber()
	observed := observation{}
	if err := decoder.Decode(&observed); err != nil {
		panic(err)
	}
	return observed
}

// absent stands for a key an object does not have.
type absentValue struct{}

var absent = absentValue{}

// match lists every way actual falls short of expected (README.md, "Matching expect").
func match(expected, actual any, path string) []string {
	where := path
	if where == "" {
		where = "observation"
	}
	if expected == "absent" {
		if actual == absent {
			return nil
		}
		return []string{fmt.Sprintf("%s: expected absent, got %s", where, show(actual))}
	}
	if actual == absent {
		if expected == "present" || !isDefault(expected) {
			return []string{fmt.Sprintf("%s: missing (expected %s)", where, show(expected))}
		}
		return nil
	}
	if expected == "present" {
		return nil
	}
	switch want := expected.(type) {
	case map[string]any:
		got, ok := actual.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: expected an object, got %s", where, show(actual))}
		}
		var problems []string
		for _, key := range sortedKeys(want) {
			if path == "" && key == "events" {
				problems = append(problems, matchEvents(want[key], got["events"])...)
				continue
			}
			child := key
			if path != "" {
				child = path + "." + key
			}
			value, found := got[key]
			if !found {
				value = absent
			}
			problems = append(problems, match(want[key], value, child)...)
		}
		return problems
	case []any:
		got, ok := actual.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: expected a list, got %s", where, show(actual))}
		}
		if len(want) != len(got) {
			return []string{fmt.Sprintf("%s: expected %d items, got %d: %s", where, len(want), len(got), show(got))}
		}
		var problems []string
		for i := range want {
			problems = append(problems, match(want[i], got[i], fmt.Sprintf("%s.%d", where, i))...)
		}
		return problems
	}
	if scalarEqual(expected, actual) {
		return nil
	}
	return []string{fmt.Sprintf("%s: expected %s, got %s", where, show(expected), show(actual))}
}

// isDefault reports a value proto JSON leaves out, type by type as the Python runner
// decides it: false, the integer 0, "", [] and {} (0.0 is not one).
func isDefault(value any) bool {
	switch v := value.(type) {
	case bool:
		return !v
	case int:
		return v == 0
	case int64:
		return v == 0
	case uint64:
		return v == 0
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// scalarEqual compares scalars: equal values, a number and the same number written as a
// string (proto JSON's int64, a captured cursor) either way round; booleans match only
// booleans.
func scalarEqual(expected, actual any) bool {
	switch want := expected.(type) {
	case bool:
		got, ok := actual.(bool)
		return ok && got == want
	case string:
		if got, ok := actual.(string); ok {
			return got == want
		}
		got, ok := numberText(actual)
		return ok && got == want
	case nil:
		return actual == nil
	}
	want, ok := numberText(expected)
	if !ok {
		return false
	}
	if got, ok := actual.(string); ok {
		return got == want
	}
	got, ok := numberText(actual)
	if !ok {
		return false
	}
	if got == want {
		return true
	}
	a, errA := strconv.ParseFloat(want, 64)
	b, errB := strconv.ParseFloat(got, 64)
	return errA == nil && errB == nil && a == b
}

// numberText writes a number (YAML's int and float64, JSON's json.Number) as its decimal
// text; ok is false for anything else.
func numberText(value any) (string, bool) {
	switch v := value.(type) {
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case json.Number:
		return v.String(), true
	}
	return "", false
}

// matchEvents matches event kinds against a pattern whose items may end in + (one or
// more) or * (zero or more).
func matchEvents(pattern, kinds any) []string {
	items, ok := pattern.([]any)
	if !ok {
		return []string{fmt.Sprintf("events: the pattern is a list of kinds, got %s", show(pattern))}
	}
	var expr strings.Builder
	for _, item := range items {
		kind, ok := item.(string)
		if !ok {
			return []string{fmt.Sprintf("events: a pattern item is a kind, got %s", show(item))}
		}
		switch {
		case strings.HasSuffix(kind, "+"):
			fmt.Fprintf(&expr, "(?:%s,)+", regexp.QuoteMeta(strings.TrimSuffix(kind, "+")))
		case strings.HasSuffix(kind, "*"):
			fmt.Fprintf(&expr, "(?:%s,)*", regexp.QuoteMeta(strings.TrimSuffix(kind, "*")))
		default:
			fmt.Fprintf(&expr, "%s,", regexp.QuoteMeta(kind))
		}
	}
	got, _ := kinds.([]any)
	var sequence strings.Builder
	for _, kind := range got {
		fmt.Fprintf(&sequence, "%v,", kind)
	}
	if regexp.MustCompile("^(?:" + expr.String() + ")$").MatchString(sequence.String()) {
		return nil
	}
	return []string{fmt.Sprintf("events: expected %s, got %s", show(pattern), show(kinds))}
}

// lookup is the value at a dot-separated path, as a string.
func lookup(observed observation, path string) (string, error) {
	var value any = observed
	for _, part := range strings.Split(path, ".") {
		switch v := value.(type) {
		case map[string]any:
			next, ok := v[part]
			if !ok {
				return "", fmt.Errorf("nothing at %s", path)
			}
			value = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v) {
				return "", fmt.Errorf("nothing at %s", path)
			}
			value = v[i]
		default:
			return "", fmt.Errorf("nothing at %s", path)
		}
	}
	return fmt.Sprint(value), nil
}

func mapping(value any) map[string]any {
	m, _ := value.(map[string]any)
	return m
}

// The kinds of arguments (README.md, "Steps"): integers, which may be written as decimal
// strings (a captured cursor), and texts. checkArguments refuses any other value before a
// call is made, so text and integer read checked arguments; null is "not given".
var (
	integerArguments = []string{
		"after_cursor", "after_sequence", "definition_revision", "expected_cursor", "page_size",
		"revision",
	}
	textArguments = []string{
		"arguments", "as", "background", "content", "definition_id", "description",
		"history_mode", "id", "last_kept_message_id", "message_id", "name", "on_disconnect",
		"page_token", "reason", "role", "session", "session_id", "tool_call_id", "tool_choice",
		"turn_id", "until_turn",
	}
	booleanArguments = []string{"approved", "parallel_tool_calls"}
	decimal          = regexp.MustCompile(`^-?[0-9]+$`)
)

// checkArguments checks every integer, text and boolean argument in a step's arguments, at
// any depth (a dispatch's messages, a tool_results operation's approvals). A tool's
// parameters are a JSON Schema, whatever its keys: a mapping, not looked into.
func checkArguments(value any) error {
	switch v := value.(type) {
	case map[string]any:
		for _, key := range sortedKeys(v) {
			var err error
			switch {
			case slices.Contains(integerArguments, key):
				_, _, err = integerOf(v[key])
			case slices.Contains(textArguments, key):
				_, err = textOf(v[key])
			case slices.Contains(booleanArguments, key):
				if _, ok := v[key].(bool); !ok && v[key] != nil {
					err = fmt.Errorf("expected a boolean, got %s", show(v[key]))
				}
			case key == "parameters":
				if _, ok := v[key].(map[string]any); !ok && v[key] != nil {
					err = fmt.Errorf("expected a mapping (a JSON Schema), got %s", show(v[key]))
				}
			default:
				err = checkArguments(v[key])
			}
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
	case []any:
		for i, item := range v {
			if err := checkArguments(item); err != nil {
				return fmt.Errorf("%d: %w", i, err)
			}
		}
	}
	return nil
}

// textOf is a text argument: a string, or "" when null or absent.
func textOf(value any) (string, error) {
	switch v := value.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	return "", fmt.Errorf("expected a string, got %s", show(value))
}

// integerOf is an integer argument: an integer or a decimal string; given is false when
// it is null or absent.
func integerOf(value any) (n int64, given bool, err error) {
	switch v := value.(type) {
	case nil:
		return 0, false, nil
	case int:
		return int64(v), true, nil
	case int64:
		return v, true, nil
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), true, nil
		}
	case string:
		if decimal.MatchString(v) {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n, true, nil
			}
		}
	}
	return 0, false, fmt.Errorf("expected an integer or a decimal string, got %s", show(value))
}

// text is a checked text argument.
func text(value any) string {
	s, _ := textOf(value)
	return s
}

// integer is a checked integer argument; given is false when it is null or absent.
func integer(value any) (n int64, given bool) {
	n, given, _ = integerOf(value)
	return n, given
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}

func show(value any) string {
	if value == absent {
		return "<absent>"
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Sprint(value)
	}
	return string(raw)
}
