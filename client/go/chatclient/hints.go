package chatclient

import (
	"slices"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
)

// Route is what eligibility needs of a route: its event and the states it is restricted
// to. *chatv1.RouteInfo is one.
type Route interface {
	GetEvent() string
	GetStates() []string
}

// OfferedRoute is a route that may carry a fixed input to offer as a button.
// *chatv1.RouteInfo is one.
type OfferedRoute interface {
	Route
	GetInputText() string
}

// EligibleRoutes returns the routes that may answer in snapshot, in their given order:
// those whose event the snapshot allows and, when a route lists states, whose current
// state is among them. It is the rule the server applies before trying a route's
// matcher.
func EligibleRoutes[R Route](routes []R, snapshot *chatv1.Snapshot) []R {
	allowed := snapshot.GetAllowedEvents()
	var eligible []R
	for _, route := range routes {
		if !slices.Contains(allowed, route.GetEvent()) {
			continue
		}
		if states := route.GetStates(); len(states) > 0 && !slices.Contains(states, snapshot.GetState()) {
			continue
		}
		eligible = append(eligible, route)
	}
	return eligible
}

// CommandHints returns the inputs a renderer may offer as buttons in snapshot: the
// InputText of each eligible route that has one (command and exact matchers), in route
// order, each text once.
func CommandHints[R OfferedRoute](routes []R, snapshot *chatv1.Snapshot) []string {
	var hints []string
	for _, route := range EligibleRoutes(routes, snapshot) {
		if text := route.GetInputText(); text != "" && !slices.Contains(hints, text) {
			hints = append(hints, text)
		}
	}
	return hints
}
