package memoryd

import (
	"context"
	"io"
	"math/rand"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	memoryv1 "memoryd/clients/go/memory/v1"
)

// Board is one task's blackboard (Blackboard) for agents that coordinate:
// compare-and-set updates retried on conflict, claims with leases, and a
// subscription that reconnects and resumes where it stopped. Values are
// JSON-shaped Go values (nil, bool, float64, string, []interface{},
// map[string]interface{}, and what structpb.NewValue takes).
//
//	board := c.Board("task-42")
//	board.Post(ctx, "plan", map[string]interface{}{"steps": 3})
//	if ok, _ := board.Claim(ctx, "subtask/7", "agent-1", 30*time.Second, false); ok { ... }
//	board.Update(ctx, "done", func(cur interface{}, _ bool) (interface{}, error) { ... })
//	sub := board.Subscribe(ctx, memoryd.SubscribeOptions{})
//	for { ev, err := sub.Next(); if err != nil { break }; ... }
type Board struct {
	c    *Client
	task string
}

// BoardState is the board as visible to the caller.
type BoardState struct {
	Items   map[string]*memoryv1.BlackboardItem
	Version int64
	BoardID string
}

// Read returns the board.
func (b *Board) Read(ctx context.Context) (*BoardState, error) {
	r, err := b.c.Blackboard.Read(ctx, &memoryv1.BlackboardReadRequest{TaskId: b.task})
	if err != nil {
		return nil, err
	}
	s := &BoardState{Items: map[string]*memoryv1.BlackboardItem{}, Version: r.Version, BoardID: r.BoardId}
	for _, it := range r.Items {
		s.Items[it.Key] = it
	}
	return s, nil
}

// Get returns one key's value; ok is false when it is absent or hidden.
func (b *Board) Get(ctx context.Context, key string) (value interface{}, ok bool, err error) {
	s, err := b.Read(ctx)
	if err != nil {
		return nil, false, err
	}
	it, ok := s.Items[key]
	if !ok {
		return nil, false, nil
	}
	return it.Value.AsInterface(), true, nil
}

// PostOptions are the optional fields of a post.
type PostOptions struct {
	// ExpectedVersion makes the post a compare-and-set (0 = only if
	// absent; ABORTED otherwise) when non-nil.
	ExpectedVersion *int64
	TTL             time.Duration // the board's life; only extends it
	Lease           time.Duration // the key lives that long unless posted again
	Label           memoryv1.Label
}

// Version is a helper for PostOptions.ExpectedVersion.
func Version(v int64) *int64 { return &v }

// Post sets key to value.
func (b *Board) Post(ctx context.Context, key string, value interface{}, o PostOptions) (*memoryv1.BlackboardPostResponse, error) {
	v, err := structpb.NewValue(value)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "value: %v", err)
	}
	req := &memoryv1.BlackboardPostRequest{TaskId: b.task, Key: key, Value: v, Label: o.Label}
	if o.ExpectedVersion != nil {
		req.Precondition = &memoryv1.BlackboardPostRequest_ExpectedVersion{ExpectedVersion: *o.ExpectedVersion}
	}
	if o.TTL > 0 {
		req.Ttl = durationpb.New(o.TTL)
	}
	if o.Lease > 0 {
		req.LeaseTtl = durationpb.New(o.Lease)
	}
	return b.c.Blackboard.Post(ctx, req)
}

// Delete deletes key (NOT_FOUND when absent).
func (b *Board) Delete(ctx context.Context, key string) error {
	_, err := b.c.Blackboard.Post(ctx, &memoryv1.BlackboardPostRequest{TaskId: b.task, Key: key, DeleteKey: true})
	return err
}

// Update sets key to fn(current value, whether it exists) with
// compare-and-set, retrying with jittered backoff while another writer gets
// there first (at most 32 tries; then the last ABORTED). Returns the value
// written.
func (b *Board) Update(ctx context.Context, key string, fn func(cur interface{}, ok bool) (interface{}, error)) (interface{}, error) {
	const attempts = 32
	for attempt := 0; ; attempt++ {
		s, err := b.Read(ctx)
		if err != nil {
			return nil, err
		}
		var cur interface{}
		expected := int64(0)
		it, ok := s.Items[key]
		if ok {
			cur, expected = it.Value.AsInterface(), it.Meta.Version
		}
		next, err := fn(cur, ok)
		if err != nil {
			return nil, err
		}
		_, err = b.Post(ctx, key, next, PostOptions{ExpectedVersion: &expected})
		if err == nil {
			return next, nil
		}
		if status.Code(err) != codes.Aborted || attempt == attempts-1 {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-time.After(time.Duration(rand.Int63n(int64(2*time.Millisecond) * int64(attempt+1)))):
		}
	}
}

