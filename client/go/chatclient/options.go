package chatclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"time"

	"google.golang.org/grpc"
)

// Option configures a Client made by Dial or New. Every Option is also a DialOption.
type Option interface {
	DialOption
	applyClient(*clientSettings)
}

// DialOption configures Dial: the connection (WithTLS, WithGRPCOptions,
// AllowPlaintextToken) and, through Options, the client.
type DialOption interface {
	applyDial(*dialSettings)
}

type clientSettings struct {
	token       string
	timeout     time.Duration
	reattach    *ReattachPolicy
	reattachSet bool
}

type dialSettings struct {
	client         clientSettings
	tls            *tls.Config
	useTLS         bool
	plaintextToken bool
	grpcOptions    []grpc.DialOption
}

type clientOption func(*clientSettings)

func (o clientOption) applyClient(s *clientSettings) { o(s) }
func (o clientOption) applyDial(s *dialSettings)     { o(&s.client) }

type dialOption func(*dialSettings)

func (o dialOption) applyDial(s *dialSettings) { o(s) }

// WithToken sends "authorization: Bearer <token>" with every call, for servers run with
// a tokens file; an empty token sends none. Dial refuses to send it in plaintext to a host other than a loopback
// one (localhost, 127.0.0.0/8, ::1, a unix socket) unless AllowPlaintextToken is given.
func WithToken(token string) Option {
	return clientOption(func(s *clientSettings) { s.token = token })
}

// WithTimeout sets the default deadline of every call whose context has none; a turn
// stream counts as one call. Zero (the default) means no deadline.
func WithTimeout(timeout time.Duration) Option {
	return clientOption(func(s *clientSettings) { s.timeout = timeout })
}

// WithTLS makes Dial speak TLS with config; nil verifies the server against the system's
// roots. Without it, Dial opens a plaintext connection. TLSConfigFromPEM builds a config
// from PEM certificates.
func WithTLS(config *tls.Config) DialOption {
	return dialOption(func(s *dialSettings) {
		s.useTLS, s.tls = true, config.Clone()
	})
}

// AllowPlaintextToken lets Dial send a WithToken token over a plaintext connection to a
// host that is not a loopback one, as on a private network whose traffic is protected
// otherwise (a service mesh).
func AllowPlaintextToken() DialOption {
	return dialOption(func(s *dialSettings) { s.plaintextToken = true })
}

// WithGRPCOptions adds grpc.DialOptions to those Dial passes to grpc.NewClient
// (interceptors, keepalive, a custom resolver...). Transport credentials are set by Dial
// from WithTLS; do not pass them here.
func WithGRPCOptions(options ...grpc.DialOption) DialOption {
	return dialOption(func(s *dialSettings) { s.grpcOptions = append(s.grpcOptions, options...) })
}

// TLSConfigFromPEM builds a TLS configuration from PEM bytes: rootCAs verifies the
// server (nil: the system's roots), and clientCert with clientKey is the client's
// certificate for servers that require mTLS (both nil: none).
func TLSConfigFromPEM(rootCAs, clientCert, clientKey []byte) (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if rootCAs != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(rootCAs) {
			return nil, errors.New("chatclient: no certificate found in the root CA PEM")
		}
		config.RootCAs = pool
	}
	if (clientCert == nil) != (clientKey == nil) {
		return nil, errors.New("chatclient: a client certificate and its key go together")
	}
	if clientCert != nil {
		pair, err := tls.X509KeyPair(clientCert, clientKey)
		if err != nil {
			return nil, errors.New("chatclient: unusable client certificate or key: " + err.Error())
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}
