// Package doccheck reads the project's markdown (README.md, docs/*.md) the
// way GitHub renders it, so that a test can hold the docs to what the
// repository has: every relative link reaches a file and a heading, every
// `make` target a user is told to run exists, and the README keeps a new
// user's first delegation on its first screen. It reads files only: no
// network, no server.
package doccheck
