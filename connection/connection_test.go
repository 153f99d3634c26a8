package connection

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/durable-pi/subagents/internal/errcode"
)

// mapEnv is an environment for envconfig that holds only what a test sets.
type mapEnv map[string]string

func (m mapEnv) Environ() []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func (m mapEnv) LookupEnv(k string) (string, bool) { v, ok := m[k]; return v, ok }

func TestClientOptionsPrecedence(t *testing.T) {
	dir := t.TempDir()
	toml := filepath.Join(dir, "temporal.toml")
	err := os.WriteFile(toml, []byte(`
[profile.default]
address = "file-host:7233"
namespace = "file-ns"

[profile.cloud]
address = "cloud-host:7233"
namespace = "cloud-ns"
api_key = "file-key"
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name          string
		conn          Settings
		wantAddr      string
		wantNamespace string
		wantTLS       bool
	}{
		{"nothing set: local dev server", Settings{Env: mapEnv{}, ConfigFile: filepath.Join(dir, "none.toml")}, DefaultAddress, "", false},
		{"file profile", Settings{Env: mapEnv{}, ConfigFile: toml}, "file-host:7233", "file-ns", false},
		{"env over file", Settings{Env: mapEnv{"TEMPORAL_ADDRESS": "env-host:7233"}, ConfigFile: toml}, "env-host:7233", "file-ns", false},
		{"an empty variable is unset", Settings{Env: mapEnv{"TEMPORAL_ADDRESS": "", "TEMPORAL_NAMESPACE": ""}, ConfigFile: toml}, "file-host:7233", "file-ns", false},
		{"flags over env", Settings{Env: mapEnv{"TEMPORAL_ADDRESS": "env-host:7233", "TEMPORAL_NAMESPACE": "env-ns"}, ConfigFile: toml, Address: "flag-host:7233"}, "flag-host:7233", "env-ns", false},
		{"named profile with api key turns TLS on", Settings{Env: mapEnv{}, ConfigFile: toml, Profile: "cloud"}, "cloud-host:7233", "cloud-ns", true},
		{"api key flag turns TLS on", Settings{Env: mapEnv{}, ConfigFile: toml, APIKey: "k"}, "file-host:7233", "file-ns", true},
		{"tls=false wins over api key", Settings{Env: mapEnv{}, ConfigFile: toml, APIKey: "k", TLS: "false"}, "file-host:7233", "file-ns", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := tt.conn.ClientOptions()
			if err != nil {
				t.Fatal(err)
			}
			if opts.HostPort != tt.wantAddr || opts.Namespace != tt.wantNamespace {
				t.Fatalf("address %q namespace %q", opts.HostPort, opts.Namespace)
			}
			if gotTLS := opts.ConnectionOptions.TLS != nil; gotTLS != tt.wantTLS {
				t.Fatalf("TLS = %v, want %v", gotTLS, tt.wantTLS)
			}
		})
	}
}

func TestClientOptionsErrors(t *testing.T) {
	tests := []struct {
		name string
		conn Settings
		want string
	}{
		{"bad tls value", Settings{Env: mapEnv{}, TLS: "maybe"}, `--tls must be true or false`},
		{"unknown profile", Settings{Env: mapEnv{}, Profile: "nope", ConfigFile: filepath.Join(t.TempDir(), "x.toml")}, "Temporal client settings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.conn.ClientOptions()
			if !errcode.Is(err, errcode.InvalidInput) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want INVALID_INPUT saying %q", err, tt.want)
			}
		})
	}
}

func TestDialUnreachableIsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	// Port 1 on loopback: nothing listens there.
	_, err := Settings{Env: mapEnv{}, Address: "127.0.0.1:1"}.Dial(ctx, nil)
	if !errcode.Is(err, errcode.ServiceUnavailable) {
		t.Fatalf("err = %v, want SERVICE_UNAVAILABLE", err)
	}
	if !strings.Contains(err.Error(), "subagents dev") || !strings.Contains(err.Error(), "TEMPORAL_ADDRESS") {
		t.Fatalf("err %q gives no hint on how to start Temporal", err)
	}
}

func TestUncompressed(t *testing.T) {
	gzip := &sdkclient.GrpcCompressionGzip{}
	tests := []struct {
		name     string
		hostPort string
		chosen   sdkclient.GrpcCompression
		none     bool
	}{
		{"loopback", "127.0.0.1:7233", nil, true},
		{"localhost", "localhost:7233", nil, true},
		{"ipv6 loopback", "[::1]:7233", nil, true},
		{"remote", "temporal.example.com:7233", nil, false},
		{"loopback, gzip chosen", "127.0.0.1:7233", gzip, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := sdkclient.Options{HostPort: tt.hostPort, ConnectionOptions: sdkclient.ConnectionOptions{GrpcCompression: tt.chosen}}
			Uncompressed(&opts)
			_, none := opts.ConnectionOptions.GrpcCompression.(*sdkclient.GrpcCompressionNone)
			if none != tt.none || (tt.chosen != nil && opts.ConnectionOptions.GrpcCompression != tt.chosen) {
				t.Fatalf("compression %T, want none: %v", opts.ConnectionOptions.GrpcCompression, tt.none)
			}
		})
	}
}
