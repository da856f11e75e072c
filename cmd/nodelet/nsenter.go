//go:build cgo

package main

// The C half of libcontainer's container init (see init in main.go):
// when this binary is re-executed as a container's init, its
// constructor joins the namespaces before the Go runtime starts;
// otherwise it returns at once.
import _ "github.com/opencontainers/runc/libcontainer/nsenter"
