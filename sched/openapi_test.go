package sched

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/troupe-hpc/troupe/internal/api"
	"github.com/troupe-hpc/troupe/internal/arrayindex"
	"github.com/troupe-hpc/troupe/sched/httpapi"
	"github.com/troupe-hpc/troupe/sched/openapi"
)

// The OpenAPI document (openapi/openapi.json) must not drift from the
// code: these tests hold it to the route table (sched/httpapi's routes), to the wire
// types' JSON fields (internal/api, jobspec) and to what the real
// handlers answer.

// openAPISchemas maps each schema of the document's components to the
// Go type it describes. A schema without a type here, or a type here
// without a schema, fails TestOpenAPISchemas.
var openAPISchemas = map[string]reflect.Type{
	"Accounting":          reflect.TypeFor[api.Accounting](),
	"AccountingRow":       reflect.TypeFor[api.AccountingRow](),
	"AssignedJob":         reflect.TypeFor[api.AssignedJob](),
	"Assignment":          reflect.TypeFor[api.Assignment](),
	"Assignments":         reflect.TypeFor[api.Assignments](),
	"AttachRequest":       reflect.TypeFor[api.AttachRequest](),
	"AttachRequests":      reflect.TypeFor[api.AttachRequests](),
	"Cluster":             reflect.TypeFor[api.Cluster](),
	"Condition":           reflect.TypeFor[api.Condition](),
	"Container":           reflect.TypeFor[api.Container](),
	"ContainerReport":     reflect.TypeFor[api.ContainerReport](),
	"ContainerState":      reflect.TypeFor[api.ContainerState](),
	"ContainerUpdate":     reflect.TypeFor[api.ContainerUpdate](),
	"DepKind":             reflect.TypeFor[api.DepKind](),
	"DepStatus":           reflect.TypeFor[api.DepStatus](),
	"Dependency":          reflect.TypeFor[api.Dependency](),
	"Empty":               reflect.TypeFor[struct{}](),
	"Error":               reflect.TypeFor[api.Error](),
	"FairShareList":       reflect.TypeFor[api.FairShareList](),
	"FairShareRow":        reflect.TypeFor[api.FairShareRow](),
	"GPUShare":            reflect.TypeFor[api.GPUShare](),
	"History":             reflect.TypeFor[api.History](),
	"HistoryContainer":    reflect.TypeFor[api.HistoryContainer](),
	"JobRun":              reflect.TypeFor[api.JobRun](),
	"Preemption":          reflect.TypeFor[api.Preemption](),
	"HistoryJob":          reflect.TypeFor[api.HistoryJob](),
	"Job":                 reflect.TypeFor[api.Job](),
	"JobEvent":            reflect.TypeFor[api.JobEvent](),
	"JobList":             reflect.TypeFor[api.JobList](),
	"JobSpec":             reflect.TypeFor[api.JobSpec](),
	"License":             reflect.TypeFor[api.License](),
	"JobState":            reflect.TypeFor[api.JobState](),
	"Mount":               reflect.TypeFor[api.Mount](),
	"Mail":                reflect.TypeFor[api.Mail](),
	"Warning":             reflect.TypeFor[api.Warning](),
	"Suspension":          reflect.TypeFor[api.Suspension](),
	"NodeGPU":             reflect.TypeFor[api.NodeGPU](),
	"SubmitCheck":         reflect.TypeFor[api.SubmitCheck](),
	"SourcePos":           reflect.TypeFor[api.SourcePos](),
	"Problem":             reflect.TypeFor[api.Problem](),
	"SubmitBatch":         reflect.TypeFor[api.SubmitBatch](),
	"SubmitBatchResponse": reflect.TypeFor[api.SubmitBatchResponse](),
	"ArraySpec":           reflect.TypeFor[api.ArraySpec](),
	"IndexRange":          reflect.TypeFor[arrayindex.IndexRange](),
	"Array":               reflect.TypeFor[api.Array](),
	"ArraySpan":           reflect.TypeFor[api.ArraySpan](),
	"Service":             reflect.TypeFor[api.Service](),
	"Network":             reflect.TypeFor[api.Network](),
	"Node":                reflect.TypeFor[api.Node](),
	"NodeDrain":           reflect.TypeFor[api.NodeDrain](),
	"NodeHeartbeat":       reflect.TypeFor[api.NodeHeartbeat](),
	"NodeHealth":          reflect.TypeFor[api.NodeHealth](),
	"NodeLease":           reflect.TypeFor[api.NodeLease](),
	"NodeList":            reflect.TypeFor[api.NodeList](),
	"NodeRegister":        reflect.TypeFor[api.NodeRegister](),
	"NodeRegistered":      reflect.TypeFor[api.NodeRegistered](),
	"NodeState":           reflect.TypeFor[api.NodeState](),
	"PartitionInfo":       reflect.TypeFor[api.PartitionInfo](),
	"PartitionList":       reflect.TypeFor[api.PartitionList](),
	"PriorityFactors":     reflect.TypeFor[api.PriorityFactors](),
	"RaftJoin":            reflect.TypeFor[api.RaftJoin](),
	"Reservation":         reflect.TypeFor[api.Reservation](),
	"ReservationList":     reflect.TypeFor[api.ReservationList](),
	"ReservationRequest":  reflect.TypeFor[api.ReservationRequest](),
	"ReconfigResponse":    reflect.TypeFor[api.ReconfigResponse](),
	"Resources":           reflect.TypeFor[api.Resources](),
	"Role":                reflect.TypeFor[api.Role](),
	"SignalJob":           reflect.TypeFor[api.SignalJob](),
	"SignalRequest":       reflect.TypeFor[api.SignalRequest](),
	"SnapshotRestored":    reflect.TypeFor[api.SnapshotRestored](),
	"SnapshotHistory":     reflect.TypeFor[api.SnapshotHistory](),
	"SpecResources":       reflect.TypeFor[api.JobResources](),
	"SubmitRequest":       reflect.TypeFor[api.SubmitRequest](),
	"SubmitResponse":      reflect.TypeFor[api.SubmitResponse](),
	"Token":               reflect.TypeFor[api.Token](),
	"TokenCreate":         reflect.TypeFor[api.TokenCreate](),
	"TokenCreated":        reflect.TypeFor[api.TokenCreated](),
	"TokenList":           reflect.TypeFor[api.TokenList](),
	"UserLimits":          reflect.TypeFor[api.UserLimits](),
}

