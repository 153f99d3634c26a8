// Package connection is how every part of the project reaches Temporal and
// the local service: the connection settings (temporal.toml, TEMPORAL_*
// variables and the flags named as the Temporal CLI names them) and the
// local service's socket in its data dir. The client and the worker both
// use it.
package connection

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/durable-pi/subagents/internal/errcode"
)

// Settings override the SDK's environment
// configuration (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
// TEMPORAL_TLS_*, TEMPORAL_PROFILE and temporal.toml). Empty fields leave
// the environment's value in place.
type Settings struct {
	Address    string
	Namespace  string
	APIKey     string
	Profile    string
	ConfigFile string
	TLSCert    string
	TLSKey     string
	TLSCACert  string
	TLSServer  string
	// TLS forces TLS on ("true") or off ("false"); empty leaves it to the
	// environment (an API key turns it on).
	TLS string
	// Env replaces the process environment, for tests.
	Env envconfig.EnvLookup
	// Metrics, when set, receives the SDK's client and worker metrics.
	Metrics sdkclient.MetricsHandler
	// DataDir is where a local service keeps its API key (KeyPath); empty:
	// DefaultDataDir. Dial uses the key for a loopback frontend when the
	// settings carry no credentials of their own.
	DataDir string
}

// DefaultAddress is where a local `subagents dev` listens.
const DefaultAddress = "127.0.0.1:7233"

// RegisterFlags adds the connection flags to fs, named as the Temporal CLI
// names them.
func (c *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Address, "address", "", "Temporal frontend host:port (env TEMPORAL_ADDRESS; default "+DefaultAddress+")")
	fs.StringVar(&c.Namespace, "namespace", "", "Temporal namespace (env TEMPORAL_NAMESPACE; default \"default\")")
	fs.StringVar(&c.APIKey, "api-key", "", "API key, e.g. for Temporal Cloud (env TEMPORAL_API_KEY); turns TLS on")
	fs.StringVar(&c.Profile, "profile", "", "profile in the Temporal config file (env TEMPORAL_PROFILE)")
	fs.StringVar(&c.ConfigFile, "config-file", "", "Temporal config file (env TEMPORAL_CONFIG_FILE; default temporal.toml in the user config dir)")
	fs.StringVar(&c.TLSCert, "tls-cert-path", "", "client certificate for mTLS (env TEMPORAL_TLS_CLIENT_CERT_PATH)")
	fs.StringVar(&c.TLSKey, "tls-key-path", "", "client key for mTLS (env TEMPORAL_TLS_CLIENT_KEY_PATH)")
	fs.StringVar(&c.TLSCACert, "tls-ca-path", "", "server CA certificate (env TEMPORAL_TLS_SERVER_CA_CERT_PATH)")
	fs.StringVar(&c.TLSServer, "tls-server-name", "", "TLS server name override (env TEMPORAL_TLS_SERVER_NAME)")
	fs.StringVar(&c.TLS, "tls", "", "true or false: force TLS on or off (env TEMPORAL_TLS)")
}

// ClientOptions resolves the settings: temporal.toml profile, then
// TEMPORAL_* variables, then the fields of c.
func (c Settings) ClientOptions() (sdkclient.Options, error) {
	var env envconfig.EnvLookup = osEnv{}
	if c.Env != nil {
		env = c.Env
	}
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{
		ConfigFilePath:    c.ConfigFile,
		ConfigFileProfile: c.Profile,
		EnvLookup:         nonEmpty{env},
	})
	if err != nil {
		return sdkclient.Options{}, errcode.Wrap(errcode.InvalidInput, err, "Temporal client settings: "+err.Error())
	}
	if c.Address != "" {
		prof.Address = c.Address
	}
	if prof.Address == "" {
		prof.Address = DefaultAddress
	}
	if c.Namespace != "" {
		prof.Namespace = c.Namespace
	}
	if c.APIKey != "" {
		prof.APIKey = c.APIKey
	}
	if c.TLSCert != "" || c.TLSKey != "" || c.TLSCACert != "" || c.TLSServer != "" || c.TLS != "" {
		if prof.TLS == nil {
			prof.TLS = &envconfig.ClientConfigTLS{}
		}
		setIf(&prof.TLS.ClientCertPath, c.TLSCert)
		setIf(&prof.TLS.ClientKeyPath, c.TLSKey)
		setIf(&prof.TLS.ServerCACertPath, c.TLSCACert)
		setIf(&prof.TLS.ServerName, c.TLSServer)
		switch c.TLS {
		case "", "true":
			prof.TLS.Disabled = false
		case "false":
			prof.TLS.Disabled = true
		default:
			return sdkclient.Options{}, errcode.Errorf(errcode.InvalidInput, "--tls must be true or false, not %q", c.TLS)
		}
	}
	opts, err := prof.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return sdkclient.Options{}, errcode.Wrap(errcode.InvalidInput, err, "Temporal client settings: "+err.Error())
	}
	return opts, nil
}

func setIf(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// Uncompressed turns off the SDK's default gzip of every request (and the
// server's of its answer) for a frontend on this machine, where it saves
// no bytes worth a thing and cost about 5% of the CPU a stub task takes
// (profiled, the load bench). A remote frontend keeps it, as does a
// client that chose a compression.
func Uncompressed(opts *sdkclient.Options) {
	if opts.ConnectionOptions.GrpcCompression == nil && IsLoopback(opts.HostPort) {
		opts.ConnectionOptions.GrpcCompression = &sdkclient.GrpcCompressionNone{}
	}
}

// Dial connects to Temporal with c's settings. An unreachable server is
// SERVICE_UNAVAILABLE with a hint on how to start one.
func (c Settings) Dial(ctx context.Context, logger *slog.Logger) (sdkclient.Client, error) {
	opts, err := c.ClientOptions()
	if err != nil {
		return nil, err
	}
	if logger != nil {
		opts.Logger = NewSDKLogger(logger)
	}
	if c.Metrics != nil {
		opts.MetricsHandler = c.Metrics
	}
	if err := withLocalKey(&opts, c.DataDir); err != nil {
		return nil, err
	}
	Uncompressed(&opts)
	cl, err := sdkclient.DialContext(ctx, opts)
	if err != nil {
		return nil, Unavailable(opts.HostPort, err)
	}
	return cl, nil
}

// Unavailable is the error for a Temporal that cannot be reached at addr.
func Unavailable(addr string, err error) error {
	var coded *errcode.Error
	if errors.As(err, &coded) {
		return err
	}
	return errcode.Wrap(errcode.ServiceUnavailable, err, fmt.Sprintf(
		"cannot reach Temporal at %s: %v; start one with `make run` or `subagents dev`, or set TEMPORAL_ADDRESS",
		addr, err))
}

// nonEmpty counts a variable set to "" as unset, as a shell user means it
// (`TEMPORAL_ADDRESS= subagents list`): envconfig would take the empty
// value over the profile's and fall back to the default address.
type nonEmpty struct{ envconfig.EnvLookup }

func (e nonEmpty) LookupEnv(k string) (string, bool) {
	v, ok := e.EnvLookup.LookupEnv(k)
	return v, ok && v != ""
}

type osEnv struct{}

func (osEnv) Environ() []string                 { return os.Environ() }
func (osEnv) LookupEnv(k string) (string, bool) { return os.LookupEnv(k) }
