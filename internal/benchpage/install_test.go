package benchpage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -only install writes its section into the page and leaves the rest as
// it was: before the levers table the first time, in place after that; a
// run that does not measure it keeps it.
func TestSpliceInstall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	page := "# Benchmarks\n\n## The local service\n\nfigures\n\n## Levers tried\n\n| a |\n\n## Reliability suite (`make chaos`)\n\nchaos\n"
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	section := func(text string) string {
		return "\n" + InstallBegin + "\n## Install\n\n" + text + "\n" + InstallEnd + "\n"
	}
	if err := SpliceInstall(path, section("first")); err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\n## The local service\n\nfigures\n\n" + InstallBegin + "\n## Install\n\nfirst\n" + InstallEnd + "\n\n## Levers tried\n\n| a |\n\n## Reliability suite (`make chaos`)\n\nchaos\n"
	if got := read(t, path); got != want {
		t.Fatalf("first splice:\n%s\nwant:\n%s", got, want)
	}
	if err := SpliceInstall(path, section("second")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, path); got != strings.Replace(want, "first", "second", 1) {
		t.Fatalf("second splice:\n%s", got)
	}
	if got := KeptInstall(path); got != section("second") {
		t.Fatalf("kept %q", got)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
