// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Command bee-bps runs a Swarm Bee node with Broadcast Pub/Sub attached.
//
//	bee-bps start [bee's options] [--bps-enable] [--bps-…]
//	bee-bps dev [--nodes N] [--info-file PATH]
//
// start takes bee's options under bee's names, as flags, as BEE_…
// environment variables or as keys of the YAML file given with --config.
// dev runs a local cluster on loopback against a development chain.
package main

import (
	"fmt"
	"os"
)

func main() {
	c, err := newCommand()
	if err == nil {
		err = c.root.Execute()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
