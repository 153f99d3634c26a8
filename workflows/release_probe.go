//go:build upgradeprobe

package workflows

// A build with this tag is release N+1 of the upgrade test ([install]):
// its workflow code runs upgradeProbe after every turn.
func init() { releaseStep = upgradeProbe }
