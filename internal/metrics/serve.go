// Package metrics serves a Prometheus registry on its own plain-HTTP
// listener, as schedd and nodelet do with --metrics-addr.
//
// It imports no troupe package.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/sys/unix"
)

// Serve serves h at /metrics on addr until ctx ends. It fails only when
// addr cannot be listened on; later errors go to warn.
func Serve(ctx context.Context, addr string, h http.Handler, warn func(msg string, args ...any)) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			warn("metrics server", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr(), nil
}

// DirSpace is the space available to unprivileged users on dir's file
// system and that file system's size, in bytes, for a daemon's gauges of
// its data directory.
func DirSpace(dir string) (avail, size float64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return float64(st.Bavail) * float64(st.Bsize), float64(st.Blocks) * float64(st.Bsize), nil
}
