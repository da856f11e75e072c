package api

import "testing"

// TestContainerMilli: a container's CPU is the millicores schedd placed
// it with; only an assignment of a schedd that sends none falls back to
// the job file's cores, rounded as admission rounds them.
func TestContainerMilli(t *testing.T) {
	for _, c := range []struct {
		milli int64
		cpu   float64
		want  int64
	}{{500, 0.5, 500}, {1, 0.0004, 1}, {0, 0.5, 500}, {0, 0.0004, 0}, {0, 1.9996, 2000}, {0, 0, 0}} {
		ct := Container{ContainerSpec: ContainerSpec{Resources: JobResources{CPU: c.cpu}}, CPUMilli: c.milli}
		if got := ct.Milli(); got != c.want {
			t.Errorf("Milli of cpu_milli %d, cpu %g = %d, want %d", c.milli, c.cpu, got, c.want)
		}
	}
}
