package chatclient_test

import (
	"slices"
	"testing"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
	"agentskit.dev/chat/client/go/chatclient"
)

var routes = []*chatv1.RouteInfo{
	{Id: "begin", Event: "begin_return", Matcher: "command", InputText: "/return"},
	{Id: "begin-typo", Event: "begin_return", Matcher: "exact", InputText: "/retrun"},
	{Id: "order", Event: "order_found", States: []string{"identifying"}, Matcher: "pattern"},
	{Id: "cancel", Event: "cancel", Matcher: "exact", InputText: "/cancel"},
	{Id: "cancel-again", Event: "cancel", Matcher: "exact", InputText: "/cancel"},
	{Id: "help", Event: "help", States: []string{"browsing"}, Matcher: "exact", InputText: "/help"},
}

func ids(routes []*chatv1.RouteInfo) []string {
	var out []string
	for _, route := range routes {
		out = append(out, route.GetId())
	}
	return out
}

func TestEligibleRoutes(t *testing.T) {
	browsing := &chatv1.Snapshot{State: "browsing", AllowedEvents: []string{"begin_return", "help"}}
	if got, want := ids(chatclient.EligibleRoutes(routes, browsing)), []string{"begin", "begin-typo", "help"}; !slices.Equal(got, want) {
		t.Errorf("browsing: %v, want %v", got, want)
	}
	// help is allowed here, but the route is restricted to browsing.
	identifying := &chatv1.Snapshot{State: "identifying", AllowedEvents: []string{"order_found", "cancel", "help"}}
	if got, want := ids(chatclient.EligibleRoutes(routes, identifying)), []string{"order", "cancel", "cancel-again"}; !slices.Equal(got, want) {
		t.Errorf("identifying: %v, want %v", got, want)
	}
	if got := chatclient.EligibleRoutes(routes, nil); len(got) != 0 {
		t.Errorf("no snapshot: %v", ids(got))
	}
}

func TestCommandHintsOffersEachEligibleInputOnceInRouteOrder(t *testing.T) {
	identifying := &chatv1.Snapshot{State: "identifying", AllowedEvents: []string{"order_found", "cancel", "help"}}
	if got, want := chatclient.CommandHints(routes, identifying), []string{"/cancel"}; !slices.Equal(got, want) {
		t.Errorf("identifying: %v, want %v", got, want)
	}
	browsing := &chatv1.Snapshot{State: "browsing", AllowedEvents: []string{"help", "begin_return"}}
	if got, want := chatclient.CommandHints(routes, browsing), []string{"/return", "/retrun", "/help"}; !slices.Equal(got, want) {
		t.Errorf("browsing: %v, want %v", got, want)
	}
}
