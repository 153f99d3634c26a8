package devserver

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/server/common/dynamicconfig"

	"github.com/durable-pi/subagents/internal/ports"
)

func TestSearchAttributeCacheReadsThroughUntilSettled(t *testing.T) {
	other := dynamicconfig.TransferProcessorMaxPollRPS.Key()
	now := time.Now()
	for _, tc := range []struct {
		name  string
		until time.Time // zero: not settled
		want  bool
	}{
		{"before registration", time.Time{}, true},
		{"within the margin after it", now.Add(settleMargin), true},
		{"after the margin", now.Add(-time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &dynamicConfig{static: dynamicconfig.StaticClient{other: 1000}}
			if !tc.until.IsZero() {
				d.refreshUntil.Store(tc.until.UnixNano())
			}
			got := d.GetValue(forceRefreshKey)
			if len(got) != 1 || got[0].Value != tc.want {
				t.Fatalf("force refresh = %+v, want %v", got, tc.want)
			}
			if v := d.GetValue(other); len(v) != 1 || v[0].Value != 1000 {
				t.Fatalf("a static value = %+v, want 1000", v)
			}
		})
	}
}

// TestAttributeAddedAtStartIsUsableAtOnce: a database made before a
// release added a search attribute gets it at the next start
// (registerSearchAttributes); a workflow started as soon as Start returns
// may set it, and so may one started after the cache stopped reading
// through on every lookup.
func TestAttributeAddedAtStartIsUsableAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	const kept, added = "TestKept", "TestAddedLater"
	start := func(attrs map[string]enumspb.IndexedValueType) *Server {
		port, err := ports.Free("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		s, err := Start(ctx, Options{Port: port, UIPort: -1, DBFile: filepath.Join(dir, "temporal.db"), SearchAttributes: attrs,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	older := start(map[string]enumspb.IndexedValueType{kept: enumspb.INDEXED_VALUE_TYPE_KEYWORD})
	older.Stop()

	s := start(map[string]enumspb.IndexedValueType{kept: enumspb.INDEXED_VALUE_TYPE_KEYWORD, added: enumspb.INDEXED_VALUE_TYPE_KEYWORD})
	defer s.Stop()
	c, err := sdkclient.DialContext(ctx, s.ClientOptions(sdkclient.Options{Logger: quietSDKLogger{}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.Namespace()})
	if err != nil || have.GetCustomAttributes()[added] != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
		t.Fatalf("after the start, the namespace's attributes are %v (%v), want %s among them", have.GetCustomAttributes(), err, added)
	}
	startWith := func(id string) {
		t.Helper()
		_, err := c.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{ID: id, TaskQueue: "no-worker",
			TypedSearchAttributes: temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyKeyword(added).ValueSet(id))}, "NoWorkflow")
		if err != nil {
			t.Fatalf("start %s with %s: %v", id, added, err)
		}
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[added]; got == nil {
			t.Fatalf("%s started without %s: %v", id, added, d.GetWorkflowExecutionInfo().GetSearchAttributes())
		}
	}
	startWith("at-once")
	// Once the margin has passed, the cache no longer reads through.
	for v := s.dyn.GetValue(forceRefreshKey); len(v) != 1 || v[0].Value != false; v = s.dyn.GetValue(forceRefreshKey) {
		select {
		case <-ctx.Done():
			t.Fatalf("the cache still reads through: %+v", v)
		case <-time.After(100 * time.Millisecond):
		}
	}
	startWith("settled")
}
