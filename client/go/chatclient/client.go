package chatclient

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	chatv1 "agentskit.dev/chat/client/go/agentskit/chat/v1"
)

// Client calls a chat server. It is safe for concurrent use.
type Client struct {
	conn     *grpc.ClientConn // nil when the caller owns the connection (New)
	rpc      chatv1.ChatServiceClient
	settings clientSettings
}

// Dial makes a client of the server at target ("host:port", or any gRPC target such as
// "dns:///chat.example.com:443" or "unix:///run/chat.sock"). The connection is plaintext
// unless WithTLS is given, and is opened lazily on the first call; Close closes it.
//
// Dial fails when the options do not fit together: a token sent in plaintext to a host
// that is not a loopback one (see AllowPlaintextToken), or an invalid target.
func Dial(target string, opts ...DialOption) (*Client, error) {
	var s dialSettings
	for _, opt := range opts {
		opt.applyDial(&s)
	}
	if s.client.token != "" {
		if err := checkToken(s.client.token); err != nil {
			return nil, err
		}
		if !s.useTLS && !s.plaintextToken && !isLoopback(target) {
			return nil, errors.New("chatclient: refusing to send a token in plaintext to " +
				"a host that is not a loopback one; use WithTLS (or AllowPlaintextToken)")
		}
	}
	creds := insecure.NewCredentials()
	if s.useTLS {
		config := s.tls
		if config == nil {
			config = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(config)
	}
	options := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, s.grpcOptions...)
	conn, err := grpc.NewClient(target, options...)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, rpc: chatv1.NewChatServiceClient(conn), settings: s.client}, nil
}

// New makes a client over a connection the caller owns and configured (security,
// interceptors); Close leaves it open.
func New(conn grpc.ClientConnInterface, opts ...Option) *Client {
	var s clientSettings
	for _, opt := range opts {
		opt.applyClient(&s)
	}
	return &Client{rpc: chatv1.NewChatServiceClient(conn), settings: s}
}

// Close closes the connection Dial opened; for a client made by New it does nothing.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// Stub is the generated gRPC client the methods call, for what this package does not
// wrap. Its calls carry neither the client's token nor its default deadline.
func (c *Client) Stub() chatv1.ChatServiceClient { return c.rpc }

// callContext applies the default deadline (when ctx has none) and the token.
func (c *Client) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	cancel := context.CancelFunc(func() {})
	if _, has := ctx.Deadline(); !has && c.settings.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.settings.timeout)
	}
	if c.settings.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.settings.token)
	}
	return ctx, cancel
}

func checkToken(token string) error {
	if strings.ContainsAny(token, " \t\r\n") {
		return errors.New("chatclient: a token has no whitespace")
	}
	return nil
}

// isLoopback reports whether a gRPC target names this machine only.
func isLoopback(target string) bool {
	endpoint := target
	if scheme, rest, found := strings.Cut(target, ":"); found && strings.HasPrefix(rest, "//") {
		switch scheme {
		case "unix", "unix-abstract":
			return true
		}
		// scheme://authority/endpoint
		_, endpoint, _ = strings.Cut(strings.TrimPrefix(rest, "//"), "/")
	} else if scheme == "unix" || scheme == "unix-abstract" {
		return true
	}
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		host = strings.Trim(endpoint, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
