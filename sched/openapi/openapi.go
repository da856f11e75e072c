// Package openapi holds the OpenAPI 3 document of schedd's /v1 API
// (openapi.json), which schedd serves at GET /v1/openapi.json.
//
// The document is maintained by hand, next to the code: the sched
// package's tests check that it names exactly the routes schedd serves
// (the route table of sched/httpapi)
// and that its schemas have exactly the JSON fields of the internal/api
// types they describe, so a change to either fails until the other
// follows.
//
// It imports no troupe package: the document is data, which sched's
// tests hold against internal/api.
package openapi

import _ "embed"

// JSON is the document.
//
//go:embed openapi.json
var JSON []byte
