package doccheck

import (
	"reflect"
	"testing"
)

func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Settings", "settings"},
		{"The `subagents` command", "the-subagents-command"},
		{"Docker: a production-shaped stack", "docker-a-production-shaped-stack"},
		{"The task tool's error codes", "the-task-tools-error-codes"},
		{"Several workers, several hosts", "several-workers-several-hosts"},
		{"`subagents dev`: the local service", "subagents-dev-the-local-service"},
		{"The UI, for this machine's user", "the-ui-for-this-machines-user"},
		{"Reliability suite (`make chaos`)", "reliability-suite-make-chaos"},
		{"`delegate_to_subagents` windows", "delegate_to_subagents-windows"},
		{"**Bold** and [a link](x.md)", "bold-and-a-link"},
		{"Design — internals", "design--internals"},
		{"Déjà vu 2", "déjà-vu-2"},
	}
	for _, tt := range tests {
		if got := Slug(tt.heading); got != tt.want {
			t.Errorf("Slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

func TestAnchorsNumberRepeats(t *testing.T) {
	d := Parse("# A\n## Notes\n```\n# not a heading\n```\n## Notes\n### Notes ###\n")
	want := map[string]bool{"a": true, "notes": true, "notes-1": true, "notes-2": true}
	if got := d.Anchors(); !reflect.DeepEqual(got, want) {
		t.Errorf("Anchors = %v, want %v", got, want)
	}
}

func TestLinks(t *testing.T) {
	tests := []struct {
		name, src string
		want      []Ref
	}{
		{"inline and image", "see [a](docs/a.md#x) and ![i](p.png \"t\")", []Ref{{1, "docs/a.md#x"}, {1, "p.png"}}},
		{"text with brackets and code", "[BENCHMARKS.md, \"x\"](../B.md) [the `c` verb](c.md)", []Ref{{1, "../B.md"}, {1, "c.md"}}},
		{"in a code span", "`[not](a.md)` but [yes](b.md)", []Ref{{1, "b.md"}}},
		{"a code span over two lines", "a `x\n[not](a.md)` [yes](b.md)", []Ref{{2, "b.md"}}},
		{"in a fenced block", "```md\n[not](a.md)\n```\n[yes](b.md)", []Ref{{4, "b.md"}}},
		{"reference definition", "[x]: docs/x.md\n", []Ref{{1, "docs/x.md"}}},
		{"autolink is not a relative link", "<http://127.0.0.1:8233>", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Parse(tt.src).Links(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Links = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMakeTargets(t *testing.T) {
	tests := []struct {
		name, src string
		want      []Ref
	}{
		{"fenced commands", "```sh\nmake run    # the service\n$ make test\ncd x && make bench\n```", []Ref{{2, "run"}, {3, "test"}, {4, "bench"}}},
		{"a comment is no command", "```sh\n# make sure\nls # then make it\n```", nil},
		{"variables before the target", "```sh\nmake ARGS=\"-x\" run\n```", []Ref{{2, "run"}}},
		{"a code span that is a command", "run `make run ARGS=\"--port 1\"` or `make pi-extension`", []Ref{{1, "run"}, {1, "pi-extension"}}},
		{"prose is no command", "make sure, and `remake it`, and `cmake x`", nil},
		{"a span over two lines", "then `make\nbuild` once", []Ref{{1, "build"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Parse(tt.src).MakeTargets(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("MakeTargets = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSection(t *testing.T) {
	src := "# T\n## One\nmake\n### Sub\nx\n## Two\ny\n"
	s, line := Parse(src).Section("One")
	if line != 2 || s.Lines() != 4 || s.Line(4) != "x" {
		t.Fatalf("Section(One) at %d with %d lines", line, s.Lines())
	}
	if s, line := Parse(src).Section("Three"); s != nil || line != 0 {
		t.Errorf("Section(Three) = %v, %d; want none", s, line)
	}
}

func TestMakefileTargets(t *testing.T) {
	src := ".PHONY: all run\nGO ?= go\nX := y\nall: deps build\nrun: deps\n\t./bin/x\npi-extension: build\na b: c\n$(STAMP): x\n## doc: comment\n"
	want := map[string]bool{"all": true, "run": true, "pi-extension": true, "a": true, "b": true}
	if got := MakefileTargets(src); !reflect.DeepEqual(got, want) {
		t.Errorf("MakefileTargets = %v, want %v", got, want)
	}
}
