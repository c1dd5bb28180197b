// A small Go agent of memoryd: remembers a user's preference in its
// namespaced memory, claims a sub-task on its task's blackboard and posts
// the result, then lists what it remembers.
//
//	MEMORYD_TOKEN=$(cat .local/dev-token) bazel-bin/clients/go/example_agent [ADDRESS]
//
// ADDRESS defaults to $MEMORYD_TARGET or 127.0.0.1:50051. MEMORYD_TOKEN
// needs entries:read/write and blackboard:read/write (make run's dev token
// has them); without one the example shows memoryd's UNAUTHENTICATED.
// Exits 1 when memoryd cannot be reached or a call fails, 0 otherwise.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"memoryd/clients/go/memoryd"
)

func main() { os.Exit(run()) }

func run() int {
	target := os.Getenv("MEMORYD_TARGET")
	if len(os.Args) > 1 {
		target = os.Args[1]
	}
	if target == "" {
		target = memoryd.DefaultTarget
	}
	c, err := memoryd.Dial(target, memoryd.WithToken(os.Getenv("MEMORYD_TOKEN")))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1
	}
	defer c.Close()
	if err := agent(context.Background(), c); err != nil {
		st := status.Convert(err)
		fmt.Fprintf(os.Stderr, "memoryd at %s: %s: %s\n", target, st.Code(), st.Message())
		if st.Code() == codes.Unavailable {
			fmt.Fprintln(os.Stderr, "(is memoryd running? make run)")
		}
		return 1
	}
	return 0
}

func agent(ctx context.Context, c *memoryd.Client) error {
	health, err := c.CheckHealth(ctx, "")
	if err != nil {
		return err
	}
	fmt.Println("health:", health)

	// Key-value memory of this agent's node: reads never write.
	mem := c.Memory("example:go-agent:prefs")
	if _, ok, err := mem.Get(ctx, "user_style"); err != nil {
		return err
	} else if !ok {
		if _, err := mem.Write(ctx, "user_style", "terse, with examples", memoryd.Tags("preference")); err != nil {
			return err
		}
	}
	if _, err := mem.Write(ctx, "user_langs", []string{"C", "Go", "TypeScript"}); err != nil {
		return err
	}
	style, _, err := mem.GetString(ctx, "user_style")
	if err != nil {
		return err
	}
	var langs []string
	if _, err := mem.GetJSON(ctx, "user_langs", &langs); err != nil {
		return err
	}
	fmt.Println("user_style:", style)
	fmt.Println("user_langs:", strings.Join(langs, ", "))
	keys, err := mem.ListKeys(ctx, "user_*")
	if err != nil {
		return err
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Namespace + "/" + k.Key
	}
	fmt.Println("keys:", strings.Join(names, " "))

	// Coordination on the task's blackboard: claim, work, post, release.
	board := c.Board("example-task")
	claimed, err := board.Claim(ctx, "subtask/go-summary", "go-agent", 30*time.Second, false)
	if err != nil {
		return err
	}
	if claimed {
		if _, err := board.Post(ctx, "result/go-summary", map[string]interface{}{"by": "go-agent", "words": 42}, memoryd.PostOptions{}); err != nil {
			return err
		}
		if err := board.Delete(ctx, "subtask/go-summary"); err != nil {
			return err
		}
		fmt.Println("board: claimed subtask/go-summary and posted result/go-summary")
	} else {
		fmt.Println("board: subtask/go-summary is claimed by another agent")
	}
	runs, err := board.Update(ctx, "go-runs", func(cur interface{}, ok bool) (interface{}, error) {
		n, _ := cur.(float64)
		return n + 1, nil
	})
	if err != nil {
		return err
	}
	fmt.Println("board: go-runs =", runs)
	return nil
}
