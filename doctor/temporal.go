package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/internal/errcode"
)

// pollerFresh is how recently a worker must have polled a queue to count
// as polling it: a worker's long poll returns within a minute (the
// server's long-poll expiry) and it polls again at once, so two minutes
// see every live worker, while Temporal itself lists a worker for five
// minutes after it stopped.
const pollerFresh = 2 * time.Minute

// checkNamespace: Temporal answers, takes this caller, and has the
// namespace.
func checkNamespace(ctx context.Context, fe Frontend, dialErr error, cfg Config) Result {
	setupFix := fmt.Sprintf("`subagents setup --namespace %s` with the same connection settings creates it", cfg.Namespace)
	if cfg.Local {
		setupFix = fmt.Sprintf("start the local service with it: `subagents dev --namespace %s` (it creates the namespace), or %s", cfg.Namespace, setupFix)
	}
	err := dialErr
	if err == nil {
		err = fe.DescribeNamespace(ctx, cfg.Namespace)
	}
	var nf *serviceerror.NamespaceNotFound
	var nf2 *serviceerror.NotFound
	var denied *serviceerror.PermissionDenied
	switch {
	case err == nil:
		return ok(CheckNamespace, fmt.Sprintf("namespace %s on %s", cfg.Namespace, cfg.Address))
	case errors.As(err, &nf) || errors.As(err, &nf2):
		return fail(CheckNamespace, fmt.Sprintf("namespace %q does not exist on %s", cfg.Namespace, cfg.Address), setupFix)
	case errors.As(err, &denied) || status.Code(err) == codes.Unauthenticated || errcode.Is(err, errcode.PermissionDenied):
		fix := "check the credentials: TEMPORAL_API_KEY, the profile of temporal.toml, or the client certificate"
		if cfg.Local {
			fix = "the API key in " + cfg.DataDir + " is not the running service's: " + restartFix
		}
		return fail(CheckNamespace, fmt.Sprintf("the Temporal at %s refused this caller: %s", cfg.Address, oneLine(err.Error())), fix)
	}
	fix := "check TEMPORAL_ADDRESS, temporal.toml or the extension's \"address\", and that the cluster runs"
	if cfg.Local {
		fix = startFix
	}
	r := fail(CheckNamespace, fmt.Sprintf("cannot reach Temporal at %s: %s", cfg.Address, oneLine(errText(err))), fix)
	r.unavailable = true
	return r
}

// errText is err's message without what connection.Unavailable wraps it
// in: "cannot reach Temporal at ADDR: ", which the verdict says itself,
// and a hint of its own to start a service, where the check gives its own
// fix.
func errText(err error) string {
	var coded *errcode.Error
	if errors.As(err, &coded) && coded.Code == errcode.ServiceUnavailable && coded.Err != nil {
		return coded.Err.Error()
	}
	s := err.Error()
	if i := strings.Index(s, "; start one with"); i >= 0 {
		s = s[:i]
	}
	return s
}

// checkSearchAttributes: the namespace has every search attribute the
// delegations and `list` use, of its type (api.SearchAttributes).
func checkSearchAttributes(ctx context.Context, fe Frontend, namespace string) Result {
	have, err := fe.SearchAttributes(ctx, namespace)
	if err != nil {
		return fail(CheckSearchAttributes, fmt.Sprintf("cannot list the search attributes of namespace %s: %s", namespace, oneLine(err.Error())),
			"the caller needs to read the namespace's search attributes: check its credentials")
	}
	var missing, wrong []string
	for name, typ := range api.SearchAttributes() {
		got, found := have[name]
		switch {
		case !found:
			missing = append(missing, name)
		case got != typ:
			wrong = append(wrong, fmt.Sprintf("%s is %s", name, got))
		}
	}
	slices.Sort(missing)
	slices.Sort(wrong)
	fix := fmt.Sprintf("`subagents setup --namespace %s` with the same connection settings registers them", namespace)
	switch {
	case len(missing) > 0:
		return fail(CheckSearchAttributes, fmt.Sprintf("namespace %s lacks the search attributes %s that delegations and `list` use", namespace, strings.Join(missing, ", ")), fix).
			with("missing", missing)
	case len(wrong) > 0:
		return fail(CheckSearchAttributes, fmt.Sprintf("namespace %s has search attributes of the wrong type (%s; %s is a Datetime, the others keywords)", namespace, strings.Join(wrong, ", "), api.SendUntilKey.GetName()),
			"remove them (`temporal operator search-attribute remove`) and run `subagents setup --namespace "+namespace+"`")
	}
	return ok(CheckSearchAttributes, fmt.Sprintf("namespace %s has the %d search attributes delegations use", namespace, len(api.SearchAttributes())))
}