// openAPIEnums are the values of the string types the document lists
// as enums.
var openAPIEnums = map[string][]string{
	"JobState": func() []string {
		var s []string
		for _, st := range httpapi.QueryStates {
			s = append(s, string(st))
		}
		return s
	}(),
	"ContainerState": {string(api.ContainerPending), string(api.ContainerAssigned), string(api.ContainerPreparing),
		string(api.ContainerRunning), string(api.ContainerExited), string(api.ContainerFailed), string(api.ContainerKilled), string(api.ContainerOOM)},
	"NodeState": {string(api.NodeUp), string(api.NodeDown), string(api.NodeDraining), string(api.NodeDrained), string(api.NodeMaint), string(api.NodeReserved)},
	"DepKind":   {string(api.DepDone), string(api.DepExit), string(api.DepEnded), string(api.DepStarted)},
	"DepStatus": {string(api.DepWaiting), string(api.DepSatisfied), string(api.DepNever)},
}

// schema is the part of an OpenAPI schema object these tests read.
type schema struct {
	Ref        string             `json:"$ref"`
	AllOf      []*schema          `json:"allOf"`
	Type       string             `json:"type"`
	Format     string             `json:"format"`
	Enum       []string           `json:"enum"`
	Properties map[string]*schema `json:"properties"`
	Required   []string           `json:"required"`
	Items      *schema            `json:"items"`
	// AdditionalProperties is a schema (a map's values) or false.
	AdditionalProperties json.RawMessage `json:"additionalProperties"`
}

type mediaType struct {
	Schema *schema `json:"schema"`
}

