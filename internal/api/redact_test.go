package api_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
)

// How each field of a job shows to someone who does not own it. A field
// added to one of these types must be put here (the test fails until it
// is) and, if shown, copied by api.Job.Public.
type class int

const (
	shown    class = iota + 1 // copied as is
	withheld                  // always empty
	nested                    // a struct (or slice of) classified field by field below
	filtered                  // shown only when harmless (Reason: the scheduler's own)
)

var classes = map[reflect.Type]map[string]class{
	reflect.TypeFor[api.Job](): {
		"ID": shown, "Name": shown, "User": shown, "UID": shown, "Partition": shown, "Account": shown,
		"Reservation": shown, "Walltime": shown, "Interactive": shown, "State": shown, "Reason": filtered, "ExitCode": shown,
		"Submitted": shown, "Started": shown, "Ended": shown, "ModifyIndex": shown,
		"EstimatedStart": shown, "Priority": shown, "PriorityFactors": shown, "QueuePosition": shown,
		"QueueLength": shown, "CPUTime": shown, "MemPeak": shown,
		// Licenses, as resources, are public: who holds the solver's seats.
		"Licenses": shown,
		// An array's element counts and an element's place in it:
		// what bqueue folds arrays with.
		"Array": shown, "ArrayID": shown, "ArrayIndex": shown, "ArraySpan": shown,
		"Spec": nested, "Containers": nested,
		// Handles another user could aim at (issue 19: kernel ids made
		// the attach socket cross-user), paths and the user's data.
		"SessionID": withheld, "RequestID": withheld, "Network": withheld, "GID": withheld, "Cwd": withheld,
		"KillWanted": withheld, "Cancelled": withheld, "KillDone": withheld, "TimedOut": withheld, "Requeues": withheld,
		"QOS": shown, "Preempt": shown, "Preempted": shown,
		"LastRequeue": withheld, "ExcludeNodes": withheld, "Runs": withheld, "DependsOn": withheld, "Signals": withheld, "Mailed": withheld,
		"Suspended": shown, "SuspendedFor": shown, "Warned": withheld,
	},
	reflect.TypeFor[api.JobSpec](): {
		"Name": shown, "Partition": shown, "Account": shown, "QOS": shown, "Walltime": shown, "Priority": shown,
		"Requeue": shown, "Cluster": shown, "Resources": shown, "Array": shown, "Reservation": shown, "Licenses": shown,
		"Image": withheld, "Command": withheld, "Workdir": withheld, "Env": withheld, "Mounts": withheld,
		"Output": withheld, "Error": withheld, "Roles": withheld, "SSH": withheld,
		"Services": withheld, "Mail": withheld, "Signal": withheld,
	},
	reflect.TypeFor[api.Container](): {
		"ContainerSpec": nested, "CPUMilli": shown, "Node": shown, "NodeAddr": shown, "State": shown, "ExitCode": shown, "CPUTime": shown, "MemPeak": shown, "Ended": shown,
		"KernelID": withheld, "Addr": withheld, "Reach": withheld, "Message": withheld, "GPUs": withheld,
	},
	reflect.TypeFor[api.ContainerSpec](): {
		"Host": shown, "Role": shown, "Idx": shown, "Rank": shown, "Resources": shown,
		"Image": withheld, "Command": withheld,
	},
}

// TestPublicFieldsClassified fails when a field of a job's types is in
// neither list: a new field must be decided on, not leak by default.
func TestPublicFieldsClassified(t *testing.T) {
	for typ, fields := range classes {
		var have []string
		for f := range typ.Fields() {
			have = append(have, f.Name)
			if _, ok := fields[f.Name]; !ok {
				t.Errorf("%s.%s is not classified: add it to classes in redact_test.go (shown or withheld) and, if shown, to Job.Public", typ, f.Name)
			}
		}
		for name := range fields {
			if !slices.Contains(have, name) {
				t.Errorf("classes lists %s.%s, which %s does not have", typ, name, typ)
			}
		}
	}
}

// TestPublicShowsOnlyAllowed fills every field of a job and checks that
// its public view holds exactly the shown fields, unchanged, and nothing
// of the withheld ones.
func TestPublicShowsOnlyAllowed(t *testing.T) {
	var j api.Job
	fill(reflect.ValueOf(&j).Elem())
	j.Reason = "/home/alice/secret.sh: exit 3"
	p := j.Public()
	check(t, "Job", reflect.ValueOf(j), reflect.ValueOf(p))
	if p.Reason != "" {
		t.Errorf("Reason %q shown", p.Reason)
	}
	j.Reason = api.ReasonResources
	if p := j.Public(); p.Reason != api.ReasonResources {
		t.Errorf("pending reason %q withheld", api.ReasonResources)
	}
	// Nothing of j is shared with its view.
	p.Containers[0].Host, p.PriorityFactors.Age = "changed", -1
	if j.Containers[0].Host == "changed" || j.PriorityFactors.Age == -1 {
		t.Error("the public view shares memory with the job")
	}
}

func check(t *testing.T, path string, full, pub reflect.Value) {
	t.Helper()
	switch full.Kind() {
	case reflect.Slice:
		if full.Len() != pub.Len() {
			t.Errorf("%s: %d elements, want %d", path, pub.Len(), full.Len())
			return
		}
		for i := range full.Len() {
			check(t, path+"[]", full.Index(i), pub.Index(i))
		}
		return
	case reflect.Struct:
	default:
		t.Fatalf("%s: nested %s", path, full.Kind())
	}
	fields := classes[full.Type()]
	for i := range full.NumField() {
		f := full.Type().Field(i)
		name := path + "." + f.Name
		switch fields[f.Name] {
		case shown:
			if !reflect.DeepEqual(full.Field(i).Interface(), pub.Field(i).Interface()) {
				t.Errorf("%s is shown but Public changed it: %v → %v", name, full.Field(i), pub.Field(i))
			}
		case withheld:
			if !pub.Field(i).IsZero() {
				t.Errorf("%s is withheld but shows %v", name, pub.Field(i))
			}
		case nested:
			check(t, name, full.Field(i), pub.Field(i))
		}
	}
}

// fill sets every field under v to a non-zero value.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x-" + strings.ToLower(v.Type().Name()))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}
