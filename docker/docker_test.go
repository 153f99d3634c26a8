// Package docker holds no code: its test parses the Dockerfile and the
// compose file with the parsers Docker itself uses, since no Docker engine
// runs where the tests do. It is a module of its own so that those parsers'
// dependencies stay out of the service's build.
package docker

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

func TestDockerfile(t *testing.T) {
	f, err := os.Open("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile does not parse: %v", err)
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatalf("Dockerfile instructions: %v", err)
	}
	versions := map[string]string{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if kv.Value != nil {
				versions[kv.Key] = *kv.Value
			}
		}
	}
	for _, arg := range []string{"GO_VERSION", "NODE_VERSION"} {
		if !exactVersion.MatchString(versions[arg]) {
			t.Errorf("build argument %s = %q, want an exact version (major.minor.patch)", arg, versions[arg])
		}
	}
	var names []string
	for _, s := range stages {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"build", "pi", "runtime"}) {
		t.Fatalf("stages %v, want build, pi, runtime", names)
	}
	build, pi, runtime := stages[0], stages[1], stages[2]
	if !strings.HasPrefix(build.BaseName, "golang:") || !strings.HasPrefix(pi.BaseName, "node:") || !strings.HasPrefix(runtime.BaseName, "node:") {
		t.Fatalf("base images: %s, %s, %s", build.BaseName, pi.BaseName, runtime.BaseName)
	}
	if !runs(build, "go build") || !runs(build, "./cmd/subagents") {
		t.Error("the build stage does not build ./cmd/subagents")
	}
	if !runs(pi, "npm ci") || !copies(pi, "extension/package-lock.json") {
		t.Error("pi is not installed from the extension's lockfile")
	}
	var user, entrypoint string
	env := map[string]string{}
	var health *instructions.HealthCheckCommand
	var fromStages []string
	for _, cmd := range runtime.Commands {
		switch c := cmd.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.EntrypointCommand:
			entrypoint = strings.Join(c.CmdLine, " ")
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				env[kv.Key] = kv.Value
			}
		case *instructions.HealthCheckCommand:
			health = c
		case *instructions.CopyCommand:
			if c.From != "" {
				fromStages = append(fromStages, c.From)
			}
		}
	}
	if user == "" || user == "root" || user == "0" {
		t.Errorf("the runtime runs as %q, want a non-root user", user)
	}
	if !strings.Contains(entrypoint, "subagents worker") {
		t.Errorf("entrypoint %q does not run the worker", entrypoint)
	}
	if !slices.Contains(fromStages, "build") || !slices.Contains(fromStages, "pi") {
		t.Errorf("the runtime copies from %v, want build and pi", fromStages)
	}
	if env["SUBAGENTS_PI"] != "/opt/subagents/extension/node_modules/.bin/pi" || env["SUBAGENTS_DATA_DIR"] == "" || env["SUBAGENTS_METRICS_ADDR"] == "" {
		t.Errorf("runtime environment %v", env)
	}
	if health == nil || !strings.Contains(strings.Join(health.Health.Test, " "), "/metrics") {
		t.Error("no health check against the metrics endpoint")
	}
}

func runs(stage instructions.Stage, sub string) bool {
	for _, cmd := range stage.Commands {
		if r, ok := cmd.(*instructions.RunCommand); ok && strings.Contains(strings.Join(r.CmdLine, " "), sub) {
			return true
		}
	}
	return false
}

func copies(stage instructions.Stage, src string) bool {
	for _, cmd := range stage.Commands {
		if c, ok := cmd.(*instructions.CopyCommand); ok && slices.Contains(c.SourcePaths, src) {
			return true
		}
	}
	return false
}

