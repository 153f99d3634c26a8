package devserver

// The embedded server's dynamic configuration: fixed values, but for the
// search attribute cache, read through to the database only while the
// attributes this release registers at start may be new to a service.

import (
	"sync/atomic"
	"time"

	"go.temporal.io/server/common/dynamicconfig"
)

// settleMargin is how long the search attribute cache still reads through
// after registerSearchAttributes returned. On SQL visibility a custom
// attribute is a mapping in its namespace, which each service's namespace
// registry reloads every 2 s (system.namespaceCacheRefreshInterval); until
// then only the read-through sees it. Five seconds outlast that reload,
// and any lookup that began before the registration ended.
const settleMargin = 5 * time.Second

// dynamicConfig serves the static values, and
// ForceSearchAttributesCacheRefreshOnRead true until settle: while it is
// true, every search attribute lookup (each visibility write, each
// workflow start) reads the cluster metadata from the one SQLite
// connection every write waits for; 4% of a one-task delegation's CPU by
// the load bench's profile. Without it, a service whose cache was filled
// before registerSearchAttributes added an attribute would refuse that
// attribute for up to a minute (the server's cache interval). The
// Collection asks a client that does not notify for each value on every
// read, so the change takes effect at once.
type dynamicConfig struct {
	static dynamicconfig.StaticClient
	// refreshUntil is a time in Unix nanoseconds; 0: not settled yet.
	refreshUntil atomic.Int64
}

var forceRefreshKey = dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key()

func (d *dynamicConfig) GetValue(key dynamicconfig.Key) []dynamicconfig.ConstrainedValue {
	if key == forceRefreshKey {
		until := d.refreshUntil.Load()
		return []dynamicconfig.ConstrainedValue{{Value: until == 0 || time.Now().UnixNano() < until}}
	}
	return d.static.GetValue(key)
}

// settle ends the cache's read-through settleMargin from now: every
// attribute this release uses is registered.
func (d *dynamicConfig) settle() {
	d.refreshUntil.Store(time.Now().Add(settleMargin).UnixNano())
}
