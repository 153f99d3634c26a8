// Package api is the vocabulary the rest of the project shares: what a
// delegation, a session and a child run take and return, the names of the
// workflows, activities, signals, queries and updates, the limits and their
// defaults, and the search attribute keys. Every type here is part of the
// wire contract (workflow inputs, results and recorded histories): field
// names and JSON tags never change spelling.
//
// It imports nothing of this project but its error codes
// (internal/errcode), so that workflows, activities, profiles, the client
// and the worker can all speak it without importing each other.
package api
