package doctor

import (
	"context"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durable-pi/subagents/activities"
	"github.com/durable-pi/subagents/worker"
)

// Config is what the doctor looks at: one folder, and the service and
// Temporal its delegations go to, resolved as the command and the pi
// extension resolve them (cli/doctor.go).
type Config struct {
	// Cwd is the folder whose profiles, plans and settings are checked.
	Cwd string
	// DataDir is the local service's data dir; AgentDir pi's config dir
	// (PI_CODING_AGENT_DIR, else ~/.pi/agent); PromptDirs more folders of
	// profiles, as the service reads them.
	DataDir    string
	AgentDir   string
	PromptDirs []string
	// Address and Namespace are the Temporal frontend's; Local says it is
	// this machine's local service (a loopback address with no TLS or
	// credentials of its own), which has a lock, a socket and a key.
	Address   string
	Namespace string
	Local     bool
	// TaskQueue is the base queue delegations start on; Host the host the
	// folder's tasks are pinned to ("" for any worker).
	TaskQueue string
	Host      string
	// UIURL is the Temporal UI's address given (--ui-url,
	// SUBAGENTS_UI_URL), "" for none: the local service is then asked
	// where it serves its UI, and GuessUIURL taken when it does not say
	// (the check skips when neither is known).
	UIURL      string
	GuessUIURL string
	// MinFree is the least free space the data dir's filesystem may have.
	MinFree uint64
	// StaleAfter is how old a leftover is before it is reported: a branch,
	// a delegation waiting for its parent.
	StaleAfter time.Duration
	// Getenv reads the environment the service and its children get (the
	// doctor's own).
	Getenv func(string) string
	// Now is the time the checks measure ages from.
	Now time.Time
	// Pi is the pi to judge (--pi): "" judges the running local service's,
	// or else the one a service started now would find.
	Pi string
	// Timeout is the doctor's deadline for all its checks (--timeout; 0:
	// DefaultTimeout).
	Timeout time.Duration
}

// Defaults of the thresholds.
const (
	// DefaultMinFree: below half a GiB the embedded Temporal's SQLite file
	// and its write-ahead log (every workflow's history) and the children's
	// session files run out of room within a busy day; the check warns
	// below four times that.
	DefaultMinFree = 512 << 20
	// DefaultStaleAfter: a day, as the issue asks of results that wait for
	// their parent: long past any pi session that was merely away.
	DefaultStaleAfter = 24 * time.Hour
)

// ServiceLock is what the local service's lock file (cli/servicelock.go)
// says: whether it exists, whether a process holds it, and the process it
// names.
type ServiceLock struct {
	Path   string
	Exists bool
	// Held: some process holds the lock: a service runs.
	Held bool
	// Pid is the pid the file names as its holder (0: none, e.g. "stopped
	// pid=…"); PidAlive whether a process of that pid runs.
	Pid      int
	PidAlive bool
	// Text is the file's content, trimmed.
	Text string
	// Err is why the file could not be read.
	Err error
}

// SocketInfo is what the service on the socket says it serves (cli's
// ServiceInfo).
type SocketInfo struct {
	Address   string
	Namespace string
	TaskQueue string
	PID       int
	Protocol  int
	// UIURL is where it serves the Temporal UI; Headless says it serves
	// none; neither: it does not say.
	UIURL    string
	Headless bool
}

// Poller is a worker that polled a task queue.
type Poller struct {
	Identity   string    `json:"identity"`
	LastAccess time.Time `json:"last_access"`
}

// Waiting is a delegation whose results wait for its parent to take them.
type Waiting struct {
	ID              string    `json:"id"`
	Cwd             string    `json:"cwd,omitempty"`
	ParentSessionID string    `json:"parent_session_id,omitempty"`
	Since           time.Time `json:"since"`
}

// Frontend is what the checks ask of Temporal.
type Frontend interface {
	// DescribeNamespace fails with serviceerror.NamespaceNotFound when the
	// namespace is missing.
	DescribeNamespace(ctx context.Context, namespace string) error
	// SearchAttributes are the namespace's custom search attributes.
	SearchAttributes(ctx context.Context, namespace string) (map[string]enumspb.IndexedValueType, error)
	// Pollers are the workers that polled queue for tasks of kind lately.
	Pollers(ctx context.Context, queue string, kind enumspb.TaskQueueType) ([]Poller, error)
	// Waiting are the delegations started with deliver whose work ended
	// before cutoff and whose parent has not acknowledged them.
	Waiting(ctx context.Context, cutoff time.Time) ([]Waiting, error)
}

// Deps are what the checks use to look at the world; cli/doctor.go gives
// the real ones (DefaultDeps and the service's lock and socket), tests
// their own.
type Deps struct {
	// FindPi finds pi as lookup says and runs `pi --version`
	// (worker.FindPi).
	FindPi func(ctx context.Context, lookup worker.PiLookup) (worker.Pi, error)
	// PiLookup is where a service started now would look for pi, flag
	// being --pi (worker.DefaultPiLookup).
	PiLookup func(flag string) worker.PiLookup
	// ServicePiLookup is where the running service of pid looked for pi
	// when it started; known is false when that cannot be read. nil: never
	// known.
	ServicePiLookup func(pid int) (lookup worker.PiLookup, known bool)
	// NodeVersion is the node found first on a PATH that starts with
	// prefix (pi's folder, where npm ci puts Node 22), and its version.
	NodeVersion func(ctx context.Context, prefix string) (path, version string, err error)
	// ServiceLock reads the lock of dataDir's service.
	ServiceLock func(dataDir string) ServiceLock
	// Answers asks what listens at address whether it is a Temporal
	// frontend, within ctx: nil when one answers; an error wrapping
	// ErrNoListener when nothing takes connections there; else why what
	// takes them is none that answers (it hangs, or speaks no gRPC).
	Answers func(ctx context.Context, address string) error
	// AskSocket asks the service on the socket at path what it serves.
	AskSocket func(ctx context.Context, path string) (SocketInfo, error)
	// ReadKey checks the API key of dataDir's service (connection.ReadKey)
	// and never hands the key out.
	ReadKey func(dataDir string) error
	// Dial connects to Temporal; close ends the connection.
	Dial func(ctx context.Context) (fe Frontend, close func(), err error)
	// HTTPGet answers a GET of url with its status code.
	HTTPGet func(ctx context.Context, url string) (int, error)
	// FreeSpace is the space an unprivileged user may still write on the
	// filesystem that holds path.
	FreeSpace func(path string) (uint64, error)
	// Git runs git in dir and returns its stdout.
	Git func(ctx context.Context, dir string, args ...string) (string, error)
	// StaleWorktrees and StaleSessionLocks list what dead runs left in the
	// data dir (activities).
	StaleWorktrees    func(dataDir string) ([]activities.StaleWorktree, error)
	StaleSessionLocks func(dataDir string, now time.Time) ([]string, error)
}
