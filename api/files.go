package api

import (
	"encoding/json"
	"strings"

	"github.com/durable-pi/subagents/internal/errcode"
)

// FileSpec is one entry of a task's files (the delegate contract): a path, or a path with
// a 1-indexed inclusive line range, a head or a tail.
type FileSpec struct {
	Path  string `json:"path"`
	Start int    `json:"start,omitempty"`
	End   int    `json:"end,omitempty"`
	Head  int    `json:"head,omitempty"`
	Tail  int    `json:"tail,omitempty"`
}

// UnmarshalJSON accepts a bare string as well as the object forms. It only
// decodes; Validate says whether the entry makes sense, so that a bad entry
// is a coded error and not a payload that cannot be read.
func (f *FileSpec) UnmarshalJSON(b []byte) error {
	var path string
	if json.Unmarshal(b, &path) == nil {
		*f = FileSpec{Path: path}
		return nil
	}
	type plain FileSpec
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return errcode.Errorf(errcode.InvalidInput, "files entry must be a path or {path, start?, end?} | {path, head} | {path, tail}: %v", err)
	}
	*f = FileSpec(p)
	return nil
}

// Validate checks one entry of a task's files.
func (f FileSpec) Validate() error {
	switch {
	case strings.TrimSpace(f.Path) == "":
		return errcode.New(errcode.InvalidInput, "files entry has an empty path")
	case f.Head < 0 || f.Tail < 0 || f.Start < 0 || f.End < 0:
		return errcode.Errorf(errcode.InvalidInput, "files entry %q: line numbers must be positive", f.Path)
	case f.Head > 0 && f.Tail > 0, (f.Head > 0 || f.Tail > 0) && (f.Start > 0 || f.End > 0):
		return errcode.Errorf(errcode.InvalidInput, "files entry %q: use one of start/end, head or tail", f.Path)
	case f.End > 0 && f.Start > f.End:
		return errcode.Errorf(errcode.InvalidInput, "files entry %q: start %d is after end %d", f.Path, f.Start, f.End)
	}
	return nil
}
