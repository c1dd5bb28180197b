// Package memoryd is the Go client of memoryd, the gRPC memory service for
// AI agents: one connection with the capability token on every call, a
// default deadline on calls with one response, the generated stubs of every
// service, and helpers shaped the way agents use memory (Memory: namespaced
// key-value memory; Board: a task's blackboard).
//
//	c, err := memoryd.Dial("127.0.0.1:50051", memoryd.WithToken(jwt))
//	defer c.Close()
//	mem := c.Memory("planner:trip:prefs")
//	_, err = mem.Write(ctx, "user_style", "terse")
//	style, ok, err := mem.GetString(ctx, "user_style")
//
// Errors are the gRPC status errors as memoryd sent them: status.Code(err)
// and status.Convert(err).Message() give the code and memoryd's message.
package memoryd

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health/grpc_health_v1"

	memoryv1 "memoryd/clients/go/memory/v1"
)

// DefaultTarget is where `make run` serves.
const DefaultTarget = "127.0.0.1:50051"

// DefaultTimeout is the deadline of calls with one response whose context
// has none.
const DefaultTimeout = 5 * time.Second

// Client is a connection to memoryd with a stub per service. Safe for
// concurrent use; Close releases it.
type Client struct {
	Conn       *grpc.ClientConn
	Global     memoryv1.GlobalMemoryClient
	Episodic   memoryv1.EpisodicMemoryClient
	Cache      memoryv1.CacheClient
	Entries    memoryv1.EntriesClient
	Blackboard memoryv1.BlackboardClient
	Router     memoryv1.RouterClient
	Audit      memoryv1.AuditClient
	Access     memoryv1.AccessClient
	Privacy    memoryv1.PrivacyClient
	Working    memoryv1.WorkingMemoryClient
	Session    memoryv1.SessionClient
	Health     grpc_health_v1.HealthClient
}

type options struct {
	token   string
	timeout time.Duration
	creds   credentials.TransportCredentials
	dial    []grpc.DialOption
}

// Option configures Dial.
type Option func(*options)

// WithToken sends the capability token (a JWT, e.g. .local/dev-token after
// `make run`) as `authorization: Bearer` on every call. Without one,
// memory.v1 calls fail UNAUTHENTICATED.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithTimeout sets the default deadline of calls with one response (5 s;
// 0 = none). A context's own deadline wins. Streams get none.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithTLS connects over TLS (a memoryd started with --tls-cert/--tls-key).
// Without it the connection is plaintext: use it on loopback only, as the
// token travels in it.
func WithTLS(creds credentials.TransportCredentials) Option {
	return func(o *options) { o.creds = creds }
}

// WithDialOptions adds grpc dial options.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dial = append(o.dial, opts...) }
}

type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

// Dial connects to memoryd at target ("host:port"). It does not wait for
// the connection: a memoryd that is not there shows as UNAVAILABLE on the
// first call.
func Dial(target string, opts ...Option) (*Client, error) {
	o := options{timeout: DefaultTimeout}
	for _, f := range opts {
		f(&o)
	}
	dial := []grpc.DialOption{grpc.WithUnaryInterceptor(defaultDeadline(o.timeout))}
	if o.creds != nil {
		dial = append(dial, grpc.WithTransportCredentials(o.creds))
	} else {
		dial = append(dial, grpc.WithInsecure())
	}
	if o.token != "" {
		dial = append(dial, grpc.WithPerRPCCredentials(bearer{o.token, o.creds != nil}))
	}
	conn, err := grpc.Dial(target, append(dial, o.dial...)...)
	if err != nil {
		return nil, err
	}
	return &Client{
		Conn:       conn,
		Global:     memoryv1.NewGlobalMemoryClient(conn),
		Episodic:   memoryv1.NewEpisodicMemoryClient(conn),
		Cache:      memoryv1.NewCacheClient(conn),
		Entries:    memoryv1.NewEntriesClient(conn),
		Blackboard: memoryv1.NewBlackboardClient(conn),
		Router:     memoryv1.NewRouterClient(conn),
		Audit:      memoryv1.NewAuditClient(conn),
		Access:     memoryv1.NewAccessClient(conn),
		Privacy:    memoryv1.NewPrivacyClient(conn),
		Working:    memoryv1.NewWorkingMemoryClient(conn),
		Session:    memoryv1.NewSessionClient(conn),
		Health:     grpc_health_v1.NewHealthClient(conn),
	}, nil
}

func defaultDeadline(d time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply interface{}, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, has := ctx.Deadline(); !has && d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// CheckHealth returns the serving status of service ("" = the server as a
// whole; e.g. "memory.v1.Entries").
func (c *Client) CheckHealth(ctx context.Context, service string) (grpc_health_v1.HealthCheckResponse_ServingStatus, error) {
	r, err := c.Health.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: service})
	if err != nil {
		return grpc_health_v1.HealthCheckResponse_UNKNOWN, err
	}
	return r.Status, nil
}

// Memory is the key-value memory of namespace (see Memory).
func (c *Client) Memory(namespace string) *Memory { return &Memory{c: c, ns: namespace} }

// Board is the blackboard of task taskID (see Board).
func (c *Client) Board(taskID string) *Board { return &Board{c: c, task: taskID} }

// Close closes the connection, cancelling calls in flight.
func (c *Client) Close() error { return c.Conn.Close() }
