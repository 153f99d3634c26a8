package client

import (
	"strings"
	"time"

	"github.com/google/uuid"
	sdkclient "go.temporal.io/sdk/client"
)

// The Client and what every verb shares of it: its settings, the IDs it
// makes, its clock and the Temporal UI links of runs. Each verb has a file
// of its own (start.go, status.go, wait.go, send.go, cancel.go, ack.go,
// list.go, output.go); lookup.go finds the workflow an ID names, and
// temporalerr.go says what Temporal's errors mean.

// Client runs the operations on delegations and sessions: the library
// behind every `subagents` verb and, through the command, the pi extension.
type Client struct {
	Temporal  sdkclient.Client
	TaskQueue string
	// Address is the frontend's host:port, for error messages.
	Address string
	// Namespace and UIURL make the Temporal UI links of runs ("" UIURL: no
	// links).
	Namespace string
	UIURL     string
	// PollInterval is DefaultPollInterval when zero.
	PollInterval time.Duration
	// NewID makes session and delegation IDs; nil means random UUIDs.
	NewID func() string
	// Now is the clock for elapsed times; nil means time.Now.
	Now func() time.Time
	// WorkflowVersion is the workflow code version the delegations and
	// sessions it starts run (api.CurrentVersion when zero): an earlier
	// one starts runs as the previous release did, for the upgrade tests
	// and the benchmarks that compare the two.
	WorkflowVersion int
}

// id is a new task or delegation ID: a UUIDv7, whose first bits are the
// time it was made, so that a client asked about an ID it cannot find can
// tell a task a start has just returned (its session appears a moment
// later) from one that does not exist (answered at once): justMinted.
func (c *Client) id() string {
	if c.NewID != nil {
		return c.NewID()
	}
	if u, err := uuid.NewV7(); err == nil {
		return u.String()
	}
	return uuid.NewString()
}

// mintedWithin is how recent an ID must be for describe and wait to wait
// for its session: the session appears within sessionAppearsWithin of the
// start, and the machine asking may not be the one that made the ID (a
// minute of clock difference between them is allowed for).
const mintedWithin = sessionAppearsWithin + time.Minute

// justMinted reports whether id is one this project's clients made (a
// UUIDv7) within mintedWithin of now. IDs of other forms (older v4 IDs, a
// typo) are never waited for.
func justMinted(id string, now time.Time) bool {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 {
		return false
	}
	made := time.Unix(u.Time().UnixTime())
	return now.Sub(made).Abs() <= mintedWithin
}

// CurrentTime is c.Now(), or the wall clock when Now is unset.
func (c *Client) CurrentTime() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// uiLink is the Temporal UI page of a workflow.
func (c *Client) uiLink(id string) string {
	if c.UIURL == "" || id == "" {
		return ""
	}
	ns := c.Namespace
	if ns == "" {
		ns = "default"
	}
	return strings.TrimRight(c.UIURL, "/") + "/namespaces/" + ns + "/workflows/" + id
}
