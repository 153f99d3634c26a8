package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFirstHourMakeTestShowsProgress: every go test that make test runs
// goes through cmd/testprogress as JSON, so the minutes of the e2e package
// show each test as it passes (the formatter's own tests, beside it, check
// that a failure is shown in full and fails the run).
func TestFirstHourMakeTestShowsProgress(t *testing.T) {
	t.Parallel()
	env := freshShellEnv(t, t.TempDir())
	out, err := runMakeIn(t, env, "-n", "test")
	if err != nil {
		t.Fatalf("make -n test: %v\n%s", err, out)
	}
	runs := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "go test") {
			continue
		}
		runs++
		if !strings.Contains(line, "/testprogress -- go test -json ") {
			t.Errorf("make test runs go test without the progress formatter: %s", line)
		}
	}
	// The whole module: the workflow and activity packages under -race and
	// TestCluster, both in the background beside every other package and
	// test.
	if runs < 4 || !strings.Contains(out, "go test -json -race -timeout 20m ./activities/... ./workflows/... &") ||
		!strings.Contains(out, "go test -json -run '^TestCluster$' -timeout 20m ./e2e/ &") ||
		!strings.Contains(out, "go test -json -parallel 3 -skip '^TestCluster$' -timeout 30m $(go list ./... | grep -v -E '/(activities|workflows)$')") {
		t.Fatalf("make -n test runs go test %d times, not the whole module (./...):\n%s", runs, out)
	}
}

// TestFirstHourNpmWarningsSaidOnce: on a machine whose node is 20, npm ci
// warns EBADENGINE for each of pi's packages (45 lines); make says in one
// line why that is harmless and keeps npm's other warnings, and a failing
// npm ci still fails make. npm here is a stand-in that prints what npm 11
// printed on this machine's Node 20, so no network is needed.
func TestFirstHourNpmWarningsSaidOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var warnings strings.Builder
	for _, pkg := range []string{
		"pi-durable-subagents@0.1.0", "@earendil-works/chord@0.87.1", "@earendil-works/pi-agent-core@0.87.1",
		"@earendil-works/pi-ai@0.87.1", "@earendil-works/pi-coding-agent@0.87.1", "@earendil-works/pi-telemetry@0.87.1",
		"@earendil-works/pi-tui@0.87.1", "chalk@6.0.0", "undici@8.10.2",
	} {
		required := ">=22.19.0"
		if strings.HasPrefix(pkg, "chalk") {
			required = ">=22"
		}
		warnings.WriteString("npm warn EBADENGINE Unsupported engine {\n" +
			"npm warn EBADENGINE   package: '" + pkg + "',\n" +
			"npm warn EBADENGINE   required: { node: '" + required + "' },\n" +
			"npm warn EBADENGINE   current: { node: 'v20.20.2', npm: '11.19.1' }\n" +
			"npm warn EBADENGINE }\n")
	}
	const deprecated = "npm warn deprecated glob@7.2.3: Glob versions prior to v9 are no longer supported"
	warnings.WriteString(deprecated + "\n")
	if err := os.WriteFile(filepath.Join(dir, "npm-says"), []byte(warnings.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	npm := filepath.Join(dir, "npm")
	script := "#!/bin/sh\n" +
		// Called as the Makefile calls npm, in extension/.
		`[ "$*" = "ci --no-audit --no-fund" ] && [ "$(basename "$PWD")" = extension ] || { echo "npm called as: $* in $PWD"; exit 9; }` + "\n" +
		"cat " + shellSingleQuote(filepath.Join(dir, "npm-says")) + " >&2\n" +
		"echo; echo 'added 122 packages in 17s'\n" +
		`exit "${FAKE_NPM_EXIT:-0}"` + "\n"
	if err := os.WriteFile(npm, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env := freshShellEnv(t, t.TempDir())
	// -W: as if the lockfile had just changed, so make runs npm ci.
	out, err := runMakeIn(t, env, "-W", "extension/package-lock.json", "pi", "NPM="+npm)
	if err != nil {
		t.Fatalf("make pi: %v\n%s", err, out)
	}
	if strings.Contains(out, "npm warn EBADENGINE") {
		t.Fatalf("make pi still prints npm's EBADENGINE lines:\n%s", out)
	}
	said := grepLines(out, "harmless")
	if strings.Count(said, "\n") != 0 || !strings.Contains(said, "9 EBADENGINE warnings") || !strings.Contains(said, "pi runs on the Node v22.") {
		t.Fatalf("make pi's one line about EBADENGINE: %q\n%s", said, out)
	}
	for _, want := range []string{deprecated, "added 122 packages"} {
		if !strings.Contains(out, want) {
			t.Fatalf("make pi left out npm's %q:\n%s", want, out)
		}
	}

	failing := append(env, "FAKE_NPM_EXIT=1")
	if out, err := runMakeIn(t, failing, "-W", "extension/package-lock.json", "pi", "NPM="+npm); err == nil {
		t.Fatalf("make pi succeeded though npm ci failed:\n%s", out)
	} else if !strings.Contains(out, "npm warn EBADENGINE") {
		// A failed install is shown as npm wrote it: nothing is judged.
		t.Fatalf("a failed npm ci's warnings were judged:\n%s", out)
	}
}
