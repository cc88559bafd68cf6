package chatclient_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The public API, pinned: the README lists it and the other clients mirror its names.
var exported = []string{
	"AllowPlaintextToken", "Client", "Client.AllTurns", "Client.CancelTurn", "Client.Close",
	"Client.CreateSession", "Client.DeleteSession", "Client.Dispatch", "Client.Edit",
	"Client.GetDefinition", "Client.GetSession", "Client.GetTurn", "Client.ListDefinitions",
	"Client.ListTurns", "Client.Regenerate", "Client.Retry", "Client.RunTurn",
	"Client.StreamTurn", "Client.Stub", "Client.Submit", "Client.ToolResults", "Client.Truncate",
	"Client.TruncateHistory", "Client.WatchSession", "Client.WatchTurn", "CodeName",
	"CommandHints", "CursorOption", "DefinitionOption", "Dial", "DialOption", "Dispatch", "Edit", "EligibleRoutes",
	"Error", "Error.Code", "Error.Domain", "Error.Error", "Error.GRPCStatus", "Error.Is",
	"Error.Message", "Error.Metadata", "Error.Reason", "Error.RetryAfter", "Error.RetryDelay",
	"Error.Unwrap", "ErrorOf", "Event", "EventOf", "New", "NewError", "NewTurnID", "OfferedRoute",
	"Operation", "Option", "ReattachAttempt", "ReattachOption", "ReattachPolicy", "Regenerate",
	"Retry", "RevisionOption", "Route", "SessionOption", "SessionWatch", "SessionWatch.Close",
	"SessionWatch.Cursor", "SessionWatch.Err", "SessionWatch.Items", "SessionWatch.Msg",
	"SessionWatch.Receive", "Submit", "TLSConfigFromPEM", "Tool", "ToolResults", "TurnOption",
	"TurnResult",
	"TurnStream", "TurnStream.Close", "TurnStream.Collect", "TurnStream.Err", "TurnStream.Events",
	"TurnStream.LastSequence", "TurnStream.Msg", "TurnStream.Receive", "TurnStream.Response",
	"TurnStream.TurnID", "WatchSessionOption", "WatchTurnOption", "WithAfterCursor",
	"WithContinueOnDisconnect", "WithExpectedCursor", "WithGRPCOptions", "WithHistoryMode",
	"WithOnDisconnect", "WithParallelToolCalls", "WithReattach", "WithRevision", "WithSessionID", "WithTLS",
	"WithTimeout", "WithToken", "WithToolChoice", "WithTools", "WithTurnID", "WithoutReattach",
	"WriteOption",
}

func TestExportedNames(t *testing.T) {
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, source := range sources {
		if strings.HasSuffix(source, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), source, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					found = append(found, d.Name.Name)
				} else if receiver := receiverName(d.Recv.List[0].Type); ast.IsExported(receiver) {
					found = append(found, receiver+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							found = append(found, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, name := range s.Names {
							if name.IsExported() {
								found = append(found, name.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(found)
	if !slices.Equal(found, exported) {
		t.Errorf("exported names changed:\n got %q\nwant %q", found, exported)
	}
}

func receiverName(expr ast.Expr) string {
	if star, ok := expr.(*ast.StarExpr); ok {
		expr = star.X
	}
	if ident, ok := expr.(*ast.Ident); ok {
		return ident.Name
	}
	return ""
}
