package api

// WorktreeSpec isolates a child in a git worktree (RunPiInput.Worktree).
type WorktreeSpec struct {
	// BaseRef is the commit the worktree starts from: HEAD (default) or a
	// named ref; it is resolved to a commit when the worktree is made.
	BaseRef string `json:"baseRef,omitempty"`
	// Base is the commit the session's first run started from, once it
	// ran: a later run of the session whose branch holds nothing yet (its
	// change was empty) starts from it again, without looking at the
	// checkout (which the user may have changed meanwhile).
	Base string `json:"base,omitempty"`
}

// Change is what a child in a worktree changed: a branch holding its
// commit on top of Base, and the same change as a patch file (the worker's
// data dir), with the files it touches. Empty is true when the child
// changed nothing.
type Change struct {
	Repo      string   `json:"repo"`
	Base      string   `json:"base"`
	Branch    string   `json:"branch"`
	PatchFile string   `json:"patchFile"`
	Files     []string `json:"files,omitempty"`
	Empty     bool     `json:"empty,omitempty"`
	// Refused are the paths the worker left out of the change, each with
	// why ("../x (a .. part)"): paths git refuses to write, outside the
	// checkout or in its .git folder. The run that made them failed.
	Refused []string `json:"refused,omitempty"`
	// Worktree is set when the capture failed: the child's work is still
	// in this worktree, not yet on the branch. An apply captures it first,
	// a discard removes it, and the worker's sweep captures it meanwhile.
	Worktree string `json:"worktree,omitempty"`
}
