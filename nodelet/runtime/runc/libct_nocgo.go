//go:build !cgo

package runc

import (
	"context"
	"fmt"
	"os"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
)

// Without cgo there is no libcontainer: NewLibcontainer and
// ProbeLibcontainer say so, and no Runtime is ever in the in-process
// mode, so that the methods below are never reached.

// LibcontainerInit does nothing in a binary built without cgo.
func LibcontainerInit() {}

func libctUsable() error { return fmt.Errorf("%s: %w", Libcontainer, ErrNoCgo) }

// ProbeLibcontainer says why the in-process mode cannot run: this
// binary was built without cgo.
func ProbeLibcontainer(ctx context.Context, init, dir string) error { return libctUsable() }

func (r *Runtime) launchLibct(context.Context, runtime.Spec, *specs.Spec, []*os.File) (int, func(), error) {
	return 0, nil, libctUsable()
}

func (r *Runtime) libctState(string) (state, error) { return state{}, libctUsable() }

func (r *Runtime) libctDelete(context.Context, string) error { return libctUsable() }

func (r *Runtime) libctSignal(string, syscall.Signal) error { return libctUsable() }

func (r *Runtime) libctFreeze(string, bool) error { return libctUsable() }
