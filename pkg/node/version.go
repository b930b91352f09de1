// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/ethersphere/bee/v2"
	beeapi "github.com/ethersphere/bee/v2/pkg/api"
)

// beeModule is bee's module path.
const beeModule = "github.com/ethersphere/bee/v2"

// VersionSuffix marks the bee version a node reports as bee with BPS.
const VersionSuffix = "bps"

// beeAPIVersions is the version of bee's HTTP API per bee release: the
// info.version of its openapi/Swarm.yaml, which bee's Makefile links into
// pkg/api.Version. A test checks the entry of the bee this module requires
// against that file.
var beeAPIVersions = map[string]string{
	"v2.8.1": "8.1.0",
}

// bee's /health reports bee.Version and api.Version, both set by bee's
// Makefile with -ldflags. Built any other way (go build, go run, go test),
// bee says "-dev" and "0.0.0", which clients like bee-js compare. So, unless
// the linker set them, they are set here, before any node starts, from the
// build's own record of the bee module it links.
func init() {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = new(debug.BuildInfo)
	}
	bee.Version, beeapi.Version = versions(info, beeSourceRelease(), bee.Version, beeapi.Version)
}

// beeSourceRelease is the bee release in the path of bee's compiled source
// (…/github.com/ethersphere/bee/v2@v2.8.1/…), with or without -trimpath: a
// test binary's build info lists no modules. "" if the path has none (a
// vendored or replaced bee).
func beeSourceRelease() string {
	file, _ := runtime.FuncForPC(reflect.ValueOf(beeapi.New).Pointer()).FileLine(0)
	_, rest, ok := strings.Cut(filepath.ToSlash(file), beeModule+"@")
	if !ok {
		return ""
	}
	release, _, _ := strings.Cut(rest, "/")
	return release
}

// versions returns the bee version and bee API version to report, given
// the build info, the bee release bee's source path names (used when the
// build info lists no bee module) and the values bee's packages hold. A
// value the linker set
// is kept. Otherwise the bee version is bee's module version with
// VersionSuffix and, when the build recorded one, the commit of this
// module (bee's format: version-commit), e.g. 2.8.1-bps-0a1b2c3; the API
// version is that of the bee release, when known.
func versions(info *debug.BuildInfo, sourceRelease, beeVersion, apiVersion string) (string, string) {
	release := sourceRelease
	for _, d := range info.Deps {
		if d.Path == beeModule {
			release = d.Version
		}
	}
	if release == "" {
		return beeVersion, apiVersion
	}
	if strings.HasPrefix(beeVersion, "-") { // bee's version variable is unset
		beeVersion = strings.TrimPrefix(release, "v") + "-" + VersionSuffix
		if rev := setting(info, "vcs.revision"); len(rev) >= 7 {
			beeVersion += "-" + rev[:7]
			if setting(info, "vcs.modified") == "true" {
				beeVersion += "-dirty"
			}
		}
	}
	if v, ok := beeAPIVersions[release]; ok && apiVersion == "0.0.0" {
		apiVersion = v
	}
	return beeVersion, apiVersion
}

func setting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
