package api

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// The search attributes every delegation and session carries, for the
// Temporal UI, `subagents list` and `subagents setup`; all keywords: filter
// the UI's list with e.g. SubagentStatus="running" or SubagentAgent="scout".
var (
	AgentKey         = temporal.NewSearchAttributeKeyKeyword("SubagentAgent")
	StatusKey        = temporal.NewSearchAttributeKeyKeyword("SubagentStatus")
	CwdKey           = temporal.NewSearchAttributeKeyKeyword("SubagentCwd")
	ParentSessionKey = temporal.NewSearchAttributeKeyKeyword("SubagentParentSession")
	// DelegationKey marks a session that is its own one-task delegation
	// (SessionInput.Delegation): DelegationOpen until its first turn has
	// ended and, with Deliver, its parent has acknowledged it; then
	// DelegationClosed. `list --kind delegation --open` finds it by it.
	DelegationKey = temporal.NewSearchAttributeKeyKeyword("SubagentDelegation")
	// SendUntilKey is when a sticky session whose run has closed stops
	// taking a send that reopens it (version 5: its last turn's end plus
	// its idle TTL): `list --open` finds the sessions that still take one
	// by it, with those whose run is running.
	SendUntilKey = temporal.NewSearchAttributeKeyTime("SubagentSendUntil")
)

// Values of DelegationKey.
const (
	DelegationOpen   = "open"
	DelegationClosed = "closed"
)

// SessionAttributes are the attributes a session starts with: its agent,
// folder, state and parent pi session, then more.
func SessionAttributes(agent, cwd string, state State, parentSession string, more ...temporal.SearchAttributeUpdate) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(append([]temporal.SearchAttributeUpdate{
		AgentKey.ValueSet(agent), CwdKey.ValueSet(cwd), StatusKey.ValueSet(string(state)), ParentSessionKey.ValueSet(parentSession),
	}, more...)...)
}

// SearchAttributes are the attributes a namespace needs, by name and type:
// what `subagents setup` and the dev server register.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	out := map[string]enumspb.IndexedValueType{}
	for _, k := range []temporal.SearchAttributeKeyKeyword{AgentKey, StatusKey, CwdKey, ParentSessionKey, DelegationKey} {
		out[k.GetName()] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	out[SendUntilKey.GetName()] = enumspb.INDEXED_VALUE_TYPE_DATETIME
	return out
}
