package activities

import (
	"context"
	"errors"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/durable-pi/subagents/api"
)

// Sessions are the activities that look at other workflows; they need a
// Temporal client.
type Sessions struct {
	Client client.Client
}

// LookupSessions describes each session's workflow: whether it exists, is
// open, and its state, agent and cwd from its search attributes.
func (s *Sessions) LookupSessions(ctx context.Context, ids []string) ([]api.SessionLookup, error) {
	out := make([]api.SessionLookup, len(ids))
	for i, id := range ids {
		out[i].SessionID = id
		desc, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		info := desc.GetWorkflowExecutionInfo()
		out[i].Found = true
		out[i].Open = info.GetCloseTime() == nil
		fields := info.GetSearchAttributes().GetIndexedFields()
		for name, dst := range map[string]*string{api.StatusKey.GetName(): &out[i].State, api.AgentKey.GetName(): &out[i].Agent, api.CwdKey.GetName(): &out[i].Cwd} {
			if p, ok := fields[name]; ok {
				_ = converter.GetDefaultDataConverter().FromPayload(p, dst)
			}
		}
		if p, ok := info.GetMemo().GetFields()["host"]; ok {
			_ = converter.GetDefaultDataConverter().FromPayload(p, &out[i].Host)
		}
	}
	return out, nil
}
