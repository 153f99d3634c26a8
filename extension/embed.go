// Package extension ships the child-side pi extension inside the Go binary,
// so a worker needs nothing but pi itself on its machine.
package extension

import _ "embed"

// FinalizeSource is child/subagent-finalize.ts: the subagent_finalize tool
// the worker loads into every child pi run with -e.
//
//go:embed child/subagent-finalize.ts
var FinalizeSource []byte
