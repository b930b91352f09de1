// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ethersphere/bps/pkg/api"
	"gopkg.in/yaml.v2"
)

// openAPI is the part of an OpenAPI 3.0 document the test reads.
type openAPI struct {
	OpenAPI    string                          `yaml:"openapi"`
	Paths      map[string]map[string]operation `yaml:"paths"`
	Components struct {
		Parameters map[string]parameter `yaml:"parameters"`
	} `yaml:"components"`
}

type operation struct {
	Parameters []parameter    `yaml:"parameters"`
	Responses  map[string]any `yaml:"responses"`
}

type parameter struct {
	Ref  string `yaml:"$ref"`
	Name string `yaml:"name"`
	In   string `yaml:"in"`
}

// TestOpenAPI: openapi/bps.yaml describes exactly the routes the handler
// serves, and every query parameter and header each of them reads.
func TestOpenAPI(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../openapi/bps.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPI
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0") {
		t.Fatalf("openapi %q, want 3.0.x", doc.OpenAPI)
	}

	served := make(map[string]bool)
	for _, r := range api.Routes() {
		key := strings.ToLower(r.Method) + " " + r.Path
		served[key] = true
		op, ok := doc.Paths[r.Path][strings.ToLower(r.Method)]
		if !ok {
			t.Errorf("%s %s is served but not in openapi/bps.yaml", r.Method, r.Path)
			continue
		}
		if len(op.Responses) == 0 {
			t.Errorf("%s %s has no responses", r.Method, r.Path)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if !served[method+" "+path] {
				t.Errorf("%s %s is in openapi/bps.yaml but not served", method, path)
			}
		}
	}

	query, headers := api.SessionParams()
	checkParams(t, doc, "get", "/pubsub/{topic}", query, headers, "101", "400", "404", "429", "502", "503", "504")
	checkParams(t, doc, "post", "/pubsub/{topic}/service", api.ServiceParams(), nil, "200", "400", "409", "413", "502")
}

// checkParams checks that the operation documents exactly the path
// parameter topic, the query parameters and the headers the handler reads,
// and the given responses.
func checkParams(t *testing.T, doc openAPI, method, path string, query, headers []string, codes ...string) {
	t.Helper()
	op := doc.Paths[path][method]
	documented := make(map[string]bool)
	for _, p := range op.Parameters {
		if p.Ref != "" {
			p = doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
		}
		documented[p.In+" "+p.Name] = true
	}
	for _, q := range query {
		if !documented["query "+q] {
			t.Errorf("query parameter %s of %s %s is not documented", q, method, path)
		}
	}
	for _, h := range headers {
		if !documented["header "+h] {
			t.Errorf("header %s of %s %s is not documented", h, method, path)
		}
	}
	if !documented["path topic"] {
		t.Errorf("%s %s: path parameter topic is not documented", method, path)
	}
	for _, code := range codes {
		if _, ok := op.Responses[code]; !ok {
			t.Errorf("%s %s: response %s is not documented", method, path, code)
		}
	}
	if n := len(query) + len(headers) + 1; len(documented) != n {
		var names []string
		for k := range documented {
			names = append(names, k)
		}
		slices.Sort(names)
		t.Errorf("%s %s: documented parameters %v, the handler reads %d", method, path, names, n)
	}
}
