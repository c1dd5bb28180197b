package memoryd_test

// The Go client against a real memoryd: tests/clients/memoryd_fixture
// (path in $MEMORYD_FIXTURE) starts one on a throw-away database and prints
// its address and tokens; the example agent's binary is $MEMORYD_GO_EXAMPLE.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	memoryv1 "memoryd/clients/go/memory/v1"
	"memoryd/clients/go/memoryd"
)

var (
	address string
	token   string
	tokens  = map[string]string{}
)

const scopes = "entries:* working:* blackboard:read:all blackboard:write audit:read:all global:read global:write"

func TestMain(m *testing.M) {
	fixture := os.Getenv("MEMORYD_FIXTURE")
	if fixture == "" {
		fmt.Fprintln(os.Stderr, "MEMORYD_FIXTURE is not set (run through bazel test)")
		os.Exit(1)
	}
	cmd := exec.Command(fixture, "--scope="+scopes, "--token=readonly=entries:read")
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "memoryd_fixture:", err)
		os.Exit(1)
	}
	lines := bufio.NewScanner(stdout)
	for i := 0; i < 3 && lines.Scan(); i++ {
		f := strings.Fields(lines.Text())
		switch {
		case f[0] == "address":
			address = f[1]
		case f[0] == "token":
			token = f[1]
		case strings.HasPrefix(f[0], "token-"):
			tokens[strings.TrimPrefix(f[0], "token-")] = f[1]
		}
	}
	if address == "" || token == "" || tokens["readonly"] == "" {
		fmt.Fprintln(os.Stderr, "memoryd_fixture did not start memoryd")
		os.Exit(1)
	}
	code := m.Run()
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, "memoryd_fixture:", err)
		code = 1
	}
	os.Exit(code)
}

