package api

// RunMark is where one run (turn) of a session begins in its pi session
// file, and how it ended.
type RunMark struct {
	Turn  int    `json:"turn"`
	State string `json:"state"`
	// FirstMessage counts the conversation messages before the run.
	FirstMessage int `json:"firstMessage"`
}

// ReadRequest asks for a session's transcript, or one turn's full output.
type ReadRequest struct {
	SessionID string `json:"sessionId"`
	Agent     string `json:"agent,omitempty"`
	Cwd       string `json:"cwd"`
	// What is "transcript" or "output".
	What string `json:"what"`
	// Runs mark the session's turns, in order (transcript).
	Runs []RunMark `json:"runs,omitempty"`
	// Turn whose full output to read (output).
	Turn int `json:"turn,omitempty"`
	// Host holds the session's files ("" for any worker).
	Host string `json:"host,omitempty"`
	// Paged asks for the text from character From on, as much as one
	// answer holds, instead of its end: how a reader gets all of an output
	// too long for one answer, page by page.
	Paged bool `json:"paged,omitempty"`
	From  int  `json:"from,omitempty"`
}

// Read kinds.
const (
	ReadTranscript = "transcript"
	ReadOutput     = "output"
)

// ReadResult is the text read, sanitized, at most MaxReadChars long.
type ReadResult struct {
	Text         string `json:"text"`
	MessageCount int    `json:"messageCount"`
	TotalChars   int    `json:"totalChars"`
	Truncated    bool   `json:"truncated"`
	// Found is false when the worker has no file for the session (it ran
	// on a worker with another data dir, or never reached the model).
	Found bool `json:"found"`
	// Next is where the next page begins (Paged), 0 after the last one.
	Next int `json:"next,omitempty"`
}

// SessionLookup is what Temporal knows of a session ID.
type SessionLookup struct {
	SessionID string `json:"sessionId"`
	Found     bool   `json:"found"`
	// Open is true while the session's workflow runs (a turn, or waiting
	// for input); State is its SubagentStatus.
	Open  bool   `json:"open"`
	State string `json:"state,omitempty"`
	Agent string `json:"agent,omitempty"`
	Cwd   string `json:"cwd,omitempty"`
	// Host is where the session's child runs ran (its memo), "" for any.
	Host string `json:"host,omitempty"`
}
