package process

import (
	"context"
	"errors"
	"testing"

	"github.com/troupe-hpc/troupe/nodelet/runtime"
	"github.com/troupe-hpc/troupe/nodelet/runtime/runtimetest"
)

func TestSuite(t *testing.T) {
	runtimetest.RunWith(t, New(), runtimetest.Options{NoCPUs: "the process driver runs on the node's CPUs, unconfined"})
}

func TestUnsupported(t *testing.T) {
	init := runtimetest.BuildInit(t)
	tests := []struct {
		name string
		mod  func(*runtime.Spec)
	}{
		{"RootfsImage", func(s *runtime.Spec) { s.Image = "/srv/images/x" }},
		{"DataMount", func(s *runtime.Spec) {
			s.Mounts = []runtime.Mount{{Source: "/srv", Target: "/data"}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, _ := runtimetest.NewSpec(t, init, "true")
			tc.mod(&spec)
			if _, err := New().Start(context.Background(), spec); !errors.Is(err, runtime.ErrUnsupported) {
				t.Errorf("start = %v, want ErrUnsupported", err)
			}
		})
	}
}