func TestCompose(t *testing.T) {
	opts, err := cli.NewProjectOptions([]string{"compose.yaml"},
		cli.WithOsEnv, cli.WithName("subagents"),
		cli.WithEnv([]string{"ANTHROPIC_API_KEY=test-key"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose.yaml does not load: %v", err)
	}
	want := []string{"postgresql", "setup", "temporal", "temporal-schema", "temporal-ui", "worker-1", "worker-2"}
	if got := p.ServiceNames(); !slices.Equal(sorted(got), want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	svc := func(name string) types.ServiceConfig {
		s, err := p.GetService(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if img := svc("postgresql").Image; !strings.HasPrefix(img, "postgres:") {
		t.Errorf("postgresql image %q", img)
	}
	// The server and its schema tool at the version the project embeds
	// (go.mod), the schema set up by a job of its own before the server
	// starts: Temporal's recommendation since auto-setup was deprecated.
	embedded := embeddedServerVersion(t)
	temporal, schema := svc("temporal"), svc("temporal-schema")
	if temporal.Image != "temporalio/server:"+embedded || env(temporal, "DB") != "postgres12" || env(temporal, "POSTGRES_SEEDS") != "postgresql" {
		t.Errorf("temporal: image %q (want temporalio/server:%s), DB %q, seeds %q", temporal.Image, embedded, env(temporal, "DB"), env(temporal, "POSTGRES_SEEDS"))
	}
	if temporal.DependsOn["temporal-schema"].Condition != types.ServiceConditionCompletedSuccessfully {
		t.Error("temporal does not wait for its schema job")
	}
	if !strings.HasSuffix(env(temporal, "DYNAMIC_CONFIG_FILE_PATH"), "/subagents.yaml") || len(temporal.Volumes) != 1 || temporal.Volumes[0].Source != filepathAbs(t, "dynamicconfig.yaml") {
		t.Errorf("temporal does not run with docker/dynamicconfig.yaml: %s, %+v", env(temporal, "DYNAMIC_CONFIG_FILE_PATH"), temporal.Volumes)
	}
	script := strings.Join(schema.Command, " ")
	if schema.Image != "temporalio/admin-tools:"+embedded || schema.DependsOn["postgresql"].Condition != types.ServiceConditionHealthy ||
		env(schema, "SQL_PLUGIN") != "postgres12" || env(schema, "SQL_HOST") != "postgresql" || !strings.HasPrefix(strings.TrimSpace(script), "set -eu") {
		t.Errorf("temporal-schema: image %q, depends %+v, plugin %q, host %q, script %q", schema.Image, schema.DependsOn, env(schema, "SQL_PLUGIN"), env(schema, "SQL_HOST"), script)
	}
	for _, step := range []string{"create-database", "setup-schema -v 0.0", "update-schema --schema-name", "postgresql/v12/", "temporal_visibility:visibility"} {
		if !strings.Contains(script, step) {
			t.Errorf("temporal-schema's script has no %q: %s", step, script)
		}
	}
	if strings.Contains(script, "|| true") {
		t.Error("temporal-schema hides a failure (|| true)")
	}
	if !publishes(temporal, 7233) || !publishes(svc("temporal-ui"), 8080) {
		t.Error("the frontend (7233) or the UI (8080) is not published")
	}
	for _, s := range p.Services {
		// Nothing here has TLS or authorization: a published port is
		// reachable from this machine only.
		for _, port := range s.Ports {
			if port.Published != "" && port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %s on %q, want 127.0.0.1 only", s.Name, port.Published, port.HostIP)
			}
		}
		// Images pulled from a registry are pinned to an exact version; the
		// workers' image is built here.
		if s.Build == nil {
			_, tag, _ := strings.Cut(s.Image, ":")
			if !exactVersion.MatchString(strings.SplitN(tag, "-", 2)[0]) {
				t.Errorf("%s image %q is not pinned to an exact version", s.Name, s.Image)
			}
		}
	}
	if env(svc("temporal-ui"), "TEMPORAL_ADDRESS") != "temporal:7233" {
		t.Error("the UI does not talk to the temporal service")
	}
	// The project's own setup registers the search attributes, from the
	// image the workers run, once, before them.
	setup := svc("setup")
	if setup.Build == nil || setup.Build.Dockerfile != "docker/Dockerfile" || strings.Join(setup.Entrypoint, " ") != "subagents" ||
		len(setup.Command) == 0 || setup.Command[0] != "setup" || env(setup, "TEMPORAL_ADDRESS") != "temporal:7233" {
		t.Errorf("setup: build %+v entrypoint %v command %v", setup.Build, setup.Entrypoint, setup.Command)
	}
	if setup.DependsOn["temporal"].Condition != types.ServiceConditionHealthy {
		t.Error("setup does not wait for a healthy server")
	}
	for _, name := range []string{"postgresql", "temporal", "temporal-ui", "worker-1", "worker-2"} {
		if svc(name).HealthCheck == nil || len(svc(name).HealthCheck.Test) == 0 {
			t.Errorf("%s has no health check", name)
		}
	}
	if sec := p.Secrets["anthropic_api_key"]; sec.Environment != "ANTHROPIC_API_KEY" {
		t.Errorf("secret anthropic_api_key comes from %+v, want the ANTHROPIC_API_KEY of the compose command", sec)
	}
	for _, name := range []string{"worker-1", "worker-2"} {
		w := svc(name)
		if w.Build == nil || w.Build.Dockerfile != "docker/Dockerfile" {
			t.Errorf("%s is not built from docker/Dockerfile: %+v", name, w.Build)
		}
		if env(w, "TEMPORAL_ADDRESS") != "temporal:7233" || env(w, "SUBAGENTS_HOST") != name {
			t.Errorf("%s environment: address %q host %q", name, env(w, "TEMPORAL_ADDRESS"), env(w, "SUBAGENTS_HOST"))
		}
		// Model keys are secrets, mounted as files, never in the environment
		// that `docker inspect` shows.
		for key, secret := range map[string]string{"ANTHROPIC_API_KEY": "anthropic_api_key", "OPENAI_API_KEY": "openai_api_key"} {
			if v, ok := w.Environment[key]; ok {
				t.Errorf("%s has %s in its environment (%v)", name, key, v)
			}
			if env(w, key+"_FILE") != "/run/secrets/"+secret || !slices.ContainsFunc(w.Secrets, func(s types.ServiceSecretConfig) bool { return s.Source == secret }) {
				t.Errorf("%s does not get %s as the secret %s", name, key, secret)
			}
		}
		if w.DependsOn["setup"].Condition != types.ServiceConditionCompletedSuccessfully || w.DependsOn["temporal"].Condition != types.ServiceConditionHealthy {
			t.Errorf("%s does not wait for the server and the search attributes", name)
		}
		if len(w.Ports) != 0 {
			t.Errorf("%s publishes %v: its metrics stay inside the compose network", name, w.Ports)
		}
		var data bool
		for _, v := range w.Volumes {
			data = data || v.Source == "subagents-data" && v.Target == "/data"
		}
		if !data {
			t.Errorf("%s does not mount the shared data volume at /data", name)
		}
	}
}

// exactVersion is a version that names one release, not a moving line
// (16, 22, latest).
var exactVersion = regexp.MustCompile(`^v?\d+\.\d+(\.\d+)?$`)

// embeddedServerVersion is the Temporal server version the service's
// go.mod requires (without its v).
func embeddedServerVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*go\.temporal\.io/server v(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod requires no go.temporal.io/server")
	}
	return string(m[1])
}

func filepathAbs(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func env(s types.ServiceConfig, key string) string {
	if v, ok := s.Environment[key]; ok && v != nil {
		return *v
	}
	return ""
}

func publishes(s types.ServiceConfig, port uint32) bool {
	for _, p := range s.Ports {
		if p.Published == "" {
			continue
		}
		if p.Published == strconv.FormatUint(uint64(port), 10) {
			return true
		}
	}
	return false
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
