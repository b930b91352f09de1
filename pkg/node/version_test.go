// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/ethersphere/bee/v2"
	beeapi "github.com/ethersphere/bee/v2/pkg/api"
	"github.com/ethersphere/bps/pkg/node"
)

// TestVersionsOfThisBuild: built without bee's ldflags (go test), a node
// reports bee's release with the BPS suffix, and bee's API version as bee's
// own openapi/Swarm.yaml gives it, which bee-js compares.
func TestVersionsOfThisBuild(t *testing.T) {
	t.Parallel()

	// bee's Swarm.yaml, beside the bee package this binary links.
	file, _ := runtime.FuncForPC(reflect.ValueOf(beeapi.New).Pointer()).FileLine(0)
	_, rest, _ := strings.Cut(file, "github.com/ethersphere/bee/v2@")
	release, _, _ := strings.Cut(rest, "/")
	if release == "" {
		t.Fatalf("no bee release in %s", file)
	}
	if want := strings.TrimPrefix(release, "v") + "-" + node.VersionSuffix; !strings.HasPrefix(bee.Version, want) {
		t.Errorf("bee.Version %q, want %s…", bee.Version, want)
	}

	spec := filepath.Join(filepath.Dir(file), "..", "..", "openapi", "Swarm.yaml")
	f, err := os.Open(spec)
	if err != nil {
		t.Fatalf("bee's API description: %v", err)
	}
	defer f.Close()
	var want string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "  version: "); ok {
			want = strings.Trim(v, `"' `)
			break
		}
	}
	if want == "" {
		t.Fatalf("no info.version in %s", spec)
	}
	if beeapi.Version != want || node.BeeAPIVersions[release] != want {
		t.Errorf("api.Version %q, table %q; bee %s's %s says %q", beeapi.Version, node.BeeAPIVersions[release], release, spec, want)
	}
}

func TestVersions(t *testing.T) {
	t.Parallel()

	build := func(settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Deps: []*debug.Module{{Path: "github.com/ethersphere/bee/v2", Version: "v2.8.1"}}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	for _, tc := range []struct {
		name                 string
		info                 *debug.BuildInfo
		source               string
		bee, api             string
		wantBee, wantAPIVers string
	}{
		{"go run", build(), "", "-dev", "0.0.0", "2.8.1-bps", "8.1.0"},
		{"go build", build("vcs.revision", "0123456789abcdef", "vcs.modified", "false"), "", "-dev", "0.0.0", "2.8.1-bps-0123456", "8.1.0"},
		{"go build, modified", build("vcs.revision", "0123456789abcdef", "vcs.modified", "true"), "", "-dev", "0.0.0", "2.8.1-bps-0123456-dirty", "8.1.0"},
		{"ldflags", build("vcs.revision", "0123456789abcdef"), "", "2.8.1-abc", "8.0.0", "2.8.1-abc", "8.0.0"},
		{"unknown bee release", &debug.BuildInfo{Deps: []*debug.Module{{Path: "github.com/ethersphere/bee/v2", Version: "v9.9.9"}}}, "", "-dev", "0.0.0", "9.9.9-bps", "0.0.0"},
		{"test binary: no modules", &debug.BuildInfo{}, "v2.8.1", "-dev", "0.0.0", "2.8.1-bps", "8.1.0"},
		{"no bee release anywhere", &debug.BuildInfo{}, "", "-dev", "0.0.0", "-dev", "0.0.0"},
	} {
		if b, a := node.Versions(tc.info, tc.source, tc.bee, tc.api); b != tc.wantBee || a != tc.wantAPIVers {
			t.Errorf("%s: got %q %q, want %q %q", tc.name, b, a, tc.wantBee, tc.wantAPIVers)
		}
	}
}
