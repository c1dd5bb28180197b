package memoryd

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	memoryv1 "memoryd/clients/go/memory/v1"
)

// Memory is the key-value memory of one namespace (Entries), shaped the way
// agents use key-value memory: reads never write, writes are explicit.
//
//	mem := c.Memory("planner:trip:prefs")
//	mem.Write(ctx, "user_style", "terse")            // text/plain
//	mem.Write(ctx, "user_langs", []string{"C", "Go"}) // application/json
//	s, ok, err := mem.GetString(ctx, "user_style")
//	keys, err := mem.ListKeys(ctx, "user_*", memoryd.NamespacePattern("planner:*:*"))
//
// A string is stored as text/plain, a []byte as application/octet-stream,
// anything else as JSON (application/json).
type Memory struct {
	c  *Client
	ns string
}

// Namespace is the memory's namespace.
func (m *Memory) Namespace() string { return m.ns }

// InNamespace is the same memory under another namespace.
func (m *Memory) InNamespace(namespace string) *Memory { return &Memory{c: m.c, ns: namespace} }

// Entry returns the whole entry; ok is false when it is absent, expired or
// hidden from the caller.
func (m *Memory) Entry(ctx context.Context, key string) (entry *memoryv1.Entry, ok bool, err error) {
	r, err := m.c.Entries.Read(ctx, &memoryv1.EntriesReadRequest{Namespace: m.ns, Key: key})
	if status.Code(err) == codes.NotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return r.Entry, true, nil
}

// Get returns key's value bytes; ok is false when it is absent.
func (m *Memory) Get(ctx context.Context, key string) (value []byte, ok bool, err error) {
	e, ok, err := m.Entry(ctx, key)
	if !ok {
		return nil, false, err
	}
	return e.Value, true, nil
}

// GetString returns key's value as a string.
func (m *Memory) GetString(ctx context.Context, key string) (string, bool, error) {
	v, ok, err := m.Get(ctx, key)
	return string(v), ok, err
}

// GetJSON decodes key's JSON value into out.
func (m *Memory) GetJSON(ctx context.Context, key string, out interface{}) (bool, error) {
	v, ok, err := m.Get(ctx, key)
	if !ok {
		return false, err
	}
	if err := json.Unmarshal(v, out); err != nil {
		return true, fmt.Errorf("memoryd: %s/%s is not JSON: %w", m.ns, key, err)
	}
	return true, nil
}

// WriteOption sets a field of a write.
type WriteOption func(*memoryv1.EntriesWriteRequest) error

// ContentType overrides the content type derived from the value.
func ContentType(t string) WriteOption {
	return func(r *memoryv1.EntriesWriteRequest) error { r.ContentType = t; return nil }
}

// Tags sets the entry's tags.
func Tags(tags ...string) WriteOption {
	return func(r *memoryv1.EntriesWriteRequest) error { r.Tags = tags; return nil }
}

// TTL makes the entry expire after d.
func TTL(d time.Duration) WriteOption {
	return func(r *memoryv1.EntriesWriteRequest) error {
		r.Expiration = &memoryv1.EntriesWriteRequest_Ttl{Ttl: durationpb.New(d)}
		return nil
	}
}

// Metadata sets the entry's metadata (a JSON object).
func Metadata(md map[string]interface{}) WriteOption {
	return func(r *memoryv1.EntriesWriteRequest) error {
		s, err := structpb.NewStruct(md)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "metadata: %v", err)
		}
		r.Metadata = s
		return nil
	}
}

// ExpectedVersion makes the write a compare-and-set (0 = only if absent).
func ExpectedVersion(v int64) WriteOption {
	return func(r *memoryv1.EntriesWriteRequest) error {
		r.Precondition = &memoryv1.EntriesWriteRequest_ExpectedVersion{ExpectedVersion: v}
		return nil
	}
}

// WithLabel sets the entry's label.
func WithLabel(l memoryv1.Label) WriteOption {
	return func(r *memoryv1.EntriesWriteRequest) error { r.Label = l; return nil }
}

// EncodeValue is how Write stores a value: its bytes and content type.
// A value JSON cannot encode is an INVALID_ARGUMENT error.
func EncodeValue(value interface{}) ([]byte, string, error) {
	switch v := value.(type) {
	case string:
		return []byte(v), "text/plain", nil
	case []byte:
		return v, "application/octet-stream", nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, "", status.Errorf(codes.InvalidArgument, "value: %v", err)
		}
		return b, "application/json", nil
	}
}

// Write creates or replaces key.
func (m *Memory) Write(ctx context.Context, key string, value interface{}, opts ...WriteOption) (*memoryv1.EntriesWriteResponse, error) {
	b, ct, err := EncodeValue(value)
	if err != nil {
		return nil, err
	}
	req := &memoryv1.EntriesWriteRequest{Namespace: m.ns, Key: key, Value: b, ContentType: ct}
	for _, o := range opts {
		if err := o(req); err != nil {
			return nil, err
		}
	}
	return m.c.Entries.Write(ctx, req)
}

// Delete deletes key: true, or false when there was nothing to delete.
func (m *Memory) Delete(ctx context.Context, key string) (bool, error) {
	_, err := m.c.Entries.DeleteEntry(ctx, &memoryv1.EntriesDeleteEntryRequest{Namespace: m.ns, Key: key})
	if status.Code(err) == codes.NotFound {
		return false, nil
	}
	return err == nil, err
}

// EntryKey names an entry.
type EntryKey struct {
	Namespace, Key string
}

type listOptions struct {
	ns    string
	limit int
}

// ListOption changes ListKeys.
type ListOption func(*listOptions)

// NamespacePattern lists every namespace matching pattern (e.g. "planner:*:*")
// instead of the memory's own.
func NamespacePattern(pattern string) ListOption { return func(o *listOptions) { o.ns = pattern } }

// Limit caps the keys returned (default 10000).
func Limit(n int) ListOption { return func(o *listOptions) { o.limit = n } }

// ListKeys returns the keys matching keyPattern (`*` matches any run of
// characters; nothing else is special), ordered by namespace, then key.
func (m *Memory) ListKeys(ctx context.Context, keyPattern string, opts ...ListOption) ([]EntryKey, error) {
	o := listOptions{ns: m.ns, limit: 10000}
	for _, f := range opts {
		f(&o)
	}
	var out []EntryKey
	token := ""
	for len(out) < o.limit {
		size := o.limit - len(out)
		if size > 1000 {
			size = 1000
		}
		r, err := m.c.Entries.List(ctx, &memoryv1.EntriesListRequest{NamespacePattern: o.ns,
			KeyPattern: keyPattern, PageSize: int32(size), PageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range r.Entries {
			out = append(out, EntryKey{e.Namespace, e.Key})
		}
		if token = r.NextPageToken; token == "" {
			break
		}
	}
	if len(out) > o.limit {
		out = out[:o.limit]
	}
	return out, nil
}
