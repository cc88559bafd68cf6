// Pins protoc-gen-go and, for the generated code the contract tests build, the Go protobuf
// runtime (one module provides both). `make contract-tools` installs the plugin into build/bin.
module agentskit.dev/chat/tests/contract

go 1.24

tool google.golang.org/protobuf/cmd/protoc-gen-go

require google.golang.org/protobuf v1.36.12 // indirect
