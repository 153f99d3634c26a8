package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/durable-pi/subagents/api"
	"github.com/durable-pi/subagents/connection"
	"github.com/durable-pi/subagents/internal/errcode"
)

// DefaultRetention is how long a namespace `subagents setup` creates keeps
// closed workflows: as `subagents dev` does, so that a parent pi resumed
// within a month still receives what it started.
const DefaultRetention = 30 * 24 * time.Hour

// setupSettle bounds the wait after registering search attributes: the
// frontend caches a namespace's attributes for a few seconds, and a start
// that uses them fails until it refreshes.
const setupSettle = time.Minute

// Check says what the namespace lacks for this project's workflows, each
// with the command that fixes it: the namespace itself, its search
// attributes, or the right to see them.
func Check(ctx context.Context, c client.Client, namespace string) error {
	fix := fmt.Sprintf("run `subagents setup --namespace %s` (or `subagents worker --setup`) with the same connection settings", namespace)
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace}); err != nil {
		return checkError(err, fmt.Sprintf("namespace %q does not exist", namespace), fix)
	}
	missing, err := missingAttributes(ctx, c, namespace)
	if err != nil {
		return checkError(err, "", fix)
	}
	if len(missing) > 0 {
		return errcode.Errorf(errcode.InvalidInput, "namespace %q lacks the search attributes %v that delegations and `list` use: %s", namespace, missing, fix)
	}
	return nil
}

func checkError(err error, notFound, fix string) error {
	var nf *serviceerror.NamespaceNotFound
	var nf2 *serviceerror.NotFound
	var denied *serviceerror.PermissionDenied
	switch {
	case notFound != "" && (errors.As(err, &nf) || errors.As(err, &nf2)):
		return errcode.Errorf(errcode.InvalidInput, "%s: %s", notFound, fix)
	case errors.As(err, &denied):
		return errcode.Wrap(errcode.PermissionDenied, err, "Temporal refused this identity: "+err.Error()+
			"; the worker needs to read the namespace and its search attributes (and setup to create them): check its API key or client certificate")
	}
	return connection.Unavailable("the configured Temporal", err)
}

func missingAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, err
	}
	var missing []string
	for name := range api.SearchAttributes() {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return missing, nil
}

// Setup makes namespace ready, idempotently: it creates it (keeping closed
// workflows for retention) when it is missing, registers the search
// attributes that are missing, and waits until a query that uses them is
// served. It reports each step on out.
func Setup(ctx context.Context, c client.Client, namespace string, retention time.Duration, out io.Writer) error {
	_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	var nf *serviceerror.NamespaceNotFound
	var nf2 *serviceerror.NotFound
	switch {
	case err == nil:
		_, _ = fmt.Fprintf(out, "namespace %q exists\n", namespace)
	case errors.As(err, &nf) || errors.As(err, &nf2):
		_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace: namespace, WorkflowExecutionRetentionPeriod: durationpb.New(retention),
			Description: "durable subagents for pi",
		})
		var exists *serviceerror.NamespaceAlreadyExists
		if err != nil && !errors.As(err, &exists) {
			return checkError(err, "", "")
		}
		_, _ = fmt.Fprintf(out, "namespace %q created (retention %s)\n", namespace, retention)
	default:
		return checkError(err, "", "")
	}
	// A namespace just created takes a moment to reach every service.
	var missing []string
	if err := retry(ctx, func() error { var err error; missing, err = missingAttributes(ctx, c, namespace); return err }); err != nil {
		return checkError(err, "", "")
	}
	if len(missing) > 0 {
		add := map[string]enumspb.IndexedValueType{}
		for _, name := range missing {
			add[name] = api.SearchAttributes()[name]
		}
		if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: add}); err != nil {
			var exists *serviceerror.AlreadyExists
			if !errors.As(err, &exists) {
				return checkError(err, "", "")
			}
		}
		_, _ = fmt.Fprintf(out, "search attributes %v registered\n", missing)
	} else {
		_, _ = fmt.Fprintln(out, "search attributes registered already")
	}
	// Served once a query that names every one of them is answered.
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range api.SearchAttributes() {
			if !yield(n) {
				return
			}
		}
	})
	query := ""
	for i, n := range names {
		if i > 0 {
			query += " AND "
		}
		// A value of the attribute's type: a SQL visibility store refuses
		// a datetime it cannot parse ("unable to parse datetime").
		probe := "'setup-probe'"
		if api.SearchAttributes()[n] == enumspb.INDEXED_VALUE_TYPE_DATETIME {
			probe = "'2000-01-01T00:00:00Z'"
		}
		query += n + " = " + probe
	}
	if err := retry(ctx, func() error {
		_, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: query, PageSize: 1})
		return err
	}); err != nil {
		return checkError(err, "", "")
	}
	_, _ = fmt.Fprintf(out, "namespace %q is ready\n", namespace)
	return nil
}

// retry calls fn until it succeeds or setupSettle passes.
func retry(ctx context.Context, fn func() error) error {
	ctx, cancel := context.WithTimeout(ctx, setupSettle)
	defer cancel()
	for {
		err := fn()
		if err == nil {
			return nil
		}
		var denied *serviceerror.PermissionDenied
		if errors.As(err, &denied) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
