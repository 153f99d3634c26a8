package connection

import "path/filepath"

// SocketName is the local service's Unix socket, in its data dir: one data
// dir, one service, one address a pi extension can find without settings.
const SocketName = "subagents.sock"

// SocketPath is where the local service of dataDir answers.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, SocketName) }
