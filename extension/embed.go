// Package extension ships the child-side pi extension inside the Go binary,
// so a worker needs nothing but pi itself on its machine.
package extension

import (
	"bytes"
	_ "embed"
	"fmt"
)

//go:embed child/subagent-finalize.ts
var finalizeTS []byte

//go:embed child/contact-supervisor.ts
var contactTS []byte

// FinalizeSource is the child-side extension the worker loads into every
// child pi run with -e: child/subagent-finalize.ts (the subagent_finalize
// tool) and child/contact-supervisor.ts (contact_supervisor, a question to
// the parent), joined into one module (joinChildExtensions), so that the
// worker writes, loads and matches warm children by one file as before.
var FinalizeSource = mustJoin(finalizeTS, contactTS)

// defaultExports are the factories of the two files, whose default exports
// the joined module's own default export calls in turn.
const (
	finalizeDefault = "export default function subagentFinalize("
	contactDefault  = "export default function contactSupervisor("
)

// joinChildExtensions makes one pi extension module of the finalize and
// contact_supervisor files: each loses its default export (a module has
// one), and a default export that registers both follows them. The contact
// file imports under names of its own, so the two files' imports do not
// collide.
func joinChildExtensions(finalize, contact []byte) ([]byte, error) {
	f, err := undefault(finalize, finalizeDefault)
	if err != nil {
		return nil, fmt.Errorf("child/subagent-finalize.ts: %w", err)
	}
	c, err := undefault(contact, contactDefault)
	if err != nil {
		return nil, fmt.Errorf("child/contact-supervisor.ts: %w", err)
	}
	var b bytes.Buffer
	b.Write(f)
	b.WriteString("\n// --- child/contact-supervisor.ts, joined by extension/embed.go ---\n")
	b.Write(c)
	b.WriteString("\nexport default function childExtensions(pi: ExtensionAPI) {\n\tsubagentFinalize(pi);\n\tcontactSupervisor(pi);\n}\n")
	return b.Bytes(), nil
}

// undefault turns the default export declaration decl of src into a plain
// function declaration; decl must occur exactly once.
func undefault(src []byte, decl string) ([]byte, error) {
	if n := bytes.Count(src, []byte(decl)); n != 1 {
		return nil, fmt.Errorf("%q occurs %d times, want once", decl, n)
	}
	return bytes.Replace(src, []byte(decl), []byte(decl[len("export default "):]), 1), nil
}

// mustJoin joins the embedded files; a failure is a build mistake, which
// every test of a package that loads the extension reports at once.
func mustJoin(finalize, contact []byte) []byte {
	b, err := joinChildExtensions(finalize, contact)
	if err != nil {
		panic(err)
	}
	return b
}