func dial(t *testing.T, tok string) *memoryd.Client {
	t.Helper()
	c, err := memoryd.Dial(address, memoryd.WithToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// wantCode fails unless err is a status error with code whose message
// matches re ("" = any).
func wantCode(t *testing.T, err error, code codes.Code, re string) {
	t.Helper()
	st := status.Convert(err)
	if err == nil || st.Code() != code {
		t.Fatalf("want %v, got %v", code, err)
	}
	if re != "" && !regexp.MustCompile(re).MatchString(st.Message()) {
		t.Fatalf("message %q does not match %q", st.Message(), re)
	}
}

func TestHealthAndRawStubs(t *testing.T) {
	c := dial(t, token)
	ctx := context.Background()
	if s, err := c.CheckHealth(ctx, "memory.v1.Entries"); err != nil || s != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v", s, err)
	}
	r, err := c.Entries.Write(ctx, &memoryv1.EntriesWriteRequest{Namespace: "raw:go:test", Key: "k", Value: []byte("v")})
	if err != nil || !r.Created || r.Meta.Owner != "client-test" {
		t.Fatalf("write %v %v", r, err)
	}
	mem := &memoryv1.WorkingMemoryAddress{Node: "raw:go:node", Scope: memoryv1.WorkingMemoryScope_WORKING_MEMORY_SCOPE_GLOBAL}
	if _, err := c.Working.Append(ctx, &memoryv1.WorkingMemoryAppendRequest{Memory: mem, Path: "notes/go", Text: "from go"}); err != nil {
		t.Fatalf("append %v", err)
	}
	rr, err := c.Working.Render(ctx, &memoryv1.WorkingMemoryRenderRequest{Memory: mem})
	if err != nil || rr.Text != "## /notes/go\nfrom go\n" || rr.DocumentCount != 1 {
		t.Fatalf("render %v %v", rr, err)
	}
}

func TestMemory(t *testing.T) {
	c := dial(t, token)
	ctx := context.Background()
	mem := c.Memory("planner:trip:prefs")
	if _, ok, err := mem.Get(ctx, "user_style"); ok || err != nil {
		t.Fatalf("absent key: ok=%v err=%v", ok, err)
	}
	must := func(_ *memoryv1.EntriesWriteResponse, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(mem.Write(ctx, "user_style", "terse", memoryd.Tags("pref"), memoryd.Metadata(map[string]interface{}{"n": 1})))
	must(mem.Write(ctx, "user_langs", []string{"C", "Go"}))
	must(mem.Write(ctx, "blob", []byte{0, 1, 2}))
	must(mem.Write(ctx, "user%x", "literal percent"))
	must(mem.InNamespace("planner:trip:plan").Write(ctx, "user_goal", map[string]string{"city": "Lyon"}))
	must(mem.InNamespace("coder:trip:prefs").Write(ctx, "user_elsewhere", "other agent"))
	if s, ok, err := mem.GetString(ctx, "user_style"); s != "terse" || !ok || err != nil {
		t.Fatalf("GetString %q %v %v", s, ok, err)
	}
	var langs []string
	if ok, err := mem.GetJSON(ctx, "user_langs", &langs); !ok || err != nil || !reflect.DeepEqual(langs, []string{"C", "Go"}) {
		t.Fatalf("GetJSON %v %v %v", langs, ok, err)
	}
	if e, _, _ := mem.Entry(ctx, "blob"); e.ContentType != "application/octet-stream" || string(e.Value) != "\x00\x01\x02" {
		t.Fatalf("blob %v", e)
	}
	if e, _, _ := mem.Entry(ctx, "user_style"); e.Tags[0] != "pref" || e.Metadata.Fields["n"].GetNumberValue() != 1 {
		t.Fatalf("tags/metadata %v", e)
	}
	// `_` and `%` match themselves; `*` is the only wildcard.
	keys, err := mem.ListKeys(ctx, "user_*")
	if err != nil || !reflect.DeepEqual(keys, []memoryd.EntryKey{{"planner:trip:prefs", "user_langs"}, {"planner:trip:prefs", "user_style"}}) {
		t.Fatalf("ListKeys %v %v", keys, err)
	}
	keys, err = mem.ListKeys(ctx, "user_*", memoryd.NamespacePattern("planner:*:*"))
	if err != nil || len(keys) != 3 || keys[0] != (memoryd.EntryKey{"planner:trip:plan", "user_goal"}) {
		t.Fatalf("ListKeys planner:*:* %v %v", keys, err)
	}
	if keys, _ = mem.ListKeys(ctx, "*", memoryd.NamespacePattern("*:trip:*")); len(keys) != 6 {
		t.Fatalf("*:trip:* %v", keys)
	}
	if keys, _ = mem.ListKeys(ctx, "*", memoryd.NamespacePattern("*:*:*"), memoryd.Limit(2)); len(keys) != 2 {
		t.Fatalf("limit 2: %v", keys)
	}
	// Reads never write.
	before, _ := c.Entries.Stats(ctx, &memoryv1.EntriesStatsRequest{NamespacePattern: "planner:*:*"})
	mem.Get(ctx, "never_written")
	after, _ := c.Entries.Stats(ctx, &memoryv1.EntriesStatsRequest{NamespacePattern: "planner:*:*"})
	if before.EntryCount != after.EntryCount {
		t.Fatalf("a read wrote: %d -> %d", before.EntryCount, after.EntryCount)
	}
	if ok, err := mem.Delete(ctx, "user_style"); !ok || err != nil {
		t.Fatalf("delete %v %v", ok, err)
	}
	if ok, err := mem.Delete(ctx, "user_style"); ok || err != nil {
		t.Fatalf("delete again %v %v", ok, err)
	}
	_, err = mem.Write(ctx, "user_langs", "x", memoryd.ExpectedVersion(0))
	wantCode(t, err, codes.Aborted, "")
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	_, _, err := dial(t, "").Memory("a:b:c").Get(ctx, "k")
	wantCode(t, err, codes.Unauthenticated, "(?i)token")
	ro := dial(t, tokens["readonly"]).Memory("a:b:c")
	_, err = ro.Write(ctx, "k", "v")
	wantCode(t, err, codes.PermissionDenied, "entries:write")
	if _, ok, err := ro.Get(ctx, "k"); ok || err != nil {
		t.Fatalf("read with entries:read: %v %v", ok, err)
	}
	c := dial(t, token)
	_, err = c.Memory("not-a-namespace").Write(ctx, "k", "v")
	wantCode(t, err, codes.InvalidArgument, "namespace")
	// What JSON cannot carry never reaches the wire.
	_, err = c.Memory("a:b:c").Write(ctx, "k", make(chan int))
	wantCode(t, err, codes.InvalidArgument, "unsupported type")
	_, err = c.Board("t").Post(ctx, "k", func() {}, memoryd.PostOptions{})
	wantCode(t, err, codes.InvalidArgument, "value")
}

func TestOneMillisecondDeadline(t *testing.T) {
	start := time.Now()
	c := dial(t, token)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	sub := c.Board("deadline").Subscribe(ctx, memoryd.SubscribeOptions{})
	for {
		_, err := sub.Next()
		if err != nil {
			wantCode(t, err, codes.DeadlineExceeded, "")
			break
		}
	}
	// A unary call to a server that accepts and never answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	silent, _ := memoryd.Dial(l.Addr().String(), memoryd.WithToken("x"))
	defer silent.Close()
	ctx1, cancel1 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel1()
	_, _, err = silent.Memory("a:b:c").Get(ctx1, "k")
	wantCode(t, err, codes.DeadlineExceeded, "")
	// The client's default deadline, shortened, applies when ctx has none.
	short, _ := memoryd.Dial(l.Addr().String(), memoryd.WithToken("x"), memoryd.WithTimeout(time.Millisecond))
	defer short.Close()
	_, _, err = short.Memory("a:b:c").Get(context.Background(), "k")
	wantCode(t, err, codes.DeadlineExceeded, "")
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
}

func TestBoard(t *testing.T) {
	c := dial(t, token)
	ctx := context.Background()
	board := c.Board(fmt.Sprintf("go-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if _, err := board.Post(ctx, "plan", map[string]interface{}{"steps": 3}, memoryd.PostOptions{}); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := board.Get(ctx, "plan"); !ok || !reflect.DeepEqual(v, map[string]interface{}{"steps": 3.0}) {
		t.Fatalf("plan %v", v)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := board.Update(ctx, "count", func(cur interface{}, _ bool) (interface{}, error) {
				n, _ := cur.(float64)
				return n + 1, nil
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if v, _, _ := board.Get(ctx, "count"); v != 8.0 {
		t.Fatalf("count %v after 8 concurrent updates", v)
	}
	for _, step := range []struct {
		who   string
		renew bool
		want  bool
	}{{"a", false, true}, {"b", false, false}, {"a", true, true}} {
		if ok, err := board.Claim(ctx, "subtask/1", step.who, 30*time.Second, step.renew); ok != step.want || err != nil {
			t.Fatalf("claim by %s: %v %v", step.who, ok, err)
		}
	}
	sub := board.Subscribe(ctx, memoryd.SubscribeOptions{})
	ev, err := sub.Next()
	if err != nil || ev.Kind != memoryv1.BlackboardEventKind_BLACKBOARD_EVENT_KIND_SNAPSHOT {
		t.Fatalf("snapshot %v %v", ev, err)
	}
	board.Post(ctx, "step", 1, memoryd.PostOptions{})
	if ev, err = sub.Next(); err != nil || ev.Kind != memoryv1.BlackboardEventKind_BLACKBOARD_EVENT_KIND_PUT || ev.Items[0].Value.GetNumberValue() != 1 {
		t.Fatalf("put %v %v", ev, err)
	}
	sub.Close()
	if _, err = sub.Next(); err != io.EOF {
		t.Fatalf("after Close: %v", err)
	}
	version, boardID := sub.Position()
	board.Post(ctx, "step", 2, memoryd.PostOptions{})
	board.Delete(ctx, "plan")
	resumed := board.Subscribe(ctx, memoryd.SubscribeOptions{Resume: true, AfterVersion: version, BoardID: boardID})
	defer resumed.Close()
	var kinds []memoryv1.BlackboardEventKind
	for len(kinds) < 2 {
		ev, err := resumed.Next()
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind)
	}
	if kinds[0] != memoryv1.BlackboardEventKind_BLACKBOARD_EVENT_KIND_PUT || kinds[1] != memoryv1.BlackboardEventKind_BLACKBOARD_EVENT_KIND_DELETE {
		t.Fatalf("resumed %v", kinds)
	}
}

func TestExampleAgent(t *testing.T) {
	bin := os.Getenv("MEMORYD_GO_EXAMPLE")
	if bin == "" {
		t.Fatal("MEMORYD_GO_EXAMPLE is not set")
	}
	c := dial(t, token)
	prev, _, _ := c.Board("example-task").Get(context.Background(), "go-runs")
	runs, _ := prev.(float64)
	cmd := exec.Command(bin, address)
	cmd.Env = append(os.Environ(), "MEMORYD_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example: %v\n%s", err, out)
	}
	for _, want := range []string{"health: SERVING", "user_style: terse, with examples",
		"user_langs: C, Go, TypeScript", "board: claimed subtask/go-summary",
		fmt.Sprintf("board: go-runs = %v\n", runs+1)} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("example output lacks %q:\n%s", want, out)
		}
	}
	cmd = exec.Command(bin, address)
	cmd.Env = append(os.Environ(), "MEMORYD_TOKEN=")
	out, err = cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "Unauthenticated") {
		t.Fatalf("example without a token: %v\n%s", err, out)
	}
}
