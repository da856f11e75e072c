package state

import (
	"reflect"
	"slices"
	"strings"
	"sync"
	"unique"
	"unsafe"
)

// A row's text is mostly what many rows hold alike: a user's jobs share
// their user, working directory, partition and account; a workflow's
// jobs their image, command and environment. A row decoded from the raft
// log or a snapshot holds its own copy of each, so a million jobs would
// hold a million copies of the same text. share points a row being
// stored at one copy of each such value instead: strings through Go's
// unique package (a value no row holds any more is collected), commands
// and environments through a bounded table of their own.
//
// Rows are never changed in place once stored (Store): a writer clones
// the row and sets a new value, so a shared command or environment is
// never written through. A value unique to its job (its name, request
// and session ids) is left as decoded: sharing it saves nothing.

// sharedMax bounds how many distinct commands and environments the
// table keeps; past it the table starts anew (rows keep what they hold).
const sharedMax = 4096

// sharedValues is the table of commands and environments rows share.
type sharedValues struct {
	mu   sync.Mutex
	cmds map[string][]string
	envs map[string]map[string]string
}

var shared = &sharedValues{}

// text is s's one copy.
func text(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// joinKey is an unambiguous key of parts (NUL never appears in a
// command's or an environment's text: the job file refuses it, and a
// value that has one merely shares nothing).
func joinKey(b *strings.Builder, parts ...string) {
	for _, p := range parts {
		b.WriteString(p)
		b.WriteByte(0)
	}
}

// command is cmd's one copy.
func (t *sharedValues) command(cmd []string) []string {
	if len(cmd) == 0 {
		return cmd
	}
	var b strings.Builder
	joinKey(&b, cmd...)
	k := b.String()
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.cmds[k]; ok {
		return c
	}
	if t.cmds == nil || len(t.cmds) >= sharedMax {
		t.cmds = map[string][]string{}
	}
	c := make([]string, len(cmd))
	for i, s := range cmd {
		c[i] = text(s)
	}
	t.cmds[k] = c
	return c
}

// env is env's one copy.
func (t *sharedValues) env(env map[string]string) map[string]string {
	if len(env) == 0 {
		return env
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		joinKey(&b, k, env[k])
	}
	k := b.String()
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.envs[k]; ok {
		return e
	}
	if t.envs == nil || len(t.envs) >= sharedMax {
		t.envs = map[string]map[string]string{}
	}
	e := make(map[string]string, len(env))
	for k, v := range env {
		e[text(k)] = text(v)
	}
	t.envs[k] = e
	return e
}

// share points j's text that other rows hold alike at one copy of it.
// It writes only what is not that copy already, so that sharing a row
// another store holds (a dump of it restored elsewhere) writes nothing.
func share(j *Job) {
	for _, p := range []*string{&j.User, &j.Cwd, &j.Partition, &j.Account, &j.Reservation, &j.QOS, &j.Reason,
		&j.Spec.Image, &j.Spec.Workdir, &j.Spec.Output, &j.Spec.Error, &j.Spec.Cluster.Mode} {
		setText(p)
	}
	setCommand(&j.Spec.Command)
	if e := shared.env(j.Spec.Env); !sameMap(e, j.Spec.Env) {
		j.Spec.Env = e
	}
	for i := range j.Containers {
		c := &j.Containers[i]
		for _, p := range []*string{&c.Host, &c.Role, &c.Image, &c.Node, &c.NodeAddr} {
			setText(p)
		}
		setCommand(&c.Command)
		if c.KernelID == j.SessionID && unsafe.StringData(c.KernelID) != unsafe.StringData(j.SessionID) {
			c.KernelID = j.SessionID // main1's kernel id is the session's: one copy
		}
	}
}

func setText(p *string) {
	if t := text(*p); unsafe.StringData(t) != unsafe.StringData(*p) {
		*p = t
	}
}

func setCommand(p *[]string) {
	if c := shared.command(*p); unsafe.SliceData(c) != unsafe.SliceData(*p) {
		*p = c
	}
}

// sameMap tells whether a and b are the same map (not merely equal).
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