// Claim claims key for lease: true when it was free (or, with renew,
// already ours: the lease starts again), false when another holds it. A
// dead agent's claims free themselves when their leases run out.
func (b *Board) Claim(ctx context.Context, key string, value interface{}, lease time.Duration, renew bool) (bool, error) {
	o := PostOptions{Lease: lease}
	if !renew {
		o.ExpectedVersion = Version(0)
	}
	_, err := b.Post(ctx, key, value, o)
	switch status.Code(err) {
	case codes.OK:
		return true, nil
	case codes.Aborted, codes.PermissionDenied:
		return false, nil
	}
	return false, err
}

// SubscribeOptions start a subscription.
type SubscribeOptions struct {
	// AfterVersion and BoardID resume after a known event (no SNAPSHOT)
	// when Resume is set.
	Resume       bool
	AfterVersion int64
	BoardID      string
	// NoReconnect: a broken stream ends the subscription with its error.
	NoReconnect bool
}

// Subscription is a resuming stream of board events (Board.Subscribe).
type Subscription struct {
	b          *Board
	ctx        context.Context
	cancel     context.CancelFunc
	o          SubscribeOptions
	stream     memoryv1.Blackboard_SubscribeClient
	backoff    time.Duration
	done       bool // ended: Close, EXPIRED or the server's OK end
	Reconnects int
}

// Subscribe opens a subscription: a SNAPSHOT first (unless resuming), then
// PUT and DELETE events in revision order. When the stream breaks
// (UNAVAILABLE: a replica shut down, Redis away, the network) it reconnects
// after the last event it gave, so nothing is missed. It ends with ctx,
// Close, or after an EXPIRED event.
func (b *Board) Subscribe(ctx context.Context, o SubscribeOptions) *Subscription {
	ctx, cancel := context.WithCancel(ctx)
	return &Subscription{b: b, ctx: ctx, cancel: cancel, o: o, backoff: 100 * time.Millisecond}
}

// Close ends the subscription (Next then returns io.EOF). Not safe to call
// concurrently with Next: cancel ctx for that.
func (s *Subscription) Close() { s.end() }

func (s *Subscription) end() {
	s.done = true
	s.cancel()
}

// stopped is io.EOF once ended, ctx's error as a status error
// (DEADLINE_EXCEEDED, CANCELLED) once ctx is done, else nil.
func (s *Subscription) stopped() error {
	if s.done {
		return io.EOF
	}
	if err := s.ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return nil
}

// Position is where the subscription would resume: the version and board
// id of the last event it gave.
func (s *Subscription) Position() (version int64, boardID string) {
	return s.o.AfterVersion, s.o.BoardID
}

func retryable(c codes.Code) bool {
	return c == codes.Unavailable || c == codes.DeadlineExceeded || c == codes.ResourceExhausted ||
		c == codes.Internal
}

// Next returns the next event; io.EOF after the EXPIRED event, when the
// server ended the stream, or after Close; otherwise the error not worth
// retrying, or ctx's (DEADLINE_EXCEEDED, CANCELLED).
func (s *Subscription) Next() (*memoryv1.BlackboardSubscribeResponse, error) {
	for {
		if err := s.stopped(); err != nil {
			return nil, err
		}
		if s.stream == nil {
			req := &memoryv1.BlackboardSubscribeRequest{TaskId: s.b.task}
			if s.o.Resume {
				req.Resume = &memoryv1.BlackboardSubscribeRequest_AfterVersion{AfterVersion: s.o.AfterVersion}
				req.BoardId = s.o.BoardID
			}
			st, err := s.b.c.Blackboard.Subscribe(s.ctx, req)
			if err != nil {
				if err = s.broken(err); err != nil {
					return nil, err
				}
				continue
			}
			s.stream = st
		}
		ev, err := s.stream.Recv()
		if err == io.EOF {
			s.end()
			return nil, io.EOF
		}
		if err != nil {
			s.stream = nil
			if err = s.broken(err); err != nil {
				return nil, err
			}
			continue
		}
		s.backoff = 100 * time.Millisecond
		if ev.Kind == memoryv1.BlackboardEventKind_BLACKBOARD_EVENT_KIND_EXPIRED {
			s.end()
		} else {
			s.o.Resume, s.o.AfterVersion, s.o.BoardID = true, ev.Version, ev.BoardId
		}
		return ev, nil
	}
}

// broken decides after a failed stream: nil to reconnect (after a
// backoff), or the error that ends the subscription.
func (s *Subscription) broken(err error) error {
	if stop := s.stopped(); stop != nil {
		return stop
	}
	if s.o.NoReconnect || !retryable(status.Code(err)) {
		return err
	}
	s.Reconnects++
	select {
	case <-s.ctx.Done():
		return s.stopped()
	case <-time.After(s.backoff):
	}
	if s.backoff *= 2; s.backoff > 2*time.Second {
		s.backoff = 2 * time.Second
	}
	return nil
}