type ref struct {
	Ref string `json:"$ref"`
}

type operation struct {
	OperationID string `json:"operationId"`
	Parameters  []struct {
		ref
		Name string `json:"name"`
		In   string `json:"in"`
	} `json:"parameters"`
	RequestBody *struct {
		Content map[string]mediaType `json:"content"`
	} `json:"requestBody"`
	Responses map[string]struct {
		ref
		Content map[string]mediaType `json:"content"`
	} `json:"responses"`
}

type document struct {
	OpenAPI    string                          `json:"openapi"`
	Paths      map[string]map[string]operation `json:"paths"`
	Components struct {
		Schemas    map[string]*schema `json:"schemas"`
		Parameters map[string]struct {
			Name string `json:"name"`
			In   string `json:"in"`
		} `json:"parameters"`
		Responses map[string]struct {
			Content map[string]mediaType `json:"content"`
		} `json:"responses"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) *document {
	t.Helper()
	var d document
	if err := json.Unmarshal(openapi.JSON, &d); err != nil {
		t.Fatalf("openapi/openapi.json: %v", err)
	}
	if !strings.HasPrefix(d.OpenAPI, "3.") {
		t.Fatalf("openapi/openapi.json: openapi %q, want 3.x", d.OpenAPI)
	}
	return &d
}

// TestOpenAPIRoutes: the document names exactly the routes of the route
// table, each of which the real mux routes to its own pattern, with its
// path parameters declared.
func TestOpenAPIRoutes(t *testing.T) {
	srv, _ := cluster(t)
	d := loadOpenAPI(t)
	var served, documented []string
	for _, rt := range httpapi.Routes() {
		served = append(served, rt.Method+" "+rt.Path)
	}
	for path, ops := range d.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(served)
	sort.Strings(documented)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("schedd serves %s, which openapi/openapi.json does not document", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("openapi/openapi.json documents %s, which schedd does not serve (routes in sched/httpapi/routes.go)", r)
		}
	}

	mux := httpapi.New(srv, nil).Mux()
	wildcard := regexp.MustCompile(`\{([a-z]+)\}`)
	for path, ops := range d.Paths {
		want := wildcard.FindAllStringSubmatch(path, -1)
		concrete := wildcard.ReplaceAllString(path, "7")
		for method, op := range ops {
			m := strings.ToUpper(method)
			r := httptest.NewRequest(m, concrete, nil)
			if _, pattern := mux.Handler(r); pattern != m+" "+path {
				t.Errorf("%s %s: the mux routes it to %q, want %q", m, concrete, pattern, m+" "+path)
			}
			var inPath []string
			for _, p := range op.Parameters {
				name, in := p.Name, p.In
				if p.Ref != "" {
					c := d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
					if c.Name == "" {
						t.Errorf("%s %s: parameter %s does not resolve", m, path, p.Ref)
					}
					name, in = c.Name, c.In
				}
				if in == "path" {
					inPath = append(inPath, name)
				}
			}
			for _, w := range want {
				if !slices.Contains(inPath, w[1]) {
					t.Errorf("%s %s: path parameter %s is not declared", m, path, w[1])
				}
			}
			if len(inPath) != len(want) {
				t.Errorf("%s %s: declares path parameters %v, the path has %d", m, path, inPath, len(want))
			}
			if op.OperationID == "" {
				t.Errorf("%s %s: no operationId", m, path)
			}
		}
	}
	// And the mux is not routing everything: an unknown path has no route.
	if _, pattern := mux.Handler(httptest.NewRequest("GET", "/v1/nope", nil)); pattern != "" {
		t.Errorf("GET /v1/nope routed to %q", pattern)
	}
}

// TestOpenAPISchemas: each schema has exactly the JSON fields of its Go
// type, each of the JSON type the field encodes as, and every $ref in
// the document resolves.
func TestOpenAPISchemas(t *testing.T) {
	d := loadOpenAPI(t)
	for name := range d.Components.Schemas {
		if _, ok := openAPISchemas[name]; !ok {
			t.Errorf("schema %s: no Go type in openAPISchemas", name)
		}
	}
	for name, typ := range openAPISchemas {
		s, ok := d.Components.Schemas[name]
		if !ok {
			t.Errorf("%s (%s): no schema %s in openapi/openapi.json", typ, name, name)
			continue
		}
		if typ.Kind() == reflect.String {
			if s.Type != "string" {
				t.Errorf("schema %s: type %q, want string", name, s.Type)
			}
			if want, ok := openAPIEnums[name]; !ok || !slices.Equal(s.Enum, want) {
				t.Errorf("schema %s: enum %v, want %v", name, s.Enum, want)
			}
			continue
		}
		checkStruct(t, name, s, typ)
	}

	var refs []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && k == "$ref" {
					refs = append(refs, s)
					if len(v) > 1 {
						// OpenAPI 3.0 ignores a $ref's siblings.
						t.Errorf("$ref %s has siblings %v, which readers ignore: wrap it in allOf", s, v)
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	var raw any
	if err := json.Unmarshal(openapi.JSON, &raw); err != nil {
		t.Fatal(err)
	}
	walk(raw)
	for _, r := range refs {
		if resolve(raw, r) == nil {
			t.Errorf("$ref %s does not resolve", r)
		}
	}
	if len(refs) < 50 {
		t.Errorf("only %d $refs found; the walk is broken", len(refs))
	}
}

// resolve looks up a local JSON pointer ("#/components/schemas/Job").
func resolve(doc any, ptr string) any {
	if !strings.HasPrefix(ptr, "#/") {
		return nil
	}
	v := doc
	for _, part := range strings.Split(ptr[2:], "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		if v, ok = m[part]; !ok {
			return nil
		}
	}
	return v
}

// jsonFields lists t's JSON fields as encoding/json writes them, with
// embedded structs' fields promoted, and whether each may be left out.
func jsonFields(t reflect.Type) (map[string]reflect.StructField, map[string]bool) {
	fields, optional := map[string]reflect.StructField{}, map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ef, eo := jsonFields(f.Type)
			for k, v := range ef {
				fields[k], optional[k] = v, eo[k]
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f
		optional[name] = strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
	}
	return fields, optional
}

func checkStruct(t *testing.T, name string, s *schema, typ reflect.Type) {
	t.Helper()
	if s.Type != "object" {
		t.Errorf("schema %s: type %q, want object", name, s.Type)
	}
	fields, optional := jsonFields(typ)
	for prop := range s.Properties {
		if _, ok := fields[prop]; !ok {
			t.Errorf("schema %s: property %q is no JSON field of %s", name, prop, typ)
		}
	}
	for field, f := range fields {
		p, ok := s.Properties[field]
		if !ok {
			t.Errorf("schema %s: %s.%s (json %q) is missing from its properties", name, typ, f.Name, field)
			continue
		}
		if err := matches(p, f.Type); err != nil {
			t.Errorf("schema %s: property %q (%s.%s, %s): %v", name, field, typ, f.Name, f.Type, err)
		}
	}
	for _, r := range s.Required {
		if _, ok := fields[r]; !ok {
			t.Errorf("schema %s: required %q is no field", name, r)
		} else if optional[r] {
			t.Errorf("schema %s: required %q is omitempty in %s: answers may leave it out", name, r, typ)
		}
	}
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	timeType     = reflect.TypeFor[time.Time]()
)

// matches checks that property schema p describes what a Go value of
// type t encodes as.
func matches(p *schema, t reflect.Type) error {
	if len(p.AllOf) == 1 {
		p = p.AllOf[0]
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if p.Ref != "" {
		name := strings.TrimPrefix(p.Ref, "#/components/schemas/")
		if want := openAPISchemas[name]; want != t {
			return fmt.Errorf("refers to %s (%v), the field is %s", name, want, t)
		}
		return nil
	}
	for name, typ := range openAPISchemas {
		if typ == t && t.Name() != "" {
			return fmt.Errorf("is inline; refer to #/components/schemas/%s", name)
		}
	}
	want := ""
	switch {
	case t == timeType:
		if p.Format != "date-time" {
			return fmt.Errorf("format %q, want date-time", p.Format)
		}
		want = "string"
	case t == durationType:
		want = "integer" // nanoseconds
	default:
		switch t.Kind() {
		case reflect.String:
			want = "string"
		case reflect.Bool:
			want = "boolean"
		case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint32, reflect.Uint64:
			want = "integer"
		case reflect.Float64:
			want = "number"
		case reflect.Slice:
			if p.Type != "array" || p.Items == nil {
				return fmt.Errorf("type %q, want array with items", p.Type)
			}
			return matches(p.Items, t.Elem())
		case reflect.Map:
			var vs schema
			if p.Type != "object" || json.Unmarshal(p.AdditionalProperties, &vs) != nil {
				return fmt.Errorf("type %q, want object with additionalProperties", p.Type)
			}
			return matches(&vs, t.Elem())
		default:
			return fmt.Errorf("no JSON type known for %s", t)
		}
	}
	if p.Type != want {
		return fmt.Errorf("type %q, want %s", p.Type, want)
	}
	return nil
}

// TestOpenAPIAnswers sends requests to the real handlers and checks
// each answer (and its status) against the response the document gives
// for that operation: a body with a field the schema lacks, without a
// required one, or of another type fails.
func TestOpenAPIAnswers(t *testing.T) {
	srv, c := cluster(t)
	register(t, c, "n1", 4)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	d := loadOpenAPI(t)
	var raw any
	if err := json.Unmarshal(openapi.JSON, &raw); err != nil {
		t.Fatal(err)
	}

	call := func(method, route, path, body string) (int, any) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, hs.URL+path, rd)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		op, ok := d.Paths[route][strings.ToLower(method)]
		if !ok {
			t.Fatalf("%s %s is not documented", method, route)
		}
		code := fmt.Sprint(res.StatusCode)
		resp, ok := op.Responses[code]
		if !ok {
			t.Errorf("%s %s answered %s, which the document does not list: %s", method, path, code, b)
			return res.StatusCode, nil
		}
		content := resp.Content
		if resp.Ref != "" {
			content = d.Components.Responses[strings.TrimPrefix(resp.Ref, "#/components/responses/")].Content
		}
		mt, ok := content[res.Header.Get("Content-Type")]
		if !ok {
			t.Errorf("%s %s: %s answer of type %q; the document has %v", method, path, code, res.Header.Get("Content-Type"), content)
			return res.StatusCode, nil
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
		sb, _ := json.Marshal(mt.Schema)
		var sv any
		_ = json.Unmarshal(sb, &sv)
		for _, e := range validate(raw, sv, v, "") {
			t.Errorf("%s %s (%s): %s", method, path, code, e)
		}
		return res.StatusCode, v
	}

	// want calls and checks the status too.
	want := func(code int, method, route, path, body string) any {
		t.Helper()
		got, v := call(method, route, path, body)
		if got != code {
			t.Errorf("%s %s: %d, want %d (%v)", method, path, got, code, v)
		}
		return v
	}
	job := `{"spec": {"name": "t", "image": "host", "command": ["sleep", "60"], "cluster": {"size": 1, "mode": "single-node"}, "resources": {"cpu": 1, "memory": 1073741824}}, "cwd": "/tmp"}`
	held := strings.Replace(job, `"cwd"`, `"hold": true, "cwd"`, 1)
	want(201, "POST", "/v1/jobs", "/v1/jobs", job)  // 1
	want(201, "POST", "/v1/jobs", "/v1/jobs", held) // 2
	want(400, "POST", "/v1/jobs", "/v1/jobs", `{"job_file": "job \"f\" {\n  image = \"host\"\n  command = [\"true\"]\n  cluster { size = 0 }\n}\n", "source": "f.hcl", "cwd": "/tmp"}`)
	want(400, "POST", "/v1/jobs", "/v1/jobs", `{"spec": {}, "bogus": 1}`)
	want(200, "GET", "/v1/jobs", "/v1/jobs?state=pending&state=HELD&user=root&limit=5", "")
	want(400, "GET", "/v1/jobs", "/v1/jobs?state=NOPE", "")
	want(200, "GET", "/v1/jobs/{id}", "/v1/jobs/1", "")
	want(404, "GET", "/v1/jobs/{id}", "/v1/jobs/99", "")
	want(400, "GET", "/v1/jobs/{id}", "/v1/jobs/x", "")
	waitJob(t, c, 1, func(j api.Job) bool { return j.State == api.JobScheduled })
	want(201, "POST", "/v1/jobs", "/v1/jobs", held) // 3
	want(200, "POST", "/v1/jobs/{id}/release", "/v1/jobs/3/release", "")
	want(409, "POST", "/v1/jobs/{id}/hold", "/v1/jobs/2/hold", "")                       // already held
	want(409, "POST", "/v1/jobs/{id}/signal", "/v1/jobs/1/signal", `{"signal": "USR1"}`) // not running yet
	want(200, "POST", "/v1/nodes/{name}/status", "/v1/nodes/n1/status", `{"updates": [{"job_id": 1, "host": "main1", "state": "running", "exit_code": 0}]}`)
	waitJob(t, c, 1, func(j api.Job) bool { return j.State == api.JobRunning })
	want(200, "POST", "/v1/jobs/{id}/signal", "/v1/jobs/1/signal", `{"signal": "USR1"}`)
	want(400, "POST", "/v1/jobs/{id}/signal", "/v1/jobs/1/signal", `{"signal": "NOPE"}`)
	want(200, "POST", "/v1/jobs/{id}/kill", "/v1/jobs/1/kill", "")
	want(200, "POST", "/v1/nodes/{name}/status", "/v1/nodes/n1/status", `{"updates": [{"job_id": 1, "host": "main1", "state": "killed", "exit_code": 137}]}`)
	want(200, "POST", "/v1/jobs/{id}/kill", "/v1/jobs/2/kill?done=true", "")
	waitJob(t, c, 1, func(j api.Job) bool { return j.State.Terminal() })
	waitJob(t, c, 2, func(j api.Job) bool { return j.State.Terminal() })
	want(409, "POST", "/v1/jobs/{id}/hold", "/v1/jobs/2/hold", "")
	want(409, "POST", "/v1/jobs/{id}/kill", "/v1/jobs/2/kill", "")
	want(200, "GET", "/v1/jobs", "/v1/jobs", "")
	want(400, "POST", "/v1/jobs/{id}/attach", "/v1/jobs/2/attach", "") // no Upgrade header
	if v := want(200, "GET", "/v1/history", "/v1/history?limit=10", ""); v == nil || len(asSlice(v.(map[string]any)["jobs"])) != 2 {
		t.Errorf("history: want jobs 1 and 2, got %v", v)
	}
	want(200, "GET", "/v1/accounting", "/v1/accounting?group=partition", "")
	want(400, "GET", "/v1/accounting", "/v1/accounting?group=colour", "")
	want(200, "GET", "/v1/nodes", "/v1/nodes", "")
	want(200, "POST", "/v1/nodes/drain", "/v1/nodes/drain", `{"nodes": ["n1"], "reason": "test"}`)
	want(400, "POST", "/v1/nodes/drain", "/v1/nodes/drain", `{"nodes": ["n1"]}`)
	want(200, "POST", "/v1/nodes/{name}/heartbeat", "/v1/nodes/n1/heartbeat", "")
	want(404, "POST", "/v1/nodes/{name}/heartbeat", "/v1/nodes/n9/heartbeat", "")
	want(200, "GET", "/v1/nodes/{name}/assignments", "/v1/nodes/n1/assignments", "")
	want(200, "GET", "/v1/nodes/{name}/attach", "/v1/nodes/n1/attach?wait=1ms", "")
	want(200, "POST", "/v1/nodes/register", "/v1/nodes/register", `{"name": "n2", "addr": "127.0.0.1", "capacity": {"cpu_milli": 1000, "memory": 1073741824}, "runtime": "process"}`)
	want(200, "GET", "/v1/partitions", "/v1/partitions", "")
	want(200, "GET", "/v1/fairshare", "/v1/fairshare", "")
	tok := want(201, "POST", "/v1/tokens", "/v1/tokens", `{"user": "root"}`)
	want(200, "GET", "/v1/tokens", "/v1/tokens", "")
	if m, ok := tok.(map[string]any); ok {
		want(200, "POST", "/v1/tokens/{id}/revoke", "/v1/tokens/"+m["id"].(string)+"/revoke", "")
	}
	want(404, "POST", "/v1/tokens/{id}/revoke", "/v1/tokens/nope/revoke", "")
	want(400, "POST", "/v1/reconfig", "/v1/reconfig", "") // no partitions file
	want(400, "POST", "/v1/raft/join", "/v1/raft/join", `{}`)
	if v := want(200, "GET", "/v1/openapi.json", "/v1/openapi.json", ""); v == nil {
		t.Errorf("GET /v1/openapi.json: no document")
	} else if b, _ := json.Marshal(v); !bytes.Contains(b, []byte(`"openapi":"3.`)) {
		t.Errorf("GET /v1/openapi.json is not the document: %.200s", b)
	}
}