// Queue is a task queue this folder's delegations use, and the kinds of
// task a worker must poll it for.
type Queue struct {
	Name  string
	Kinds []enumspb.TaskQueueType
	// Fix says how to get a worker onto it.
	Fix string
}

// folderQueues are the queues a delegation from this folder uses: the
// base queue for workflows and the steps that run anywhere, and, when the
// tasks are pinned to a host, that host's queue for the child runs.
func folderQueues(cfg Config) []Queue {
	base := Queue{Name: cfg.TaskQueue, Kinds: []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY},
		Fix: fmt.Sprintf("start a worker on it: `subagents worker --task-queue %s` against this Temporal", cfg.TaskQueue)}
	if cfg.Local {
		base.Fix = fmt.Sprintf("the local service's worker polls the queue it was started with: `subagents stop`, then `subagents dev --task-queue %s`; or set SUBAGENTS_TASK_QUEUE to the service's queue", cfg.TaskQueue)
	}
	out := []Queue{base}
	if cfg.Host != "" {
		out = append(out, Queue{Name: api.HostQueue(cfg.TaskQueue, cfg.Host), Kinds: []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_ACTIVITY},
			Fix: fmt.Sprintf("start a worker on host %s (`subagents worker --host %s --task-queue %s`), or unset SUBAGENTS_HOST so that any worker runs the tasks", cfg.Host, cfg.Host, cfg.TaskQueue)})
	}
	return out
}

// checkWorkers: a worker polls each queue this folder's delegations use,
// for each kind of task they put there.
func checkWorkers(ctx context.Context, fe Frontend, queues []Queue, now time.Time) Result {
	var missing, fixes, seen []string
	polling := map[string][]Poller{}
	for _, q := range queues {
		var counts []string
		for _, kind := range q.Kinds {
			pollers, err := fe.Pollers(ctx, q.Name, kind)
			if err != nil {
				return fail(CheckWorkers, fmt.Sprintf("cannot describe task queue %s: %s", q.Name, oneLine(err.Error())), "the caller needs to describe task queues: check its credentials")
			}
			var live []Poller
			for _, p := range pollers {
				if now.Sub(p.LastAccess) <= pollerFresh {
					live = append(live, p)
				}
			}
			polling[q.Name+" "+kindWord(kind)] = live
			if len(live) == 0 {
				missing = append(missing, fmt.Sprintf("%s (%s tasks)", q.Name, kindWord(kind)))
				if !slices.Contains(fixes, q.Fix) {
					fixes = append(fixes, q.Fix)
				}
				continue
			}
			counts = append(counts, fmt.Sprintf("%d for %s tasks", len(live), kindWord(kind)))
		}
		if len(counts) > 0 {
			seen = append(seen, q.Name+": "+strings.Join(counts, ", "))
		}
	}
	if len(missing) > 0 {
		return fail(CheckWorkers, "no worker polls "+joinAnd(missing)+": this folder's delegations would wait there", strings.Join(fixes, "; ")).
			with("pollers", polling)
	}
	return ok(CheckWorkers, "workers poll every queue this folder's delegations use ("+strings.Join(seen, "; ")+")").with("pollers", polling)
}

func kindWord(k enumspb.TaskQueueType) string {
	if k == enumspb.TASK_QUEUE_TYPE_WORKFLOW {
		return "workflow"
	}
	return "activity"
}
