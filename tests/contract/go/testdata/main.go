// Command decode reads a google.rpc.Status, base64-encoded in its first argument, with the
// Go code protoc-gen-go generated from proto/, and prints what a Go client learns from it.
package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

type report struct {
	Code         int32             `json:"code"`
	Reason       string            `json:"reason"`
	KnownReason  bool              `json:"known_reason"`
	Domain       string            `json:"domain"`
	Metadata     map[string]string `json:"metadata"`
	RetryDelayMs int64             `json:"retry_delay_ms"`
	Methods      []string          `json:"methods"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	wire, err := base64.StdEncoding.DecodeString(os.Args[1])
	if err != nil {
		return err
	}
	var st status.Status
	if err := proto.Unmarshal(wire, &st); err != nil {
		return err
	}
	out := report{Code: st.GetCode()}
	for _, detail := range st.GetDetails() {
		message, err := detail.UnmarshalNew()
		if err != nil {
			return err
		}
		switch d := message.(type) {
		case *errdetails.ErrorInfo:
			out.Reason, out.Domain, out.Metadata = d.GetReason(), d.GetDomain(), d.GetMetadata()
			_, out.KnownReason = chatv1.ErrorReason_value[d.GetReason()]
		case *errdetails.RetryInfo:
			out.RetryDelayMs = d.GetRetryDelay().AsDuration().Milliseconds()
		}
	}
	methods := chatv1.File_agentskit_chat_v1_chat_proto.Services().ByName("ChatService").Methods()
	for i := 0; i < methods.Len(); i++ {
		out.Methods = append(out.Methods, string(methods.Get(i).Name()))
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