// validate checks JSON value v against schema s (a decoded schema
// object of doc), as far as the document uses the keywords: $ref, allOf,
// type, enum, properties, required, items, additionalProperties.
func validate(doc, s, v any, at string) []string {
	sm, ok := s.(map[string]any)
	if !ok {
		return []string{at + ": bad schema"}
	}
	if r, ok := sm["$ref"].(string); ok && r != "" {
		return validate(doc, resolve(doc, r), v, at)
	}
	if all, ok := sm["allOf"].([]any); ok {
		var errs []string
		for _, a := range all {
			errs = append(errs, validate(doc, a, v, at)...)
		}
		return errs
	}
	where := at
	if where == "" {
		where = "the body"
	}
	switch sm["type"] {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %T, want an object", where, v)}
		}
		var errs []string
		props, _ := sm["properties"].(map[string]any)
		for _, r := range asSlice(sm["required"]) {
			if _, ok := m[r.(string)]; !ok {
				errs = append(errs, fmt.Sprintf("%s: required %q is missing", where, r))
			}
		}
		for k, e := range m {
			if p, ok := props[k]; ok {
				errs = append(errs, validate(doc, p, e, at+"."+k)...)
				continue
			}
			switch ap := sm["additionalProperties"].(type) {
			case map[string]any:
				errs = append(errs, validate(doc, ap, e, at+"."+k)...)
			case nil:
				if props != nil {
					errs = append(errs, fmt.Sprintf("%s: %q is not in the schema", where, k))
				}
			default:
				errs = append(errs, fmt.Sprintf("%s: %q is not in the schema", where, k))
			}
		}
		return errs
	case "array":
		a, ok := v.([]any)
		if !ok {
			if v == nil {
				return nil // a nil Go slice: null
			}
			return []string{fmt.Sprintf("%s: %T, want an array", where, v)}
		}
		var errs []string
		for i, e := range a {
			errs = append(errs, validate(doc, sm["items"], e, fmt.Sprintf("%s[%d]", at, i))...)
		}
		return errs
	case "string":
		str, ok := v.(string)
		if !ok {
			return []string{fmt.Sprintf("%s: %T, want a string", where, v)}
		}
		if enum := asSlice(sm["enum"]); len(enum) > 0 && !slices.Contains(enum, any(str)) {
			return []string{fmt.Sprintf("%s: %q is not one of %v", where, str, enum)}
		}
	case "integer":
		if f, ok := v.(float64); !ok || f != float64(int64(f)) {
			return []string{fmt.Sprintf("%s: %v, want an integer", where, v)}
		}
	case "number":
		if _, ok := v.(float64); !ok {
			return []string{fmt.Sprintf("%s: %T, want a number", where, v)}
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return []string{fmt.Sprintf("%s: %T, want a boolean", where, v)}
		}
	}
	return nil
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
